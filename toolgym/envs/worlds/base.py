"""`WorldEnv`: a ToolEnv over a typed world with a policy, a simulated user, and state-based rewards."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from toolgym.envs.conversation import ConversationEnv
from toolgym.envs.core import NO_ACTION_HINT
from toolgym.envs.parsing import ParsedAction, parse_action
from toolgym.schemas import Task, ToolCall, ToolResult
from toolgym.simulators import Tool
from toolgym.simulators.users import GenerateText, UserProfile, UserSimulator, make_user
from toolgym.simulators.worlds import (
    Evaluation,
    Milestone,
    Minefield,
    PolicyRule,
    TraceEvent,
    WorldState,
    call_event,
    check_rules,
    confirm_before_write,
    evaluate,
    text_event,
)

JsonDict = dict[str, Any]
REWARD_MODES = ("success", "milestones")


@dataclass(frozen=True)
class Domain:
    """Everything that defines a world domain: its state, tools, policy and tasks."""

    name: str
    policy: str
    tools: tuple[Tool, ...]
    world_type: type[WorldState]
    initial_world: Callable[[], WorldState]
    build_tasks: Callable[[], list[Task]]
    rules: dict[str, PolicyRule] = field(default_factory=dict)

    @property
    def write_tools(self) -> frozenset[str]:
        """Names of the tools annotated as writing to the world."""
        return frozenset(t.name for t in self.tools if not t.spec.annotations.read_only)


def tool_call(name: str, /, **arguments: Any) -> str:
    """A gold action: one Hermes tool-call block."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "</tool_call>"


def replay_gold(domain: Domain, gold_actions: list[str]) -> WorldState:
    """Run the tool calls of `gold_actions` on a fresh initial world; a failing gold call is a task bug."""
    world = domain.initial_world()
    tools = {t.name: t.bind(world=world) for t in domain.tools}
    for action in gold_actions:
        for call in parse_action(action).calls:
            result = tools[call.name].invoke(call.arguments)
            if not result.ok:
                raise RuntimeError(f"gold call {call.name}({call.arguments}) failed: {result.error_message}")
    return world


def gold_milestones(domain: Domain, gold_actions: list[str]) -> list[JsonDict]:
    """Default milestones of a task: its gold writing calls, in order, with their full arguments."""
    calls = [c for action in gold_actions for c in parse_action(action).calls if c.name in domain.write_tools]
    return [
        Milestone(name=f"{c.name}#{i}", tool=c.name, arguments=c.arguments).model_dump() for i, c in enumerate(calls)
    ]


class WorldEnv(ConversationEnv):
    """Base of world environments; subclasses set `domain` (see Retail-v0 and Clinic-v0).

    Text-only assistant messages go to the simulated user, whose reply is the observation; the
    user ends the conversation when its requests are done, or the agent answers with
    `<answer>…</answer>`. At the end, `success` is 1.0 when the world's state hash equals the state
    reached by replaying the task's gold actions, every required output was said to the user, no
    minefield was hit and no policy rule was broken (τ-bench × ToolSandbox semantics).
    """

    domain: ClassVar[Domain]
    _task_cache: ClassVar[dict[str, list[Task]]] = {}
    _gold_cache: ClassVar[dict[tuple[str, str], tuple[WorldState, str]]] = {}

    def __init__(
        self,
        *,
        user: str | UserSimulator | None = "scripted",
        user_generate: GenerateText | None = None,
        user_backend: Any = None,
        user_cache: Any = None,
        reward: str = "success",
        max_turns: int = 30,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_turns=max_turns, **kwargs)
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        self.user = make_user(user, user_generate, backend=user_backend, cache=user_cache)
        self.reward_mode = reward
        self.world: WorldState | None = None
        self.trace: list[TraceEvent] = []
        self.evaluation: Evaluation | None = None

    # ----------------------------------------------------------------- tasks
    @property
    def tasks(self) -> list[Task]:
        """Every task of the domain (id, instruction, gold_actions, metadata)."""
        name = self.domain.name
        if name not in self._task_cache:
            self._task_cache[name] = self.domain.build_tasks()
        return self._task_cache[name]

    def _make_task(self, rng: np.random.Generator, task_id: str | None) -> Task:
        by_id = {t.id: t for t in self.tasks}
        if task_id is None:
            task = self.tasks[int(rng.integers(len(self.tasks)))]
        elif task_id in by_id:
            task = by_id[task_id]
        else:
            raise ValueError(
                f"unknown {self.domain.name} task id {task_id!r}; ids run {self.tasks[0].id}..{self.tasks[-1].id}"
            )
        self.world = self.domain.initial_world()
        self.trace, self.evaluation = [], None
        profile = UserProfile.model_validate(task.metadata["user"])
        seed = int(rng.integers(2**31))
        opening = self.user.start(profile, seed) if self.user is not None else profile.disclosed()
        return task.model_copy(update={"instruction": opening})

    def _system_prompt(self) -> str:
        talk = (
            " A message without tool calls or an answer is sent to the user, and the user's reply comes back."
            if self.user is not None
            else ""
        )
        return f"{super()._system_prompt()}{talk}\n\n# Policy\n{self.domain.policy}"

    def _episode_tools(self) -> list[Tool]:
        return [t.bind(world=self.world) for t in self.domain.tools]

    # ----------------------------------------------------------------- conversation
    def _reply(self, parsed: ParsedAction) -> str:
        text = parsed.content.strip()
        self.trace.append(text_event("assistant", self.turn, text))
        if self.user is None:
            return NO_ACTION_HINT
        turn = self.user.reply(text)
        self.trace.append(text_event("user", self.turn, turn.text, confirms=turn.confirms))
        if turn.stop:
            self.end_conversation()
        return turn.text

    def _evaluation_info(self) -> JsonDict | None:
        return self.evaluation.to_dict() if self.evaluation is not None else None

    def _run_calls(self, parsed: ParsedAction) -> tuple[list[JsonDict], list[str], dict[str, float]]:
        records, responses, components = super()._run_calls(parsed)
        if not self.hooks:  # the core's fast path ran the tools directly, without `_dispatch`
            for record in records:
                if record["name"] in self._tools:
                    content = record["result"] if record["ok"] else record["error"]
                    self.trace.append(
                        call_event(self.turn, record["name"], dict(record["arguments"]), record["ok"], content)
                    )
        return records, responses, components

    def _dispatch(self, call: ToolCall) -> ToolResult:
        result = super()._dispatch(call)  # with hooks: `call` is already resolved to the real tool
        if self.hooks and call.name in self._tools:
            content = result.content if result.ok else result.error_message
            self.trace.append(call_event(self.turn, call.name, dict(call.arguments), result.ok, content))
        return result

    # ----------------------------------------------------------------- reward
    def _score(self, answer: str | None) -> dict[str, float]:
        assert self.task is not None and self.world is not None
        if answer is not None:
            self.trace.append(text_event("assistant", self.turn, answer))
        self.evaluation = self._evaluate(self.task)
        if self.reward_mode == "milestones":
            return {"milestones": self.evaluation.milestone_score}
        return {"success": self.evaluation.success}

    def _evaluate(self, task: Task) -> Evaluation:
        assert self.world is not None
        gold, gold_hash = self._gold_world(task)
        state_match = self.world.state_hash() == gold_hash
        rules = dict(self.domain.rules)
        if self.user is not None:
            rules["confirm_before_write"] = confirm_before_write(self.domain.write_tools)
        meta = task.metadata
        milestones = [
            Milestone.model_validate(m)
            for m in meta.get("milestones") or gold_milestones(self.domain, task.gold_actions)
        ]
        return evaluate(
            state_match=state_match,
            required_outputs=meta.get("outputs", []),
            texts=[e["text"] for e in self.trace if e["kind"] == "assistant"],
            milestones=milestones,
            minefields=[Minefield.model_validate(m) for m in meta.get("minefields", [])],
            trace=self.trace,
            violations=check_rules(rules, self.trace, self.world),
            diff={} if state_match else self.world.diff(gold),
        )

    def _gold_world(self, task: Task) -> tuple[WorldState, str]:
        key = (self.domain.name, task.id)
        if key not in self._gold_cache:
            world = replay_gold(self.domain, task.gold_actions)
            self._gold_cache[key] = (world, world.state_hash())
        return self._gold_cache[key]

    # ----------------------------------------------------------------- snapshot
    def _world_state(self) -> Any:
        return {
            "world": self.world.snapshot() if self.world is not None else None,
            "trace": self.trace,
            "user": self.user.get_state() if self.user is not None else None,
        }

    def _load_world_state(self, state: Any) -> None:
        self.world = self.domain.world_type.restore(state["world"]) if state["world"] is not None else None
        self.trace = state["trace"]
        if self.user is not None and state["user"] is not None:
            self.user.set_state(state["user"])
