"""Test doubles for eval: a fake OpenAI-compatible model server and a real `toolgym serve` process."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).parent.parent.parent
_EXPRESSION = re.compile(r"[-+*/() \d]+\d[-+*/() \d]*")


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    """A scripted 'model' that solves Calculator: call the tool with the expression, then answer with the result."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        content = last["content"].strip()
        return {"role": "assistant", "content": f"The result is <answer>{content}</answer>"}
    question = next(m["content"] for m in body["messages"] if m["role"] == "user")
    expression = max(_EXPRESSION.findall(question), key=len).strip().rstrip(".?")
    call = {"id": f"call_{len(body['messages'])}", "type": "function"}
    call["function"] = {"name": "calculator", "arguments": json.dumps({"expression": expression})}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


class FakeOpenAI:
    """An OpenAI-compatible chat-completions server on a loopback port, recording every request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                answer = {"id": "chatcmpl-1", "object": "chat.completion", "model": body["model"]}
                answer["choices"] = [{"index": 0, "message": _reply(body), "finish_reason": "stop"}]
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    """Wait until a server answers /healthz (fail early if the process died)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text(errors='replace')}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"server did not start in {timeout} s")
