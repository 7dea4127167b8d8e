"""MCP servers as catalog sources (`mcp+stdio:<command line>`, `mcp+http://…`) through the `mcp` SDK."""

from __future__ import annotations

import asyncio
import importlib
import json
import shlex
import threading
import weakref
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any

from toolgym.schemas import ErrorKind, ToolResult, ToolSpec
from toolgym.simulators.catalogs.formats import spec_from_mcp

JsonDict = dict[str, Any]
STDIO_PREFIX = "mcp+stdio:"
HTTP_PREFIXES = ("mcp+http://", "mcp+https://")


def is_mcp_source(source: str) -> bool:
    """Whether a catalog source string names an MCP server."""
    return source.startswith(STDIO_PREFIX) or source.startswith(HTTP_PREFIXES)


def _mcp() -> Any:
    try:
        return importlib.import_module("mcp")
    except ImportError as error:
        raise ImportError("MCP catalogs need the mcp SDK (2.x): pip install 'toolgym[mcp]'") from error


def _target(source: str) -> Any:
    """What `mcp.Client` connects to: stdio server parameters or a streamable-HTTP URL."""
    mcp = _mcp()
    if source.startswith(STDIO_PREFIX):
        argv = shlex.split(source[len(STDIO_PREFIX) :])
        if not argv:
            raise ValueError(f"empty command line in MCP source {source!r}")
        return mcp.StdioServerParameters(command=argv[0], args=argv[1:])
    if not source.startswith(HTTP_PREFIXES):
        raise ValueError(f"not an MCP source: {source!r} (use 'mcp+stdio:<command>' or 'mcp+http://host:port/path')")
    return source[len("mcp+") :]


class McpSession:
    """One long-lived connection to an MCP server, served by an event loop on a daemon thread.

    A stdio server is one subprocess for the whole session, so its state survives between calls.
    `close()` (also run when the session is garbage-collected or at exit) ends the connection and
    with it a stdio server's process.
    """

    def __init__(self, source: str, timeout: float = 30.0) -> None:
        self.source, self.timeout = source, timeout
        self._target = _target(source)
        self._loop = asyncio.new_event_loop()
        self._client: Any = None
        self._stop = asyncio.Event()  # binds to the session's loop on first use
        self._opened: Future[None] = Future()
        self._finished = threading.Event()  # set when the connection has fully unwound
        self._thread = threading.Thread(target=self._loop.run_forever, name="toolgym-mcp", daemon=True)
        self._thread.start()
        self._main = asyncio.run_coroutine_threadsafe(self._hold(), self._loop)
        self._finalizer = weakref.finalize(
            self, _shutdown, self._loop, self._stop, self._main, self._finished, self._thread
        )
        try:
            self._opened.result(timeout)
        except BaseException:
            self.close()
            raise

    async def _hold(self) -> None:
        try:
            async with _mcp().Client(self._target, read_timeout_seconds=self.timeout) as client:
                self._client = client
                self._opened.set_result(None)
                await self._stop.wait()
        except BaseException as error:
            if not self._opened.done():
                self._opened.set_exception(error)
            raise
        finally:
            self._finished.set()

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        if not self._finalizer.alive:
            coroutine.close()
            raise ConnectionError(f"MCP session {self.source!r} is closed")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(self.timeout)

    def list_tools(self) -> list[JsonDict]:
        """The server's `tools/list` answer, every page, as wire-form dicts (camelCase keys)."""
        tools: list[JsonDict] = []
        cursor: str | None = None
        for _ in range(1000):  # a server that never stops paging is cut off
            result = self._run(self._client.list_tools(cursor=cursor))
            tools.extend(tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in result.tools)
            cursor = result.next_cursor
            if not cursor:
                break
        return tools

    def call_tool(self, name: str, arguments: JsonDict) -> Any:
        """The server's raw `tools/call` result."""
        return self._run(self._client.call_tool(name, arguments))

    def close(self) -> None:
        """End the connection (and a stdio server's process); idempotent."""
        self._finalizer()


def _shutdown(
    loop: asyncio.AbstractEventLoop,
    stop: asyncio.Event,
    main: Future[None],
    finished: threading.Event,
    thread: threading.Thread,
) -> None:
    """Ask the connection to unwind (cancel it when it does not, e.g. still connecting), then stop the loop."""
    if loop.is_running():
        loop.call_soon_threadsafe(stop.set)
    try:
        main.result(5.0)
    except TimeoutError:
        main.cancel()  # cancels the task in the loop: the SDK's context managers clean up
        finished.wait(5.0)
    except BaseException:  # noqa: BLE001, S110 - closing: a failed unwind must not raise
        pass
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5.0)


def open_session(source: str, timeout: float = 30.0) -> McpSession:
    """Connect to an MCP server; a failure names the source."""
    try:
        return McpSession(source, timeout)
    except (ValueError, ImportError):
        raise
    except TimeoutError as error:
        raise ConnectionError(f"could not connect to MCP server {source!r}: no answer within {timeout}s") from error
    except Exception as error:  # noqa: BLE001 - the SDK raises many kinds; name the source
        raise ConnectionError(f"could not connect to MCP server {source!r}: {error!r}") from error


def list_mcp_tools(source: str, timeout: float = 30.0) -> list[JsonDict]:
    """The raw `tools/list` answer of an MCP server (one short-lived connection)."""
    session = open_session(source, timeout)
    try:
        return session.list_tools()
    finally:
        session.close()


def load_mcp_specs(session: McpSession) -> list[ToolSpec]:
    """Canonical specs for every tool an MCP server lists."""
    return [spec_from_mcp(tool) for tool in session.list_tools()]


class McpCaller:
    """Calls one tool of an MCP server for real, over a shared `McpSession`."""

    def __init__(self, session: McpSession, name: str) -> None:
        self.session, self.name = session, name

    def __call__(self, arguments: JsonDict) -> ToolResult:
        try:
            result = self.session.call_tool(self.name, arguments)
        except Exception as error:  # noqa: BLE001 - a failed real call is a result, not a crash
            return ToolResult.failure(ErrorKind.UNAVAILABLE, f"MCP call to {self.name!r} failed: {error!r}")
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            return ToolResult.failure(ErrorKind.EXECUTION, text or "MCP tool reported an error")
        if result.structured_content is not None:  # conforms to the tool's outputSchema
            return ToolResult.success(result.structured_content)
        try:
            return ToolResult.success(json.loads(text))
        except ValueError:
            return ToolResult.success(text)
