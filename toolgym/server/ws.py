"""WebSocket `/v1/sessions/{id}/ws`: reset and step one session over a single connection."""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from toolgym.server.app_auth import owner_of
from toolgym.server.errors import ApiError, internal_error
from toolgym.server.models import ResetRequest
from toolgym.server.sessions import SessionManager
from toolgym.server.work import LiveSession, dumps

CLOSE_BASE = 4000  # close code = 4000 + the HTTP status of the error that ended the connection


def add_websocket_route(app: FastAPI, manager: SessionManager) -> None:
    """Messages in: `{"op": "reset", "seed"?, "options"?}` or `{"op": "step", "action"}`.

    Each answer is the REST body of the same operation, or `{"error": {...}}`; errors about one
    message leave the connection open.
    """

    @app.websocket("/v1/sessions/{session_id}/ws")
    async def session_socket(websocket: WebSocket, session_id: str) -> None:
        await websocket.accept()
        try:
            owner = owner_of(manager.settings, websocket.headers.get("authorization"))
            session = manager.get(owner, session_id)
        except ApiError as error:
            await websocket.send_text(dumps(error.body()))
            await websocket.close(code=CLOSE_BASE + error.status)
            return
        try:
            while True:
                text = await websocket.receive_text()
                await websocket.send_text(await _answer(manager, session, text))
        except WebSocketDisconnect:
            return


async def _answer(manager: SessionManager, session: LiveSession, text: str) -> str:
    try:
        if len(text) > manager.settings.max_request_bytes:
            raise ApiError(413, "request_too_large", f"the message exceeds {manager.settings.max_request_bytes} bytes")
        message = _parse(text)
        op = message.pop("op", None)
        if op == "step":
            action = message.get("action")
            if not isinstance(action, str) or len(message) != 1:
                raise ApiError(422, "invalid_request", 'a step message is {"op": "step", "action": "<text>"}')
            return (await manager.step(session, action)).decode()
        if op == "reset":
            request = ResetRequest.model_validate(message)
            return (await manager.reset(session, request.seed, request.options)).decode()
        raise ApiError(422, "invalid_request", f'"op" must be "reset" or "step", got {op!r}')
    except ApiError as error:
        return dumps(error.body())
    except ValidationError as exc:
        return dumps(ApiError(422, "invalid_request", str(exc.errors()[0].get("msg"))).body())
    except Exception as exc:
        return dumps(internal_error("unexpected error on a WebSocket", exc).body())


def _parse(text: str) -> dict[str, Any]:
    try:
        message = json.loads(text)
    except ValueError:
        raise ApiError(400, "malformed_json", "the message is not valid JSON") from None
    if not isinstance(message, dict):
        raise ApiError(422, "invalid_request", "a message must be a JSON object with an 'op'")
    return message
