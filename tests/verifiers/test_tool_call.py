"""The `tool_call` verifier: each function-calling format parses, arguments are schema-checked, and the
call must equal the expected one (names, argument values; parallel calls in any order)."""

from __future__ import annotations

import json

import pytest

from rlvr_verifiers import registry
from rlvr_verifiers.base import Item

TOOL_CALL = registry.get("tool_call")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer", "minimum": 1, "maximum": 14},
                    "unit": {"type": "string", "enum": ["C", "F"]},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {
        "name": "get_time",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
    },
]
EXPECTED = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
GT = {"tools": TOOLS, "expected": EXPECTED}
CALL = json.dumps({"name": "get_weather", "arguments": {"days": 3, "city": "Paris"}})


def verdict(response: str, gt: object = None):
    return TOOL_CALL.verify(Item(response, GT if gt is None else gt))


@pytest.mark.parametrize(
    "response",
    [
        f"<tool_call>\n{CALL}\n</tool_call>",  # Qwen / Hermes
        f"[TOOL_CALLS][{CALL}]",  # Mistral v3 JSON list
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3}',  # Mistral v11+
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}<|eom_id|>',  # Llama 3
        f"Calling the tool:\n```json\n{CALL}\n```",  # fenced
        CALL,  # raw JSON
        f"Sure, here it is: {CALL} -- done",  # embedded JSON
        json.dumps(
            {
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "days": 3})},
            }
        ),
    ],
)
def test_every_calling_format_is_parsed_and_matched(response: str) -> None:
    v = verdict(response)
    assert (v.status, v.score) == ("ok", 1.0), v


def test_integer_valued_float_equals_integer_but_bool_never_equals_number() -> None:
    assert verdict('{"name": "get_weather", "arguments": {"city": "Paris", "days": 3.0}}').status == "ok"
    gt = {
        "tools": [{"name": "f", "parameters": {"type": "object"}}],
        "expected": {"name": "f", "arguments": {"x": 1}},
    }
    assert verdict('{"name": "f", "arguments": {"x": true}}', gt).status == "wrong"
    assert verdict('{"name": "f", "arguments": {"x": "1"}}', gt).status == "wrong"


@pytest.mark.parametrize(
    "arguments,where",
    [
        ({"city": "Paris", "days": "3"}, "days"),  # wrong type
        ({"city": "Paris", "days": 30}, "days"),  # out of range
        ({"days": 3}, "city"),  # missing required
        ({"city": "Paris", "unit": "K"}, "unit"),  # not in enum
        ({"city": "Paris", "extra": 1}, "Additional properties"),  # additionalProperties false
    ],
)
def test_schema_violations_are_wrong_with_a_detail(arguments: dict, where: str) -> None:
    v = verdict(json.dumps({"name": "get_weather", "arguments": arguments}))
    assert v.status == "wrong" and "schema violation" in v.detail
    assert where in v.detail or where == "city" and "required" in v.detail


def test_unknown_tool_is_wrong() -> None:
    v = verdict('<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>')
    assert v.status == "wrong" and "unknown tool" in v.detail


def test_valid_but_different_arguments_are_wrong() -> None:
    assert verdict('{"name": "get_weather", "arguments": {"city": "London", "days": 3}}').status == "wrong"
    assert verdict('{"name": "get_weather", "arguments": {"city": "Paris"}}').status == "wrong"


def test_parallel_calls_match_in_any_order_but_not_with_extras_or_missing() -> None:
    gt = {"tools": TOOLS, "expected": [EXPECTED, {"name": "get_time", "arguments": {"tz": "UTC"}}]}
    both = (
        '<tool_call>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_call>\n<tool_call>'
        + CALL
        + "</tool_call>"
    )
    assert verdict(both, gt).status == "ok"
    assert verdict(f"<tool_call>{CALL}</tool_call>", gt).status == "wrong"
    assert verdict(both + f"<tool_call>{CALL}</tool_call>", gt).status == "wrong"


@pytest.mark.parametrize(
    "response",
    [
        '<tool_call>{"name": "get_weather", "arguments": </tool_call>',
        "[TOOL_CALLS][{oops}]",
        '{"name": "get_weather", "arguments": "{not json"}',
        "I will not call any tool.",
    ],
)
def test_unparseable_or_missing_calls_are_parse_errors(response: str) -> None:
    assert verdict(response).status == "parse_error"


def test_no_call_expected_and_none_made_is_ok() -> None:
    assert verdict("No tool needed: it is 4.", {"tools": TOOLS, "expected": []}).status == "ok"


@pytest.mark.parametrize(
    "gt",
    [
        {"tools": [], "expected": EXPECTED},
        {"tools": TOOLS},
        {"tools": TOOLS, "expected": {"name": "nope", "arguments": {}}},
        {
            "tools": [{"name": "f", "parameters": {"type": "not-a-type"}}],
            "expected": {"name": "f", "arguments": {}},
        },
        "not json",
    ],
)
def test_malformed_ground_truth_is_invalid_input(gt: object) -> None:
    assert verdict(CALL, gt).status == "invalid_input"
