"""Parse an assistant's raw output into tool calls, a final answer and parse errors."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_OPEN_TAG = "<tool_call>"


@dataclass(frozen=True)
class RawCall:
    """A call as the agent wrote it: a name and arguments, not yet validated."""

    name: str
    arguments: dict[str, Any]
    call_id: str | None = None


@dataclass(frozen=True)
class ParseError:
    """A piece of the action that looked like a call but could not be read."""

    message: str
    snippet: str


@dataclass
class ParsedAction:
    """Everything an action contains: free text, calls, parse errors and the final answer."""

    content: str
    calls: list[RawCall] = field(default_factory=list)
    errors: list[ParseError] = field(default_factory=list)
    answer: str | None = None


def parse_action(action: str) -> ParsedAction:
    """Read calls from OpenAI assistant-message JSON or Hermes `<tool_call>` blocks; never raises."""
    if not isinstance(action, str):
        return ParsedAction(content="", errors=[ParseError("the action must be a string", repr(action)[:200])])
    stripped = action.strip()
    if stripped.startswith("{"):
        message = _load_json(stripped)
        if isinstance(message, dict) and ("tool_calls" in message or "content" in message):
            return _parse_openai_message(message)
    return _parse_hermes(action)


def _load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _parse_hermes(action: str) -> ParsedAction:
    parsed = ParsedAction(content=action, answer=_find_answer(action))
    if _OPEN_TAG not in action:
        return parsed
    for block in _TOOL_CALL.findall(action):
        _add_call(parsed, _load_json(block.strip()), block)
    dangling = action.count(_OPEN_TAG) - len(parsed.calls) - len(parsed.errors)
    if dangling > 0:
        tail = action[action.rfind(_OPEN_TAG) :]
        parsed.errors.append(ParseError("a <tool_call> block was opened but never closed", tail[:200]))
    return parsed


def _add_call(parsed: ParsedAction, payload: Any, snippet: str, call_id: str | None = None) -> None:
    if not isinstance(payload, dict):
        parsed.errors.append(ParseError("the tool call is not a JSON object", snippet[:200]))
        return
    name = payload.get("name")
    arguments = payload.get("arguments", payload.get("parameters", {}))
    if isinstance(arguments, str):
        arguments = _load_json(arguments) if arguments.strip() else {}
    if not isinstance(name, str) or not name:
        parsed.errors.append(ParseError("the tool call has no 'name' string", snippet[:200]))
    elif not isinstance(arguments, dict):
        parsed.errors.append(ParseError(f"the arguments of '{name}' are not a JSON object", snippet[:200]))
    else:
        parsed.calls.append(RawCall(name=name, arguments=arguments, call_id=call_id))


def _parse_openai_message(message: dict[str, Any]) -> ParsedAction:
    content = message.get("content")
    content = content if isinstance(content, str) else ""
    parsed = ParsedAction(content=content, answer=_find_answer(content))
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        parsed.errors.append(ParseError("'tool_calls' must be a list", str(calls)[:200]))
        return parsed
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        call_id = call.get("id") if isinstance(call, dict) else None
        _add_call(parsed, function, json.dumps(call, default=str), call_id if isinstance(call_id, str) else None)
    return parsed


def _find_answer(text: str) -> str | None:
    if "<answer>" not in text:
        return None
    answers = _ANSWER.findall(text)
    return answers[-1].strip() if answers else None
