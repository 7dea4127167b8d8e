"""Simulator backends: offline (schema-driven), any OpenAI-compatible endpoint, a local transformers model."""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx

from toolgym.simulators.simulated.values import generate_value

JsonDict = dict[str, Any]
Messages = list[JsonDict]
_OFFLINE_REPLIES = (
    "Okay.",
    "Yes, please go ahead.",
    "Could you tell me more?",
    "That works for me.",
    "No, that is not what I meant.",
    "Thanks, that is all.",
)


class BackendError(RuntimeError):
    """A backend could not produce a reply (transport error, HTTP error, malformed response)."""


@runtime_checkable
class Backend(Protocol):
    """Produces a chat reply. `name` identifies the model in cache keys (not where it is served)."""

    name: str

    def chat(self, messages: Messages, *, seed: int, response_schema: JsonDict | None = None) -> str: ...


class OfflineBackend:
    """Deterministic, model-free: a JSON value built from the response schema and the seed.

    Without a schema (free text, e.g. a user simulator) it picks a short neutral reply by seed.
    """

    name = "offline"

    def chat(self, messages: Messages, *, seed: int, response_schema: JsonDict | None = None) -> str:
        rng = random.Random(seed)
        if response_schema is None:
            return rng.choice(_OFFLINE_REPLIES)
        return json.dumps(generate_value(response_schema, rng), ensure_ascii=False)


class OpenAIBackend:
    """Any OpenAI-compatible `/chat/completions` endpoint (vLLM's server, a hosted provider) over httpx.

    `json_mode`: `True`/"object" asks for a JSON object (`response_format: json_object`, widely
    supported); "schema" constrains decoding to the tool's output schema (`json_schema`, e.g.
    vLLM's guided decoding); `False` sends no `response_format`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        json_mode: bool | str = True,
        timeout: float = 60.0,
    ) -> None:
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "").rstrip("/")
        self.model = model or os.environ.get("TOOLGYM_SIM_MODEL") or ""
        if not self.base_url or not self.model:
            raise ValueError(
                "the openai backend needs base_url and model: pass backend={'kind': 'openai', 'base_url': …, "
                "'model': …} or set OPENAI_BASE_URL and TOOLGYM_SIM_MODEL"
            )
        if json_mode not in (True, False, "object", "schema"):
            raise ValueError(f"json_mode must be True, False, 'object' or 'schema', got {json_mode!r}")
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.temperature, self.max_tokens, self.json_mode = temperature, max_tokens, json_mode
        self.name = f"openai:{self.model}"
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def _body(self, messages: Messages, seed: int, response_schema: JsonDict | None) -> JsonDict:
        body: JsonDict = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": seed,
        }
        if response_schema is not None and self.json_mode == "schema":
            schema = {"name": "tool_output", "schema": response_schema, "strict": False}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif response_schema is not None and self.json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    def chat(self, messages: Messages, *, seed: int, response_schema: JsonDict | None = None) -> str:
        try:
            response = self._client.post("/chat/completions", json=self._body(messages, seed, response_schema))
        except httpx.HTTPError as error:
            raise BackendError(f"{self.name}: request to {self.base_url} failed: {error}") from error
        if response.status_code != 200:
            raise BackendError(f"{self.name}: HTTP {response.status_code}: {response.text[:300]}")
        try:
            content = response.json()["choices"][0]["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError) as error:
            raise BackendError(f"{self.name}: malformed chat-completions response: {response.text[:300]}") from error
        return str(content or "")

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()


_TRAIN_EXTRA = "the transformers backend needs torch and transformers: pip install 'toolgym[train]'"


def _import_torch() -> Any:
    """torch, imported lazily (never at module level: `import toolgym` stays light)."""
    try:
        import torch
    except ImportError as error:
        raise ImportError(_TRAIN_EXTRA) from error
    return torch


def _import_transformers() -> Any:
    """transformers, imported lazily."""
    try:
        import transformers
    except ImportError as error:
        raise ImportError(_TRAIN_EXTRA) from error
    return transformers


class TransformersBackend:
    """A local causal LM directory (`save_pretrained` output), loaded lazily with `from_pretrained`."""

    def __init__(self, path: str | Path, *, max_new_tokens: int = 256, device: str = "cpu") -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise FileNotFoundError(f"transformers backend: model directory not found: {self.path}")
        self.max_new_tokens, self.device = max_new_tokens, device
        self.name = f"transformers:{self.path.resolve().name}"
        self._model: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> tuple[Any, Any]:
        if self._model is None:
            transformers = _import_transformers()
            self._tokenizer = transformers.AutoTokenizer.from_pretrained(str(self.path))
            model = transformers.AutoModelForCausalLM.from_pretrained(str(self.path))
            self._model = model.to(self.device).eval()
        return self._model, self._tokenizer

    def _prompt(self, tokenizer: Any, messages: Messages) -> str:
        if getattr(tokenizer, "chat_template", None):
            return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
        lines = [f"{m['role']}: {m.get('content') or ''}" for m in messages]
        return "\n".join([*lines, "assistant: "])

    def chat(self, messages: Messages, *, seed: int, response_schema: JsonDict | None = None) -> str:
        torch = _import_torch()
        with self._lock:
            model, tokenizer = self._load()
            limit = int(getattr(model.config, "max_position_embeddings", 2048)) - self.max_new_tokens
            ids = tokenizer(self._prompt(tokenizer, messages), return_tensors="pt")["input_ids"][:, -max(limit, 1) :]
            torch.manual_seed(seed)
            with torch.no_grad():
                output = model.generate(
                    input_ids=ids.to(self.device),
                    attention_mask=torch.ones_like(ids).to(self.device),
                    max_new_tokens=self.max_new_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
                )
            return str(tokenizer.decode(output[0, ids.shape[1] :], skip_special_tokens=True))


def make_backend(spec: Any = None) -> Backend:
    """A backend from a spec: None/"offline", "openai" (from the environment), "transformers:<dir>",
    `{"kind": "openai", "base_url": …, "model": …, …}`, `{"kind": "transformers", "path": …}`, or a Backend."""
    if spec is None or spec == "offline":
        return OfflineBackend()
    if isinstance(spec, Backend):
        return spec
    if spec == "openai":
        return OpenAIBackend()
    if isinstance(spec, str) and spec.startswith("transformers:"):
        return TransformersBackend(spec[len("transformers:") :])
    if isinstance(spec, dict):
        options = dict(spec)
        kind = options.pop("kind", None)
        if kind == "offline" and not options:
            return OfflineBackend()
        if kind == "openai":
            return OpenAIBackend(**options)
        if kind == "transformers":
            return TransformersBackend(**options)
        raise ValueError(
            f"unknown backend kind {kind!r} (options {sorted(options)}); use offline, openai or transformers"
        )
    raise ValueError(f"cannot build a simulator backend from {spec!r}; use 'offline', 'openai' or a dict with 'kind'")


__all__ = [
    "Backend",
    "BackendError",
    "OfflineBackend",
    "OpenAIBackend",
    "TransformersBackend",
    "make_backend",
]
