"""Lazy imports of the heavy training dependencies, failing with a message that names the extra."""

from __future__ import annotations

import importlib
from types import ModuleType

_EXTRA = {"vllm": "vllm"}


def require(module: str) -> ModuleType:
    """Import `module` or raise ImportError telling which toolgym extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        extra = _EXTRA.get(module.split(".")[0], "train")
        raise ImportError(f"{module} is needed here: pip install 'toolgym[{extra}]'") from error
