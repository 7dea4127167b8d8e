"""`BudgetHook` and `BudgetWrapper`: tool-call, money, token and virtual-time budgets with a tracker line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym

from toolgym.envs.hooks import BaseHook, StepOutcome
from toolgym.envs.wrappers._install import install_hook
from toolgym.schemas import ErrorKind, ToolCall, ToolResult
from toolgym.simulators.budget import BudgetConfig, BudgetLedger

if TYPE_CHECKING:
    from toolgym.envs.core import ToolEnv

JsonDict = dict[str, Any]
_UNCHARGED = (ErrorKind.BUDGET, ErrorKind.UNKNOWN_TOOL)


class BudgetHook(BaseHook):
    """Charges every tool call, counts the action's tokens, refuses overspending and truncates on exhaustion.

    Calls are charged at the price-table price when they return; at the end of the step the charge
    is reconciled with the final cost and latency of each call (faults may raise prices or add
    latency), so `info["budget"]` and the tracker line always show what was really spent.
    """

    name = "budget"

    def __init__(self, config: BudgetConfig) -> None:
        self.config = config
        self.ledger = BudgetLedger(config)
        self.turn = 0
        self._charged: dict[str, list[float]] = {}
        self._events: list[JsonDict] = []

    @classmethod
    def from_config(cls, config: JsonDict) -> BudgetHook:
        """Build from the `budget={…}` keyword (keys: calls, cost, tokens, time, prices, latencies, price_changes, tracker)."""
        return cls(BudgetConfig.from_dict(config))

    def on_reset(self, env: ToolEnv) -> None:
        """Fresh ledger; default prices and latencies from the tools' annotations."""
        defaults = {s.name: (s.annotations.price, s.annotations.latency) for s in env.base_tool_specs}
        self.ledger.reset(defaults)
        self.turn, self._charged, self._events = 0, {}, []

    def on_reset_end(self, info: JsonDict) -> str | None:
        """Put the full budget in the reset info and show the tracker with the task."""
        info["budget"] = {**self.ledger.summary(), "events": []}
        return self.ledger.tracker_line() if self.config.tracker else None

    def on_action(self, action: str) -> None:
        """A new step: apply scheduled price changes, then charge the action's tokens."""
        self.turn += 1
        self._events = self.ledger.apply_price_changes(self.turn)
        self.ledger.charge_tokens(action if isinstance(action, str) else str(action))

    def before_call(self, call: ToolCall) -> ToolResult | None:
        """Refuse a call the remaining budget cannot pay for; the refusal ends the episode."""
        reason = self.ledger.refusal(call.name)
        if reason is None:
            return None
        self.ledger.mark_exhausted(reason)
        return ToolResult.failure(ErrorKind.BUDGET, f"call refused: {reason}")

    def after_call(self, call: ToolCall, result: ToolResult) -> ToolResult:
        """Charge the call at the current price and latency."""
        if result.error_kind in _UNCHARGED:
            return result
        cost, latency = self.ledger.charge_call(call.name)
        self._charged[call.id] = [cost, latency]
        if result.cost == cost and result.latency == latency:  # the usual case: the annotated price
            return result
        return result.model_copy(update={"cost": cost, "latency": latency})

    def on_step_end(self, info: JsonDict) -> StepOutcome:
        """Reconcile with the final call records, report the budget, show the tracker, truncate if exhausted."""
        for record in info.get("tool_calls", []):
            charged = self._charged.pop(record["id"], None)
            if charged is not None:
                self.ledger.adjust(record["cost"] - charged[0], record["latency"] - charged[1])
        self._charged = {}
        info["budget"] = {**self.ledger.summary(), "events": self._events}
        self._events = []
        suffix = self.ledger.tracker_line() if self.config.tracker else None
        reason = self.ledger.exhausted
        truncate = f"Budget exhausted ({reason}): the episode is over." if reason else None
        return StepOutcome(observation_suffix=suffix, truncate_reason=truncate)

    def get_state(self) -> JsonDict:
        """Ledger, clock, price table and step counter."""
        return {"ledger": self.ledger.get_state(), "turn": self.turn}

    def set_state(self, state: JsonDict) -> None:
        """Restore `get_state`'s output."""
        self.ledger.set_state(state["ledger"])
        self.turn, self._charged, self._events = state["turn"], {}, []


class BudgetWrapper(gym.Wrapper[str, str, str, str]):
    """Give any toolgym env a budget: `BudgetWrapper(env, calls=5, cost=1.0)` (same keys as `budget={…}`).

    Install it before `reset`. The hook runs before any fault hook, so refusals win over faults.
    """

    def __init__(self, env: gym.Env[str, str], budget: JsonDict | None = None, **config: Any) -> None:
        super().__init__(env)
        from toolgym.envs.wrappers.faults import FaultHook

        self.hook = BudgetHook.from_config({**(budget or {}), **config})
        install_hook(env, self.hook, before=FaultHook)
