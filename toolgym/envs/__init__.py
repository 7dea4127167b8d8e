"""Gymnasium environments: the ToolEnv core, registered ids, wrappers, tasks and rewards."""

from toolgym.envs.core import ToolEnv
from toolgym.envs.hooks import BaseHook, StepHook, StepOutcome
from toolgym.envs.parsing import ParsedAction, RawCall, parse_action
from toolgym.envs.registration import ENV_IDS, register_envs
from toolgym.envs.spaces import UnicodeText

__all__ = [
    "ENV_IDS",
    "BaseHook",
    "ParsedAction",
    "RawCall",
    "StepHook",
    "StepOutcome",
    "ToolEnv",
    "UnicodeText",
    "parse_action",
    "register_envs",
]
