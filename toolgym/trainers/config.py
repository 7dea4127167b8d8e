"""Training configuration: dataclasses with field docstrings, loaded from YAML with `key=value` overrides."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass
class SFTConfig:
    """Warm start of a tiny model by SFT on oracle trajectories."""

    enabled: bool = True
    """run the warm start when the model is built from scratch"""
    lr: float = 1e-3
    """AdamW learning rate of the warm start"""
    batch_size: int = 64
    """oracle episodes per SFT step"""
    target_success: float = 0.3
    """stop once greedy validation success reaches this"""
    check_every: int = 5
    """SFT steps between validation checks"""
    max_steps: int = 600
    """give up after this many steps"""
    validation_tasks: int = 128
    """validation episodes per check (seeds disjoint from eval and training)"""
    check_below_loss: float = 1.0
    """skip validation while the SFT loss is above this (nothing is solved yet)"""


@dataclass
class ModelConfig:
    """Which policy to train."""

    path: str | None = None
    """a local `save_pretrained` folder; None builds the tiny model (`toolgym.trainers.tiny`)"""
    format: str = "tiny"
    """chat format: "tiny" (the tiny tokenizer's markers) or "chatml" (<|im_start|>… for real models)"""
    seed: int = 0
    """seed of the random init"""
    sft: SFTConfig = field(default_factory=SFTConfig)
    """warm start (tiny model only)"""


@dataclass
class EnvConfig:
    """Which environment, and where it runs."""

    id: str = "toolgym/Calculator-v0"
    """registered env id"""
    server_url: str | None = None
    """toolgym server base URL (HTTP mode); None runs `gym.make` inside each rollout worker"""
    api_key: str | None = None
    """bearer key for the server, if it has keys"""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """env constructor kwargs"""


@dataclass
class RolloutConfig:
    """How episodes are sampled."""

    workers: int = 2
    """Ray rollout workers (each holds an engine and env clients)"""
    prompts_per_step: int = 16
    """groups per RL step"""
    group_size: int = 8
    """episodes per group (same task)"""
    temperature: float = 0.7
    """sampling temperature"""
    max_new_tokens: int = 48
    """tokens at most per assistant turn"""
    max_tokens: int = 512
    """tokens at most per episode (prompt + turns + observations)"""
    engine: str = "transformers"
    """"transformers" or "vllm\""""
    device: str = "cpu"
    """engine device"""
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    """extra engine arguments (e.g. vLLM's gpu_memory_utilization)"""
    reward_component: str | None = None
    """train on this reward component only (e.g. "success"); None: the env's full return"""
    off_policy_steps: int = 0
    """0: synchronous; 1: the next batch is sampled while the learner updates (one policy version behind)"""
    train_seed_offset: int = 100_000_000
    """training tasks come from reset seeds at or above this (disjoint from eval and validation)"""
    offline_episodes: int = 0
    """offline methods (StepTool): episodes sampled once from the starting policy, from which every step draws
    prompts_per_step × group_size; 0 means 4 × that"""
    prompt_pool: int = 0
    """tasks a prompt sampler (SPO, VSPO) chooses from: seeds train_seed_offset .. +prompt_pool-1; 0 draws fresh
    seeds every step (a method with a prompt sampler then uses a pool of 1024)"""


@dataclass
class AlgorithmConfig:
    """The RL method: a preset name and overrides (see `toolgym.trainers.methods`)."""

    name: str = "grpo"
    """method preset"""
    overrides: dict[str, Any] = field(default_factory=dict)
    """preset overrides, nested or dotted keys (e.g. {"loss.clip_high": 0.28})"""


@dataclass
class OptimConfig:
    """Learner settings."""

    lr: float = 1e-4
    """AdamW learning rate"""
    max_grad_norm: float = 1.0
    """gradient clipping (0 = off)"""
    micro_batch_size: int = 64
    """sequences per forward/backward"""
    drop_zero_advantage: bool = True
    """drop sequences whose advantages are all zero before the update"""
    recompute_old_logprobs: bool = False
    """recompute π_old with the learner instead of using the engine's behaviour log-probs"""
    device: str = "cpu"
    """learner device"""


@dataclass
class EvalConfig:
    """Greedy evaluation on a fixed task set."""

    tasks: int = 256
    """eval episodes (reset seeds 0..tasks-1)"""
    every: int = 0
    """RL steps between evaluations (0: only before and after RL)"""
    max_new_tokens: int = 48
    """tokens at most per assistant turn"""


@dataclass
class RayConfig:
    """Where the actors run."""

    address: str | None = None
    """join an existing cluster ("auto" or "ray://…"); None starts a local Ray"""
    num_cpus: int = 2
    """CPUs of a local Ray"""
    worker_cpus: float = 0.5
    """CPU reservation of each rollout worker"""
    learner_cpus: float = 0.5
    """CPU reservation of the learner"""
    worker_gpus: float = 0.0
    """GPU reservation of each rollout worker (vLLM on GPU)"""
    learner_gpus: float = 0.0
    """GPU reservation of the learner"""


@dataclass
class TrainConfig:
    """A whole training run (`toolgym train CONFIG`)."""

    name: str = "run"
    """run name: outputs go to `<output_dir>/<name>/`"""
    output_dir: str = "runs"
    """parent folder of runs"""
    seed: int = 0
    """seed of task sampling and of the samplers"""
    steps: int = 200
    """RL steps at most"""
    time_budget_s: float = 0.0
    """stop RL after this many seconds (0: no limit)"""
    total_budget_s: float = 0.0
    """wall-clock budget of the whole run, SFT and evaluations included: RL stops early enough for the
    final evaluation to finish inside it (0: no limit)"""
    checkpoint_every: int = 50
    """RL steps between checkpoints (0: only at the end)"""
    resume: bool = False
    """continue from the latest checkpoint of this run"""
    threads: int = 1
    """torch threads per process"""
    model: ModelConfig = field(default_factory=ModelConfig)
    """policy"""
    env: EnvConfig = field(default_factory=EnvConfig)
    """environment"""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """sampling"""
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    """RL method"""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """learner"""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """evaluation"""
    ray: RayConfig = field(default_factory=RayConfig)
    """Ray placement"""

    def __post_init__(self) -> None:
        if self.rollout.workers < 1:
            raise ValueError("rollout.workers must be at least 1")
        if self.rollout.prompts_per_step % self.rollout.workers:
            raise ValueError(
                f"rollout.prompts_per_step ({self.rollout.prompts_per_step}) must be divisible by "
                f"rollout.workers ({self.rollout.workers}): each worker runs whole groups"
            )
        if self.rollout.off_policy_steps not in (0, 1):
            raise ValueError("rollout.off_policy_steps must be 0 (synchronous) or 1 (one step overlap)")
        if self.model.format not in ("tiny", "chatml"):
            raise ValueError(f"model.format must be 'tiny' or 'chatml', got {self.model.format!r}")

    @property
    def run_dir(self) -> Path:
        """`<output_dir>/<name>`."""
        return Path(self.output_dir) / self.name


def _build(cls: type, data: Any, where: str) -> Any:
    """Construct dataclass `cls` from a mapping, rejecting unknown keys with their dotted path."""
    if not isinstance(data, dict):
        raise ValueError(f"{where or 'config'} must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"unknown config key(s) {', '.join(f'{where}{k}' for k in unknown)}; known: {sorted(names)}")
    kwargs = {}
    for key, value in data.items():
        hint = hints[key]
        kwargs[key] = (
            _build(hint, value, f"{where}{key}.")
            if dataclasses.is_dataclass(hint)
            else _coerce(hint, value, where + key)
        )
    return cls(**kwargs)


def _coerce(hint: Any, value: Any, where: str) -> Any:
    """Check a leaf value against its annotation (ints are accepted for floats)."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None and type(None) in options:
        return None
    for option in options:
        origin = typing.get_origin(option) or option
        if origin is float and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if origin is not float and isinstance(origin, type) and isinstance(value, origin):
            return value
    raise ValueError(f"config key {where} expects {hint}, got {value!r}")


def parse_override(text: str) -> tuple[list[str], Any]:
    """`"rollout.temperature=0.8"` -> (["rollout", "temperature"], 0.8); the value is parsed as YAML."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"override {text!r} must look like key.path=value")
    return key.strip().split("."), yaml.safe_load(raw) if raw.strip() else ""


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Set dotted keys in a nested mapping (algorithm.overrides takes free-form keys)."""
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"override {text!r}: {part} is not a section")
        node[path[-1]] = value
    return data


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig:
    """Read a YAML config (None: defaults) and apply `key=value` overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        loaded = yaml.safe_load(Path(path).read_text())
        data = loaded if isinstance(loaded, dict) else {}
    return _build(TrainConfig, apply_overrides(data, list(overrides or [])), "")


def to_dict(config: TrainConfig) -> dict[str, Any]:
    """The config as plain data (saved next to the run's outputs)."""
    return dataclasses.asdict(config)
