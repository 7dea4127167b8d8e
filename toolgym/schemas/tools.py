"""Tool specifications, tool calls and tool results: the canonical tool wire format."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

JsonDict = dict[str, Any]


class ErrorKind(str, Enum):
    """Why a tool call did not produce a normal result."""

    PARSE = "parse_error"
    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENTS = "invalid_arguments"
    EXECUTION = "execution_error"
    OUTPUT_SCHEMA = "output_schema"
    TIMEOUT = "timeout"
    RATE_LIMIT = "rate_limit"
    HTTP = "http_error"
    BUDGET = "budget_exhausted"
    UNAVAILABLE = "unavailable"
    DEPRECATED = "deprecated"


class ToolAnnotations(BaseModel):
    """What a tool does to the world and what it costs to call."""

    model_config = ConfigDict(extra="forbid")

    read_only: bool = True
    writes: list[str] = Field(default_factory=list)
    reads: list[str] = Field(default_factory=list)
    price: float = 0.0
    latency: float = 0.0
    tags: list[str] = Field(default_factory=list)


class ToolSpec(BaseModel):
    """A tool as the agent sees it: a name, a description and JSON Schemas for input and output."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128)
    description: str = ""
    input_schema: JsonDict = Field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: JsonDict | None = None
    annotations: ToolAnnotations = Field(default_factory=ToolAnnotations)

    def to_openai(self) -> JsonDict:
        """Return the OpenAI chat-completions tool definition."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema,
            },
        }

    @classmethod
    def from_openai(cls, definition: JsonDict) -> ToolSpec:
        """Build a spec from an OpenAI tool definition (with or without the outer `function` wrapper)."""
        function = definition.get("function", definition)
        return cls(
            name=function["name"],
            description=function.get("description", ""),
            input_schema=function.get("parameters") or {"type": "object", "properties": {}},
        )


class ToolCall(BaseModel):
    """One call the agent asked for."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: JsonDict = Field(default_factory=dict)


class ToolResult(BaseModel):
    """What answering a tool call produced: content on success, an error kind and message otherwise."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    content: Any = None
    error_kind: ErrorKind | None = None
    error_message: str | None = None
    cost: float = 0.0
    latency: float = 0.0

    @classmethod
    def success(cls, content: Any, cost: float = 0.0, latency: float = 0.0) -> ToolResult:
        """A successful result."""
        return cls(ok=True, content=content, cost=cost, latency=latency)

    @classmethod
    def failure(cls, kind: ErrorKind, message: str, cost: float = 0.0, latency: float = 0.0) -> ToolResult:
        """A failed result with an error kind and a message for the agent."""
        return cls(ok=False, error_kind=kind, error_message=message, cost=cost, latency=latency)
