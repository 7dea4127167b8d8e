"""Bare FastAPI echo (HTTP and WebSocket), served like `toolgym serve`: the ceiling of the stack."""

from __future__ import annotations

import sys

import uvicorn
from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from starlette.responses import Response

app = FastAPI()


@app.post("/echo")
async def echo(request: Request) -> Response:
    return Response(await request.body(), media_type="application/json")


@app.websocket("/ws")
async def echo_socket(websocket: WebSocket) -> None:
    await websocket.accept()
    try:
        while True:
            await websocket.send_text(await websocket.receive_text())
    except WebSocketDisconnect:
        return


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


if __name__ == "__main__":
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="warning",
        access_log=False,
        ws_per_message_deflate=False,
    )
