"""Episodes as token sequences: masks, spans, turns, logprobs, infos, and token-in/token-out."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from toolgym.trainers.batch import SpanType  # noqa: E402
from toolgym.trainers.engines.base import GenOutput, GenRequest, SamplingParams  # noqa: E402
from toolgym.trainers.engines.hf import TransformersEngine  # noqa: E402
from toolgym.trainers.learner import token_logprobs  # noqa: E402
from toolgym.trainers.rollouts.collector import EpisodeSpec, RolloutCollector  # noqa: E402
from toolgym.trainers.rollouts.envs import LocalEnvPool  # noqa: E402
from toolgym.trainers.rollouts.format import classify_turn  # noqa: E402
from toolgym.trainers.rollouts.to_batch import episodes_to_batch  # noqa: E402
from toolgym.trainers.tiny import TINY_FORMAT  # noqa: E402

ENV = "toolgym/Calculator-v0"


class ScriptedEngine:
    """Returns pre-set token ids per turn (what a model "sampled"), with made-up logprobs."""

    def __init__(self, turns: list[list[int]]) -> None:
        self.turns = turns
        self.version = 3
        self.calls: list[list[GenRequest]] = []

    def generate(self, requests: list[GenRequest], params: SamplingParams) -> list[GenOutput]:
        turn = len(self.calls)
        self.calls.append(requests)
        ids = self.turns[turn]
        return [GenOutput(list(ids), [-0.5 - 0.01 * k for k in range(len(ids))]) for _ in requests]

    def release(self, seq_ids) -> None:
        pass

    def update_weights(self, state_dict, version) -> None:
        pass


def char_ids(tokenizer, text: str) -> list[int]:
    """One token per character, even where the tokenizer has a multi-character token."""
    return [tokenizer.convert_tokens_to_ids(ch) for ch in text]


def _solve(tokenizer, seed: int) -> tuple[str, str]:
    import gymnasium as gym

    env = gym.make(ENV)
    env.reset(seed=seed)
    call, answer = env.unwrapped.task.gold_actions
    return call, answer


def test_episode_record_masks_spans_turns_and_infos(tiny):
    tokenizer, _ = tiny
    end = TINY_FORMAT.end_id(tokenizer)
    call, answer = _solve(tokenizer, 11)
    call_ids = tokenizer.encode(call, add_special_tokens=False) + [end]
    answer_ids = tokenizer.encode(answer, add_special_tokens=False) + [end]
    engine = ScriptedEngine([call_ids, answer_ids])
    collector = RolloutCollector(engine, tokenizer, TINY_FORMAT, LocalEnvPool(ENV))
    episodes = collector.collect([EpisodeSpec(seed=11, group_id=4)] * 2, collector.sampling(1.0, 64))
    ep = episodes[0]
    assert ep.reward == 1.0 and ep.terminated and ep.num_turns == 2 and ep.group_id == 4
    assert ep.policy_version == 3
    n = len(ep.token_ids)
    assert len(ep.loss_mask) == len(ep.logprobs) == len(ep.turn_idx) == len(ep.span_type) == n
    model_positions = [i for i in range(n) if ep.loss_mask[i]]
    assert [ep.token_ids[i] for i in model_positions] == call_ids + answer_ids
    assert [ep.turn_idx[i] for i in model_positions] == [0] * len(call_ids) + [1] * len(answer_ids)
    assert all(ep.logprobs[i] == 0.0 and ep.turn_idx[i] == -1 for i in range(n) if not ep.loss_mask[i])
    spans = [SpanType(s) for s in ep.span_type]
    assert spans[: ep.prompt_len] == [SpanType.PROMPT] * ep.prompt_len
    obs = [i for i in range(n) if spans[i] == SpanType.OBS]
    assert obs and all(ep.loss_mask[i] == 0 for i in obs)
    obs_text = tokenizer.decode([ep.token_ids[i] for i in obs])
    assert "<tool_response>" in obs_text and ep.infos[0]["tool_calls"][0]["result"] in obs_text
    assert spans[model_positions[0]] == SpanType.TOOL_CALL
    assert SpanType.ANSWER in [spans[i] for i in model_positions]
    assert len(ep.infos) == 2 and ep.infos[1]["reward_components"]["success"] == 1.0
    # the second turn's request is the first turn's context plus the observation: history is never rebuilt
    first, second = engine.calls
    assert second[0].token_ids[: len(first[0].token_ids)] == first[0].token_ids


def test_generated_tokens_are_kept_as_generated_not_retokenized(tiny):
    tokenizer, _ = tiny
    end = TINY_FORMAT.end_id(tokenizer)
    call, answer = _solve(tokenizer, 12)
    # the model spells the markup one character at a time: decode→encode would merge them into markup tokens
    call_ids = char_ids(tokenizer, call) + [end]
    answer_ids = char_ids(tokenizer, answer) + [end]
    text = tokenizer.decode(call_ids[:-1])
    assert text == call
    assert tokenizer.encode(text, add_special_tokens=False) != call_ids[:-1]  # re-tokenizing differs
    engine = ScriptedEngine([call_ids, answer_ids])
    collector = RolloutCollector(engine, tokenizer, TINY_FORMAT, LocalEnvPool(ENV))
    ep = collector.collect([EpisodeSpec(seed=12, group_id=0)], collector.sampling(1.0, 64))[0]
    generated = [t for t, m in zip(ep.token_ids, ep.loss_mask, strict=True) if m]
    assert generated == call_ids + answer_ids  # our record keeps the sampled ids
    assert ep.reward == 1.0  # and the env got the same text


def test_classify_turn_marks_tool_call_and_answer_spans():
    pieces = ["think", "<tool_call>", "{x}", "</tool_call>", " ", "<answer>", "4", "</answer>"]
    spans = classify_turn(pieces)
    assert spans == [
        SpanType.REASON,
        SpanType.TOOL_CALL,
        SpanType.TOOL_CALL,
        SpanType.TOOL_CALL,
        SpanType.REASON,
        SpanType.ANSWER,
        SpanType.ANSWER,
        SpanType.ANSWER,
    ]


def test_batch_behaviour_logprobs_match_the_learner(tiny):
    tokenizer, model = tiny
    engine = TransformersEngine(model, tokenizer.pad_token_id)
    collector = RolloutCollector(engine, tokenizer, TINY_FORMAT, LocalEnvPool(ENV, {"max_turns": 2}), max_tokens=200)
    specs = [EpisodeSpec(seed=s, group_id=s) for s in (1, 1, 2, 2)]
    episodes = collector.collect(specs, collector.sampling(0.7, 10, seed=3))
    batch = episodes_to_batch(episodes, tokenizer.pad_token_id)
    b, t = batch.input_ids.shape
    assert b == 4 and t == max(len(ep.token_ids) for ep in episodes)
    assert batch.group_id.tolist() == [1, 1, 2, 2]
    assert batch.turn_idx.dtype == torch.int16 and batch.span_type.dtype == torch.int8
    assert int(batch.loss_mask[:, 0].sum()) == 0
    forbidden = tuple(TINY_FORMAT.forbidden_ids(tokenizer))
    with torch.no_grad():
        logp, _ = token_logprobs(model, batch, temperature=0.7, forbidden_ids=forbidden)
        unmasked, _ = token_logprobs(model, batch, temperature=0.7)
    mask = batch.loss_mask.bool()
    # the learner scores exactly the distribution the engine sampled from (π_θ = μ before any update)
    assert torch.allclose(logp[mask], batch.rollout_logprobs[mask], atol=1e-4)
    assert not torch.allclose(unmasked[mask], batch.rollout_logprobs[mask], atol=1e-3)


def test_batch_reward_can_be_one_component(tiny):
    tokenizer, _ = tiny
    end = TINY_FORMAT.end_id(tokenizer)
    bad_call = tokenizer.encode('<tool_call>{"name": "nope", "arguments": {}}</tool_call>', add_special_tokens=False)
    engine = ScriptedEngine(
        [bad_call + [end], tokenizer.encode("<answer>1</answer>", add_special_tokens=False) + [end]]
    )
    collector = RolloutCollector(engine, tokenizer, TINY_FORMAT, LocalEnvPool(ENV))
    episodes = collector.collect([EpisodeSpec(seed=3, group_id=0)], collector.sampling(1.0, 64))
    assert episodes[0].reward < 0  # the env's invalid-call shaping
    full = episodes_to_batch(episodes, tokenizer.pad_token_id)
    success_only = episodes_to_batch(episodes, tokenizer.pad_token_id, reward_key="success")
    assert abs(float(full.reward[0]) - episodes[0].reward) < 1e-6 and float(success_only.reward[0]) == 0.0
    assert set(full.reward_components) >= {"success"}
