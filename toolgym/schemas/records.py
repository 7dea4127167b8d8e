"""Records of what happened: tasks, fault events, steps and episodes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolgym.schemas.messages import ChatMessage

JsonDict = dict[str, Any]


class Task(BaseModel):
    """A task an episode is about: the instruction, and the gold actions that solve it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    instruction: str
    gold_actions: list[str] = Field(default_factory=list)
    answer: str | None = None
    metadata: JsonDict = Field(default_factory=dict)


class FaultEvent(BaseModel):
    """One injected failure, labelled so that rewards and metrics can account for it."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    tool: str | None = None
    step: int
    explicit: bool = True
    transient: bool = True
    detail: JsonDict = Field(default_factory=dict)


class StepRecord(BaseModel):
    """One environment step as persisted and sent over the wire."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    index: int = Field(ge=0)
    action: str
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: JsonDict = Field(default_factory=dict)
    created_at: datetime | None = None


class EpisodeRecord(BaseModel):
    """A whole episode: its task, its reset observation and every step."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    env_id: str
    seed: int | None = None
    task_id: str | None = None
    reset_observation: str = ""
    reset_info: JsonDict = Field(default_factory=dict)
    messages: list[ChatMessage] = Field(default_factory=list)
    steps: list[StepRecord] = Field(default_factory=list)
    status: Literal["running", "terminated", "truncated", "interrupted", "closed"] = "running"
    total_reward: float = 0.0
