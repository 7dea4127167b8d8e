"""User simulators: the scripted user's rules, and the LLM user's seeding and cache."""

from __future__ import annotations

import pytest

from toolgym.simulators.users import STOP_TOKEN, Fact, LLMUser, ScriptedUser, UserProfile, make_user

PROFILE = UserProfile(
    opening="I want to cancel an order.",
    instructions="Cancel order #W1.",
    facts=[Fact(keywords=["email"], text="It's a@b.c."), Fact(keywords=["order number"], text="Order #W1.")],
    requests=["Also change my address to 1 Main St."],
)


def test_scripted_user_gives_facts_confirms_then_requests_then_stops() -> None:
    user = ScriptedUser()
    assert user.start(PROFILE, seed=0) == PROFILE.opening
    assert user.reply("What is your EMAIL?").text == "It's a@b.c."
    assert user.reply("And the number of the order?").text == "Order #W1."  # words in any order
    assert user.reply("Tell me your email and order number").text == "It's a@b.c. Order #W1."
    turn = user.reply("I will cancel #W1. Do you confirm?")
    assert turn.confirms and not turn.stop
    assert user.reply("What is your favourite colour?").text == "Sorry, I don't know that."
    assert user.reply("Done. Anything else?").text == PROFILE.requests[0]
    state = user.get_state()
    last = user.reply("Anything else?")
    assert last.stop and STOP_TOKEN in last.text
    user.set_state(state)
    assert user.reply("Anything else?") == last


def test_scripted_user_can_decline() -> None:
    user = ScriptedUser()
    user.start(PROFILE.model_copy(update={"confirm": False}), seed=0)
    turn = user.reply("Shall I proceed?")
    assert not turn.confirms and turn.text.startswith("No")


class CountingGenerator:
    """A deterministic stand-in text generator that counts how often it is really called."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[dict[str, str]], seed: int) -> str:
        self.calls += 1
        last = messages[-1]["content"]
        if "confirm" in last:
            return "Yes, go ahead."
        if "else" in last:
            return f"No, thanks. {STOP_TOKEN}"
        return f"reply-{seed % 97}-{len(messages)}"


def test_llm_user_flips_roles_hides_nothing_needed_and_stops() -> None:
    generate = CountingGenerator()
    user = LLMUser(generate)
    user.start(PROFILE, seed=5)
    first = user.reply("What is your email?")
    assert first.text.startswith("reply-") and not first.stop
    assert user.reply("Do you confirm?").confirms
    assert user.reply("Anything else?").stop
    prompt = generate.calls
    assert prompt == 3


def test_llm_user_is_seeded_and_cached() -> None:
    generate, cache = CountingGenerator(), {}
    a, b = LLMUser(generate, cache=cache), LLMUser(generate, cache=cache)
    a.start(PROFILE, seed=1)
    b.start(PROFILE, seed=1)
    assert a.reply("hello") == b.reply("hello")
    assert generate.calls == 1  # the second conversation replayed from the cache
    c = LLMUser(generate, cache=cache)
    c.start(PROFILE, seed=2)
    assert c.reply("hello").text != a.transcript[-1]["content"]  # another seed, another reply


def test_make_user() -> None:
    assert make_user("none") is None and make_user(None) is None
    assert isinstance(make_user("scripted"), ScriptedUser)
    assert isinstance(make_user("llm"), LLMUser)  # the offline simulator backend by default
    with pytest.raises(ValueError, match="scripted"):
        make_user("robot")


class EchoBackend:
    """A simulator backend (the `Backend` protocol) that reports what it was asked."""

    name = "echo"

    def __init__(self) -> None:
        self.calls = 0

    def chat(self, messages: list[dict[str, str]], *, seed: int, response_schema: dict | None = None) -> str:
        self.calls += 1
        return f"[{seed}] you said: {messages[-1]['content']}"


def test_llm_user_through_simulator_backends_records_and_replays(tmp_path) -> None:
    from toolgym.simulators.simulated import ReplayMiss

    backend, path = EchoBackend(), str(tmp_path / "users.sqlite")
    user = make_user("llm", backend=backend, cache={"path": path, "mode": "record"})
    user.start(PROFILE, seed=3)
    recorded = user.reply("What is your email?")
    assert "you said: What is your email?" in recorded.text and backend.calls == 1
    replayer = make_user("llm", backend=EchoBackend(), cache={"path": path, "mode": "replay"})
    replayer.start(PROFILE, seed=3)
    assert replayer.reply("What is your email?") == recorded
    with pytest.raises(ReplayMiss):
        replayer.reply("Something never recorded")
    offline = make_user("llm", backend="offline")
    offline.start(PROFILE, seed=3)
    again = make_user("llm", backend="offline")
    again.start(PROFILE, seed=3)
    assert offline.reply("hi").text == again.reply("hi").text
