"""Tool catalogs: load tool specs from OpenAI, ToolBench, Python and MCP sources; export to OpenAI and MCP."""

from toolgym.simulators.catalogs.catalog import Catalog, Implementation
from toolgym.simulators.catalogs.formats import (
    WEAK_SCHEMA_COMMENT,
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
from toolgym.simulators.catalogs.mcp_source import McpCaller, McpSession, list_mcp_tools, open_session

__all__ = [
    "WEAK_SCHEMA_COMMENT",
    "Catalog",
    "CatalogSource",
    "Implementation",
    "McpCaller",
    "McpSession",
    "list_mcp_tools",
    "load_catalog",
    "normalize_schema",
    "open_session",
    "spec_from_mcp",
    "spec_from_openai",
    "spec_from_toolbench_api",
    "spec_to_mcp",
    "spec_to_openai",
    "specs_from_toolbench",
    "weak_schema",
]
