"""AutoTIR (2507.21836): a hybrid reward that punishes wrong tool use and rewards good format.

Evidence [CODE] weiyifan1023/AutoTIR `src/verl/utils/reward_score/auto_tir.py::compute_score`
(`validate_format`, `get_f1_score`). Optimizer GRPO with a KL loss.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from toolgym.trainers import rewards
from toolgym.trainers.algorithms.preset import (
    MethodPreset,
    PluginRef,
    RegularizerRef,
    RolloutSpec,
    register_preset,
)
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.methods.matchtir import normalize_answer, token_f1

TOOL_MISUSE = -0.1  # a tool on a no-tool task, or the wrong tool's tags [CODE]
GOOD_FORMAT_WRONG = 0.1  # wrong answer, good format [CODE]
_TAGS = {"search": ("<search>", "</search>"), "code": ("<code>", "</code>")}


def _blocks_ordered(text: str, tool: str) -> tuple[bool, str]:
    """Every <tool>…</tool> is followed by <result>…</result>, and at least one exists."""
    start_tag, end_tag = _TAGS[tool]
    other = "<code>" if tool == "search" else "<search>"
    if other in text:
        return False, "tool misuse"
    pos, found = 0, False
    while (start := text.find(start_tag, pos)) != -1:
        found = True
        end = text.find(end_tag, start)
        r_start = text.find("<result>", start)
        r_end = text.find("</result>", r_start) if r_start != -1 else -1
        if -1 in (end, r_start, r_end) or not start < end < r_start < r_end:
            return False, "tool/result blocks out of order"
        pos = r_end
    return (True, "ok") if found else (False, f"no <{tool}> call")


def _no_tool_ok(text: str) -> tuple[bool, str]:
    tags = ("<search>", "</search>", "<code>", "</code>", "<result>", "</result>")
    return (False, "tool misuse") if any(t in text for t in tags) else (True, "ok")


def validate_format(text: str, task_type: str = "general") -> tuple[bool, str]:
    """AutoTIR's format check: paired think tags, one answer, tool blocks for the task type,
    and a \\boxed{} answer. task_type ∈ {code, search, general (no tool)}."""
    if text.count("<think>") != text.count("</think>") or text.count("<think>") == 0:
        return False, "think tags"
    if text.count("<answer>") != 1 or text.count("</answer>") != 1:
        return False, "answer tags"
    ok, why = _blocks_ordered(text, task_type) if task_type in _TAGS else _no_tool_ok(text)
    if not ok:
        return False, why
    a, b = text.find("<answer>"), text.find("</answer>")
    if a > b or "\\boxed{" not in text[a:b]:
        return False, "no boxed answer"
    return True, "ok"


def boxed_content(text: str) -> str | None:
    """Content of the last \\boxed{…} (balanced braces), or None."""
    i = text.rfind("\\boxed{")
    if i < 0:
        return None
    depth, start = 0, i + len("\\boxed")
    for j in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[start + 1 : j]
    return None


def autotir_reward(text: str, gold: str | list[str], task_type: str = "general", truncated: bool = False) -> float:
    """−0.1 tool misuse; 0 other format errors, overlong, no boxed answer; F1 if > 0; else 0.1.

    The IFEval verifier branch of the official code is not included: F1 is used for all tasks.
    """
    ok, why = validate_format(text, task_type)
    if not ok:
        return TOOL_MISUSE if why == "tool misuse" else 0.0
    if truncated:
        return 0.0
    a, b = text.find("<answer>"), text.find("</answer>")
    answer = boxed_content(text[a:b])
    if answer is None:
        return 0.0
    golds = [gold] if isinstance(gold, str) else gold
    f1 = max(_f1_with_yes_no(answer, g) for g in golds)
    return f1 if f1 > 0 else GOOD_FORMAT_WRONG


def _f1_with_yes_no(pred: str, gold: str) -> float:
    # yes/no/noanswer must match exactly [CODE get_f1_score]
    p, g = normalize_answer(pred), normalize_answer(gold)
    if (p in ("yes", "no", "noanswer") or g in ("yes", "no", "noanswer")) and p != g:
        return 0.0
    return token_f1(pred, gold)


def _task(gold: Any, default: str) -> str:
    return str(gold.get("task_type", default)) if isinstance(gold, dict) else default


def _answers(gold: Any) -> str | list[str]:
    answer = gold.get("answer", "") if isinstance(gold, dict) else gold
    return answer if isinstance(answer, list) else str(answer)


class AutoTirReward:
    """reward <- AutoTIR's hybrid reward from `response_text`, `gold` and `truncated`.

    gold[i] may be a str / list of answers or {"answer": …, "task_type": "code"|"search"|"general"}.
    """

    requires: ClassVar[frozenset[str]] = frozenset({"response_text", "gold"})

    def __init__(self, default_task_type: str = "general") -> None:
        self.default_task_type = default_task_type

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward [B] <- hybrid score."""
        if batch.response_text is None or batch.gold is None:
            raise ValueError("AutoTIR rewards need batch.response_text and batch.gold")
        trunc = batch.truncated.tolist() if batch.truncated is not None else [False] * batch.batch_size
        scores = [
            autotir_reward(t, _answers(g), _task(g, self.default_task_type), bool(tr))
            for t, g, tr in zip(batch.response_text, batch.gold, trunc, strict=True)
        ]
        reward = torch.tensor(scores, dtype=torch.float32, device=batch.reward.device)
        return batch.replace(reward=reward, reward_components={**batch.reward_components, "autotir": reward})


rewards.REGISTRY.register("autotir_reward", AutoTirReward)

register_preset(
    MethodPreset(
        name="autotir",
        advantage=PluginRef("grpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("autotir_reward"),),
        regularizers=(RegularizerRef("kl_k3", 0.001),),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="AutoTIR: Autonomous Tools Integrated Reasoning via RL",
        arxiv="2507.21836",
        evidence="[CODE] reward table (−0.1 / 0 / F1 / 0.1); GRPO with KL; n, clip, KL coef, lr [PRIOR]",
        tier="A",
    )
)
