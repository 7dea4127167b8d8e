"""Every base and Tier A preset trains a tiny transformers model for one step on CPU."""

from __future__ import annotations

import math

import pytest
import torch

from toolgym.trainers.batch import Path, Role, RolloutBatch, ToolCallRecord, TurnReward, stable_key
from toolgym.trainers.methods import REGISTRY, build_algorithm
from toolgym.trainers.value_head import ValueHead, values_for_tokens

transformers = pytest.importorskip("transformers")

# prompt 0-2, turn 0 at 3-5, observation 6-7, turn 1 at 8-10, padding at 11
LOSS_MASK = [0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0]
TURN_IDX = [-1, -1, -1, 0, 0, 0, -1, -1, 1, 1, 1, -1]
TAPO_TEXT = "<think>a</think><search>q</search><response>r</response><answer>paris</answer>"
AUTOTIR_TEXT = "<think>a</think><search>q</search><result>r</result><answer>\\boxed{paris}</answer>"
PRESETS = [n for n in REGISTRY.names() if REGISTRY.get(n).tier in ("base", "A")]


def episode_batch() -> RolloutBatch:
    """Two prompts × two rollouts with everything any Tier A method reads."""
    b, t = 4, len(LOSS_MASK)
    gen = torch.Generator().manual_seed(0)
    attention = torch.ones(b, t, dtype=torch.long)
    attention[:, -1] = 0
    correct = torch.tensor([True, False, True, False])
    calls = [[ToolCallRecord(0, "search", {"q": "x"}, exec_ok=i % 2 == 0)] for i in range(b)]
    return RolloutBatch(
        input_ids=torch.randint(1, 32, (b, t), generator=gen),
        attention_mask=attention,
        loss_mask=torch.tensor([LOSS_MASK] * b),
        reward=correct.float(),
        group_id=torch.tensor([0, 0, 1, 1]),
        turn_idx=torch.tensor([TURN_IDX] * b),
        prompt_key=torch.tensor([stable_key("p0")] * 2 + [stable_key("p1")] * 2),
        correct=correct,
        truncated=torch.zeros(b, dtype=torch.bool),
        path=torch.tensor([Path.TOOLS_ON, Path.TOOLS_OFF] * 2),
        role=torch.full((b,), int(Role.PLANNER)),
        sample_id=torch.arange(b),
        parent_id=torch.full((b,), -1),
        resp_len=torch.tensor([8, 9, 8, 9]),
        reward_components={"acc": correct.float(), "fmt": torch.ones(b)},
        tool_calls=calls,
        turn_rewards=[[TurnReward(0, 0.0, {"contribution_to_final_answer": 0.5})] for _ in range(b)],
        gold=[{"calls": [{"name": "search", "arguments": {"q": "x"}}], "answer": "paris", "task_type": "search"}] * b,
        answers=["paris", "rome", "paris", "rome"],
        response_text=[TAPO_TEXT, AUTOTIR_TEXT] * 2,
    )


@pytest.fixture(scope="module")
def make_model():
    def build():
        torch.manual_seed(0)
        cfg = transformers.GPT2Config(
            vocab_size=32, n_positions=16, n_embd=16, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0
        )
        return transformers.GPT2LMHeadModel(cfg)

    return build


def forward(model, batch: RolloutBatch):
    """Aligned logprobs, entropy and last hidden states. -> [B, T], [B, T], [B, T, H]."""
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True)
    logp_all = torch.log_softmax(out.logits[:, :-1].float(), dim=-1)
    logp = logp_all.gather(2, batch.input_ids[:, 1:, None]).squeeze(2)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    pad = torch.nn.functional.pad
    return pad(logp, (1, 0)), pad(entropy, (1, 0)), out.hidden_states[-1]


def train_step(algo, model, head, batch: RolloutBatch):
    """The learner's sequence of Algorithm calls, once."""
    opt = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=1e-2)
    state = algo.init_state()
    batch, _ = algo.filter_groups(algo.transform_rewards(batch))
    with torch.no_grad():
        logp0, _, hidden = forward(model, batch)
    batch = batch.replace(old_logprobs=logp0, ref_logprobs=logp0 - 0.1 * batch.mask)
    if algo.needs_critic:
        batch = batch.replace(values=values_for_tokens(head(hidden)).detach())
    adv = algo.advantages(batch, state)
    logp, entropy, hidden = forward(model, batch)
    loss, metrics = algo.loss(batch, logp, adv, entropy=entropy, counts=algo.global_counts(batch, adv))
    if algo.needs_critic:
        loss = loss + algo.value_loss(values_for_tokens(head(hidden)), batch, adv)
    opt.zero_grad()
    loss.backward()
    opt.step()
    algo.update_state(batch, state, logprob_fn=lambda b: forward(model, b)[0].detach())
    return loss, metrics, state


DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")],
    ),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", PRESETS)
def test_preset_trains_tiny_model(name, device, make_model):
    model = make_model().to(device)
    head = ValueHead(model.config.n_embd).to(device)
    before = [p.detach().clone() for p in model.parameters()]
    loss, metrics, _ = train_step(build_algorithm(name), model, head, episode_batch().to(device))
    assert math.isfinite(loss.item()) and all(math.isfinite(v) for v in metrics.values())
    changed = sum(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
    assert changed > 0


def test_spo_state_after_a_step(make_model):
    model = make_model()
    _, _, state = train_step(build_algorithm("spo"), model, ValueHead(16), episode_batch())
    table = state["spo"]
    assert len(table) == 2 and all(v.response is not None for v in table.values())


def test_global_counts_make_micro_batches_sum_to_the_full_loss(make_model):
    algo = build_algorithm("akbe")
    model = make_model()
    batch = algo.transform_rewards(episode_batch())
    with torch.no_grad():
        logp, _, _ = forward(model, batch)
    batch = batch.replace(old_logprobs=logp - 0.05)
    adv = algo.advantages(batch, {})
    counts = algo.global_counts(batch, adv)
    full, _ = algo.loss(batch, logp, adv, counts=counts)
    parts = [algo.loss(batch.select(r), logp[r], adv.select(r), counts=counts)[0] for r in ([0, 1], [2, 3])]
    assert full.item() == pytest.approx(sum(p.item() for p in parts), abs=1e-6)
    assert full.item() == pytest.approx(algo.loss(batch, logp, adv)[0].item(), abs=1e-6)


def test_token_values_match_the_manual_alignment(make_model):
    from toolgym.trainers.value_head import token_values

    model, head = make_model().eval(), ValueHead(16)  # eval: no dropout
    torch.nn.init.normal_(head.linear.weight)
    batch = episode_batch()
    values = token_values(model, head, batch)
    _, _, hidden = forward(model, batch)
    expected = head(hidden)
    assert values.shape == batch.loss_mask.shape
    assert torch.allclose(values[:, 1:], expected[:, :-1]) and values[:, 0].abs().sum() == 0
