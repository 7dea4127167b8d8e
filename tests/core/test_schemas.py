"""Wire models round-trip through JSON exactly (property-tested)."""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from toolgym.schemas import (
    ChatMessage,
    EpisodeRecord,
    ErrorKind,
    FaultEvent,
    FunctionCall,
    MessageToolCall,
    StepRecord,
    Task,
    ToolAnnotations,
    ToolCall,
    ToolResult,
    ToolSpec,
)

_finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
_json: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _finite | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)
_obj = st.dictionaries(st.text(max_size=6), _json, max_size=4)
_names = st.text(min_size=1, max_size=20)

_annotations = st.builds(
    ToolAnnotations,
    read_only=st.booleans(),
    writes=st.lists(st.text(max_size=5), max_size=2),
    price=_finite,
    latency=_finite,
)
_spec = st.builds(
    ToolSpec,
    name=_names,
    description=st.text(max_size=30),
    input_schema=_obj,
    output_schema=st.none() | _obj,
    annotations=_annotations,
)
_call = st.builds(ToolCall, id=st.text(max_size=8), name=st.text(max_size=8), arguments=_obj)
_result = st.builds(
    ToolResult,
    ok=st.booleans(),
    content=_json,
    error_kind=st.none() | st.sampled_from(list(ErrorKind)),
    error_message=st.none() | st.text(max_size=10),
    cost=_finite,
    latency=_finite,
)
_message = st.builds(
    ChatMessage,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.none() | st.text(max_size=20),
    tool_calls=st.none()
    | st.lists(
        st.builds(
            MessageToolCall,
            id=st.text(max_size=5),
            function=st.builds(FunctionCall, name=_names, arguments=st.text(max_size=10)),
        ),
        max_size=2,
    ),
    tool_call_id=st.none() | st.text(max_size=5),
)
_fault = st.builds(
    FaultEvent,
    kind=st.text(max_size=8),
    tool=st.none() | st.text(max_size=8),
    step=st.integers(0, 100),
    explicit=st.booleans(),
    transient=st.booleans(),
    detail=_obj,
)
_step = st.builds(
    StepRecord,
    episode_id=st.text(max_size=8),
    index=st.integers(0, 1000),
    action=st.text(max_size=30),
    observation=st.text(max_size=30),
    reward=_finite,
    terminated=st.booleans(),
    truncated=st.booleans(),
    info=_obj,
    created_at=st.none() | st.datetimes(),
)
_task = st.builds(
    Task,
    id=st.text(max_size=8),
    instruction=st.text(max_size=20),
    gold_actions=st.lists(st.text(max_size=10), max_size=3),
    answer=st.none() | st.text(max_size=5),
    metadata=_obj,
)
_episode = st.builds(
    EpisodeRecord,
    episode_id=st.text(max_size=8),
    env_id=st.text(max_size=8),
    seed=st.none() | st.integers(0, 2**31),
    messages=st.lists(_message, max_size=2),
    steps=st.lists(_step, max_size=2),
    total_reward=_finite,
    reset_info=_obj,
)


def _round_trip(model: BaseModel) -> None:
    text = model.model_dump_json()
    again = type(model).model_validate_json(text)
    assert again == model
    assert again.model_dump_json() == text


@settings(max_examples=60, deadline=None)
@given(st.one_of(_spec, _call, _result, _message, _fault, _step, _task, _episode))
def test_models_round_trip_through_json(model: BaseModel) -> None:
    _round_trip(model)


def test_unknown_fields_are_rejected() -> None:
    import pydantic
    import pytest

    with pytest.raises(pydantic.ValidationError):
        ToolCall.model_validate({"id": "1", "name": "x", "arguments": {}, "bogus": 1})
