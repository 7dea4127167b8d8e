"""Pydantic wire and record models shared by every part of toolgym."""

from toolgym.schemas.messages import ChatMessage, FunctionCall, MessageToolCall
from toolgym.schemas.records import EpisodeRecord, FaultEvent, StepRecord, Task
from toolgym.schemas.tools import ErrorKind, ToolAnnotations, ToolCall, ToolResult, ToolSpec

__all__ = [
    "ChatMessage",
    "EpisodeRecord",
    "ErrorKind",
    "FaultEvent",
    "FunctionCall",
    "MessageToolCall",
    "StepRecord",
    "Task",
    "ToolAnnotations",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
]
