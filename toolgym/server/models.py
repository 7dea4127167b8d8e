"""Request and response bodies of the HTTP protocol (published in the OpenAPI schema)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

JsonDict = dict[str, Any]
Seed = StrictInt


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateSession(_Body):
    """`POST /v1/sessions`: which env to host, with which constructor kwargs and default seed."""

    env_id: StrictStr
    kwargs: JsonDict = Field(default_factory=dict)
    seed: Seed | None = Field(default=None, ge=0, description="used by the first reset when it gives no seed")


class ResetRequest(_Body):
    """`POST /v1/sessions/{id}/reset`."""

    seed: Seed | None = Field(default=None, ge=0)
    options: JsonDict | None = None


class StepRequest(_Body):
    """`POST /v1/sessions/{id}/step`: the assistant's raw output."""

    action: StrictStr


class BatchItem(_Body):
    """One step of a batch."""

    session_id: StrictStr
    action: StrictStr


class BatchRequest(_Body):
    """`POST /v1/step`: steps of many sessions, run together."""

    steps: list[BatchItem] = Field(min_length=1)


class BatchResetItem(ResetRequest):
    """One reset of a batch."""

    session_id: StrictStr


class BatchResetRequest(_Body):
    """`POST /v1/reset`: new episodes for many sessions, started together."""

    resets: list[BatchResetItem] = Field(min_length=1)


class ErrorDetail(BaseModel):
    """What went wrong."""

    code: str
    message: str
    error_id: str | None = None


class ErrorBody(BaseModel):
    """Every error response."""

    error: ErrorDetail


class SessionInfo(BaseModel):
    """A session as the server sees it."""

    session_id: str
    env_id: str
    kwargs: JsonDict
    seed: int | None
    status: str
    failure: str | None = None
    parent_id: str | None = None
    episode_index: int = -1
    step_index: int = 0
    episode_done: bool = True
    total_reward: float = 0.0
    busy: bool = False
    created_at: float


class ResetResponse(BaseModel):
    """Gymnasium's `reset` pair."""

    observation: str
    info: JsonDict


class StepResponse(BaseModel):
    """Gymnasium's `step` 5-tuple."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: JsonDict


class BatchResult(BaseModel):
    """One item of a batch answer: a step result, or an error."""

    session_id: str
    status: int
    observation: str | None = None
    reward: float | None = None
    terminated: bool | None = None
    truncated: bool | None = None
    info: JsonDict | None = None
    error: ErrorDetail | None = None


class BatchResetResult(BaseModel):
    """One item of a batch-reset answer: the new episode's observation and info, or an error."""

    session_id: str
    status: int
    observation: str | None = None
    info: JsonDict | None = None
    error: ErrorDetail | None = None


class BatchResetResponse(BaseModel):
    """`POST /v1/reset` answer, in the order of the request."""

    results: list[BatchResetResult]


class BatchResponse(BaseModel):
    """`POST /v1/step` answer, in the order of the request."""

    results: list[BatchResult]


class StepOut(BaseModel):
    """A persisted step."""

    index: int
    action: str
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: JsonDict
    started_at: float
    finished_at: float


class EpisodeOut(BaseModel):
    """A persisted episode with its steps."""

    index: int
    episode_id: str
    seed: int | None
    options: JsonDict
    reset_observation: str
    reset_info: JsonDict
    status: str
    total_reward: float
    started_at: float
    ended_at: float | None
    steps: list[StepOut]


class Trajectory(BaseModel):
    """Everything a session did."""

    session_id: str
    env_id: str
    status: str
    parent_id: str | None
    episodes: list[EpisodeOut]


class KwargOut(BaseModel):
    """One accepted constructor kwarg."""

    model_config = ConfigDict(extra="allow")
    name: str
    type: str
    schema_: JsonDict = Field(alias="schema")


class EnvOut(BaseModel):
    """A hosted env id."""

    id: str
    summary: str
    doc: str
    kwargs: list[KwargOut]


class EnvList(BaseModel):
    """`GET /v1/envs`."""

    envs: list[EnvOut]
