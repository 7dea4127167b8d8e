"""World state (snapshot, restore, canonical hash, diff) and the reward building blocks."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from toolgym.simulators.worlds import (
    Milestone,
    Minefield,
    Record,
    WorldState,
    authenticate_first,
    call_event,
    canonical_hash,
    confirm_before_write,
    evaluate,
    milestones_reached,
    outputs_present,
    text_event,
)


class Item(Record):
    id: str
    price: float
    tags: list[str] = []


class Shop(WorldState):
    items: dict[str, Item]
    open: bool = True


def _shop() -> Shop:
    return Shop(items={"a": Item(id="a", price=1.5), "b": Item(id="b", price=2.0, tags=["x"])})


def test_snapshot_round_trips_through_json_and_keeps_the_hash() -> None:
    shop = _shop()
    restored = Shop.restore(json.loads(json.dumps(shop.snapshot())))
    assert restored == shop and restored.state_hash() == shop.state_hash()


def test_hash_ignores_key_order_and_float_noise_but_not_content() -> None:
    shop, other = _shop(), Shop(items={"b": Item(id="b", price=2.0, tags=["x"]), "a": Item(id="a", price=1.5)})
    assert shop.state_hash() == other.state_hash()
    other.items["a"].price = 0.1 + 0.2 + 1.2  # 1.5000000000000002
    assert other.state_hash() == shop.state_hash()
    other.items["a"].price = 1.51
    assert other.state_hash() != shop.state_hash()
    assert canonical_hash({"x": 1, "y": [1.0]}) == canonical_hash({"y": [1], "x": 1})


def test_clone_is_independent_and_assignment_is_validated() -> None:
    shop = _shop()
    copy = shop.clone()
    copy.items["a"].tags.append("new")
    assert shop.items["a"].tags == []
    with pytest.raises(ValidationError):
        shop.items["a"].price = "free"  # type: ignore[assignment]


def test_diff_names_added_removed_and_changed_records() -> None:
    shop, other = _shop(), _shop()
    other.items["c"] = Item(id="c", price=3.0)
    del other.items["b"]
    other.items["a"].price = 9.0
    other.open = False
    assert shop.diff(other) == {
        "items": {"added": ["c"], "removed": ["b"], "changed": ["a"]},
        "open": {"value": {"from": True, "to": False}},
    }
    assert shop.diff(shop.clone()) == {}


def test_required_outputs_use_tau_bench_normalisation() -> None:
    assert outputs_present(["1,234.50", "Maple"], ["You paid 1234.50.", "it ships to MAPLE ave"])
    assert not outputs_present(["99.00"], ["You paid 1234.50."])
    assert outputs_present([], [])


def _calls(*names: str) -> list[dict]:
    return [call_event(0, name, {"id": i}, True, None) for i, name in enumerate(names)]


def test_milestones_are_matched_in_order() -> None:
    first = Milestone(name="first", tool="a")
    second = Milestone(name="second", tool="b", arguments={"id": 1})
    assert milestones_reached([first, second], _calls("a", "b")) == [True, True]
    assert milestones_reached([second, first], _calls("a", "b")) == [True, False]
    failed = [call_event(0, "a", {}, False, "boom")]
    assert milestones_reached([first], failed) == [False]


def test_minefield_or_violation_zeroes_both_rewards() -> None:
    trace = _calls("a", "b")
    common = {"state_match": True, "required_outputs": [], "texts": [], "trace": trace}
    clean = evaluate(milestones=[Milestone(name="m", tool="a")], minefields=[], **common)
    assert clean.success == 1.0 and clean.milestone_score == 1.0
    mined = evaluate(
        milestones=[Milestone(name="m", tool="a")], minefields=[Minefield(name="no b", tool="b")], **common
    )
    assert mined.minefields == ["no b"] and mined.success == 0.0 and mined.milestone_score == 0.0
    ruled = evaluate(milestones=[], minefields=[], violations=["rule: broken"], **common)
    assert ruled.success == 0.0
    half = evaluate(
        milestones=[Milestone(name="m", tool="a"), Milestone(name="n", tool="z")],
        minefields=[],
        **{**common, "state_match": False},
    )
    assert half.success == 0.0 and half.milestone_score == 0.5


def test_policy_rules_authenticate_first_and_confirm_before_write() -> None:
    auth = authenticate_first(["login"], exempt=["search"])
    assert auth(_calls("search", "login", "read"), None) == []
    assert auth(_calls("read", "login"), None) == ["read was called before the user was authenticated"]
    confirm = confirm_before_write(["write"])
    yes = text_event("user", 0, "Yes", confirms=True)
    assert confirm([yes, *_calls("write")], None) == []
    assert len(confirm([yes, *_calls("write", "write")], None)) == 1  # one yes covers one write
    assert len(confirm(_calls("write"), None)) == 1
