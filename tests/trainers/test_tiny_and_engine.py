"""The tiny model and the transformers engine: char tokens, save/load, KV cache across turns, forbidden ids."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from toolgym.trainers.engines.base import GenRequest, SamplingParams  # noqa: E402
from toolgym.trainers.engines.hf import TransformersEngine  # noqa: E402
from toolgym.trainers.tiny import TINY_FORMAT, build_tiny_model, load_tiny  # noqa: E402


def reference_logprobs(model, context, generated, forbidden=(), temperature=1.0):
    ids = torch.tensor([list(context) + list(generated)])
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    if forbidden:
        logits[:, list(forbidden)] = float("-inf")
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return [float(logp[len(context) - 1 + k, tok]) for k, tok in enumerate(generated)]


def test_tokenizer_gives_one_token_per_digit(tiny):
    tokenizer, _ = tiny
    ids = tokenizer.encode("12345 * 678", add_special_tokens=False)
    assert len(ids) == len("12345 * 678")
    assert tokenizer.decode(ids) == "12345 * 678"
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "1 + 2"}}</tool_call>'
    assert len(tokenizer.encode(call, add_special_tokens=False)) == 2 + 2 + len("1 + 2")


def test_save_and_load_roundtrip(tiny, tiny_path):
    tokenizer, model = tiny
    loaded_model, loaded_tokenizer = load_tiny(tiny_path)
    text = TINY_FORMAT.prompt("What is 3 * 4?")
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert loaded_tokenizer.encode(text, add_special_tokens=False) == ids
    with torch.no_grad():
        same = torch.allclose(model(torch.tensor([ids])).logits, loaded_model(torch.tensor([ids])).logits, atol=1e-6)
    assert same
    assert sum(p.numel() for p in loaded_model.parameters()) < 1_000_000


def _params(tokenizer, **kw):
    base = dict(
        temperature=1.0,
        max_new_tokens=12,
        stop_ids=(TINY_FORMAT.end_id(tokenizer),),
        forbidden_ids=tuple(TINY_FORMAT.forbidden_ids(tokenizer)),
        seed=0,
    )
    return SamplingParams(**{**base, **kw})


def test_batched_sampling_logprobs_match_a_full_forward(tiny):
    tokenizer, model = tiny
    engine = TransformersEngine(model, tokenizer.pad_token_id)
    prompts = [TINY_FORMAT.prompt("What is " + "7" * n + "?") for n in range(1, 6)]
    requests = [GenRequest(f"s{i}", tokenizer.encode(p, add_special_tokens=False)) for i, p in enumerate(prompts)]
    params = _params(tokenizer, temperature=0.7)
    outputs = engine.generate(requests, params)
    for req, out in zip(requests, outputs, strict=True):
        ref = reference_logprobs(model, req.token_ids, out.token_ids, params.forbidden_ids, 0.7)
        assert max(abs(a - b) for a, b in zip(ref, out.logprobs, strict=True)) < 1e-4


class CountingModel(torch.nn.Module):
    """Wraps a model and counts the tokens fed to it."""

    def __init__(self, model):
        super().__init__()
        self.inner = model
        self.fed = 0

    def forward(self, input_ids, attention_mask, **kwargs):
        self.fed += int(attention_mask[:, -input_ids.shape[1] :].sum())
        return self.inner(input_ids=input_ids, attention_mask=attention_mask, **kwargs)


def test_second_turn_only_prefills_the_new_tokens(tiny):
    tokenizer, model = tiny
    counting = CountingModel(model)
    engine = TransformersEngine(counting, tokenizer.pad_token_id)
    params = _params(tokenizer, max_new_tokens=6)
    first = [
        GenRequest(f"e{i}", tokenizer.encode(TINY_FORMAT.prompt(f"Compute {i}{i} + 1."), add_special_tokens=False))
        for i in range(4)
    ]
    outs = engine.generate(first, params)
    observation = tokenizer.encode(
        TINY_FORMAT.observation("<tool_response>12</tool_response>"), add_special_tokens=False
    )
    second = [GenRequest(r.seq_id, r.token_ids + o.token_ids + observation) for r, o in zip(first, outs, strict=True)][
        1:3
    ]
    counting.fed = 0
    outs2 = engine.generate(second, params)
    first_decode = sum(len(o.token_ids) for o in outs2[:1])
    # fed: 1 leftover sampled token + the observation, then one token per decode step (no history re-read)
    assert counting.fed <= len(second) * (1 + len(observation) + params.max_new_tokens)
    assert first_decode > 0
    for req, out in zip(second, outs2, strict=True):
        ref = reference_logprobs(model, req.token_ids, out.token_ids, params.forbidden_ids)
        assert max(abs(a - b) for a, b in zip(ref, out.logprobs, strict=True)) < 1e-4


def test_sampler_never_emits_forbidden_markers(tiny):
    tokenizer, model = tiny
    forbidden = TINY_FORMAT.forbidden_ids(tokenizer)
    with torch.no_grad():  # make the forbidden markers the most likely tokens by far
        biased = build_tiny_model(tokenizer, seed=1)
        biased.lm_head.weight.data[forbidden] *= 0
        biased.model.embed_tokens.weight.data[forbidden] += 5.0
    engine = TransformersEngine(biased, tokenizer.pad_token_id)
    requests = [
        GenRequest(f"f{i}", tokenizer.encode(TINY_FORMAT.prompt("2+2?"), add_special_tokens=False)) for i in range(8)
    ]
    unconstrained = engine.generate(requests, _params(tokenizer, forbidden_ids=(), max_new_tokens=16))
    assert any(set(o.token_ids) & set(forbidden) for o in unconstrained)
    constrained = engine.generate(requests, _params(tokenizer, max_new_tokens=16))
    assert not any(set(o.token_ids) & set(forbidden) for o in constrained)


def test_weight_sync_replaces_the_policy(tiny):
    tokenizer, model = tiny
    engine = TransformersEngine(build_tiny_model(tokenizer, seed=5), tokenizer.pad_token_id)
    request = [GenRequest("w", tokenizer.encode(TINY_FORMAT.prompt("9*9?"), add_special_tokens=False))]
    engine.update_weights(model.state_dict(), version=7)
    out = engine.generate(request, _params(tokenizer, greedy=True))[0]
    assert engine.version == 7
    ref = reference_logprobs(model, request[0].token_ids, out.token_ids, TINY_FORMAT.forbidden_ids(tokenizer))
    assert max(abs(a - b) for a, b in zip(ref, out.logprobs, strict=True)) < 1e-4
