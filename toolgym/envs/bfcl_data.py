"""BFCL multi-turn material from the `bfcl-eval` package: entries, ground truth, function docs, backend classes."""

from __future__ import annotations

import ast
import copy
import functools
import importlib
import inspect
import json
from pathlib import Path
from typing import Any

JsonDict = dict[str, Any]
CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
INSTALL_HINT = (
    "toolgym/BFCL-MultiTurn-v0 needs the bfcl extra: pip install 'toolgym[bfcl]' "
    "(or, without bfcl-eval's many dependencies, `pip install --no-deps bfcl-eval mpmath` as `make venv` does)"
)


def _package() -> Any:
    try:
        return importlib.import_module("bfcl_eval")
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error


def checkers() -> Any:
    """BFCL's own multi-turn checker module (state_checker, response_checker)."""
    _package()
    return importlib.import_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker")


def _config() -> Any:
    _package()
    return importlib.import_module("bfcl_eval.constants.executable_backend_config")


def _data_dir() -> Path:
    return Path(_package().__file__).parent / "data"


def _jsonl(path: Path) -> list[JsonDict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@functools.cache
def entries(category: str) -> tuple[JsonDict, ...]:
    """The entries of one multi-turn category, each with its `ground_truth` (call strings per turn)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL multi-turn category {category!r}; choose from {CATEGORIES}")
    data = _data_dir()
    answers = {a["id"]: a["ground_truth"] for a in _jsonl(data / "possible_answer" / f"BFCL_v4_{category}.json")}
    return tuple({**e, "ground_truth": answers[e["id"]]} for e in _jsonl(data / f"BFCL_v4_{category}.json"))


@functools.cache
def entry(entry_id: str) -> JsonDict:
    """One entry by id, e.g. 'multi_turn_base_0'."""
    category = entry_id.rsplit("_", 1)[0]
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL multi-turn entry id {entry_id!r}; ids look like 'multi_turn_base_0'")
    found = [e for e in entries(category) if e["id"] == entry_id]
    if not found:
        raise ValueError(f"no BFCL entry {entry_id!r}")
    return found[0]


@functools.cache
def function_docs(class_name: str) -> tuple[JsonDict, ...]:
    """The function documents (name, description, parameters, response) of one backend class."""
    filename = _config().MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]
    return tuple(_jsonl(_data_dir() / "multi_turn_func_doc" / filename))


def backend_class(class_name: str) -> type:
    """The stateful backend class (GorillaFileSystem, TwitterAPI, ...)."""
    module = importlib.import_module(_config().CLASS_FILE_PATH_MAPPING[class_name])
    return getattr(module, class_name)  # type: ignore[no-any-return]


def new_instance(class_name: str, initial_config: JsonDict, long_context: bool) -> Any:
    """A fresh backend instance loaded with the entry's initial configuration, as BFCL loads it."""
    instance = backend_class(class_name)()
    if class_name not in _config().STATELESS_CLASSES:
        instance._load_scenario(copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context)
    return instance


def is_long_context(entry_id: str) -> bool:
    """BFCL loads long-context scenarios for the long_context (and composite) categories."""
    return "long_context" in entry_id or "composite" in entry_id


def parse_call(text: str) -> tuple[str, list[Any], JsonDict]:
    """A ground-truth call string `name(arg, key=value)` as (name, positional, keyword) literals; no eval."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain function call: {text!r}")
    args = [ast.literal_eval(a) for a in node.args]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
    return node.func.id, args, kwargs


def keyword_arguments(method: Any, args: list[Any], kwargs: JsonDict) -> JsonDict:
    """Positional arguments named after the method's parameters, merged with the keywords."""
    names = [p for p in inspect.signature(method).parameters if p != "self"]
    return {**dict(zip(names, args, strict=False)), **kwargs}


def result_text(value: Any) -> str:
    """A call's result as BFCL records it: strings as-is, dicts as JSON (else str), anything else str()."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def run_method(instance: Any, name: str, kwargs: JsonDict, /) -> tuple[str, bool]:
    """Call one backend method; (BFCL result text, whether it raised)."""
    try:
        return result_text(getattr(instance, name)(**kwargs)), False
    except Exception as error:  # noqa: BLE001 - BFCL records a failing call as its error text
        return f"Error during execution: {error}", True
