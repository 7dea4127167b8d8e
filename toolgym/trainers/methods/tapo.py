"""TAPO (2510.07038): strict XML-format reward on the whole trace, optimized with DAPO.

Evidence [CODE] Goer17/TAPO `verl/utils/reward_score/tool_dapo.py` (`check_format`,
`_check_score`, `compute_score`) and `recipe/tapo/examples/tapo_single_node.sh`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from toolgym.trainers import rewards
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch

FORMAT_PENALTY = -1.0  # invalid format [CODE]
ACC_THRESHOLD = 0.9  # acc = score > 0.9 [CODE]
NUMBER_WORDS = {
    w: str(i + 1) for i, w in enumerate("one two three four five six seven eight nine ten eleven twelve".split())
}
_BLOCK = re.compile(r"\s*<(\w+)>(.*?)</\1>\s*", re.DOTALL)


def check_format(text: str, tools: Sequence[str] = ("search", "code")) -> dict[str, Any] | None:
    """The trace must be only `<tag>…</tag>` blocks (think, response, answer, tools), ending
    with answer. Returns {"tool_call": {tool: count}, "answer": str} or None when invalid."""
    text = text.strip()
    allowed = {"think", "response", "answer", *tools}
    counts = {t: 0 for t in tools}
    tags: list[str] = []
    answer = None
    pos = 0
    while pos < len(text):
        m = _BLOCK.match(text, pos)
        if m is None or m.group(1).lower() not in allowed:
            return None
        tag = m.group(1).lower()
        if tag == "answer":
            answer = m.group(2).strip()
        if tag in counts:
            counts[tag] += 1
        tags.append(tag)
        pos = m.end()
    if not tags or tags[-1] != "answer":
        return None
    return {"tool_call": counts, "answer": answer}


def normalize(answer: str) -> str:
    """Lower case, number words to digits, thousands separators removed."""
    a = answer.strip().lower()
    a = NUMBER_WORDS.get(a, a)
    if a.replace(",", "").isdigit():
        a = a.replace(",", "")
    return a.strip()


def levenshtein(a: str, b: str) -> int:
    """Edit distance."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _number(s: str) -> complex | None:
    try:
        return complex(s)
    except ValueError:
        return None


def answer_score(pred: str, gold: str, mode: str = "exact") -> float:
    """Correctness in [0, 1] by data source [CODE _check_score].

    exact: normalized equality; fuzzy (QA): 1 if gold ⊂ pred else 1 − edit/len when < 0.5;
    numeric_abs: |pred − gold| < 1e-3; numeric_rel: relative error < 5% (non-numeric chars dropped).
    """
    p, g = normalize(pred), normalize(gold)
    if mode == "exact":
        return float(p == g)
    if mode == "fuzzy":
        if g in p:
            return 1.0
        ratio = levenshtein(p, g) / max(len(p), len(g), 1)
        return 1.0 - ratio if ratio < 0.5 else 0.0
    if mode == "numeric_rel":
        p = "".join(ch for ch in p if ch.isdigit() or ch in "+-.")
    pn, gn = _number(p), _number(g)
    if pn is None or gn is None:
        return 0.0
    if mode == "numeric_abs":
        return float(abs(pn - gn) < 1e-3)
    if mode == "numeric_rel":
        return float(abs(pn - gn) / max(abs(gn), 1e-12) < 0.05)
    raise ValueError(f"unknown answer mode {mode!r}")


def tapo_reward(text: str, gold: str | Sequence[str], mode: str = "exact") -> tuple[float, bool]:
    """(reward, acc): −1 on a format error, else the best score over gold answers."""
    parsed = check_format(text)
    if parsed is None:
        return FORMAT_PENALTY, False
    golds = [gold] if isinstance(gold, str) else list(gold)
    score = max(answer_score(parsed["answer"] or "", g, mode) for g in golds)
    return score, score > ACC_THRESHOLD


def gold_answer(gold: Any) -> Any:
    """The answer(s) in a gold entry: a str, a list, or a dict's "answer"/"target"."""
    if isinstance(gold, dict):
        return gold.get("answer", gold.get("target", ""))
    return gold


class TapoReward:
    """Sets reward and `correct` from `response_text` and `gold` (answer or list of answers)."""

    requires: ClassVar[frozenset[str]] = frozenset({"response_text", "gold"})

    def __init__(self, mode: str = "exact") -> None:
        self.mode = mode

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward [B] <- TAPO score; correct [B] <- score > 0.9."""
        if batch.response_text is None or batch.gold is None:
            raise ValueError("TAPO rewards need batch.response_text and batch.gold")
        scored = [
            tapo_reward(t, gold_answer(g), self.mode) for t, g in zip(batch.response_text, batch.gold, strict=True)
        ]
        reward = torch.tensor([s for s, _ in scored], dtype=torch.float32, device=batch.reward.device)
        correct = torch.tensor([a for _, a in scored], device=batch.reward.device)
        return batch.replace(
            reward=reward, correct=correct, reward_components={**batch.reward_components, "tapo": reward}
        )


rewards.REGISTRY.register("tapo_reward", TapoReward)

register_preset(
    MethodPreset(
        name="tapo",
        advantage=PluginRef("grpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.28, "clip_c": 10.0}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(
            PluginRef("tapo_reward", {"mode": "exact"}),
            PluginRef("overlong_shaping", {"max_len": 8192, "buffer_len": 1024, "penalty_factor": 1.0}),
        ),
        group_filter=PluginRef("dynamic_sampling", {"metric": "acc", "max_num_gen_batches": 10}),
        rollout=RolloutSpec("group", 4, {"max_turns": 4}),
        hparams={"lr": 1e-6},
        paper="TAPO: Tool-Augmented Policy Optimization",
        arxiv="2510.07038",
        evidence="[CODE] reward (format −1, EM/numeric/fuzzy), DAPO config (0.2/0.28, c 10, "
        "token-mean, no KL, buffer 1024, dynamic sampling ≤10 gen batches, n 4, 4 turns); "
        "max_len 8192 and lr assumed [PRIOR]",
        tier="A",
    )
)
