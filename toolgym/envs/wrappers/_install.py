"""Install a step hook on a wrapped ToolEnv (what the Gymnasium wrapper forms do)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from toolgym.envs.hooks import StepHook


def install_hook(env: gym.Env[Any, Any], hook: StepHook, *, before: type | None = None) -> None:
    """Add `hook` to the ToolEnv under `env`, ahead of the first hook of type `before` if there is one."""
    from toolgym.envs.core import ToolEnv

    core = env.unwrapped
    if not isinstance(core, ToolEnv):
        raise TypeError(f"budget and fault wrappers need a toolgym ToolEnv, got {type(core).__name__}")
    position = len(core.hooks)
    if before is not None:
        position = next((i for i, h in enumerate(core.hooks) if isinstance(h, before)), position)
    core.hooks.insert(position, hook)
