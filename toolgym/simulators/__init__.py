"""What answers a tool call: Python tools, simulated APIs, worlds, sandboxes, budgets and faults."""

from toolgym.simulators.python_tools import Tool, ToolError, make_tool, tool

__all__ = ["Tool", "ToolError", "make_tool", "tool"]
