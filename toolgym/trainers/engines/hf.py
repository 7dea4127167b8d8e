"""transformers engine: batched sampling with a KV cache kept across the turns of each episode."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from toolgym.trainers._deps import require
from toolgym.trainers.engines.base import GenOutput, GenRequest, SamplingParams

logger = logging.getLogger(__name__)
torch = require("torch")


@dataclass
class _Cohort:
    """Sequences whose KV cache is held: row b caches `contexts[b]` (holes masked by `mask`)."""

    seq_ids: list[str]
    contexts: list[list[int]]
    cache: Any
    mask: Any  # (B, L) long: 1 where the cached position is a real token
    next_pos: Any  # (B,) long: position id of each row's next token


class TransformersEngine:
    """Token-in/token-out sampling with `transformers`, CPU or GPU.

    A request whose context extends the cached context of the same `seq_id` only prefills the new
    tokens (the observation), so a multi-turn episode never re-reads its history. Rows of different
    lengths share one left-padded cache; padding and finished rows are holes in the attention mask.
    """

    def __init__(self, model: Any, pad_id: int, *, device: str = "cpu") -> None:
        self.model = model.to(device).eval()
        self.pad_id = pad_id
        self.device = torch.device(device)
        self.version = 0
        self._cohort: _Cohort | None = None

    @classmethod
    def from_pretrained(cls, path: str, *, device: str = "cpu", dtype: str = "float32") -> TransformersEngine:
        """Load model and tokenizer from a local folder."""
        from toolgym.trainers.tiny.tokenizer import load_tokenizer

        transformers = require("transformers")
        model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
        tokenizer = load_tokenizer(path)
        return cls(model, tokenizer.pad_token_id, device=device)

    # ------------------------------------------------------------------ interface
    def generate(self, requests: list[GenRequest], params: SamplingParams) -> list[GenOutput]:
        """Sample one assistant turn for every request (batched)."""
        if not requests:
            return []
        with torch.inference_mode():
            ids, chunk_mask = self._prepare(requests)
            return self._decode(ids, chunk_mask, params)

    def release(self, seq_ids: Iterable[str]) -> None:
        """Drop the cache when none of its sequences is still wanted."""
        gone = set(seq_ids)
        if self._cohort is not None and set(self._cohort.seq_ids) <= gone:
            self._cohort = None

    def update_weights(self, state_dict: Mapping[str, Any], version: int) -> None:
        """Load the learner's weights; cached keys/values are stale, so drop them."""
        self.model.load_state_dict(dict(state_dict))
        self.version = version
        self._cohort = None

    # ------------------------------------------------------------------ internals
    def _prepare(self, requests: list[GenRequest]) -> tuple[Any, Any]:
        """Reuse or rebuild the cohort; returns the new tokens to feed, left-padded: (B, S) ids and mask."""
        rows = self._reusable_rows(requests)
        if rows is None:
            n = len(requests)
            self._cohort = _Cohort(
                seq_ids=[r.seq_id for r in requests],
                contexts=[[] for _ in requests],
                cache=_growing_cache(),
                mask=torch.zeros(n, 0, dtype=torch.long, device=self.device),
                next_pos=torch.zeros(n, dtype=torch.long, device=self.device),
            )
        else:
            self._select_rows(rows)
        cohort = self._cohort
        assert cohort is not None
        suffixes = [r.token_ids[len(ctx) :] for r, ctx in zip(requests, cohort.contexts, strict=True)]
        for ctx, req in zip(cohort.contexts, requests, strict=True):
            ctx[:] = list(req.token_ids)
        width = max(len(s) for s in suffixes)
        ids = torch.full((len(suffixes), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(suffixes), width), dtype=torch.long)
        for b, suffix in enumerate(suffixes):
            if suffix:
                ids[b, width - len(suffix) :] = torch.tensor(suffix)
                mask[b, width - len(suffix) :] = 1
        return ids.to(self.device), mask.to(self.device)

    def _reusable_rows(self, requests: list[GenRequest]) -> list[int] | None:
        """Cohort rows of the requests if every request extends its cached context, else None."""
        cohort = self._cohort
        if cohort is None:
            return None
        index = {seq_id: b for b, seq_id in enumerate(cohort.seq_ids)}
        rows = []
        for req in requests:
            b = index.get(req.seq_id)
            if b is None:
                return None
            ctx = cohort.contexts[b]
            if len(req.token_ids) <= len(ctx) or req.token_ids[: len(ctx)] != ctx:
                return None
            rows.append(b)
        return rows

    def _select_rows(self, rows: list[int]) -> None:
        cohort = self._cohort
        assert cohort is not None
        if rows == list(range(len(cohort.seq_ids))):
            return
        index = torch.tensor(rows, dtype=torch.long, device=self.device)
        cohort.cache.batch_select_indices(index)
        cohort.mask, cohort.next_pos = cohort.mask[index], cohort.next_pos[index]
        cohort.seq_ids = [cohort.seq_ids[b] for b in rows]
        cohort.contexts = [cohort.contexts[b] for b in rows]

    def _forward(self, ids: Any, feed_mask: Any) -> Any:
        """Feed (B, S) tokens (mask 0 = hole) through the cached model; returns last-position logits (B, V)."""
        cohort = self._cohort
        assert cohort is not None
        positions = cohort.next_pos[:, None] + torch.cumsum(feed_mask, dim=1) - 1  # (B, S)
        positions = positions.clamp(min=0)
        cohort.mask = torch.cat([cohort.mask, feed_mask], dim=1)
        cohort.next_pos = cohort.next_pos + feed_mask.sum(dim=1)
        out = self.model(
            input_ids=ids,
            attention_mask=cohort.mask,
            position_ids=positions,
            cache=cohort.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1, :].float()

    def _decode(self, ids: Any, chunk_mask: Any, params: SamplingParams) -> list[GenOutput]:
        cohort = self._cohort
        assert cohort is not None
        n = ids.shape[0]
        generator = _generator(params.seed, self.device)
        stop = torch.tensor(sorted(set(params.stop_ids)) or [-1], device=self.device)
        tokens: list[list[int]] = [[] for _ in range(n)]
        logps: list[list[float]] = [[] for _ in range(n)]
        done = torch.zeros(n, dtype=torch.bool, device=self.device)
        logits = self._forward(ids, chunk_mask)
        for step in range(params.max_new_tokens):
            token, logp = _sample(logits, params, generator)  # (B,), (B,)
            for b in (~done).nonzero().flatten().tolist():
                tokens[b].append(int(token[b]))
                logps[b].append(float(logp[b]))
            done = done | torch.isin(token, stop)
            if bool(done.all()) or step == params.max_new_tokens - 1:
                break
            feed = (~done).long()[:, None]  # (B, 1)
            logits = self._forward(torch.where(feed.bool(), token[:, None], self.pad_id), feed)
        for b in range(n):  # the last sampled token is not in the cache
            cohort.contexts[b].extend(tokens[b][:-1])
        stop_set = set(params.stop_ids)
        return [
            GenOutput(t, lp, "stop" if t and t[-1] in stop_set else "length")
            for t, lp in zip(tokens, logps, strict=True)
        ]


def _growing_cache() -> Any:
    """A `DynamicCache` whose layers append in place (see `_GrowingLayer`)."""
    cache = require("transformers").DynamicCache()
    cache.layer_class_to_replicate = _growing_layer_class()
    return cache


_LAYER_CLASS: Any = None


def _growing_layer_class() -> Any:
    """`DynamicLayer` with keys/values in buffers grown by doubling (defined on first use: transformers is lazy)."""
    global _LAYER_CLASS
    if _LAYER_CLASS is not None:
        return _LAYER_CLASS
    from transformers.cache_utils import DynamicLayer

    class _GrowingLayer(DynamicLayer):  # type: ignore[misc, valid-type]
        """Decoding appends one position per step: writing it into spare capacity replaces `torch.cat`'s
        copy of the whole cache (a fifth of a tiny model's decode step on CPU)."""

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                self.size, self.key_buffer, self.value_buffer = 0, None, None
            start, end = self.size, self.size + key_states.shape[-2]
            if self.key_buffer is None or end > self.key_buffer.shape[-2]:
                self._grow(key_states, value_states, end)
            self.key_buffer[:, :, start:end] = key_states
            self.value_buffer[:, :, start:end] = value_states
            self.size = end
            self.keys, self.values = self.key_buffer[:, :, :end], self.value_buffer[:, :, :end]
            return self.keys, self.values

        def _grow(self, key_states: Any, value_states: Any, needed: int) -> None:
            batch, heads, _, dim = key_states.shape
            capacity = max(2 * needed, 64)
            keys = key_states.new_empty(batch, heads, capacity, dim)
            values = value_states.new_empty(batch, heads, capacity, value_states.shape[-1])
            if self.size:
                keys[:, :, : self.size], values[:, :, : self.size] = self.keys, self.values
            self.key_buffer, self.value_buffer = keys, values

        def batch_select_indices(self, indices: Any) -> None:
            if self.get_seq_length() > 0:
                self.key_buffer, self.value_buffer = self.key_buffer[indices], self.value_buffer[indices]
                self.keys = self.key_buffer[:, :, : self.size]
                self.values = self.value_buffer[:, :, : self.size]

    _LAYER_CLASS = _GrowingLayer
    return _LAYER_CLASS


def _generator(seed: int | None, device: Any) -> Any:
    if seed is None:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def _sample(logits: Any, params: SamplingParams, generator: Any) -> tuple[Any, Any]:
    """Sample from tempered logits (B, V) with forbidden ids removed; returns ids (B,) and logprobs (B,)."""
    if params.forbidden_ids:
        logits[:, list(params.forbidden_ids)] = float("-inf")
    temperature = params.temperature if params.temperature > 0 else 1.0
    logp_all = torch.log_softmax(logits / temperature, dim=-1)  # (B, V)
    if params.greedy:
        token = logp_all.argmax(dim=-1)
    else:
        token = torch.multinomial(logp_all.exp(), 1, generator=generator).squeeze(1)
    return token, logp_all.gather(1, token[:, None]).squeeze(1)
