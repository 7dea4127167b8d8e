"""Prometheus text exposition of the server's counters and gauges."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolgym.server.sessions import SessionManager

_COUNTERS = {
    "sessions_created": "Sessions created (including forks).",
    "sessions_expired": "Sessions closed because they were idle longer than the TTL.",
    "resets": "Episodes started.",
    "steps": "Steps committed.",
    "env_errors": "Env resets or steps that raised inside the env.",
    "step_timeouts": "Steps cut off by the step time limit.",
    "busy_rejections": "Requests refused because their session was busy.",
}


def render_metrics(manager: SessionManager) -> str:
    """The metrics page."""
    counters = manager.counters
    lines: list[str] = []
    for name, help_text in _COUNTERS.items():
        lines += _metric(f"toolgym_{name}_total", "counter", help_text, getattr(counters, name))
    live = manager.sessions.values()
    lines += _metric("toolgym_sessions_live", "gauge", "Sessions held in memory.", len(manager.sessions))
    lines += _metric("toolgym_sessions_busy", "gauge", "Sessions with a request in flight.", sum(s.busy for s in live))
    lines += _metric(
        "toolgym_step_seconds_total", "counter", "Wall time spent in steps (incl. commit).", counters.step_seconds
    )
    return "\n".join(lines) + "\n"


def _metric(name: str, kind: str, help_text: str, value: float) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value}"]
