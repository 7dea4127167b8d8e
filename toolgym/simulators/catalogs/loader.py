"""`load_catalog(source)`: tool specs from JSON files, Python modules, MCP servers or objects in memory."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from toolgym.schemas import ToolResult, ToolSpec
from toolgym.simulators.catalogs.catalog import Catalog, Implementation
from toolgym.simulators.catalogs.formats import spec_from_mcp, spec_from_openai, specs_from_toolbench
from toolgym.simulators.catalogs.mcp_source import McpCaller, is_mcp_source, load_mcp_specs, open_session
from toolgym.simulators.python_tools import Tool

JsonDict = dict[str, Any]
DEFAULT_SOURCE = "default"
CatalogSource = Catalog | str | Path | list[Any] | JsonDict | None


def load_catalog(source: CatalogSource = None, *, mcp_calls: bool = True) -> Catalog:
    """Load canonical tool specs from `source`.

    Accepted: None or "default" (the embedded catalog); a path to a JSON file of OpenAI function
    definitions, ToolBench/RapidAPI tool or query JSON, MCP tool objects or toolgym specs (or a
    directory of such files, e.g. ToolBench's one file per tool); a Python
    module (dotted name or `.py` path) of `@tool` functions; `"mcp+stdio:<command line>"` and
    `"mcp+http://host:port/path"`; a `Catalog`, or a list/dict of any of the JSON forms in memory.
    MCP tools get real implementations (`tools/call` over one connection that stays open until
    `Catalog.close()`, garbage collection or exit) unless `mcp_calls=False`.
    """
    if isinstance(source, Catalog):
        return source
    if source is None or source == DEFAULT_SOURCE:
        return _default_catalog()
    if isinstance(source, (list, dict)):
        return _from_document(source, "<memory>")
    text = str(source)
    if is_mcp_source(text):
        return _from_mcp(text, mcp_calls)
    path = Path(text)
    if path.is_dir():
        return _from_directory(path)
    if path.suffix == ".json":
        if not path.is_file():
            raise FileNotFoundError(f"catalog file not found: {path}")
        return _from_document(json.loads(path.read_text(encoding="utf-8")), str(path))
    if path.suffix == ".py" or _looks_like_module(text):
        return _from_module(text)
    raise ValueError(
        f"cannot tell what catalog source {text!r} is: expected a .json file, a .py file or module name, "
        "'mcp+stdio:<command>', 'mcp+http://host:port/path' or 'default'"
    )


def _from_mcp(source: str, calls: bool) -> Catalog:
    """Specs from `tools/list`; with `calls`, the connection stays open for real `tools/call`s."""
    session = open_session(source)
    try:
        specs = load_mcp_specs(session)
    except BaseException:
        session.close()
        raise
    if not calls:
        session.close()
        return Catalog(specs, source=source)
    implementations: dict[str, Implementation] = {s.name: McpCaller(session, s.name) for s in specs}
    return Catalog(specs, implementations, source=source, closers=[session.close])


def _from_directory(path: Path) -> Catalog:
    """Every `.json` file under a directory (ToolBench ships one file per tool), in path order."""
    files = sorted(path.rglob("*.json"))
    if not files:
        raise ValueError(f"catalog directory {path} holds no .json files")
    specs = [spec for file in files for spec in _from_document(json.loads(file.read_text("utf-8")), str(file))]
    return Catalog(_dedupe(specs), source=str(path))


def _default_catalog() -> Catalog:
    data = resources.files("toolgym.simulators.data").joinpath("default_catalog.json").read_text(encoding="utf-8")
    return _from_document(json.loads(data), "default")


def _looks_like_module(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


def _from_document(document: Any, source: str) -> Catalog:
    """Detect the JSON flavour of `document` and convert it."""
    if isinstance(document, dict) and "api_list" in document:
        return Catalog(_dedupe(specs_from_toolbench(document)), source=source)
    if isinstance(document, dict) and isinstance(document.get("tools"), list):
        return _from_document(document["tools"], source)
    if isinstance(document, dict):
        document = [document]
    if not isinstance(document, list):
        raise ValueError(f"catalog {source}: expected a JSON list or object, got {type(document).__name__}")
    specs: list[ToolSpec] = []
    for index, item in enumerate(document):
        specs.extend(_specs_from_item(item, f"{source}[{index}]"))
    return Catalog(_dedupe(specs), source=source)


def _specs_from_item(item: Any, where: str) -> list[ToolSpec]:
    if not isinstance(item, dict):
        raise ValueError(f"catalog entry {where} is not a JSON object")
    if "api_list" in item:
        return specs_from_toolbench(item)
    if "input_schema" in item:
        return [ToolSpec.model_validate(item)]
    if "inputSchema" in item:
        return [spec_from_mcp(item)]
    if item.get("type") == "function" or "parameters" in item or "function" in item:
        return [spec_from_openai(item)]
    raise ValueError(f"catalog entry {where} is in no known tool format (keys: {sorted(item)})")


def _dedupe(specs: list[ToolSpec]) -> list[ToolSpec]:
    """Drop exact repeats (ToolBench queries list the same API many times); clashing specs stay and fail."""
    seen: dict[str, ToolSpec] = {}
    out: list[ToolSpec] = []
    for spec in specs:
        if spec.name in seen and seen[spec.name] == spec:
            continue
        seen[spec.name] = spec
        out.append(spec)
    return out


def _import_module(text: str) -> Any:
    if not text.endswith(".py"):
        return importlib.import_module(text)
    path = Path(text).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"catalog module not found: {path}")
    name = f"toolgym_catalog_{path.stem}_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _from_module(text: str) -> Catalog:
    module = _import_module(text)
    tools = [value for value in vars(module).values() if isinstance(value, Tool)]
    if not tools:
        raise ValueError(f"module {text!r} defines no @tool functions")
    implementations: dict[str, Implementation] = {t.name: _invoker(t) for t in tools if _callable_without_injection(t)}
    return Catalog([t.spec for t in tools], implementations, source=text)


def _invoker(tool: Tool) -> Implementation:
    def run(arguments: JsonDict) -> ToolResult:
        return tool.invoke(arguments)

    return run


def _callable_without_injection(tool: Tool) -> bool:
    """A tool whose hidden (injected) parameters are unbound cannot run on its own."""
    visible = set(tool.arguments_model.model_fields)
    for param in inspect.signature(tool.fn).parameters.values():
        hidden = param.name not in visible and param.name not in tool._bound
        if hidden and param.default is param.empty and param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            return False
    return True
