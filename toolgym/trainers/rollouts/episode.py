"""An episode as one token sequence: prompt, model turns (trainable) and env observations (masked)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolgym.trainers.engines.base import GenOutput
from toolgym.trainers.rollouts.format import ChatFormat, Span, classify_turn


@dataclass
class Episode:
    """The token-level record of one multi-turn episode (token-in/token-out: ids exactly as sampled)."""

    seq_id: str
    group_id: int
    seed: int
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turn_idx: list[int] = field(default_factory=list)
    span_type: list[int] = field(default_factory=list)
    prompt_len: int = 0
    prompt_text: str = ""
    actions: list[str] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    finish_reason: str = ""
    policy_version: int = 0
    task_id: str | None = None
    path: str = "tools_on"
    """"tools_off" when the episode was reset with {"tools": "none"} (EAPO / AKBE tool-free rollouts)"""
    prompt_prefix: str = ""
    """text a rollout strategy put before the task (e.g. ToolExpander's demonstration); part of prompt_text"""
    observations: list[str] = field(default_factory=list)
    states: list[dict[str, Any]] = field(default_factory=list)
    """env snapshots (`get_state()`) before each step, recorded only when forks need them"""
    parent_seq_id: str | None = None
    """seq_id of the episode this one was forked from"""
    branch_point: int = -1
    """token index where a fork's own (trainable) tokens start; -1: not a fork"""
    gold: dict[str, Any] | None = None
    """the task's gold {"actions": [...], "answer": ...} (local envs only: a server does not reveal it)"""
    labels: dict[str, float] = field(default_factory=dict)
    """per-episode values a rollout strategy attached (e.g. ELPO's critical turn), kept as reward components"""
    role: str | None = None
    """"planner" or "worker" in a planner-worker env (a worker sub-episode's parent is its planner); else None"""

    @property
    def reward(self) -> float:
        """Return of the episode (sum of step rewards)."""
        return float(sum(self.rewards))

    @property
    def num_turns(self) -> int:
        """Assistant turns taken."""
        return len(self.actions)

    @property
    def done(self) -> bool:
        """Whether the episode has ended."""
        return self.terminated or self.truncated

    @property
    def reward_components(self) -> dict[str, float]:
        """Reward components summed over the episode's steps."""
        total: dict[str, float] = {}
        for info in self.infos:
            for name, value in (info.get("reward_components") or {}).items():
                total[name] = total.get(name, 0.0) + float(value)
        return {**total, **self.labels}

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Every parsed tool call of the episode, with its turn."""
        calls = []
        for turn, info in enumerate(self.infos):
            calls.extend({**call, "turn": turn} for call in info.get("tool_calls") or [])
        return calls

    @property
    def num_model_tokens(self) -> int:
        """Tokens the policy generated."""
        return sum(self.loss_mask)


class EpisodeBuilder:
    """Appends prompt, model and observation tokens to an `Episode` as the episode runs."""

    def __init__(self, episode: Episode, tokenizer: Any, fmt: ChatFormat, max_tokens: int) -> None:
        self.episode = episode
        self.tokenizer = tokenizer
        self.fmt = fmt
        self.end_id = fmt.end_id(tokenizer)
        self.max_tokens = max_tokens

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _append_env(self, ids: list[int], span: Span) -> None:
        ep = self.episode
        ep.token_ids += ids
        ep.loss_mask += [0] * len(ids)
        ep.logprobs += [0.0] * len(ids)
        ep.turn_idx += [-1] * len(ids)
        ep.span_type += [int(span)] * len(ids)

    def start(self, observation: str) -> None:
        """Record the prompt built from the reset observation."""
        self.episode.prompt_text = observation
        self._append_env(self._encode(self.fmt.prompt(observation)), Span.PROMPT)
        self.episode.prompt_len = len(self.episode.token_ids)

    def add_model_turn(self, out: GenOutput) -> str:
        """Record the sampled tokens verbatim (mask 1) and return the action text sent to the env."""
        ep = self.episode
        turn = len(ep.actions)
        pieces = [self.tokenizer.decode([t], skip_special_tokens=False) for t in out.token_ids]
        ep.token_ids += out.token_ids
        ep.loss_mask += [1] * len(out.token_ids)
        ep.logprobs += list(out.logprobs)
        ep.turn_idx += [turn] * len(out.token_ids)
        ep.span_type += [int(s) for s in classify_turn(pieces)]
        body = out.token_ids[:-1] if out.token_ids and out.token_ids[-1] == self.end_id else out.token_ids
        action = self.tokenizer.decode(body, skip_special_tokens=False)
        ep.actions.append(action)
        return action

    def end(self, reward: float, info: dict[str, Any], *, answered: bool) -> None:
        """End the episode after its last action without an observation (a worker sub-episode handing back)."""
        self.add_env_step("", reward, answered, not answered, info)

    def add_env_step(
        self, observation: str, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]
    ) -> None:
        """Record the env's answer; append its observation tokens (mask 0) unless the episode ended."""
        ep = self.episode
        ep.rewards.append(float(reward))
        ep.infos.append(info)
        ep.observations.append(observation)
        ep.terminated, ep.truncated = bool(terminated), bool(truncated)
        if ep.done:
            ep.finish_reason = "terminated" if terminated else "truncated"
            return
        ids = self._encode(self.fmt.observation(observation))
        if len(ep.token_ids) + len(ids) >= self.max_tokens:
            ep.truncated, ep.finish_reason = True, "max_tokens"
            return
        self._append_env(ids, Span.OBS)
