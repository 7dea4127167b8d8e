"""toolgym: tool ecosystems as Gymnasium multi-turn environments for training tool-using LLM agents."""

from toolgym.envs import ToolEnv, register_envs
from toolgym.simulators import Tool, ToolError, tool

__version__ = "0.1.0"
__all__ = ["Tool", "ToolEnv", "ToolError", "__version__", "tool"]

register_envs()
