"""OpenAI-format chat messages."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class FunctionCall(BaseModel):
    """The function part of an OpenAI tool call; `arguments` is a JSON string."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: str = "{}"


class MessageToolCall(BaseModel):
    """A tool call inside an assistant message."""

    model_config = ConfigDict(extra="forbid")

    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(BaseModel):
    """One chat message in OpenAI format (system, user, assistant or tool)."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
