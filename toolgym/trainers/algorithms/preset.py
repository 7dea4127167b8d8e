"""MethodPreset: a method named as a choice of plug-ins with defaults, and its overrides."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ROLLOUT_KINDS = frozenset({"group", "single_stream", "per_turn", "dual_path", "planner_worker", "offline"})


@dataclass(frozen=True)
class PluginRef:
    """A registered plug-in by name, with its config."""

    name: str
    cfg: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RegularizerRef:
    """A registered regulariser, its coefficient, and its aggregator (None: the method's)."""

    name: str
    coef: float
    cfg: Mapping[str, Any] = field(default_factory=dict)
    aggregator: str | None = None


@dataclass(frozen=True)
class RolloutSpec:
    """How the rollout side must sample for this method (read by the rollout workers).

    kinds: "group" (n rollouts per prompt), "single_stream" (one per prompt, SPO),
    "per_turn" (each assistant turn becomes its own sample, Flow-GRPO), "dual_path"
    (n with tools + options["n_tools_off"] without, AKBE), "planner_worker" (MATPO worker
    sub-episodes per planner tool call), "offline" (fixed trajectories, StepTool).
    """

    kind: str = "group"
    n: int = 8
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Validate the kind."""
        if self.kind not in ROLLOUT_KINDS:
            raise ValueError(f"unknown rollout kind {self.kind!r}; known: {sorted(ROLLOUT_KINDS)}")


@dataclass(frozen=True)
class MethodPreset:
    """A method: which plug-ins, with which defaults, from which paper, how well verified."""

    name: str
    advantage: PluginRef
    loss: PluginRef
    aggregator: PluginRef = PluginRef("token-mean")
    regularizers: tuple[RegularizerRef, ...] = ()
    reward_transforms: tuple[PluginRef, ...] = ()
    group_filter: PluginRef | None = None
    prompt_sampler: PluginRef | None = None
    rollout: RolloutSpec = RolloutSpec()
    hparams: Mapping[str, Any] = field(default_factory=dict)  # lr, kl, temperature, …
    paper: str = ""
    arxiv: str = ""
    evidence: str = ""  # methods.md §0 labels, e.g. "[CODE] loss; [PRIOR] lr"
    tier: str = "base"  # "base", "A", "B", "C"
    experimental: bool = False
    notes: str = ""


def nest(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Turn dotted keys ("loss.clip_high") into nested dicts, merging with nested input."""
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        head, _, rest = key.partition(".")
        if not rest:
            if isinstance(value, Mapping) and isinstance(out.get(head), dict):
                out[head].update(nest(value))
            else:
                out[head] = nest(value) if isinstance(value, Mapping) else value
            continue
        sub = out.setdefault(head, {})
        if not isinstance(sub, dict):
            raise ValueError(f"override {key!r} conflicts with {head!r}={sub!r}")
        sub.update(nest({rest: value}))
    return out


def _ref(current: PluginRef | None, value: Any) -> PluginRef | None:
    """A str switches plug-in (cfg reset); a dict merges cfg ("name" in it switches)."""
    if value is None:
        return None
    if isinstance(value, str):
        return PluginRef(value)
    if isinstance(value, PluginRef):
        return value
    cfg = dict(value)
    name = cfg.pop("name", None)
    if name is not None and (current is None or name != current.name):
        return PluginRef(name, cfg)
    if current is None:
        raise ValueError(f"override {value!r} needs a 'name'")
    return PluginRef(current.name, {**current.cfg, **cfg})


def _ref_list(current: tuple[Any, ...], value: Any, make: Any) -> tuple[Any, ...]:
    """A list replaces; a dict {name: cfg|None} updates, adds or (None) removes entries."""
    if isinstance(value, list | tuple):
        return tuple(make(None, v) for v in value)
    by_name = {r.name: r for r in current}
    for name, cfg in value.items():
        if cfg is None:
            by_name.pop(name, None)
        else:
            by_name[name] = make(by_name.get(name), {"name": name, **cfg})
    return tuple(by_name.values())


def _reg(current: RegularizerRef | None, value: Any) -> RegularizerRef:
    if isinstance(value, RegularizerRef):
        return value
    cfg = dict(value)
    name = cfg.pop("name")
    coef = cfg.pop("coef", current.coef if current else None)
    if coef is None:
        raise ValueError(f"regularizer {name!r} needs a 'coef'")
    agg = cfg.pop("aggregator", current.aggregator if current else None)
    base = dict(current.cfg) if current else {}
    return RegularizerRef(name, float(coef), {**base, **cfg}, agg)


def apply_overrides(preset: MethodPreset, overrides: Mapping[str, Any] | None) -> MethodPreset:
    """The preset with `overrides` applied (nested or dotted keys; see `nest`)."""
    if not overrides:
        return preset
    changes: dict[str, Any] = {}
    for key, value in nest(overrides).items():
        changes[key] = _override_field(preset, key, value)
    return dataclasses.replace(preset, **changes)


def _override_field(preset: MethodPreset, key: str, value: Any) -> Any:
    current = getattr(preset, key, None) if hasattr(preset, key) else None
    if key in ("advantage", "loss", "aggregator", "group_filter", "prompt_sampler"):
        ref = _ref(current, value)
        if ref is None and key in ("advantage", "loss", "aggregator"):
            raise ValueError(f"{key} cannot be removed")
        return ref
    if key == "regularizers":
        return _ref_list(preset.regularizers, value, _reg)
    if key == "reward_transforms":
        return _ref_list(preset.reward_transforms, value, _ref)
    if key == "rollout":
        return dataclasses.replace(preset.rollout, **_rollout_changes(preset.rollout, value))
    if key == "hparams":
        return {**preset.hparams, **value}
    raise KeyError(f"unknown override {key!r}")


def _rollout_changes(current: RolloutSpec, value: Mapping[str, Any]) -> dict[str, Any]:
    value = dict(value)
    options = {**current.options, **value.pop("options", {})}
    return {**value, "options": options}


def _registry() -> Any:
    from toolgym.trainers.algorithms.registry import Registry

    return Registry("method", autoload=("toolgym.trainers.methods",))


PRESETS = _registry()  # name -> MethodPreset; exposed as toolgym.trainers.methods.REGISTRY


def register_preset(preset: MethodPreset) -> MethodPreset:
    """Add a preset to the method registry (call at import time of a methods/ module)."""
    PRESETS.register(preset.name, preset)
    return preset
