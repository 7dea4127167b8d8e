"""Tier B methods: mechanism clear, constants partly assumed (each assumption named in code and docs/methods.md)."""

from __future__ import annotations

import importlib
import pkgutil

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    importlib.import_module(f"{__name__}.{_info.name}")
