"""`ToolEnv`: the multi-turn, text-in text-out Gymnasium core every toolgym environment builds on."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np

from toolgym.envs.hooks import StepHook
from toolgym.envs.parsing import ParsedAction, RawCall, parse_action
from toolgym.envs.spaces import UnicodeText
from toolgym.schemas import ErrorKind, Task, ToolCall, ToolResult, ToolSpec
from toolgym.simulators import Tool

JsonDict = dict[str, Any]
NO_ACTION_HINT = (
    'No tool call or answer found. Call a tool with <tool_call>{"name": ..., "arguments": {...}}</tool_call> '
    "or give the final answer as <answer>...</answer>."
)
TURN_LIMIT_MESSAGE = "Turn limit reached: the episode is over."
_JSON = json.JSONEncoder(ensure_ascii=False, default=str)


class ToolEnv(gym.Env[str, str]):
    """A multi-turn tool-use episode: the agent writes text, tools answer, a final answer ends it.

    Subclasses provide tasks (`_make_task`), tools over the episode's world (`_episode_tools`), the
    world's state (`_world_state` / `_load_world_state`) and the final score (`_score`). Everything
    else — parsing, validation, info records, truncation, snapshot and fork, hooks — lives here.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012
    tool_error_penalty: float = 0.05

    def __init__(
        self,
        *,
        max_turns: int = 8,
        render_mode: str | None = None,
        budget: JsonDict | None = None,
        faults: JsonDict | None = None,
        hooks: Sequence[StepHook] = (),
    ) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.max_turns = max_turns
        self.render_mode = render_mode
        self.observation_space = UnicodeText()
        self.action_space = UnicodeText()
        self.hooks: list[StepHook] = [*_hooks_from_kwargs(budget, faults), *hooks]
        self.task: Task | None = None
        self._tools: dict[str, Tool] = {}
        self._specs: list[ToolSpec] = []
        self._messages: list[JsonDict] = []
        self._turn = 0
        self._done = True
        self._episode_id = ""
        self._total_reward = 0.0

    # ----------------------------------------------------------------- subclass hooks
    def _make_task(self, rng: np.random.Generator, task_id: str | None) -> Task:
        """Pick the episode's task: `task_id` when given, else one drawn from `rng`."""
        raise NotImplementedError

    def _episode_tools(self) -> list[Tool]:
        """The tools of this episode, bound to its world."""
        raise NotImplementedError

    def _score(self, answer: str | None) -> dict[str, float]:
        """Reward components at the end of the episode, given the final answer (None if none)."""
        raise NotImplementedError

    def _system_prompt(self) -> str:
        """The system message shown at reset."""
        return (
            "You are an agent that solves tasks with tools. Call tools with "
            '<tool_call>{"name": <tool name>, "arguments": {...}}</tool_call> (several per turn allowed); '
            "tool results come back in <tool_response> blocks. Finish with <answer>...</answer>."
        )

    def _world_state(self) -> Any:
        """The episode's world as JSON-serializable data (None for stateless envs)."""
        return None

    def _load_world_state(self, state: Any) -> None:
        """Restore the world from `_world_state`'s output."""

    def _on_text_only(self, parsed: ParsedAction) -> str:
        """Observation for an action with neither calls nor an answer (a user simulator may reply)."""
        return NO_ACTION_HINT

    # ----------------------------------------------------------------- gym API
    def reset(self, *, seed: int | None = None, options: JsonDict | None = None) -> tuple[str, JsonDict]:
        """Start an episode. Options: `task_id` (pick a task), `tools` ("all", "none" or a list of names)."""
        super().reset(seed=seed)
        options = options or {}
        self.task = self._make_task(self.np_random, options.get("task_id"))
        self._episode_id = _episode_uuid(self.np_random)
        self._turn, self._done, self._total_reward = 0, False, 0.0
        self._install_tools(options.get("tools", "all"))
        for hook in self.hooks:
            hook.on_reset(self)
        self._specs = self._visible_specs()
        self._messages = [
            {"role": "system", "content": self._system_prompt()},
            {"role": "user", "content": self.task.instruction},
        ]
        info = self._base_info(list(self._messages), [], {})
        info["tools"] = [spec.to_openai() for spec in self._specs]
        info["task_id"] = self.task.id
        notes = [note for hook in self.hooks if (note := getattr(hook, "on_reset_end", _no_note)(info))]
        if notes:  # e.g. the budget tracker: shown with the task, recorded in the user message
            self._messages[-1]["content"] = "\n".join([self.task.instruction, *notes])
        return str(self._messages[-1]["content"]), info

    def step(self, action: str) -> tuple[str, float, bool, bool, JsonDict]:
        """Run the calls in `action`; a final answer ends the episode."""
        if self._done:
            raise gym.error.ResetNeeded("The episode is over: call reset() before step().")
        self._turn += 1
        for hook in self.hooks:
            hook.on_action(action)
        parsed = parse_action(action)
        records, responses, components = self._run_calls(parsed)
        messages: list[JsonDict] = [_assistant_message(action, parsed, records)]
        messages.extend(_tool_message(record, text) for record, text in zip(records, responses, strict=True))
        terminated = parsed.answer is not None
        if terminated:
            components.update(self._score(parsed.answer))
        observation = "\n".join(responses) if responses else ("" if terminated else self._on_text_only(parsed))
        info = self._base_info(messages, records, components)
        observation, truncated = self._finish_step(observation, terminated, info)
        reward = float(sum(components.values()))
        self._total_reward += reward
        self._messages.extend(info["messages"])
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, info

    def render(self) -> str | None:
        """The transcript so far as text (render mode "ansi")."""
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{m['role']}] {m.get('content') or ''}" for m in self._messages)

    # ----------------------------------------------------------------- snapshot and fork
    def get_state(self) -> JsonDict:
        """The whole episode state as JSON-serializable data: restore it with `set_state` to fork."""
        return {
            "task": self.task.model_dump(mode="json") if self.task else None,
            "turn": self._turn,
            "done": self._done,
            "episode_id": self._episode_id,
            "total_reward": self._total_reward,
            "rng": _jsonable_rng_state(self.np_random.bit_generator.state),
            "messages": copy.deepcopy(self._messages),
            "tools": sorted(self._tools),
            "world": copy.deepcopy(self._world_state()),
            "hooks": [hook.get_state() for hook in self.hooks],
        }

    def set_state(self, state: JsonDict) -> None:
        """Restore a state from `get_state`; the episode continues exactly as the original would."""
        self.task = Task.model_validate(state["task"]) if state["task"] else None
        self._turn, self._done = state["turn"], state["done"]
        self._episode_id, self._total_reward = state["episode_id"], state["total_reward"]
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = state["rng"]
        self._np_random = rng
        self._messages = copy.deepcopy(state["messages"])
        self._load_world_state(copy.deepcopy(state["world"]))
        self._install_tools(state["tools"])
        for hook, hook_state in zip(self.hooks, state["hooks"], strict=True):
            hook.set_state(hook_state)
        self._specs = self._visible_specs()

    # ----------------------------------------------------------------- internals
    @property
    def turn(self) -> int:
        """Number of steps taken in this episode."""
        return self._turn

    @property
    def episode_id(self) -> str:
        """Id of the current episode (derived from the seed: reproducible)."""
        return self._episode_id

    @property
    def messages(self) -> list[JsonDict]:
        """The OpenAI-format transcript of the current episode."""
        return self._messages

    @property
    def base_tool_specs(self) -> list[ToolSpec]:
        """The specs of the episode's tools before hooks transform them (drift, distractors, ...)."""
        return [tool.spec for tool in self._tools.values()]

    @property
    def tool_specs(self) -> list[ToolSpec]:
        """The specs of the tools the agent sees in this episode."""
        return self._specs

    def _install_tools(self, selection: str | Sequence[str]) -> None:
        tools = {tool.name: tool for tool in self._episode_tools()}
        if selection == "none":
            tools = {}
        elif selection != "all":
            if isinstance(selection, str) or not all(isinstance(n, str) for n in selection):
                raise ValueError(f"options['tools'] must be 'all', 'none' or a list of tool names, got {selection!r}")
            unknown = sorted(set(selection) - set(tools))
            if unknown:
                raise ValueError(f"unknown tools in options['tools']: {unknown}; available: {sorted(tools)}")
            tools = {name: tools[name] for name in selection}
        self._tools = tools

    def _visible_specs(self) -> list[ToolSpec]:
        specs = [tool.spec for tool in self._tools.values()]
        for hook in self.hooks:
            specs = hook.transform_specs(specs)
        return specs

    def _run_calls(self, parsed: ParsedAction) -> tuple[list[JsonDict], list[str], dict[str, float]]:
        records: list[JsonDict] = []
        responses: list[str] = []
        components: dict[str, float] = {}
        for index, error in enumerate(parsed.errors):
            call = ToolCall(id=f"call_{self._turn}_e{index}", name="", arguments={})
            result = ToolResult.failure(ErrorKind.PARSE, f"could not parse tool call: {error.message}")
            records.append(_call_record(call, result))
        for index, raw in enumerate(parsed.calls):
            call_id = raw.call_id or f"call_{self._turn}_{index}"
            tool = self._tools.get(raw.name)
            if self.hooks or tool is None:
                call = ToolCall(id=call_id, name=raw.name, arguments=raw.arguments)
                records.append(_call_record(call, self._dispatch(self._resolve(call))))
            else:  # fast path: no hook needs the pydantic call and result objects
                records.append(_direct_record(call_id, raw, tool))
        for record in records:
            responses.append(_response_text(record))
            if record["error_kind"] in (
                ErrorKind.PARSE.value,
                ErrorKind.UNKNOWN_TOOL.value,
                ErrorKind.INVALID_ARGUMENTS.value,
            ):
                label = f"invalid_call/{record['error_kind']}"
                components[label] = components.get(label, 0.0) - self.tool_error_penalty
        return records, responses, components

    def _resolve(self, call: ToolCall) -> ToolCall:
        """Map the agent's call onto the tool that answers it (hooks may rename); `_dispatch` gets the result."""
        for hook in self.hooks:
            call = hook.resolve_call(call)
        return call

    def _dispatch(self, call: ToolCall) -> ToolResult:
        """Answer a resolved call: hooks first (refusals, faults), then the tool, then hooks again."""
        for hook in self.hooks:
            early = hook.before_call(call)
            if early is not None:
                return self._after(call, early)
        tool = self._tools.get(call.name)
        if tool is None:
            result = ToolResult.failure(ErrorKind.UNKNOWN_TOOL, self._unknown_tool_message(call.name))
        else:
            result = tool.invoke(call.arguments)
        return self._after(call, result)

    def _after(self, call: ToolCall, result: ToolResult) -> ToolResult:
        for hook in self.hooks:
            result = hook.after_call(call, result)
        return result

    def _unknown_tool_message(self, name: str) -> str:
        available = ", ".join(sorted(self._tools)) or "none"
        return f"unknown tool '{name}'; tools available in this episode: {available}"

    def _base_info(self, messages: list[JsonDict], records: list[JsonDict], components: dict[str, float]) -> JsonDict:
        return {
            "messages": messages,
            "tool_calls": records,
            "reward_components": components,
            "turn": self._turn,
            "budget": {},
            "faults": [],
            "episode_id": self._episode_id,
        }

    def _finish_step(self, observation: str, terminated: bool, info: JsonDict) -> tuple[str, bool]:
        truncated = False
        suffixes: list[str] = []
        for hook in self.hooks:
            outcome = hook.on_step_end(info)
            if outcome.observation_suffix:
                suffixes.append(outcome.observation_suffix)
            if outcome.truncate_reason and not terminated:
                truncated = True
                suffixes.append(outcome.truncate_reason)
        if not terminated and not truncated and self._turn >= self.max_turns:
            truncated = True
            suffixes.append(TURN_LIMIT_MESSAGE)
        if truncated and self.task is not None:
            info["reward_components"].update(self._score(None))
        if suffixes:
            observation = "\n".join([observation, *suffixes]) if observation else "\n".join(suffixes)
        info["messages"].extend({"role": "user", "content": text} for text in suffixes if text)
        return observation, truncated


def _no_note(info: JsonDict) -> str | None:
    return None


def _hooks_from_kwargs(budget: JsonDict | None, faults: JsonDict | None) -> list[StepHook]:
    hooks: list[StepHook] = []
    if budget is not None:
        from toolgym.envs.wrappers.budget import BudgetHook

        hooks.append(BudgetHook.from_config(budget))
    if faults is not None:
        from toolgym.envs.wrappers.faults import FaultHook

        hooks.append(FaultHook.from_config(faults))
    return hooks


def _call_record(call: ToolCall, result: ToolResult) -> JsonDict:
    record: JsonDict = {
        "id": call.id,
        "name": call.name,
        "arguments": call.arguments,
        "ok": result.ok,
        "cost": result.cost,
        "latency": result.latency,
        "error_kind": result.error_kind.value if result.error_kind else None,
    }
    if result.ok:
        record["result"] = result.content
    else:
        record["error"] = result.error_message
    return record


def _direct_record(call_id: str, raw: RawCall, tool: Tool) -> JsonDict:
    content, error_kind, error_message = tool.execute(raw.arguments)
    annotations = tool.spec.annotations
    ok = error_kind is None
    record: JsonDict = {
        "id": call_id,
        "name": raw.name,
        "arguments": raw.arguments,
        "ok": ok,
        "cost": annotations.price if ok else 0.0,
        "latency": annotations.latency if ok else 0.0,
        "error_kind": None if ok else error_kind.value,  # type: ignore[union-attr]
    }
    if ok:
        record["result"] = content
    else:
        record["error"] = error_message
    return record


def _response_text(record: JsonDict) -> str:
    if record["ok"]:
        content = record["result"]
        text = content if isinstance(content, str) else _JSON.encode(content)
    else:
        text = f"Error ({record['error_kind']}): {record['error']}"
    return f"<tool_response>{text}</tool_response>"


def _assistant_message(action: str, parsed: ParsedAction, records: list[JsonDict]) -> JsonDict:
    message: JsonDict = {"role": "assistant", "content": action}
    calls = [r for r in records if r["name"]]
    if calls:
        message["tool_calls"] = [
            {
                "id": r["id"],
                "type": "function",
                "function": {"name": r["name"], "arguments": _JSON.encode(r["arguments"])},
            }
            for r in calls
        ]
    return message


def _tool_message(record: JsonDict, text: str) -> JsonDict:
    content = text[len("<tool_response>") : -len("</tool_response>")]
    if not record["name"]:  # an unparseable call has no assistant tool_call to answer
        return {"role": "user", "content": content}
    return {"role": "tool", "tool_call_id": record["id"], "content": content}


def _episode_uuid(rng: np.random.Generator) -> str:
    """A UUID-formatted id drawn from the env's RNG (reproducible under the same seed)."""
    raw = rng.bit_generator.random_raw(2)
    digits = f"{int(raw[0]):016x}{int(raw[1]):016x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def _jsonable_rng_state(state: Mapping[str, Any]) -> JsonDict:
    return cast(JsonDict, json.loads(json.dumps(dict(state))))


__all__ = ["RawCall", "ToolEnv"]
