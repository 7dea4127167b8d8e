"""What answers a tool call: Python tools, simulated APIs, worlds, sandboxes, budgets and faults."""

from toolgym.simulators.catalogs import Catalog, load_catalog
from toolgym.simulators.python_tools import Tool, ToolError, make_tool, tool

__all__ = ["Catalog", "Tool", "ToolError", "load_catalog", "make_tool", "tool"]
