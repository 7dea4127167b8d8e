"""A small real MCP server for the catalog tests (the `mcp` SDK's MCPServer, formerly FastMCP).

Run `python mcp_demo_server.py stdio` or `python mcp_demo_server.py http PORT`. It exits by itself
when its parent process goes away or after `--ttl` seconds, so a crashed test leaves nothing behind.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("toolgym-demo", log_level="WARNING")
NOTES: dict[str, dict[str, str]] = {}


class Note(BaseModel):
    """A stored note."""

    note_id: str
    title: str
    body: str


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add_numbers(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def create_note(title: str, body: str = "") -> Note:
    """Create a note and return it with its new id."""
    note = Note(note_id=f"note_{len(NOTES) + 1}", title=title, body=body)
    NOTES[note.note_id] = note.model_dump()
    return note


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def get_note(note_id: str) -> Note:
    """Fetch one note by id."""
    if note_id not in NOTES:
        raise ToolError(f"note {note_id} not found")
    return Note(**NOTES[note_id])


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def greet(name: str, excited: bool = False) -> str:
    """Say hello."""
    return f"Hello, {name}{'!' if excited else '.'}"


def _watchdog(ttl: float) -> None:
    parent, deadline = os.getppid(), time.monotonic() + ttl
    while time.monotonic() < deadline and os.getppid() == parent:
        time.sleep(0.2)
    os._exit(0)


def main(argv: list[str]) -> None:
    ttl = float(argv[argv.index("--ttl") + 1]) if "--ttl" in argv else 120.0
    threading.Thread(target=_watchdog, args=(ttl,), daemon=True).start()
    if argv[1] == "http":
        import anyio

        anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=int(argv[2])))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main(sys.argv)
