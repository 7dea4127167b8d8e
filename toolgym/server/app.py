"""`create_app(settings)`: the FastAPI app that hosts toolgym envs as persisted sessions."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from starlette.responses import PlainTextResponse, Response

from toolgym import __version__
from toolgym.server import catalog
from toolgym.server.app_auth import owner_of
from toolgym.server.db import Store
from toolgym.server.errors import ApiError, ErrorBodyMiddleware, install_error_handlers
from toolgym.server.metrics import render_metrics
from toolgym.server.models import (
    BatchRequest,
    BatchResetRequest,
    BatchResetResponse,
    BatchResponse,
    CreateSession,
    EnvList,
    ErrorBody,
    ResetRequest,
    ResetResponse,
    SessionInfo,
    StepRequest,
    StepResponse,
    Trajectory,
)
from toolgym.server.sessions import SessionManager
from toolgym.server.settings import Settings
from toolgym.server.work import dumps

logger = logging.getLogger("toolgym.server")
JSON = "application/json"
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (400, 401, 404, 409, 413, 422)}
BEARER: dict[str, Any] = {"security": [{"bearer": []}]}


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; settings default to the `TOOLGYM_*` environment variables, read now."""
    settings = Settings.from_env() if settings is None else settings
    for module in settings.env_modules:
        importlib.import_module(module)
    store = Store(settings.database_url)
    manager = SessionManager(settings, store)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store.create_tables()
        interrupted = store.mark_interrupted()
        if interrupted:
            logger.warning("marked %d sessions of a previous run as interrupted", interrupted)
        sweeper = asyncio.create_task(manager.sweep_forever())
        yield
        sweeper.cancel()
        manager.shutdown()
        store.dispose()

    app = FastAPI(
        title="toolgym env server",
        version=__version__,
        description="Hosts registered toolgym environments as sessions; every step is persisted. "
        'WebSocket /v1/sessions/{id}/ws takes {"op": "reset", "seed"?, "options"?} and {"op": "step", "action"} '
        "messages and answers each with the body of the REST call of the same name.",
        lifespan=lifespan,
    )
    app.state.settings, app.state.store, app.state.manager = settings, store, manager
    app.add_middleware(ErrorBodyMiddleware, max_bytes=settings.max_request_bytes)
    install_error_handlers(app)
    _add_env_routes(app)
    _add_session_routes(app, manager)
    _add_service_routes(app, manager)
    from toolgym.server.ws import add_websocket_route

    add_websocket_route(app, manager)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI schema with the bearer scheme declared (checked per route, not by a dependency)."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
        schemes["bearer"] = {"type": "http", "scheme": "bearer", "description": "a key from TOOLGYM_API_KEYS"}
        app.openapi_schema = schema
    return app.openapi_schema


def _owner(request: Request) -> str:
    return owner_of(request.app.state.settings, request.headers.get("authorization"))


def _json(body: bytes | str, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type=JSON)


def _add_env_routes(app: FastAPI) -> None:
    @app.get("/v1/envs", response_model=EnvList, tags=["envs"], responses=ERRORS, openapi_extra=BEARER)
    async def list_envs(request: Request) -> Response:
        """Hosted env ids with their docs and the constructor kwargs they accept."""
        _owner(request)
        return _json(dumps({"envs": [catalog.lookup(i).describe() for i in catalog.served_ids()]}))


def _add_session_routes(app: FastAPI, manager: SessionManager) -> None:
    deps: dict[str, Any] = {"responses": ERRORS, "tags": ["sessions"], "openapi_extra": BEARER}

    @app.post("/v1/sessions", response_model=SessionInfo, status_code=201, **deps)
    async def create_session(body: CreateSession, request: Request) -> Response:
        """Create a session hosting `env_id` built with `kwargs`."""
        session = await manager.create(_owner(request), body.env_id, body.kwargs, body.seed)
        return _json(dumps(session.describe()), 201)

    @app.post("/v1/sessions/{session_id}/reset", response_model=ResetResponse, **deps)
    async def reset(session_id: str, request: Request, body: ResetRequest | None = None) -> Response:
        """Start an episode: Gymnasium's `reset(seed=, options=)`."""
        body = body or ResetRequest()
        session = manager.get(_owner(request), session_id)
        return _json(await manager.reset(session, body.seed, body.options))

    @app.post("/v1/sessions/{session_id}/step", response_model=StepResponse, **deps)
    async def step(session_id: str, body: StepRequest, request: Request) -> Response:
        """Gymnasium's `step(action)`; the step is committed to the database before this answers."""
        session = manager.get(_owner(request), session_id)
        return _json(await manager.step(session, body.action))

    @app.post("/v1/sessions/{session_id}/fork", response_model=SessionInfo, status_code=201, **deps)
    async def fork(session_id: str, request: Request) -> Response:
        """A new session in exactly the same state (env, world, RNG, episode so far)."""
        session = manager.get(_owner(request), session_id)
        return _json(dumps((await manager.fork(session)).describe()), 201)

    @app.get("/v1/sessions/{session_id}", response_model=SessionInfo, **deps)
    async def get_session(session_id: str, request: Request) -> Response:
        """A session's status (live sessions in detail; ended ones from the database)."""
        owner = _owner(request)
        live = manager.sessions.get(session_id)
        if live is not None and live.owner == owner:
            return _json(dumps(live.describe()))
        row = await asyncio.to_thread(manager.check_stored, owner, session_id)
        return _json(dumps(_stored_session(row)))

    @app.get("/v1/sessions/{session_id}/trajectory", response_model=Trajectory, **deps)
    async def trajectory(session_id: str, request: Request) -> Response:
        """Every persisted episode and step of a session."""
        owner = _owner(request)
        row = await asyncio.to_thread(manager.check_stored, owner, session_id)
        episodes = await asyncio.to_thread(manager.store.trajectory, session_id)
        status = "live" if session_id in manager.sessions else row["status"]
        body = {"session_id": session_id, "env_id": row["env_id"], "status": status, "parent_id": row["parent_id"]}
        return _json(dumps({**body, "episodes": episodes}))

    @app.delete("/v1/sessions/{session_id}", response_model=SessionInfo, **deps)
    async def close(session_id: str, request: Request) -> Response:
        """Close a session and free its env."""
        session = manager.get(_owner(request), session_id)
        await manager.close(session)
        return _json(dumps({**session.describe(), "status": "closed"}))

    @app.post("/v1/step", response_model=BatchResponse, **deps)
    async def batch_step(body: BatchRequest, request: Request) -> Response:
        """Step many sessions together (one thread hand-off, one commit); errors are per item."""
        owner = _owner(request)
        if len(body.steps) > manager.settings.max_batch:
            raise ApiError(413, "batch_too_large", f"at most {manager.settings.max_batch} steps per batch")
        results = await manager.batch(owner, [(item.session_id, item.action) for item in body.steps])
        return _json(_batch_body([item.session_id for item in body.steps], results))

    @app.post("/v1/reset", response_model=BatchResetResponse, **deps)
    async def batch_reset(body: BatchResetRequest, request: Request) -> Response:
        """Reset many sessions together (one thread hand-off); errors are per item."""
        owner = _owner(request)
        if len(body.resets) > manager.settings.max_batch:
            raise ApiError(413, "batch_too_large", f"at most {manager.settings.max_batch} resets per batch")
        items = [(item.session_id, item.seed, item.options) for item in body.resets]
        results = await manager.batch_reset(owner, items)
        return _json(_batch_body([item.session_id for item in body.resets], results))


def _batch_body(session_ids: list[str], results: list[bytes | ApiError]) -> bytes:
    parts: list[bytes] = []
    for session_id, result in zip(session_ids, results, strict=True):
        head = b'{"session_id":' + dumps(session_id).encode()
        if isinstance(result, ApiError):
            error = dumps(result.body()["error"]).encode()
            parts.append(head + b',"status":' + str(result.status).encode() + b',"error":' + error + b"}")
        else:
            parts.append(head + b',"status":200,' + result[1:])
    return b'{"results":[' + b",".join(parts) + b"]}"


def _stored_session(row: dict[str, Any]) -> dict[str, Any]:
    import json

    return {
        "session_id": row["id"],
        "env_id": row["env_id"],
        "kwargs": json.loads(row["kwargs_json"]),
        "seed": None if row["seed"] is None else int(row["seed"]),
        "status": row["status"],
        "parent_id": row["parent_id"],
        "created_at": row["created_at"],
    }


def _add_service_routes(app: FastAPI, manager: SessionManager) -> None:
    @app.get("/healthz", tags=["service"])
    async def healthz() -> dict[str, Any]:
        """Liveness: the process answers and how many sessions it holds."""
        return {"status": "ok", "sessions": len(manager.sessions), "version": __version__}

    @app.get("/metrics", response_class=PlainTextResponse, tags=["service"])
    async def metrics() -> PlainTextResponse:
        """Prometheus text exposition."""
        return PlainTextResponse(render_metrics(manager), media_type="text/plain; version=0.0.4")
