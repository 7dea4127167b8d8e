"""Retail-v0 and Clinic-v0: every gold replay scores 1.0; dropped writes and broken policy rules score 0."""

from __future__ import annotations

import copy
import json
from typing import Any

import gymnasium as gym
import pytest

import toolgym  # noqa: F401
from toolgym.envs.parsing import parse_action
from toolgym.envs.worlds import WorldEnv, tool_call

ENV_IDS = ["toolgym/Retail-v0", "toolgym/Clinic-v0"]


def _env(env_id: str, **kwargs: Any) -> WorldEnv:
    env = gym.make(env_id, **kwargs).unwrapped
    assert isinstance(env, WorldEnv)
    return env


def _play(env: WorldEnv, task_id: str, actions: list[str]) -> tuple[float, dict[str, Any], bool]:
    env.reset(seed=0, options={"task_id": task_id})
    total, info, terminated = 0.0, {}, False
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        total += reward
        if terminated or truncated:
            break
    return total, info, terminated


def _is_write(env: WorldEnv, action: str) -> bool:
    return any(c.name in env.domain.write_tools for c in parse_action(action).calls)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_gold_replay_scores_one_and_ends_with_the_user(env_id: str) -> None:
    env = _env(env_id)
    assert len(env.tasks) >= 40 and len({t.id for t in env.tasks}) == len(env.tasks)
    assert len({tuple(t.gold_actions) for t in env.tasks}) == len(env.tasks)
    for task in env.tasks:
        total, info, terminated = _play(env, task.id, task.gold_actions)
        assert terminated and total == 1.0, (task.id, info.get("evaluation"))
        assert info["messages"][-1]["role"] == "user" and "###STOP###" in info["messages"][-1]["content"]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_removing_any_writing_action_scores_zero(env_id: str) -> None:
    env = _env(env_id)
    checked = 0
    for task in env.tasks:
        for index, action in enumerate(task.gold_actions):
            if _is_write(env, action):
                total, info, _ = _play(env, task.id, task.gold_actions[:index] + task.gold_actions[index + 1 :])
                assert total == 0.0 and not info["evaluation"]["state_match"], task.id
                assert info["evaluation"]["diff"], task.id
                checked += 1
    assert checked >= 30


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_writing_without_confirmation_breaks_policy_even_with_the_right_state(env_id: str) -> None:
    env = _env(env_id)
    task = next(t for t in env.tasks if any(_is_write(env, a) for a in t.gold_actions))
    index = next(i for i, a in enumerate(task.gold_actions) if _is_write(env, a))
    assert "confirm" in task.gold_actions[index - 1]
    total, info, _ = _play(env, task.id, task.gold_actions[: index - 1] + task.gold_actions[index:])
    assert total == 0.0 and info["evaluation"]["state_match"]
    assert any(v.startswith("confirm_before_write") for v in info["evaluation"]["violations"])


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_skipping_authentication_breaks_policy(env_id: str) -> None:
    env = _env(env_id)
    task = env.tasks[0]
    auth = next(i for i, a in enumerate(task.gold_actions) if "find_" in a and "<tool_call>" in a)
    total, info, _ = _play(env, task.id, task.gold_actions[:auth] + task.gold_actions[auth + 1 :])
    assert total == 0.0 and info["evaluation"]["state_match"]
    assert any(v.startswith("authenticate_first") for v in info["evaluation"]["violations"])


def _insert_before_last(actions: list[str], *extra: str) -> list[str]:
    return [*actions[:-1], *extra, actions[-1]]


def test_retail_late_return_is_refused_by_policy_not_by_the_tool() -> None:
    env = _env("toolgym/Retail-v0")
    task = next(t for t in env.tasks if t.metadata["kind"] == "refuse_late_return")
    order_id = task.metadata["minefields"][0]["arguments"]["order_id"]
    order = env.domain.initial_world().orders[order_id]  # type: ignore[attr-defined]
    write = tool_call(
        "return_delivered_order_items",
        order_id=order_id,
        item_ids=[order.items[0].item_id],
        payment_method_id=order.payments[0].payment_method_id,
    )
    actions = _insert_before_last(task.gold_actions, "I will return it now. Do you confirm?", write)
    total, info, _ = _play(env, task.id, actions)
    assert total == 0.0
    evaluation = info["evaluation"]
    assert evaluation["minefields"] == ["late_return"] and not evaluation["state_match"]
    assert any(v.startswith("return_window") for v in evaluation["violations"])


def test_retail_refund_to_another_card_breaks_the_refund_rule() -> None:
    env = _env("toolgym/Retail-v0")
    tasks = [t for t in env.tasks if t.metadata["kind"] == "return_original"]
    world = env.domain.initial_world()
    for task in tasks:
        write_index = next(i for i, a in enumerate(task.gold_actions) if _is_write(env, a))
        call = parse_action(task.gold_actions[write_index]).calls[0]
        customer = world.customers[world.orders[call.arguments["order_id"]].customer_id]  # type: ignore[attr-defined]
        others = [m for m in customer.payment_methods if m != call.arguments["payment_method_id"] and "gift" not in m]
        if others:
            break
    actions = list(task.gold_actions)
    actions[write_index] = tool_call(call.name, **{**call.arguments, "payment_method_id": others[0]})
    total, info, _ = _play(env, task.id, actions)
    assert total == 0.0 and any(v.startswith("refund_destination") for v in info["evaluation"]["violations"])


def test_clinic_specialist_without_referral_and_wrong_late_fee_score_zero() -> None:
    env = _env("toolgym/Clinic-v0")
    refuse = next(t for t in env.tasks if t.metadata["kind"] == "refuse_specialist")
    patient_id = refuse.metadata["minefields"][0]["arguments"]["patient_id"]
    world = env.domain.initial_world()
    specialty = "cardiology" if "cardiology" in refuse.instruction else "dermatology"
    doctor = next(d for d in world.doctors.values() if d.specialty == specialty)  # type: ignore[attr-defined]
    book = tool_call("book_appointment", patient_id=patient_id, doctor_id=doctor.id, slot=doctor.free_slots[0])
    total, info, _ = _play(env, refuse.id, _insert_before_last(refuse.gold_actions, "Booking. Do you confirm?", book))
    assert total == 0.0 and info["evaluation"]["minefields"] == ["booking_without_referral"]
    assert any(v.startswith("referral_required") for v in info["evaluation"]["violations"])

    late = next(t for t in env.tasks if t.metadata["kind"] == "cancel_late")
    actions = [a.replace('"charge_late_fee": true', '"charge_late_fee": false') for a in late.gold_actions]
    total, info, _ = _play(env, late.id, actions)
    assert total == 0.0 and any(v.startswith("late_fee") for v in info["evaluation"]["violations"])


def test_required_output_must_be_said_to_the_user() -> None:
    env = _env("toolgym/Retail-v0")
    task = next(t for t in env.tasks if t.metadata["kind"] == "lookup_total")
    total_paid = task.metadata["outputs"][0]
    actions = [a.replace(f"You paid {total_paid} in total", "I found the order") for a in task.gold_actions]
    total, info, _ = _play(env, task.id, actions)
    assert total == 0.0 and info["evaluation"]["state_match"] and not info["evaluation"]["outputs_ok"]


def test_milestone_reward_gives_partial_credit() -> None:
    env = _env("toolgym/Retail-v0", reward="milestones")
    task = next(t for t in env.tasks if t.metadata["kind"] == "cancel_then_address")
    last_write = max(i for i, a in enumerate(task.gold_actions) if _is_write(env, a))
    total, info, _ = _play(env, task.id, task.gold_actions[:last_write] + task.gold_actions[last_write + 1 :])
    assert total == 0.5 and info["reward_components"] == {"milestones": 0.5}
    assert info["evaluation"]["success"] == 0.0


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_solo_mode_discloses_everything_and_gold_calls_still_score(env_id: str) -> None:
    env = _env(env_id, user="none")
    task = env.tasks[3]
    obs, _ = env.reset(seed=0, options={"task_id": task.id})
    assert obs == task.instruction
    calls = [a for a in task.gold_actions if "<tool_call>" in a]
    total, info, terminated = _play(env, task.id, [*calls, "<answer>done</answer>"])
    assert terminated and total == 1.0


def test_llm_user_drives_the_conversation_and_replays_from_cache() -> None:
    def generate(messages: list[dict[str, str]], seed: int) -> str:
        last = messages[-1]["content"].lower()
        facts = messages[0]["content"].split("What you know:\n")[1].split("\n")
        if "confirm" in last:
            return "Yes, please."
        if "anything else" in last:
            return "No, that's all. ###STOP###"
        return " ".join(f.lstrip("- ") for f in facts if f.startswith("- ") and "(none)" not in f)

    env = _env("toolgym/Clinic-v0", user="llm", user_generate=generate)
    cache = env.user.cache  # type: ignore[union-attr]
    task = next(t for t in env.tasks if t.metadata["kind"] == "update_phone")
    first = _play(env, task.id, task.gold_actions)
    assert first[0] == 1.0 and first[2]
    size = len(cache)
    assert size == sum(1 for a in task.gold_actions if "<tool_call>" not in a)
    assert _play(env, task.id, task.gold_actions)[0] == 1.0 and len(cache) == size


def test_truncation_scores_and_unknown_task_is_a_clear_error() -> None:
    env = _env("toolgym/Retail-v0", max_turns=2)
    task = env.tasks[0]
    env.reset(seed=0, options={"task_id": task.id})
    env.step(task.gold_actions[0])
    _, reward, terminated, truncated, info = env.step(task.gold_actions[1])
    assert truncated and not terminated and reward == 0.0 and info["evaluation"]["success"] == 0.0
    with pytest.raises(ValueError, match="retail-000"):
        env.reset(options={"task_id": "retail-999"})


def test_fork_mid_conversation_through_json() -> None:
    env = _env("toolgym/Retail-v0")
    task = next(t for t in env.tasks if t.metadata["kind"] == "cancel_then_address")
    env.reset(seed=0, options={"task_id": task.id})
    half = len(task.gold_actions) // 2
    for action in task.gold_actions[:half]:
        env.step(action)
    state = json.loads(json.dumps(env.get_state()))
    fork = _env("toolgym/Retail-v0")
    fork.set_state(copy.deepcopy(state))
    assert fork.world == env.world and fork.trace == env.trace
    rest_fork = [fork.step(a) for a in task.gold_actions[half:]]
    rest = [env.step(a) for a in task.gold_actions[half:]]
    assert json.dumps(rest_fork, default=str) == json.dumps(rest, default=str)
    assert rest[-1][2] and sum(step[1] for step in rest) == 1.0


def test_trace_and_policy_also_work_on_the_hooked_path() -> None:
    env = _env("toolgym/Clinic-v0", budget={"calls": 100})
    assert env.hooks
    task = next(t for t in env.tasks if t.metadata["kind"] == "refill")
    assert _play(env, task.id, task.gold_actions)[0] == 1.0
    index = next(i for i, a in enumerate(task.gold_actions) if _is_write(env, a))
    total, info, _ = _play(env, task.id, task.gold_actions[: index - 1] + task.gold_actions[index:])
    assert total == 0.0 and any(v.startswith("confirm_before_write") for v in info["evaluation"]["violations"])


def test_llm_user_on_the_offline_simulator_backend_is_seeded() -> None:
    def run(seed: int) -> list[str]:
        env = _env("toolgym/Retail-v0", user="llm", user_backend="offline", max_turns=3)
        env.reset(seed=seed, options={"task_id": "retail-001"})
        return [env.step("Hello! How can I help you?")[0] for _ in range(3)]

    first = run(4)
    assert first == run(4) and all(first)
