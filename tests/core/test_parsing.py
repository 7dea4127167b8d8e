"""Action parsing: Hermes blocks, OpenAI messages, answers, and fuzzed input that never raises."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from toolgym.envs import parse_action


def test_several_hermes_calls_and_an_answer() -> None:
    action = (
        'thinking <tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call> then '
        '<tool_call>{"name": "b", "arguments": "{\\"y\\": 2}"}</tool_call><answer> 42 </answer>'
    )
    parsed = parse_action(action)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("a", {"x": 1}), ("b", {"y": 2})]
    assert parsed.answer == "42" and parsed.errors == []


def test_openai_message_json() -> None:
    message = {
        "content": "ok",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": json.dumps({"q": "x"})}}
        ],
    }
    parsed = parse_action(json.dumps(message))
    assert parsed.calls[0].name == "f" and parsed.calls[0].arguments == {"q": "x"} and parsed.calls[0].call_id == "c1"
    assert parsed.content == "ok" and parsed.answer is None


def test_malformed_calls_become_errors() -> None:
    parsed = parse_action(
        '<tool_call>{not json}</tool_call><tool_call>[1]</tool_call><tool_call>{"name": 3}</tool_call>'
    )
    assert len(parsed.errors) == 3 and parsed.calls == []
    unclosed = parse_action('<tool_call>{"name": "a", "arguments": {}}')
    assert len(unclosed.errors) == 1 and "never closed" in unclosed.errors[0].message
    bad_args = parse_action('<tool_call>{"name": "a", "arguments": [1, 2]}</tool_call>')
    assert bad_args.errors and "not a JSON object" in bad_args.errors[0].message


def test_openai_message_with_bad_tool_calls() -> None:
    assert parse_action(json.dumps({"tool_calls": "x"})).errors
    assert parse_action(json.dumps({"tool_calls": [1, {"function": None}]})).errors


def test_plain_json_that_is_not_a_message_is_text() -> None:
    parsed = parse_action('{"foo": 1}')
    assert parsed.calls == [] and parsed.errors == [] and parsed.content == '{"foo": 1}'


_TOKENS = st.sampled_from(
    [
        "<tool_call>",
        "</tool_call>",
        "<answer>",
        "</answer>",
        "{",
        "}",
        '"name"',
        ":",
        '"arguments"',
        ",",
        "[",
        "]",
        '"x"',
        "1",
        "null",
        " ",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.lists(_TOKENS, max_size=40).map("".join)))
def test_parser_never_raises_on_fuzzed_text(text: str) -> None:
    parsed = parse_action(text)
    assert all(isinstance(c.arguments, dict) for c in parsed.calls)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
        max_leaves=10,
    )
)
def test_parser_never_raises_on_fuzzed_json(payload: object) -> None:
    parse_action(json.dumps({"tool_calls": payload}))
    parse_action("<tool_call>" + json.dumps(payload) + "</tool_call>")
