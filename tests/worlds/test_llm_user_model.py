"""An LLM user played by a real (tiny, locally built) transformers model through the simulator backends."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import pytest

import toolgym  # noqa: F401

pytest.importorskip("transformers", reason="needs the train extra")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulators" / "simulated"))

from simfakes import build_bigram_lm  # noqa: E402


@pytest.fixture(scope="module")
def yes_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama whose weights make greedy decoding answer every prompt with exactly "Yes"."""
    return build_bigram_lm(tmp_path_factory.mktemp("yes-lm"), {" ": "Y", "Y": "e", "e": "s"})


def test_model_user_confirms_and_its_replies_replay_from_the_cache(yes_lm: Path, tmp_path: Path) -> None:
    backend = {"kind": "transformers", "path": str(yes_lm), "max_new_tokens": 4}
    cache = str(tmp_path / "users.sqlite")

    def talk(mode: str) -> tuple[str, list[dict]]:
        env = gym.make("toolgym/Clinic-v0", user="llm", user_backend=backend, user_cache={"path": cache, "mode": mode})
        env.reset(seed=5, options={"task_id": "clinic-008"})
        obs, reward, terminated, truncated, info = env.step("I will update your phone number. Do you confirm?")
        assert info["messages"][1] == {"role": "user", "content": obs}
        return obs, env.unwrapped.trace

    obs, trace = talk("record")
    assert obs == "Yes" and trace[-1] == {"kind": "user", "turn": 1, "text": "Yes", "confirms": True}
    assert talk("replay") == (obs, trace)
