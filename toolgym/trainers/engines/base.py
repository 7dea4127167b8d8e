"""The engine interface: full token contexts in, generated token ids and behaviour logprobs out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class SamplingParams:
    """How one assistant turn is sampled."""

    temperature: float = 1.0
    """softmax temperature; behaviour logprobs are those of the tempered distribution"""
    max_new_tokens: int = 64
    """tokens at most per assistant turn"""
    greedy: bool = False
    """argmax decoding (evaluation)"""
    stop_ids: tuple[int, ...] = ()
    """a turn ends after any of these ids (kept in the output)"""
    forbidden_ids: tuple[int, ...] = ()
    """ids the sampler never emits (user/tool markers: the model cannot forge a tool result)"""
    seed: int | None = None
    """seed of the sampler for this call"""

    def __post_init__(self) -> None:
        if self.temperature <= 0 and not self.greedy:
            raise ValueError(f"temperature must be > 0 (or greedy=True), got {self.temperature}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@dataclass
class GenRequest:
    """One sequence to continue: its whole context so far, under a stable id (prefix cache key)."""

    seq_id: str
    token_ids: list[int]


@dataclass
class GenOutput:
    """Tokens exactly as sampled, with the log-probability of each under the behaviour policy."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str = "stop"
    extra: dict[str, Any] = field(default_factory=dict)


class Engine(Protocol):
    """What rollout code needs from an inference engine."""

    version: int

    def generate(self, requests: list[GenRequest], params: SamplingParams) -> list[GenOutput]:
        """Continue every request by one assistant turn."""
        ...

    def release(self, seq_ids: Iterable[str]) -> None:
        """Forget cached state of finished sequences."""
        ...

    def update_weights(self, state_dict: Mapping[str, Any], version: int) -> None:
        """Load new policy weights from the learner (weight sync)."""
        ...


def make_engine(kind: str, model_path: str, **kwargs: Any) -> Engine:
    """Build an engine by name: "transformers" or "vllm"."""
    if kind == "transformers":
        from toolgym.trainers.engines.hf import TransformersEngine

        return TransformersEngine.from_pretrained(model_path, **kwargs)
    if kind == "vllm":
        from toolgym.trainers.engines.vllm import VLLMEngine

        return VLLMEngine(model_path, **kwargs)
    raise ValueError(f"unknown engine {kind!r}: choose 'transformers' or 'vllm'")
