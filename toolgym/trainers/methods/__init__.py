"""Method presets: every method selectable by name, resolved into plug-ins by build_algorithm.

Each module of this package registers its presets and plug-ins at import time; importing the
package imports them all, so adding a method is adding a module here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import Any

from toolgym.trainers.algorithms.algorithm import Algorithm
from toolgym.trainers.algorithms.preset import (
    PRESETS,
    MethodPreset,
    PluginRef,
    RegularizerRef,
    RolloutSpec,
    apply_overrides,
    register_preset,
)

REGISTRY = PRESETS


def _import_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def build_algorithm(name: str, overrides: Mapping[str, Any] | None = None) -> Algorithm:
    """The Algorithm of preset `name` with `overrides` (nested or dotted keys) applied."""
    return Algorithm(apply_overrides(REGISTRY.get(name), overrides))


def resolve_preset(name: str, overrides: Mapping[str, Any] | None = None) -> MethodPreset:
    """The preset `name` with `overrides` applied, without building plug-ins."""
    return apply_overrides(REGISTRY.get(name), overrides)


_import_all()

__all__ = [
    "REGISTRY",
    "Algorithm",
    "MethodPreset",
    "PluginRef",
    "RegularizerRef",
    "RolloutSpec",
    "build_algorithm",
    "register_preset",
    "resolve_preset",
]
