"""Budget ledger: limits on tool calls, money, tokens and virtual time, with a price table and a virtual clock."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

JsonDict = dict[str, Any]
RESOURCES = ("calls", "cost", "tokens", "time")
CONFIG_KEYS = frozenset({*RESOURCES, "prices", "latencies", "price_changes", "tracker"})
_TOKEN = re.compile(r"\w+|\S")  # a word, or one other non-space character


def count_tokens(text: str) -> int:
    """A deterministic, tokenizer-free token count: words and punctuation marks (≈ BPE tokens for English)."""
    return len(_TOKEN.findall(text))


@dataclass(frozen=True)
class PriceChange:
    """A scheduled change of one tool's price, taking effect at the start of `step`."""

    step: int
    tool: str
    price: float


@dataclass(frozen=True)
class BudgetConfig:
    """Validated budget settings: limits per resource (None = unlimited) and the price table."""

    limits: dict[str, float | None]
    prices: dict[str, float] = field(default_factory=dict)
    latencies: dict[str, float] = field(default_factory=dict)
    price_changes: tuple[PriceChange, ...] = ()
    tracker: bool = True

    @classmethod
    def from_dict(cls, config: JsonDict) -> BudgetConfig:
        """Read `{"calls":…, "cost":…, "tokens":…, "time":…, "prices":…, "latencies":…, "price_changes":…, "tracker":…}`."""
        if not isinstance(config, dict):
            raise TypeError(f"budget must be a dict, got {type(config).__name__}")
        unknown = sorted(set(config) - CONFIG_KEYS)
        if unknown:
            raise ValueError(f"unknown budget keys {unknown}; allowed: {sorted(CONFIG_KEYS)}")
        limits = {name: _limit(name, config.get(name)) for name in RESOURCES}
        return cls(
            limits=limits,
            prices=_non_negative_map("prices", config.get("prices", {})),
            latencies=_non_negative_map("latencies", config.get("latencies", {})),
            price_changes=tuple(_price_change(item) for item in config.get("price_changes", [])),
            tracker=bool(config.get("tracker", True)),
        )


def _limit(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"budget['{name}'] must be a non-negative number or None, got {value!r}")
    return float(value)


def _non_negative_map(name: str, value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ValueError(f"budget['{name}'] must map tool names to numbers, got {value!r}")
    result: dict[str, float] = {}
    for tool, number in value.items():
        checked = _limit(f"{name}.{tool}", number)
        if checked is None:
            raise ValueError(f"budget['{name}']['{tool}'] must be a number")
        result[str(tool)] = checked
    return result


def _price_change(item: Any) -> PriceChange:
    if not isinstance(item, dict) or set(item) != {"step", "tool", "price"}:
        raise ValueError(f"each budget['price_changes'] entry needs exactly step, tool and price, got {item!r}")
    price = _limit("price_changes.price", item["price"])
    if not isinstance(item["step"], int) or item["step"] < 1 or price is None:
        raise ValueError(f"price change step must be an int >= 1 and price a number, got {item!r}")
    return PriceChange(step=item["step"], tool=str(item["tool"]), price=price)


class PriceTable:
    """Per-tool prices and latencies: explicit entries override the tools' annotated defaults."""

    def __init__(self, defaults: dict[str, tuple[float, float]] | None = None) -> None:
        self.defaults: dict[str, tuple[float, float]] = dict(defaults or {})
        self.prices: dict[str, float] = {}
        self.latencies: dict[str, float] = {}

    def price(self, tool: str) -> float:
        """Current price of one call of `tool`."""
        return self.prices.get(tool, self.defaults.get(tool, (0.0, 0.0))[0])

    def latency(self, tool: str) -> float:
        """Virtual seconds one call of `tool` takes."""
        return self.latencies.get(tool, self.defaults.get(tool, (0.0, 0.0))[1])

    def set_price(self, tool: str, price: float) -> float:
        """Change a price; return the old one."""
        old = self.price(tool)
        self.prices[tool] = float(price)
        return old


class VirtualClock:
    """Simulated seconds: advanced by tool latencies, never by the wall clock."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def advance(self, seconds: float) -> float:
        """Move forward by `seconds` (negative values are ignored); return the new time."""
        self.now += max(0.0, seconds)
        return self.now


class BudgetLedger:
    """What has been spent of each resource, what remains, and whether the budget is exhausted."""

    def __init__(self, config: BudgetConfig, table: PriceTable | None = None) -> None:
        self.config = config
        self.table = table or PriceTable()
        self.clock = VirtualClock()
        self.used: dict[str, float] = dict.fromkeys(RESOURCES, 0.0)
        self.exhausted: str | None = None
        self.events: list[JsonDict] = []
        self._apply_configured_prices()

    def _apply_configured_prices(self) -> None:
        self.table.prices.update(self.config.prices)
        self.table.latencies.update(self.config.latencies)

    def reset(self, defaults: dict[str, tuple[float, float]]) -> None:
        """Start a fresh episode whose tools have these annotated (price, latency) defaults."""
        self.table = PriceTable(defaults)
        self._apply_configured_prices()
        self.clock = VirtualClock()
        self.used = dict.fromkeys(RESOURCES, 0.0)
        self.exhausted = None
        self.events = []

    # ------------------------------------------------------------------ spending
    def refusal(self, tool: str) -> str | None:
        """Why a call of `tool` may not run now (None when it may): a resource would be overspent."""
        if self.exhausted:
            return self.exhausted
        limits = self.config.limits
        for name in ("calls", "cost", "time"):
            limit = limits[name]
            if limit is None:
                continue
            need = 1.0 if name == "calls" else self.table.price(tool) if name == "cost" else self.table.latency(tool)
            if self.used[name] + need > limit + 1e-9:
                return self._describe_exhaustion(name, tool, need)
        return None

    def _describe_exhaustion(self, name: str, tool: str, need: float) -> str:
        left = self.remaining()[name]
        return f"{name} budget exhausted: calling {tool} needs {_fmt(name, need)} but only {_fmt(name, left or 0.0)} is left"

    def charge_call(self, tool: str, extra_latency: float = 0.0) -> tuple[float, float]:
        """Charge one call of `tool` at the current price; return (cost, latency) charged."""
        cost, latency = self.table.price(tool), self.table.latency(tool) + max(0.0, extra_latency)
        self.used["calls"] += 1
        self.used["cost"] += cost
        self.used["time"] = self.clock.advance(latency)
        self._check_over("cost")
        self._check_over("time")
        return cost, latency

    def adjust(self, cost: float, latency: float) -> None:
        """Correct the last charges by these differences (a fault raised a price or added latency)."""
        if cost == 0.0 and latency == 0.0:
            return
        self.used["cost"] = max(0.0, self.used["cost"] + cost)
        self.used["time"] = self.clock.advance(latency)
        self._check_over("cost")
        self._check_over("time")

    def charge_tokens(self, text: str) -> int:
        """Count the tokens of an action and charge them; return the count."""
        tokens = count_tokens(text)
        self.used["tokens"] += tokens
        self._check_over("tokens")
        return tokens

    def _check_over(self, name: str) -> None:
        limit = self.config.limits[name]
        if self.exhausted is None and limit is not None and self.used[name] > limit + 1e-9:
            self.exhausted = f"{name} budget exhausted: used {_fmt(name, self.used[name])} of {_fmt(name, limit)}"

    def mark_exhausted(self, reason: str) -> None:
        """Record that the agent tried to overspend (the first reason is kept)."""
        self.exhausted = self.exhausted or reason

    def apply_price_changes(self, step: int) -> list[JsonDict]:
        """Apply the configured price changes due at `step`; return them as events."""
        events = []
        for change in self.config.price_changes:
            if change.step == step:
                events.append(self.change_price(change.tool, change.price, step, source="schedule"))
        return events

    def change_price(self, tool: str, price: float, step: int, source: str) -> JsonDict:
        """Change a tool's price now and log it as an event."""
        old = self.table.set_price(tool, price)
        event = {"kind": "price_change", "tool": tool, "step": step, "old": old, "new": float(price), "source": source}
        self.events.append(event)
        return event

    # ------------------------------------------------------------------ reporting
    def remaining(self) -> dict[str, float | None]:
        """What is left of each resource (None where there is no limit)."""
        return {
            name: None if limit is None else max(0.0, limit - self.used[name])
            for name, limit in self.config.limits.items()
        }

    def summary(self) -> JsonDict:
        """`info["budget"]`: limit, used and remaining per resource, plus the exhaustion reason."""
        remaining = self.remaining()
        result: JsonDict = {
            name: {"limit": self.config.limits[name], "used": _round(self.used[name]), "remaining": remaining[name]}
            for name in RESOURCES
        }
        result["exhausted"] = self.exhausted
        return result

    def tracker_line(self) -> str:
        """The line shown to the agent: what is left of each limited resource (what is spent otherwise)."""
        parts = []
        for name in RESOURCES:
            limit = self.config.limits[name]
            if limit is None:
                parts.append(f"{name} used {_fmt(name, self.used[name])}")
            else:
                parts.append(f"{name} {_fmt(name, limit - self.used[name])} of {_fmt(name, limit)} left")
        return "[budget] " + "; ".join(parts)

    # ------------------------------------------------------------------ snapshot
    def get_state(self) -> JsonDict:
        """JSON-serializable state (restored exactly by `set_state`)."""
        return {
            "used": dict(self.used),
            "clock": self.clock.now,
            "exhausted": self.exhausted,
            "events": [dict(e) for e in self.events],
            "defaults": {k: list(v) for k, v in self.table.defaults.items()},
            "prices": dict(self.table.prices),
            "latencies": dict(self.table.latencies),
        }

    def set_state(self, state: JsonDict) -> None:
        """Restore `get_state`'s output."""
        self.table = PriceTable({k: (float(v[0]), float(v[1])) for k, v in state["defaults"].items()})
        self.table.prices = dict(state["prices"])
        self.table.latencies = dict(state["latencies"])
        self.used = dict(state["used"])
        self.clock = VirtualClock(state["clock"])
        self.exhausted = state["exhausted"]
        self.events = [dict(e) for e in state["events"]]


def _round(value: float) -> float:
    return round(value, 9)


def _fmt(name: str, value: float) -> str:
    if name == "cost":
        return f"${value:.4g}"
    if name == "time":
        return f"{value:.4g}s"
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"


__all__ = [
    "RESOURCES",
    "BudgetConfig",
    "BudgetLedger",
    "PriceChange",
    "PriceTable",
    "VirtualClock",
    "count_tokens",
]
