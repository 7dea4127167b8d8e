"""`FaultHook` and `FaultWrapper`: a seeded schedule of labelled tool failures injected into any toolgym env."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym

from toolgym.envs.hooks import BaseHook, StepOutcome
from toolgym.envs.parsing import parse_action
from toolgym.envs.wrappers._install import install_hook
from toolgym.schemas import ErrorKind, Task, ToolCall, ToolResult, ToolSpec
from toolgym.simulators.faults import (
    Decision,
    FaultConfig,
    FaultInjector,
    corrupt_wrong_value,
    deprecation_result,
    deprecation_warning,
    error_result,
    event,
    garbage,
    neutral_value,
)

if TYPE_CHECKING:
    from toolgym.envs.core import ToolEnv

JsonDict = dict[str, Any]
_BLOCKING = frozenset({"http_error", "timeout", "rate_limit", "missing_tool"})
_FREE_TOOL_BASE_PRICE = 0.01


def required_tools(task: Task | None) -> set[str] | None:
    """The tools a task's gold actions call (None when the task has no gold actions: treat all as required)."""
    if task is None or not task.gold_actions:
        return None
    return {call.name for action in task.gold_actions for call in parse_action(action).calls}


class FaultHook(BaseHook):
    """Injects the faults of a `FaultInjector` schedule and labels each one in `info["faults"]`.

    Episode-level faults (schema drift, missing tools, distractors) are planned at reset and listed
    in the reset info with step 0; call-level faults are listed in the info of the step they hit.
    """

    name = "faults"

    def __init__(self, config: FaultConfig) -> None:
        self.config = config
        self.injector = FaultInjector(config)
        self.turn = 0
        self.price_multipliers: dict[str, float] = {}
        self.log: list[JsonDict] = []
        self._visible: list[str] = []
        self._pending: dict[str, Decision] = {}
        self._drifted: dict[str, JsonDict] = {}
        self._events: list[JsonDict] = []
        self._notes: list[str] = []

    @classmethod
    def from_config(cls, config: JsonDict) -> FaultHook:
        """Build from the `faults={…}` keyword (keys: rate, kinds, tools, seed, solvable, permanent, ...)."""
        return cls(FaultConfig.from_dict(config))

    # ------------------------------------------------------------------ episode
    def on_reset(self, env: ToolEnv) -> None:
        """Plan this episode's faults from the seed (or the episode id) and the task."""
        task = env.task
        if self.config.seed is not None:
            key = f"seed={self.config.seed}:task={task.id if task else ''}"
        else:
            key = f"episode={env.episode_id}"
        self.turn, self.price_multipliers = 0, {}
        self._clear_step()
        self.log = self.injector.start_episode(key, env.base_tool_specs, required_tools(task))

    def on_reset_end(self, info: JsonDict) -> str | None:
        """List the episode-level faults (step 0) in the reset info."""
        info["faults"] = [dict(e) for e in self.log]
        return None

    def transform_specs(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        """Renamed tools and parameters, hidden missing tools, added distractors."""
        visible = self.injector.transform_specs(specs)
        self._visible = [spec.name for spec in visible]
        return visible

    def on_action(self, action: str) -> None:
        """A new step: the fault clock moves on."""
        self.turn += 1
        self.injector.begin_turn(self.turn)
        self._clear_step()

    def _clear_step(self) -> None:
        self._pending, self._drifted, self._events, self._notes = {}, {}, [], []

    def _emit(self, kind: str, tool: str | None, permanent: bool, detail: JsonDict) -> None:
        item = event(kind, tool, self.turn, permanent, detail)
        self._events.append(item)
        self.log.append(item)

    # ------------------------------------------------------------------ calls
    def resolve_call(self, call: ToolCall) -> ToolCall:
        """Map drifted names back to the real tool; note calls that use a deprecated name."""
        if call.name in self.injector.distractors:
            return call
        name, arguments, drift = self.injector.resolve(call.name, call.arguments)
        if drift is not None:
            self._drifted[call.id] = drift["plan"]
        if (name, arguments) == (call.name, call.arguments):
            return call
        return ToolCall.model_construct(id=call.id, name=name, arguments=arguments)

    def before_call(self, call: ToolCall) -> ToolResult | None:
        """Answer drifted, distractor, missing and failing calls without running the tool."""
        plan = self._drifted.pop(call.id, None)
        if plan is not None:
            detail = {"renamed_to": plan["new_name"], "renamed_parameters": plan["params"]}
            self._emit("schema_drift", call.name, plan["permanent"], detail)
            if plan["permanent"]:
                return deprecation_result(call.name, plan)
            self._notes.append(deprecation_warning(call.name, plan))
        if call.name in self.injector.distractors:
            original = self.injector.distractors[call.name]
            self._emit("distractor", call.name, True, {"imitates": original})
            return ToolResult.success(neutral_value(self.injector.schemas.get(original)))
        if call.name not in self.injector.schemas:  # unknown: list what the agent sees, not the real names
            names = ", ".join(sorted(self._visible)) or "none"
            message = f"unknown tool '{call.name}'; tools available in this episode: {names}"
            return ToolResult.failure(ErrorKind.UNKNOWN_TOOL, message)
        decision = self.injector.decide(call.name)
        if decision is None:
            return None
        self._pending[call.id] = decision
        if decision.kind in _BLOCKING:
            self._emit(decision.kind, call.name, decision.permanent, decision.detail)
            return error_result(call.name, decision)
        return None

    def after_call(self, call: ToolCall, result: ToolResult) -> ToolResult:
        """Corrupt outputs (implicit faults), apply price changes and timeouts' latency."""
        if result.error_kind in (ErrorKind.BUDGET, ErrorKind.UNKNOWN_TOOL):
            return result
        decision = self._pending.pop(call.id, None)
        if decision is not None and decision.kind == "price_change":
            result = self._price_change(call.name, decision, result)
        else:
            if call.name in self.price_multipliers:
                result = self._reprice(result, self.price_multipliers[call.name])
            if decision is not None:
                result = self._apply(call.name, decision, result)
        self.injector.observe_latency(result.latency)
        return result

    def _apply(self, tool: str, decision: Decision, result: ToolResult) -> ToolResult:
        if decision.kind == "timeout":
            return result.model_copy(update={"latency": result.latency + decision.detail["timeout_s"]})
        if decision.kind in _BLOCKING or not result.ok:
            return result  # an implicit fault only shows on a call that worked
        if decision.kind == "wrong_value":
            content, where = corrupt_wrong_value(result.content, decision.detail["u"])
            self._emit("wrong_value", tool, decision.permanent, {**decision.detail, **where})
            return result.model_copy(update={"content": content})
        self._emit("garbage", tool, decision.permanent, decision.detail)
        return result.model_copy(update={"content": garbage(decision.detail["u"])})

    def _price_change(self, tool: str, decision: Decision, result: ToolResult) -> ToolResult:
        standing = self.price_multipliers.get(tool)
        old = self._reprice(result, standing).cost if standing else result.cost
        multiplier = decision.detail["multiplier"] * (standing or 1.0)
        repriced = self._reprice(result, multiplier)
        if decision.permanent:
            self.price_multipliers[tool] = multiplier
        span = "from now on" if decision.permanent else "for this call"
        self._notes.append(
            f"Notice: the price of {tool} changed from ${old:.4g} to ${repriced.cost:.4g} per call {span}."
        )
        self._emit("price_change", tool, decision.permanent, {**decision.detail, "old": old, "new": repriced.cost})
        return repriced

    @staticmethod
    def _reprice(result: ToolResult, multiplier: float) -> ToolResult:
        base = result.cost if result.cost > 0 else _FREE_TOOL_BASE_PRICE
        return result.model_copy(update={"cost": round(base * multiplier, 9)})

    def on_step_end(self, info: JsonDict) -> StepOutcome:
        """List this step's fault events in `info["faults"]`; show notices (price changes, deprecations)."""
        info["faults"] = [dict(e) for e in self._events]
        notes = "\n".join(self._notes) or None
        self._clear_step()
        return StepOutcome(observation_suffix=notes)

    # ------------------------------------------------------------------ snapshot
    def get_state(self) -> JsonDict:
        """Schedule position, standing faults, price changes and the episode's event log."""
        return {
            "injector": self.injector.get_state(),
            "turn": self.turn,
            "price_multipliers": dict(self.price_multipliers),
            "log": [dict(e) for e in self.log],
        }

    def set_state(self, state: JsonDict) -> None:
        """Restore `get_state`'s output."""
        self.injector.set_state(state["injector"])
        self.turn = state["turn"]
        self.price_multipliers = dict(state["price_multipliers"])
        self.log = [dict(e) for e in state["log"]]
        self._clear_step()


class FaultWrapper(gym.Wrapper[str, str, str, str]):
    """Inject seeded faults into any toolgym env: `FaultWrapper(env, rate=0.2, seed=7)` (same keys as `faults={…}`).

    Install it before `reset`.
    """

    def __init__(self, env: gym.Env[str, str], faults: JsonDict | None = None, **config: Any) -> None:
        super().__init__(env)
        self.hook = FaultHook.from_config({**(faults or {}), **config})
        install_hook(env, self.hook)
