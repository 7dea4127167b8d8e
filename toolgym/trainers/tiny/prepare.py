"""Build the tiny policy for a run: tokenizer + random-init model, SFT warm start, saved to a folder."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from toolgym.trainers.config import TrainConfig
from toolgym.trainers.tiny.sft import SFTResult, warm_start

logger = logging.getLogger(__name__)
VALIDATION_SEED_OFFSET = 50_000_000


@dataclass
class PreparedPolicy:
    """Where the warm-started model lies, and how its warm start went."""

    path: Path
    sft: SFTResult | None
    seconds: float


def prepare_tiny_policy(cfg: TrainConfig, out_dir: str | Path) -> PreparedPolicy:
    """Build (or reuse, if `out_dir` holds one) the tiny model, warm-started by SFT, saved with `save_pretrained`."""
    import torch

    from toolgym.trainers.engines.hf import TransformersEngine
    from toolgym.trainers.learner import Learner, LearnerConfig
    from toolgym.trainers.rollouts.collector import EpisodeSpec, RolloutCollector
    from toolgym.trainers.rollouts.envs import LocalEnvPool
    from toolgym.trainers.rollouts.stats import success_rate
    from toolgym.trainers.tiny import TINY_FORMAT, build_tiny_model, build_tokenizer, save_tiny

    out = Path(out_dir)
    if (out / "config.json").exists():
        return PreparedPolicy(out, None, 0.0)
    start = time.perf_counter()
    torch.set_num_threads(cfg.threads)
    tokenizer = build_tokenizer()
    model = build_tiny_model(tokenizer, seed=cfg.model.seed)
    sft = cfg.model.sft
    result = None
    if sft.enabled:
        learner = Learner(model, None, LearnerConfig(lr=sft.lr))
        engine = TransformersEngine(model, tokenizer.pad_token_id)
        collector = RolloutCollector(
            engine,
            tokenizer,
            TINY_FORMAT,
            LocalEnvPool(cfg.env.id, cfg.env.kwargs),
            max_tokens=cfg.rollout.max_tokens,
            name="sft-val",
        )
        specs = [EpisodeSpec(seed=VALIDATION_SEED_OFFSET + i, group_id=i) for i in range(sft.validation_tasks)]
        params = collector.sampling(1.0, cfg.eval.max_new_tokens, greedy=True)

        def validate() -> float:
            engine.update_weights(model.state_dict(), engine.version + 1)  # same tensors; drops the KV cache
            return success_rate(collector.collect(specs, params))

        result = warm_start(
            learner,
            tokenizer,
            TINY_FORMAT,
            validate,
            env_id=cfg.env.id,
            env_kwargs=cfg.env.kwargs,
            max_tokens=cfg.rollout.max_tokens,
            batch_size=sft.batch_size,
            target=sft.target_success,
            check_every=sft.check_every,
            max_steps=sft.max_steps,
            check_below_loss=sft.check_below_loss,
            seed=cfg.seed,
        )
    save_tiny(model, tokenizer, out)
    return PreparedPolicy(out, result, time.perf_counter() - start)
