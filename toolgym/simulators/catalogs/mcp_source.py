"""MCP servers as catalog sources (`mcp+stdio:<command line>`, `mcp+http://…`) through the `mcp` SDK."""

from __future__ import annotations

import asyncio
import importlib
import json
import shlex
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from toolgym.schemas import ErrorKind, ToolResult, ToolSpec
from toolgym.simulators.catalogs.formats import spec_from_mcp

JsonDict = dict[str, Any]
T = TypeVar("T")
STDIO_PREFIX = "mcp+stdio:"
HTTP_PREFIXES = ("mcp+http://", "mcp+https://")


def is_mcp_source(source: str) -> bool:
    """Whether a catalog source string names an MCP server."""
    return source.startswith(STDIO_PREFIX) or source.startswith(HTTP_PREFIXES)


def _mcp() -> Any:
    try:
        return importlib.import_module("mcp")
    except ImportError as error:
        raise ImportError("MCP catalogs need the mcp SDK: pip install 'toolgym[mcp]'") from error


def _target(source: str) -> Any:
    """What `mcp.Client` connects to: stdio server parameters or a streamable-HTTP URL."""
    mcp = _mcp()
    if source.startswith(STDIO_PREFIX):
        argv = shlex.split(source[len(STDIO_PREFIX) :])
        if not argv:
            raise ValueError(f"empty command line in MCP source {source!r}")
        return mcp.StdioServerParameters(command=argv[0], args=argv[1:])
    return source[len("mcp+") :]


def _run(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from sync code, also when an event loop is already running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def worker() -> None:
        try:
            box["value"] = asyncio.run(factory())  # type: ignore[arg-type]
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = error

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


async def _list_tools(source: str, timeout: float) -> list[JsonDict]:
    mcp = _mcp()
    async with mcp.Client(_target(source), read_timeout_seconds=timeout) as client:
        result = await client.list_tools()
        return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in result.tools]


def list_mcp_tools(source: str, timeout: float = 30.0) -> list[JsonDict]:
    """The raw `tools/list` answer of an MCP server, as wire-form dicts."""
    try:
        return _run(lambda: _list_tools(source, timeout))
    except (OSError, ValueError, ImportError):
        raise
    except Exception as error:  # noqa: BLE001 - the SDK raises many kinds; name the source
        raise ConnectionError(f"could not list tools of MCP server {source!r}: {error}") from error


def load_mcp_specs(source: str, timeout: float = 30.0) -> list[ToolSpec]:
    """Canonical specs for every tool an MCP server lists."""
    return [spec_from_mcp(tool) for tool in list_mcp_tools(source, timeout)]


class McpCaller:
    """Calls one tool of an MCP server for real (one connection per call: simple, not fast)."""

    def __init__(self, source: str, name: str, timeout: float = 30.0) -> None:
        self.source, self.name, self.timeout = source, name, timeout

    async def _call(self, arguments: JsonDict) -> Any:
        mcp = _mcp()
        async with mcp.Client(_target(self.source), read_timeout_seconds=self.timeout) as client:
            return await client.call_tool(self.name, arguments)

    def __call__(self, arguments: JsonDict) -> ToolResult:
        try:
            result = _run(lambda: self._call(arguments))
        except Exception as error:  # noqa: BLE001 - a failed real call is a result, not a crash
            return ToolResult.failure(ErrorKind.UNAVAILABLE, f"MCP call failed: {error}")
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            return ToolResult.failure(ErrorKind.EXECUTION, text or "MCP tool reported an error")
        if result.structured_content is not None:
            return ToolResult.success(_unwrap(result.structured_content))
        try:
            return ToolResult.success(json.loads(text))
        except ValueError:
            return ToolResult.success(text)


def _unwrap(content: Any) -> Any:
    """MCP servers wrap non-object structured results as `{"result": value}`."""
    if isinstance(content, dict) and set(content) == {"result"}:
        return content["result"]
    return content
