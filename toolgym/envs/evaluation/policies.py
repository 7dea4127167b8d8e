"""Policies `toolgym eval` runs: the env's oracle (gold actions, with recovery), random, and an OpenAI-compatible model."""

from __future__ import annotations

import json
import random
from typing import Any, Protocol

import httpx

from toolgym.envs.parsing import RawCall, parse_action
from toolgym.schemas import Task

JsonDict = dict[str, Any]
RETRYABLE = frozenset({"http_error", "timeout", "rate_limit", "unavailable"})


class Policy(Protocol):
    """Acts in one episode at a time: `start` at reset, then `act` after each observation."""

    name: str

    def start(self, observation: str, info: JsonDict, task: Task | None) -> None: ...
    def act(self, observation: str, info: JsonDict) -> str: ...


def hermes(call: RawCall) -> str:
    """A call as a Hermes `<tool_call>` block."""
    return (
        "<tool_call>"
        + json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
        + "</tool_call>"
    )


class OraclePolicy:
    """Replays the task's gold actions, recovering like a careful agent would.

    Calls that failed with a retryable error (5xx/409, timeout, rate limit, temporarily unavailable)
    are sent again, with the later calls of the same action that failed too (they may have depended
    on the first); a deprecation error is read for the new tool or parameter names, which are used
    from then on. Outputs are never read, so implicit faults do not mislead it.
    """

    name = "oracle"

    def __init__(self, max_retries: int = 8) -> None:
        self.max_retries = max_retries
        self._queue: list[str] = []
        self._last: list[RawCall] = []
        self._retries = 0
        self._renames: dict[str, str] = {}
        self._params: dict[str, dict[str, str]] = {}

    def start(self, observation: str, info: JsonDict, task: Task | None) -> None:
        """Load the gold actions of `task`."""
        if task is None or not task.gold_actions:
            raise ValueError("the oracle policy needs a task with gold actions")
        self._queue = list(task.gold_actions)
        self._last, self._retries, self._renames, self._params = [], 0, {}, {}

    def act(self, observation: str, info: JsonDict) -> str:
        """Retry what failed for a recoverable reason, else the next gold action."""
        failed = self._recoverable_failures(info.get("tool_calls", []))
        if failed and self._retries < self.max_retries:
            self._retries += 1
            self._last = [self._rewrite(call) for call in failed]
            return "\n".join(hermes(call) for call in self._last)
        self._retries = 0
        if not self._queue:
            return "<answer>done</answer>"
        action = self._queue.pop(0)
        parsed = parse_action(action)
        if not parsed.calls:
            self._last = []
            return action
        self._last = [self._rewrite(call) for call in parsed.calls]
        text = "\n".join(hermes(call) for call in self._last)
        return text if parsed.answer is None else f"{text}\n<answer>{parsed.answer}</answer>"

    def _recoverable_failures(self, records: list[JsonDict]) -> list[RawCall]:
        """Calls to send again: retryable failures, and the calls after one that failed too (they may depend on it)."""
        failed: list[RawCall] = []
        for record, call in zip(records, self._last, strict=False):
            kind = record.get("error_kind")
            if kind == "deprecated":
                self._learn_drift(call.name, str(record.get("error", "")))
            if kind in RETRYABLE or kind == "deprecated" or (failed and _reports_failure(record)):
                failed.append(call)
        return failed

    def _learn_drift(self, tool: str, message: str) -> None:
        try:
            payload = json.loads(message)
        except ValueError:
            return
        original = self._original(tool)
        if payload.get("replacement") and payload["replacement"] != tool:
            self._renames[original] = payload["replacement"]
        if payload.get("renamed_parameters"):
            self._params.setdefault(original, {}).update(payload["renamed_parameters"])

    def _original(self, name: str) -> str:
        return next((old for old, new in self._renames.items() if new == name), name)

    def _rewrite(self, call: RawCall) -> RawCall:
        original = self._original(call.name)
        params = self._params.get(original, {})
        arguments = {params.get(k, k): v for k, v in call.arguments.items()}
        return RawCall(name=self._renames.get(original, original), arguments=arguments)


def _reports_failure(record: JsonDict) -> bool:
    """A failed call, or one whose result says it failed (`{"error": ...}`, as BFCL's tools answer)."""
    result = record.get("result")
    if isinstance(result, str) and result.lstrip().startswith("{"):
        try:
            result = json.loads(result)
        except ValueError:
            pass
    return not record.get("ok") or (isinstance(result, dict) and bool(result.get("error")))


class RandomPolicy:
    """Calls random tools with arguments drawn from their schemas, then answers (a seeded baseline)."""

    name = "random"

    def __init__(self, seed: int = 0, answer_probability: float = 0.25) -> None:
        self._rng = random.Random(seed)
        self.answer_probability = answer_probability
        self._tools: list[JsonDict] = []

    def start(self, observation: str, info: JsonDict, task: Task | None) -> None:
        """Remember the episode's tool list."""
        self._tools = [t.get("function", t) for t in info.get("tools", [])]

    def act(self, observation: str, info: JsonDict) -> str:
        """A random call, or (sometimes, and always without tools) a random answer."""
        if not self._tools or self._rng.random() < self.answer_probability:
            return f"<answer>{self._rng.choice(['done', '0', '1', 'yes'])}</answer>"
        tool = self._rng.choice(self._tools)
        arguments = sample_arguments(tool.get("parameters") or {}, self._rng)
        return hermes(RawCall(name=str(tool["name"]), arguments=arguments))


def sample_arguments(schema: JsonDict, rng: random.Random) -> JsonDict:
    """Random values for the required properties of an object schema."""
    properties = schema.get("properties", {})
    return {name: _sample(properties.get(name, {}), rng) for name in schema.get("required", [])}


def _sample(schema: JsonDict, rng: random.Random) -> Any:
    kind = schema.get("type")
    if "anyOf" in schema:
        return _sample(rng.choice(schema["anyOf"]), rng)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if kind == "integer":
        return rng.randint(0, 20)
    if kind == "number":
        return round(rng.uniform(0, 20), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [_sample(schema.get("items", {}), rng) for _ in range(rng.randint(1, 3))]
    if kind == "object":
        return sample_arguments(schema, rng)
    return rng.choice(["a", "Alice", "ev1", "1 + 1", "test"])


class OpenAIPolicy:
    """A model behind an OpenAI-compatible chat-completions endpoint (vLLM, a hosted provider, ...)."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        timeout: float = 120.0,
    ) -> None:
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)
        self._messages: list[JsonDict] = []
        self._tools: list[JsonDict] = []
        self._replied = False

    def start(self, observation: str, info: JsonDict, task: Task | None) -> None:
        """Begin the conversation with the env's reset messages and tool list."""
        self._messages = [dict(m) for m in info.get("messages", [])] or [{"role": "user", "content": observation}]
        self._tools = list(info.get("tools", []))
        self._replied = False

    def act(self, observation: str, info: JsonDict) -> str:
        """Send the transcript (plus the env's replies to the last action); the model's reply is the action."""
        if self._replied:  # the env's messages of the last step, except its copy of our own message
            self._messages.extend(m for m in info.get("messages", []) if m.get("role") != "assistant")
        body: JsonDict = {
            "model": self.model,
            "messages": self._messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self._tools:
            body["tools"] = self._tools
        response = self._client.post("/chat/completions", json=body)
        if response.status_code >= 400:
            raise RuntimeError(f"model endpoint answered {response.status_code}: {response.text[:300]}")
        message = response.json()["choices"][0]["message"]
        self._messages.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")})
        self._replied = True
        return _message_to_action(message)

    def close(self) -> None:
        """Close the HTTP connection."""
        self._client.close()


def _message_to_action(message: JsonDict) -> str:
    calls = message.get("tool_calls") or []
    if calls:
        return json.dumps({"content": message.get("content") or "", "tool_calls": calls}, ensure_ascii=False)
    return str(message.get("content") or "")
