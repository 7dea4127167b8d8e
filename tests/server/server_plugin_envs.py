"""Extra env ids the test servers load through TOOLGYM_ENV_MODULES: an env that fails or stalls on command."""

from __future__ import annotations

import time
from typing import Any

from gymnasium.envs.registration import register, registry

from toolgym.envs.calculator import CalculatorEnv
from toolgym.envs.registration import ENV_IDS

FLAKY_ID = "toolgym-test/Flaky-v0"


class FlakyEnv(CalculatorEnv):
    """The calculator env, except that the action "raise" raises and "sleep:<s>" sleeps first."""

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if action == "raise":
            raise RuntimeError("FlakyEnv was told to raise")
        if action.startswith("sleep:"):
            time.sleep(float(action.partition(":")[2]))
        return super().step(action)


if FLAKY_ID not in registry:
    register(id=FLAKY_ID, entry_point=FlakyEnv, disable_env_checker=True)
ENV_IDS.setdefault(FLAKY_ID, f"{__name__}:FlakyEnv")
