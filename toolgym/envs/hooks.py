"""Step hooks: pluggable behaviour around tool calls (budgets, fault injection, ...)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from toolgym.schemas import ToolCall, ToolResult, ToolSpec

if TYPE_CHECKING:
    from toolgym.envs.core import ToolEnv


@dataclass
class StepOutcome:
    """What a hook adds at the end of a step: text for the agent, and a reason to truncate."""

    observation_suffix: str | None = None
    truncate_reason: str | None = None


class StepHook(Protocol):
    """Behaviour around tool calls; every method has a no-op default in `BaseHook`."""

    name: str

    def on_reset(self, env: ToolEnv) -> None: ...
    def transform_specs(self, specs: list[ToolSpec]) -> list[ToolSpec]: ...
    def resolve_call(self, call: ToolCall) -> ToolCall: ...
    def before_call(self, call: ToolCall) -> ToolResult | None: ...
    def after_call(self, call: ToolCall, result: ToolResult) -> ToolResult: ...
    def on_action(self, action: str) -> None: ...
    def on_step_end(self, info: dict[str, Any]) -> StepOutcome: ...
    def get_state(self) -> dict[str, Any]: ...
    def set_state(self, state: dict[str, Any]) -> None: ...


class BaseHook:
    """A hook that does nothing; subclasses override what they need."""

    name = "base"

    def on_reset(self, env: ToolEnv) -> None:
        """Called at the end of `reset`, once the task and tools are set."""

    def on_reset_end(self, info: dict[str, Any]) -> str | None:
        """Add to the reset info; return a note to show with the task (optional: called only if defined)."""
        return None

    def transform_specs(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        """Change the tool list the agent sees (rename, hide, add distractors)."""
        return specs

    def resolve_call(self, call: ToolCall) -> ToolCall:
        """Map a call onto the tool that answers it (e.g. a renamed tool onto its original)."""
        return call

    def before_call(self, call: ToolCall) -> ToolResult | None:
        """Answer a call without running the tool (a refusal or an injected fault), or return None."""
        return None

    def after_call(self, call: ToolCall, result: ToolResult) -> ToolResult:
        """Observe or alter a result (charge a budget, corrupt an output)."""
        return result

    def on_action(self, action: str) -> None:
        """See the raw action before it is parsed (e.g. to count tokens)."""

    def on_step_end(self, info: dict[str, Any]) -> StepOutcome:
        """Add to the info dict and the observation at the end of a step."""
        return StepOutcome()

    def get_state(self) -> dict[str, Any]:
        """JSON-serializable state for snapshot and fork."""
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the state returned by `get_state`."""
