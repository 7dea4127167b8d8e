"""Planner and worker roles over one toolgym env: each planner call to the worker tool opens a worker sub-episode."""

from __future__ import annotations

import copy
import json
from typing import Any

import gymnasium as gym

from toolgym.envs.parsing import parse_action
from toolgym.envs.spaces import UnicodeText
from toolgym.schemas import Task

JsonDict = dict[str, Any]

WORKER_PROMPT = "You are a worker agent. Solve this subtask with the tools and finish with <answer>...</answer>."
NOT_RUN = "a turn that calls the worker runs only its worker calls"


def worker_tool_spec(name: str) -> JsonDict:
    """The OpenAI-format spec of the planner's delegation tool."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": "Delegate a subtask to a worker agent, which solves it with the tools and answers.",
            "parameters": {
                "type": "object",
                "properties": {"subtask": {"type": "string", "description": "what the worker must do"}},
                "required": ["subtask"],
                "additionalProperties": False,
            },
        },
    }


class PlannerWorkerEnv(gym.Env[str, str]):
    """MATPO's multi-agent episode: one model plays planner and worker over a hosted toolgym env.

    ## Description
    The planner sees the task and a `worker(subtask)` tool (it may also call the env's own tools). Each
    call to the worker opens a *worker sub-episode*: the next observation is the subtask, in a context of
    its own (`info["role"] == "worker"`, `info["context"] == "new"`); the worker's turns run the env's
    tools on the same world, and its `<answer>` becomes the planner's tool response
    (`info["context"] == "resume"`, `info["role"] == "planner"`). The planner's final answer is scored
    by the env. A rollout loop keeps one token sequence per role: the planner's, and one per sub-episode.

    ## Arguments
    `env_id` (default "toolgym/Calculator-v0") and `env_kwargs`: the env the agents work in;
    `worker_tool` (default "worker"); `max_worker_turns` (default 3): a worker that has not answered by
    then returns an error to the planner; `max_planner_turns` (default 4): planner turns before truncation.

    ## Info
    The wrapped env's keys, plus `role` ("planner" | "worker") and `context` ("new" | "continue" |
    "resume"); a worker's first info also holds `subtask` and `call_id`.
    """

    metadata = {"render_modes": [], "render_fps": 4}  # noqa: RUF012

    def __init__(
        self,
        *,
        env_id: str = "toolgym/Calculator-v0",
        env_kwargs: JsonDict | None = None,
        worker_tool: str = "worker",
        max_worker_turns: int = 3,
        max_planner_turns: int = 4,
    ) -> None:
        if env_id == "toolgym/PlannerWorker-v0":
            raise ValueError("the planner-worker env cannot wrap itself")
        if max_worker_turns < 1 or max_planner_turns < 1:
            raise ValueError("max_worker_turns and max_planner_turns must be at least 1")
        self.inner: Any = gym.make(env_id, **(env_kwargs or {})).unwrapped
        self.worker_tool, self.max_worker_turns, self.max_planner_turns = (
            worker_tool,
            max_worker_turns,
            max_planner_turns,
        )
        self.observation_space, self.action_space = UnicodeText(), UnicodeText()
        self.task: Task | None = None
        self._role = "planner"
        self._pending: list[JsonDict] = []  # worker calls of the current planner turn: id, subtask, answer
        self._planner_turn = 0
        self._worker_turn = 0

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: JsonDict | None = None) -> tuple[str, JsonDict]:
        """Reset the env; the planner gets the task and the worker tool."""
        super().reset(seed=seed)
        observation, info = self.inner.reset(seed=seed, options=options)
        self.task = self._planner_task(self.inner.task)
        self._role, self._pending, self._planner_turn, self._worker_turn = "planner", [], 0, 0
        info["tools"] = [worker_tool_spec(self.worker_tool), *info.get("tools", [])]
        return observation, {**info, "role": "planner", "context": "new"}

    def step(self, action: str) -> tuple[str, float, bool, bool, JsonDict]:
        """A planner turn (delegate, call tools, or answer) or a worker turn (call tools or answer)."""
        if self.task is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._role == "worker":
            return self._worker_step(action)
        self._planner_turn += 1
        parsed = parse_action(action)
        delegated = [c for c in parsed.calls if c.name == self.worker_tool]
        if not delegated:
            return self._inner_step(action, "planner", "continue")
        self._pending = [_pending(c, i, self._planner_turn, self.worker_tool) for i, c in enumerate(parsed.calls)]
        return self._next_worker(messages=[_delegation_message(action, self._pending)])

    # ------------------------------------------------------------------ state
    def get_state(self) -> JsonDict:
        """JSON-serializable snapshot: the env's state and where the roles are."""
        return {
            "inner": self.inner.get_state(),
            "role": self._role,
            "pending": copy.deepcopy(self._pending),
            "planner_turn": self._planner_turn,
            "worker_turn": self._worker_turn,
        }

    def set_state(self, state: JsonDict) -> None:
        """Restore a `get_state` snapshot."""
        self.inner.set_state(state["inner"])
        self.task = self._planner_task(self.inner.task)
        self._role, self._pending = str(state["role"]), copy.deepcopy(state["pending"])
        self._planner_turn, self._worker_turn = int(state["planner_turn"]), int(state["worker_turn"])

    def close(self) -> None:
        """Close the wrapped env."""
        self.inner.close()

    # ------------------------------------------------------------------ roles
    def _worker_step(self, action: str) -> tuple[str, float, bool, bool, JsonDict]:
        self._worker_turn += 1
        parsed = parse_action(action)
        current = next(p for p in self._pending if p["answer"] is None and p["worker"])
        if parsed.answer is not None:
            current["answer"], current["ok"] = parsed.answer, True
        elif self._worker_turn >= self.max_worker_turns:
            observation, reward, terminated, truncated, info = self.inner.step(action)
            if terminated or truncated:
                return observation, reward, terminated, truncated, {**info, "role": "worker", "context": "continue"}
            current["answer"], current["ok"] = f"the worker gave no answer in {self.max_worker_turns} turns", False
            return self._next_worker(reward=reward, base=info)
        else:
            return self._inner_step(action, "worker", "continue")
        message = {"role": "assistant", "content": action}
        return self._next_worker(messages=[message])

    def _next_worker(
        self, reward: float = 0.0, base: JsonDict | None = None, messages: list[JsonDict] | None = None
    ) -> tuple[str, float, bool, bool, JsonDict]:
        """Open the next pending worker sub-episode, or hand the answers back to the planner."""
        info = self._info(base, messages)
        following = next((p for p in self._pending if p["answer"] is None and p["worker"]), None)
        if following is not None:
            self._role, self._worker_turn = "worker", 0
            info.update(role="worker", context="new", subtask=following["subtask"], call_id=following["id"])
            info["tools"] = self._inner_tools()
            return f"{WORKER_PROMPT}\nSubtask: {following['subtask']}", reward, False, False, info
        self._role = "planner"
        records = [_record(p) for p in self._pending]
        info["tool_calls"] = records + info["tool_calls"]
        info["messages"] = info["messages"] + [_tool_message(r) for r in records]
        info.update(role="planner", context="resume")
        observation = "\n".join(f"<tool_response>{_response(r)}</tool_response>" for r in records)
        self._pending = []
        truncated = self._planner_turn >= self.max_planner_turns
        return observation, reward, False, truncated, info

    def _inner_step(self, action: str, role: str, context: str) -> tuple[str, float, bool, bool, JsonDict]:
        observation, reward, terminated, truncated, info = self.inner.step(action)
        if role == "planner" and not (terminated or truncated) and self._planner_turn >= self.max_planner_turns:
            truncated = True
        return observation, float(reward), terminated, truncated, {**info, "role": role, "context": context}

    def _info(self, base: JsonDict | None, messages: list[JsonDict] | None) -> JsonDict:
        info = copy.deepcopy(base) if base is not None else {}
        info.setdefault("messages", [])
        info["messages"] = [*(messages or []), *info["messages"]]
        for key, empty in (("tool_calls", []), ("reward_components", {}), ("budget", {}), ("faults", [])):
            info.setdefault(key, copy.deepcopy(empty))
        info.setdefault("turn", self.inner.turn)
        info.setdefault("episode_id", self.inner.episode_id)
        return info

    def _inner_tools(self) -> list[JsonDict]:
        return [spec.to_openai() for spec in self.inner.tool_specs]

    def _planner_task(self, task: Task) -> Task:
        """The env's task with planner-worker gold: delegate the task (its `metadata["subtask"]`, else its
        `metadata["expression"]`, else the instruction), the worker solves it, the planner answers."""
        gold = list(task.gold_actions)
        subtask = task.metadata.get("subtask") or task.metadata.get("expression") or task.instruction
        call = {"name": self.worker_tool, "arguments": {"subtask": str(subtask)}}
        delegate = f"<tool_call>{json.dumps(call)}</tool_call>"
        answer = gold[-1] if gold else "<answer></answer>"
        return task.model_copy(update={"gold_actions": [delegate, *gold[:-1], answer, answer]})


def _pending(call: Any, index: int, turn: int, worker_tool: str) -> JsonDict:
    """A call of a delegating planner turn: worker calls wait for their sub-episode, other calls are not run."""
    subtask = call.arguments.get("subtask") if isinstance(call.arguments, dict) else None
    worker = call.name == worker_tool
    return {
        "id": call.call_id or f"call_{turn}_{index}",
        "name": call.name,
        "arguments": call.arguments,
        "subtask": str(subtask) if subtask is not None else json.dumps(call.arguments),
        "worker": worker,
        "answer": None if worker else NOT_RUN,
        "ok": False,
    }


def _delegation_message(action: str, pending: list[JsonDict]) -> JsonDict:
    calls = [
        {"id": p["id"], "type": "function", "function": {"name": p["name"], "arguments": json.dumps(p["arguments"])}}
        for p in pending
    ]
    return {"role": "assistant", "content": action, "tool_calls": calls}


def _record(pending: JsonDict) -> JsonDict:
    ok = bool(pending["ok"])
    record = {
        "id": pending["id"],
        "name": pending["name"],
        "arguments": pending["arguments"],
        "ok": ok,
        "cost": 0.0,
        "latency": 0.0,
        "error_kind": None if ok else "not_run" if not pending["worker"] else "execution_error",
    }
    record["result" if ok else "error"] = pending["answer"]
    return record


def _response(record: JsonDict) -> str:
    return str(record["result"]) if record["ok"] else f"Error ({record['error_kind']}): {record['error']}"


def _tool_message(record: JsonDict) -> JsonDict:
    return {"role": "tool", "tool_call_id": record["id"], "content": _response(record)}
