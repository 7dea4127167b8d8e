"""API errors: every failure answers `{"error": {"code", "message"}}` with the right status."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

logger = logging.getLogger("toolgym.server")


class ApiError(Exception):
    """An error with an HTTP status, a stable machine-readable code and a human message."""

    def __init__(self, status: int, code: str, message: str, error_id: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.error_id = status, code, message, error_id

    def body(self) -> dict[str, Any]:
        """The JSON body of the error."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.error_id:
            error["error_id"] = self.error_id
        return {"error": error}


def internal_error(what: str, exc: BaseException) -> ApiError:
    """Log `exc` with its traceback under a fresh error id and return the 500 to answer with."""
    error_id = uuid.uuid4().hex[:12]
    logger.error("error %s: %s", error_id, what, exc_info=exc)
    return ApiError(500, "internal_error", f"{what}; see the server log for error id {error_id}", error_id)


def error_response(error: ApiError) -> Response:
    """The HTTP response for an error."""
    return Response(json.dumps(error.body()), status_code=error.status, media_type="application/json")


_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    415: "unsupported_media_type",
}


def validation_error(exc: RequestValidationError) -> ApiError:
    """Map pydantic/FastAPI request validation failures onto 400 (bad JSON) or 422 (wrong shape)."""
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return ApiError(400, "malformed_json", "the request body is not valid JSON")
    parts = [f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: {e.get('msg')}" for e in errors]
    return ApiError(422, "invalid_request", "; ".join(parts[:5]))


def install_error_handlers(app: FastAPI) -> None:
    """Route every exception type onto the JSON error shape."""

    async def on_api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return error_response(validation_error(exc))

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        code = _STATUS_CODES.get(exc.status_code, "http_error")
        return error_response(ApiError(exc.status_code, code, str(exc.detail)))

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        return error_response(internal_error(f"unexpected error in {request.method} {request.url.path}", exc))

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)


class ErrorBodyMiddleware:
    """Refuses request bodies over `max_bytes` with a 413 JSON error (by header or while reading)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await error_response(self._too_large())(scope, receive, send)
            return
        await self.app(scope, self._counting(receive), send)

    def _too_large(self) -> ApiError:
        return ApiError(413, "request_too_large", f"the request body exceeds {self.max_bytes} bytes")

    def _counting(self, receive: Any) -> Any:
        seen = 0

        async def wrapped() -> Any:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise self._too_large()
            return message

        return wrapped
