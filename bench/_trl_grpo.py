"""TRL GRPOTrainer side of `bench/trainer.py` (run in the bench venv that has TRL; prints one JSON line).

Same tiny model and task as toolgym's side: the tokenizer gets a chat template that renders exactly
toolgym's tiny chat format, and a response template so TRL parses `<tool_call>` blocks; the
`calculator` tool evaluates the expression like toolgym/Calculator-v0's tool.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time

import torch

TINY_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}<|user|>{{ m.content }}"
    "{%- elif m.role == 'assistant' -%}<|assistant|>{{ m.content if m.content else '' }}"
    "{%- for tc in (m.tool_calls or []) -%}"
    '<tool_call>{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}</tool_call>'
    "{%- endfor -%}<|eos|>"
    "{%- elif m.role == 'tool' -%}<|tool|><tool_response>{{ m.content }}</tool_response>"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"
)
RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|assistant|>",
    "fields": {
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|eos\|>\s*", "content": "text"},
    },
}


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: The expression, e.g. "(12 + 7) * 3 - 5".
    """
    from toolgym.envs.calculator import evaluate_expression

    value = evaluate_expression(expression)
    return str(int(value)) if float(value).is_integer() else str(value)


def answer_reward(completions: list, answer: list, **_: object) -> list[float]:
    """1.0 when the last assistant message holds `<answer>` with the exact value."""
    rewards = []
    for completion, gold in zip(completions, answer, strict=True):
        text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
        match = re.search(r"<answer>(.*?)</answer>", text or "")
        rewards.append(1.0 if match and match.group(1).strip() == gold else 0.0)
    return rewards


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    from toolgym.envs.calculator import make_calculator_task

    tokenizer = PreTrainedTokenizerFast.from_pretrained(args.model)
    tokenizer.chat_template = TINY_TEMPLATE
    tokenizer.response_template = RESPONSE_TEMPLATE
    model = AutoModelForCausalLM.from_pretrained(args.model)
    tasks = [make_calculator_task(100_000_000 + i) for i in range(args.prompts * (args.steps + 2))]
    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": t.instruction}], "answer": t.answer} for t in tasks]
    )
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=args.prompts * args.group,
            num_generations=args.group,
            max_completion_length=4 * args.max_new_tokens,
            max_steps=args.steps,
            temperature=0.7,
            learning_rate=1e-4,
            beta=0.0,
            logging_steps=1,
            report_to="none",
            use_cpu=True,
            bf16=False,
            gradient_checkpointing=False,
            save_strategy="no",
            max_tool_calling_iterations=3,
            dataloader_num_workers=0,
            seed=0,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=answer_reward,
            args=config,
            train_dataset=data,
            processing_class=tokenizer,
            tools=[calculator],
        )
        timings = _instrument(trainer)
        trainer.train()
    print(json.dumps(_summary(timings)))
    return 0


def _instrument(trainer: object) -> dict[str, list[float]]:
    """Time `_generate` (the rollout) and each optimizer step; count model-generated tokens."""
    from transformers import TrainerCallback

    timings: dict[str, list[float]] = {"gen_s": [], "gen_tokens": [], "episodes": [], "step_s": []}
    original = trainer._generate  # type: ignore[attr-defined]

    def timed(prompts: list) -> tuple:
        start = time.perf_counter()
        out = original(prompts)
        timings["gen_s"].append(time.perf_counter() - start)
        completion_ids, tool_mask = out[1], out[2]
        masks = tool_mask if tool_mask is not None else [[1] * len(c) for c in completion_ids]
        timings["gen_tokens"].append(float(sum(sum(m) for m in masks)))
        timings["episodes"].append(float(len(completion_ids)))
        return out

    trainer._generate = timed  # type: ignore[attr-defined]

    class StepTimer(TrainerCallback):
        def on_step_begin(self, *a: object, **k: object) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, *a: object, **k: object) -> None:
            timings["step_s"].append(time.perf_counter() - self.start)

    trainer.add_callback(StepTimer())  # type: ignore[attr-defined]
    return timings


def _summary(t: dict[str, list[float]]) -> dict[str, float]:
    skip = 1 if len(t["gen_s"]) > 2 else 0  # first step warms up
    gen_s, tokens = sum(t["gen_s"][skip:]), sum(t["gen_tokens"][skip:])
    steps = t["step_s"][skip:]
    learner = [s - g for s, g in zip(steps, t["gen_s"][skip:], strict=False)]
    return {
        "rollout_tokens_per_s": tokens / gen_s if gen_s else 0.0,
        "episodes_per_s": sum(t["episodes"][skip:]) / gen_s if gen_s else 0.0,
        "learner_step_s": sum(learner) / len(learner) if learner else 0.0,
        "step_s": sum(steps) / len(steps) if steps else 0.0,
        "tokens_per_episode": tokens / max(sum(t["episodes"][skip:]), 1),
    }


if __name__ == "__main__":
    sys.exit(main())
