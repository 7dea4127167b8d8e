"""`toolgym/BFCL-MultiTurn-v0`: BFCL v4 multi-turn entries on bfcl-eval's stateful classes, checked per turn as BFCL does."""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, create_model

from toolgym.envs import bfcl_data as data
from toolgym.envs.conversation import ConversationEnv
from toolgym.envs.parsing import ParsedAction
from toolgym.envs.worlds.base import tool_call
from toolgym.schemas import Task, ToolAnnotations, ToolSpec
from toolgym.simulators import Tool, ToolError

JsonDict = dict[str, Any]
_JSON_TYPES = {"dict": "object", "float": "number", "tuple": "array"}
_UNSET: Any = type("Unset", (), {"__repr__": lambda self: "<unset>"})()  # an optional argument not given
TURN_DONE, NEED_INFO, FINAL = (
    "Done.",
    "I cannot do that with the information and tools I have.",
    "<answer>Done.</answer>",
)


def json_schema(schema: Any) -> Any:
    """BFCL's parameter schema in standard JSON Schema (dict→object, float→number, tuple→array, any→untyped)."""
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: json_schema(value) for key, value in schema.items() if key != "type"}
    kind = schema.get("type")
    if isinstance(kind, str) and kind != "any":
        converted["type"] = _JSON_TYPES.get(kind, kind)
    if "properties" in schema:
        converted["properties"] = {name: json_schema(value) for name, value in schema["properties"].items()}
    return converted


@functools.cache
def _tool_template(class_name: str, name: str) -> tuple[ToolSpec, type[BaseModel]]:
    """Spec and argument model of one backend method; values are not type-checked, as BFCL executes them as given."""
    doc = next(d for d in data.function_docs(class_name) if d["name"] == name)
    params = doc.get("parameters") or {}
    required = set(params.get("required", []))
    fields: dict[str, Any] = {}
    for pname, pschema in (params.get("properties") or {}).items():
        if pname in required:
            fields[pname] = (Any, Field(..., description=pschema.get("description")))
        else:
            fields[pname] = (Any, Field(_UNSET, description=pschema.get("description")))
    config = ConfigDict(extra="forbid")
    model = create_model(f"{class_name}_{name}_Arguments", __config__=config, **fields)
    spec = ToolSpec(
        name=name,
        description=doc.get("description", ""),
        input_schema={**json_schema(params), "type": "object", "additionalProperties": False},
        output_schema=json_schema(doc["response"]) if doc.get("response") else None,
        annotations=ToolAnnotations(read_only=False, tags=["bfcl", class_name]),
    )
    return spec, model


def _method_owners(classes: Sequence[str]) -> dict[str, str]:
    """Method name → class, later classes winning (BFCL's own mapping order)."""
    return {doc["name"]: cls for cls in classes for doc in data.function_docs(cls)}


def _gold_calls(owners: dict[str, str], calls: list[str]) -> str:
    blocks = []
    for text in calls:
        name, args, kwargs = data.parse_call(text)
        method = getattr(data.backend_class(owners[name]), name)
        blocks.append(tool_call(name, **data.keyword_arguments(method, args, kwargs)))
    return "".join(blocks)


def entry_task(entry: JsonDict) -> Task:
    """A BFCL entry as a task: the first request as instruction, the ground truth as gold actions."""
    owners = _method_owners(entry["involved_classes"])
    turns: list[list[str]] = entry["ground_truth"]
    gold: list[str] = []
    for index, calls in enumerate(turns):
        if calls:
            gold.append(_gold_calls(owners, calls))
        gold.append(FINAL if index == len(turns) - 1 else (TURN_DONE if calls else NEED_INFO))
    return Task(
        id=entry["id"],
        instruction=_question(entry, 0),
        gold_actions=gold,
        metadata={
            "category": entry["id"].rsplit("_", 1)[0],
            "involved_classes": list(entry["involved_classes"]),
            "ground_truth": turns,
            "missed_function": entry.get("missed_function", {}),
            "excluded_function": entry.get("excluded_function", []),
        },
    )


def _question(entry: JsonDict, turn: int) -> str:
    return "\n".join(str(m["content"]) for m in entry["question"][turn])


@functools.cache
def category_tasks(category: str) -> tuple[Task, ...]:
    """Every entry of one category as a task."""
    return tuple(entry_task(e) for e in data.entries(category))


class BFCLMultiTurnEnv(ConversationEnv):
    """BFCL v4 multi-turn: file system, messaging, trading, travel, vehicle and more, over several user turns.

    ## Description
    Each task is an entry of BFCL's multi-turn categories (base, miss_func, miss_param,
    long_context; 800 entries) run on the stateful backend classes of the `bfcl-eval` package.
    The user's requests arrive one turn at a time; functions of `missed_function` appear only at
    their turn. Needs the `bfcl` extra (`pip install 'toolgym[bfcl]'`).

    ## Action Space
    Text: tool calls (Hermes `<tool_call>` blocks or OpenAI message JSON); a message without
    calls ends the current turn (the next request follows); `<answer>…</answer>` ends the episode.

    ## Observation Space
    Text: the first request at reset, then `<tool_response>` blocks (BFCL's result strings) or
    the next request.

    ## Rewards
    `success`: 1.0 when every turn passes BFCL's checks — after each turn with ground truth, the
    model made calls, its instances' public state equals the ground-truth instances'
    (`state_checker`) and the ground-truth results appear among all model results so far
    (`response_checker`) — and no turn was left out; else 0.0. `invalid_call/*`: −0.05 per bad call.

    ## Starting State
    The entry's `initial_config`; the task drawn from the seed or `options={"task_id": "multi_turn_base_0"}`.

    ## Episode End
    Terminates after the last turn or on an answer; truncates after `max_turns` steps.

    ## Arguments
    `categories` (default: all four), `max_turns` (60), `budget`, `faults`, `render_mode`.

    ## Version History
    * v0: initial version (bfcl-eval 2026.3.23 data).
    """

    def __init__(self, *, categories: Sequence[str] = data.CATEGORIES, max_turns: int = 60, **kwargs: Any) -> None:
        super().__init__(max_turns=max_turns, **kwargs)
        unknown = sorted(set(categories) - set(data.CATEGORIES))
        if unknown or not categories:
            raise ValueError(f"categories must be a non-empty subset of {data.CATEGORIES}, got {list(categories)}")
        data.checkers()  # fail now, naming the extra, if bfcl-eval is missing
        self.categories = tuple(categories)
        self._entry: JsonDict = {}
        self._instances: dict[str, Any] = {}
        self._gt_instances: dict[str, Any] = {}
        self._reset_progress()

    def _reset_progress(self) -> None:
        self._turn_index, self._turn_calls = 0, 0
        self._calls: list[JsonDict] = []
        self._results: list[str] = []
        self._checks: list[JsonDict] = []
        self._evaluation: JsonDict | None = None
        self._tools_changed = False

    # ----------------------------------------------------------------- tasks
    @property
    def tasks(self) -> list[Task]:
        """Every entry of the selected categories as a task."""
        return [task for category in self.categories for task in category_tasks(category)]

    def _make_task(self, rng: np.random.Generator, task_id: str | None) -> Task:
        if task_id is None:
            tasks = self.tasks
            task = tasks[int(rng.integers(len(tasks)))]
        else:
            if str(task_id).rsplit("_", 1)[0] not in self.categories:
                raise ValueError(f"task id {task_id!r} is not in categories {self.categories}")
            task = entry_task(data.entry(str(task_id)))
        self._start_entry(task.id)
        return task

    def _start_entry(self, entry_id: str) -> None:
        self._entry = data.entry(entry_id)
        self._reset_progress()
        self._instances = self._fresh_instances()
        self._gt_instances = self._fresh_instances()

    def _fresh_instances(self) -> dict[str, Any]:
        long_context = data.is_long_context(self._entry["id"])
        config = self._entry["initial_config"]
        return {cls: data.new_instance(cls, config, long_context) for cls in self._entry["involved_classes"]}

    def _system_prompt(self) -> str:
        return (
            f"{super()._system_prompt()} The user's requests arrive one at a time: when you have done what the "
            "current request asks, or cannot do it, reply with a short message without tool calls and the next "
            "request follows."
        )

    # ----------------------------------------------------------------- tools
    def _episode_tools(self) -> list[Tool]:
        """Every method of the involved classes: BFCL executes any call the model makes, listed or not."""
        if not self._entry:
            return []
        tools = []
        for name, cls in _method_owners(self._entry["involved_classes"]).items():
            spec, model = _tool_template(cls, name)
            tools.append(Tool(functools.partial(self._call_backend, cls, name), spec, model))
        return tools

    def _hidden_functions(self) -> set[str]:
        """Functions not shown to the agent now: excluded ones, and missed ones before their turn."""
        hidden = set(self._entry.get("excluded_function") or [])
        for turn, names in (self._entry.get("missed_function") or {}).items():
            if int(turn) > self._turn_index:
                hidden.update(names)
        return hidden

    def _visible_specs(self) -> list[ToolSpec]:
        hidden = self._hidden_functions() if self._entry else set()
        return [spec for spec in super()._visible_specs() if spec.name not in hidden]

    def _call_backend(self, class_name: str, method: str, /, **kwargs: Any) -> str:
        kwargs = {key: copy.deepcopy(value) for key, value in kwargs.items() if value is not _UNSET}
        self._calls.append({"turn": self._turn_index, "name": method, "arguments": copy.deepcopy(kwargs)})
        text, raised = data.run_method(self._instances[class_name], method, kwargs)
        self._results.append(text)
        self._turn_calls += 1
        if raised:
            raise ToolError(text)
        return text

    # ----------------------------------------------------------------- turns
    def step(self, action: str) -> tuple[str, float, bool, bool, JsonDict]:
        """Like `ConversationEnv.step`; a step that ends a turn puts BFCL's verdict for it in `info["turn_check"]`,
        and `info["tools"]` is set again when the next turn reveals new functions."""
        self._tools_changed, checked = False, len(self._checks)
        observation, reward, terminated, truncated, info = super().step(action)
        if self._tools_changed:
            info["tools"] = [spec.to_openai() for spec in self._specs]
        if len(self._checks) > checked:
            info["turn_check"] = self._checks[-1]
        return observation, reward, terminated, truncated, info

    def _reply(self, parsed: ParsedAction) -> str:
        self._end_turn()
        if self._turn_index >= len(self._entry["question"]):
            self.end_conversation()
            return ""
        before = {spec.name for spec in self._specs}
        self._specs = self._visible_specs()
        new = sorted({spec.name for spec in self._specs} - before)
        self._tools_changed = bool(new)
        note = f"(New tools are available: {', '.join(new)}.)" if new else ""
        return "\n".join(part for part in (_question(self._entry, self._turn_index), note) if part)

    def _run_ground_truth(self, turn: int) -> list[str]:
        owners = _method_owners(self._entry["involved_classes"])
        results = []
        for text in self._entry["ground_truth"][turn]:
            name, args, kwargs = data.parse_call(text)
            instance = self._gt_instances[owners[name]]
            results.append(
                data.run_method(instance, name, data.keyword_arguments(getattr(instance, name), args, kwargs))[0]
            )
        return results

    def _end_turn(self) -> None:
        turn = self._turn_index
        expected = self._run_ground_truth(turn)
        self._checks.append(self._check_turn(turn, expected))
        self._turn_index, self._turn_calls = turn + 1, 0

    def _check_turn(self, turn: int, expected: list[str]) -> JsonDict:
        if not self._entry["ground_truth"][turn]:
            return {"turn": turn, "valid": True}
        if self._turn_calls == 0:
            return _failure(
                turn, "multi_turn:empty_turn_model_response", f"Model response list is empty for turn {turn}"
            )
        checker = data.checkers()
        state = checker.state_checker(self._instances, self._gt_instances)
        if not state["valid"]:
            return _failure(turn, state["error_type"], state["error_message"])
        response = checker.response_checker(self._results, expected, turn)
        if not response["valid"]:
            return _failure(turn, response["error_type"], response["error_message"])
        return {"turn": turn, "valid": True}

    # ----------------------------------------------------------------- reward
    def _score(self, answer: str | None) -> dict[str, float]:
        turns = len(self._entry["question"])
        if answer is not None and self._turn_index < turns:
            self._end_turn()
        failures = [c for c in self._checks if not c["valid"]]
        if self._turn_index < turns:
            message = f"{turns - self._turn_index} of {turns} turns were never reached"
            failures.append(_failure(self._turn_index, "multi_turn:force_terminated", message))
        self._evaluation = {
            "valid": not failures,
            "turns": list(self._checks),
            "error": failures[0] if failures else None,
        }
        return {"success": float(not failures)}

    def _evaluation_info(self) -> JsonDict | None:
        return self._evaluation

    # ----------------------------------------------------------------- snapshot
    def _world_state(self) -> Any:
        return {
            "entry": self._entry.get("id"),
            "turn_index": self._turn_index,
            "turn_calls": self._turn_calls,
            "calls": self._calls,
            "checks": self._checks,
            "evaluation": self._evaluation,
        }

    def _load_world_state(self, state: Any) -> None:
        """Rebuild both instance sets by replaying the recorded calls (the backends are deterministic)."""
        if state["entry"] is None:
            return
        self._start_entry(state["entry"])
        for turn in range(state["turn_index"]):
            self._run_ground_truth(turn)
        owners = _method_owners(self._entry["involved_classes"])
        for call in state["calls"]:
            text, _ = data.run_method(
                self._instances[owners[call["name"]]], call["name"], copy.deepcopy(call["arguments"])
            )
            self._results.append(text)
        self._turn_index, self._turn_calls = state["turn_index"], state["turn_calls"]
        self._calls, self._checks, self._evaluation = state["calls"], state["checks"], state["evaluation"]


def _failure(turn: int, error_type: str, message: str) -> JsonDict:
    return {"turn": turn, "valid": False, "error_type": error_type, "error_message": message}
