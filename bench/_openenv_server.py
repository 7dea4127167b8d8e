"""OpenEnv's server (`openenv` from PyPI) hosting the same toolgym calculator env; run from `.venv-openenv`."""

from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym
import uvicorn
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

import toolgym  # noqa: F401 - registers toolgym/Calculator-v0


class TextAction(Action):
    """The assistant's raw output."""

    text: str


class TextObservation(Observation):
    """The env's text answer."""

    text: str = ""


class CalculatorEnvironment(Environment):
    """toolgym/Calculator-v0 behind OpenEnv's reset/step/state contract."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self.env = gym.make("toolgym/Calculator-v0")
        self.steps = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> TextObservation:
        observation, _ = self.env.reset(seed=seed)
        self.steps = 0
        return TextObservation(text=observation, done=False, reward=0.0)

    def step(self, action: TextAction, timeout_s: float | None = None, **kwargs: Any) -> TextObservation:  # type: ignore[override]
        observation, reward, terminated, truncated, _ = self.env.step(action.text)
        self.steps += 1
        return TextObservation(text=observation, done=terminated or truncated, reward=reward)

    @property
    def state(self) -> State:
        return State(step_count=self.steps)


app = create_fastapi_app(CalculatorEnvironment, TextAction, TextObservation, max_concurrent_envs=1024)

if __name__ == "__main__":
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="warning",
        access_log=False,
        ws_per_message_deflate=False,
    )
