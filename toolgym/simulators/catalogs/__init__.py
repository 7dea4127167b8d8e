"""Tool catalogs: load tool specs from OpenAI, ToolBench, Python and MCP sources; export to OpenAI and MCP."""

from toolgym.simulators.catalogs.catalog import Catalog, Implementation
from toolgym.simulators.catalogs.formats import (
    normalize_schema,
    spec_from_mcp,
    spec_from_openai,
    spec_from_toolbench_api,
    spec_to_mcp,
    spec_to_openai,
    specs_from_toolbench,
    weak_schema,
)
from toolgym.simulators.catalogs.loader import CatalogSource, load_catalog
from toolgym.simulators.catalogs.mcp_source import McpCaller, list_mcp_tools

__all__ = [
    "Catalog",
    "CatalogSource",
    "Implementation",
    "McpCaller",
    "list_mcp_tools",
    "load_catalog",
    "normalize_schema",
    "spec_from_mcp",
    "spec_from_openai",
    "spec_from_toolbench_api",
    "spec_to_mcp",
    "spec_to_openai",
    "specs_from_toolbench",
    "weak_schema",
]
