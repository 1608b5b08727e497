"""Reasoning blocks: no verifier pays an answer that appears only inside `<think>...</think>`.

Threat model: a policy trained on these rewards hedges or guesses inside its reasoning and answers
something else (or nothing, or is cut off mid-reasoning) after it. Every accuracy verifier (math,
countdown, tool_call, code) must read only the answer region (after the LAST closing tag, one shared rule
in rlvr_verifiers/reasoning.py); a reasoning block that never closes has no answer region (parse_error,
"unclosed reasoning block"); a response without a block is scored as before; the tag pair is set per task
(or off); a template that prefills the opening tag makes a response without a closing tag unanswered.
The `format` verifier keeps scoring the block itself.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pytest

from rlvr_verifiers import reasoning, registry
from rlvr_verifiers.base import INVALID_INPUT, OK, PARSE_ERROR, Item, Verdict
from rlvr_verifiers.code import extract_code
from rlvr_verifiers.reasoning import CLOSED, NO_BLOCK, UNCLOSED, UNCLOSED_STATE, split

THINK = reasoning.default_tags()

# ---------------------------------------------------------------------------------------------------
# The rule itself, against the spellings a policy could try


@pytest.mark.parametrize(
    ("response", "state", "answer"),
    [
        ("The answer is 12.", NO_BLOCK, "The answer is 12."),
        ("<think>a</think>12", CLOSED, "12"),
        ("<think>a</think> 11 </think> 12", CLOSED, " 12"),  # several closing tags: the last one wins
        ("<think>a <think>b</think> c</think> 12", CLOSED, " 12"),  # nested blocks
        ("<think>a</think> b <think>c</think> 12", CLOSED, " 12"),  # repeated blocks
        ("guess 12 </think> 13", CLOSED, " 13"),  # a closing tag without an opening one
        ("12 <think>a</think> 13", CLOSED, " 13"),  # text before the block is not answer either
        ("<THINK>12</THINK> 13", CLOSED, " 13"),  # case variants are tags
        ("< think >12</ Think > 13", CLOSED, " 13"),  # whitespace inside the brackets too
        ("<think>12</think\n> 13", CLOSED, " 13"),
        ("<think>12 and more reasoning", UNCLOSED_STATE, None),  # truncated mid-reasoning
        ("<Think >12 and more", UNCLOSED_STATE, None),
        ("<think>a</think> 12 <think> 13", UNCLOSED_STATE, None),  # reopened after the last close
        ("</think> 12 <think>", UNCLOSED_STATE, None),
        ("<think>a</think>", CLOSED, ""),  # closed, nothing after: an empty answer region
        ("a <thinking> b", NO_BLOCK, "a <thinking> b"),  # another word is not the tag
        ("if a<think and b>c", NO_BLOCK, "if a<think and b>c"),
    ],
)
def test_the_answer_region_follows_the_last_closing_tag(response, state, answer):
    regions = split(response, THINK)
    assert (regions.state, regions.answer) == (state, answer)


def test_a_closing_tag_inside_code_or_a_json_string_still_ends_the_reasoning():
    # Nothing before the last closing tag is ever answer, wherever the tag stands: a literal tag in the
    # answer cuts it there (a false reject at worst, never a false accept).
    code = '<think>plan</think>\n```python\nprint("</think>")\nprint(12)\n```'
    assert split(code, THINK).answer == '")\nprint(12)\n```'
    call = '<think>x</think><tool_call>{"name": "f", "arguments": {"s": "</think>"}}</tool_call>'
    assert split(call, THINK).answer == '"}}</tool_call>'


def test_prefilled_opening_tag_means_no_closing_tag_no_answer():
    assert split("reasoning 12", THINK, prefilled=True).state == UNCLOSED_STATE
    assert split("reasoning 12</think> 13", THINK, prefilled=True).answer == " 13"
    assert split("reasoning 12", THINK, prefilled=False).answer == "reasoning 12"


def test_a_custom_pair_replaces_think_and_off_reads_everything():
    pair = reasoning.parse_tags("<reasoning>,</reasoning>")
    assert split("<reasoning>12</reasoning> 13", pair).answer == " 13"
    assert split("<reasoning>12", pair).state == UNCLOSED_STATE
    assert split("<think>12", pair).answer == "<think>12"  # not this task's tags: plain text
    assert split("<think>12</think> 13", None).answer == "<think>12</think> 13"  # off
    assert reasoning.parse_tags(["[THINK]", "[/THINK]"]).close == "[/THINK]"
    assert split("[THINK]12[/THINK]13", reasoning.parse_tags(["[THINK]", "[/THINK]"])).answer == "13"


@pytest.mark.parametrize("value", ["off", "OFF", False, None, [], ""])
def test_tags_switch_off(value):
    assert reasoning.parse_tags(value) is None


@pytest.mark.parametrize(
    ("tags", "prefilled", "problem"),
    [
        ("think,/think", False, "needs a letter or digit and a delimiter"),  # bare words match prose
        ("<think>,<think>", False, "match each other"),
        ("<a>,<b>,<c>", False, "OPEN,CLOSE"),
        (["<think>"], False, "[OPEN, CLOSE]"),
        (3, False, "[OPEN, CLOSE]"),
        ("off", True, "think_prefilled is set but reasoning tags are off"),
        ("<think>,</think>", "yes", "think_prefilled must be true or false"),
    ],
)
def test_bad_settings_are_rejected_naming_the_problem(tags, prefilled, problem):
    with pytest.raises(ValueError) as err:
        reasoning.settings(tags, prefilled)
    assert problem in str(err.value)


def test_the_rule_is_linear_on_adversarial_responses():
    # Megabytes of near-tags (`<` and `</` followed by long whitespace runs, tag prefixes) are split in
    # bounded time: a quadratic scan would take minutes here, the linear one takes well under a second.
    hostile = ("< " * 200 + "</ " * 200 + "<thin" + " " * 500) * 800  # ~1.5 MB
    start = time.monotonic()
    assert split(hostile, THINK).state == NO_BLOCK
    assert split(hostile + "<think>", THINK).state == UNCLOSED_STATE
    assert time.monotonic() - start < 10.0


# ---------------------------------------------------------------------------------------------------
# Every accuracy verifier, the same matrix


@dataclass(frozen=True)
class Case:
    verifier: str
    ground_truth: Any
    right: str  # an answer that pays when it is the answer
    wrong: str  # a final answer that does not


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def call(city: str) -> str:
    return "<tool_call>" + json.dumps({"name": "get_weather", "arguments": {"city": city}}) + "</tool_call>"


CASES = [
    Case("math", "12", r"so the total is \boxed{12}", "The answer is 13."),
    Case(
        "countdown", {"target": 24, "numbers": [2, 3, 4]}, "<answer>2*3*4</answer>", "<answer>2+3+4</answer>"
    ),
    Case(
        "tool_call",
        {"tools": TOOLS, "expected": {"name": "get_weather", "arguments": {"city": "Paris"}}},
        call("Paris"),
        call("Rome"),
    ),
    Case(
        "code",
        {"inputs": ["21\n"], "outputs": ["42\n"]},
        "```python\nprint(int(input()) * 2)\n```",
        "```python\nprint(int(input()) + 2)\n```",
    ),
]

# (name, response template, extra, paid?) -- {R}: the right answer, {W}: the wrong one
MATRIX = [
    ("answer only inside the block", "<think>Maybe {R}? not sure...</think> I give up.", {}, False),
    ("same answer after the block", "<think>let me work it out</think>\n{R}", {}, True),
    ("right guess inside, wrong final answer", "<think>{R}</think>\n{W}", {}, False),
    ("unclosed block (truncated) holding the answer", "<think>working... {R} and then", {}, False),
    ("right answer, then a block reopened and cut off", "<think>a</think>{R}<think>more", {}, False),
    ("variant tags around the guess", "<THINK>{R}</ think >\n{W}", {}, False),
    ("no block: unchanged", "{R}", {}, True),
    ("no block, wrong: unchanged", "{W}", {}, False),
    (
        "custom tags: guess inside",
        "<reasoning>{R}</reasoning>\n{W}",
        {"reasoning_tags": "<reasoning>,</reasoning>"},
        False,
    ),
    (
        "custom tags: answer after",
        "<reasoning>x</reasoning>\n{R}",
        {"reasoning_tags": ["<reasoning>", "</reasoning>"]},
        True,
    ),
    ("custom tags: unclosed", "<reasoning>{R}", {"reasoning_tags": ["<reasoning>", "</reasoning>"]}, False),
    ("tags off: the whole response is the answer", "<think>thinking\n{R}", {"reasoning_tags": "off"}, True),
    ("prefilled: no closing tag, no answer", "working... {R}", {"think_prefilled": True}, False),
    ("prefilled: answer after the closing tag", "working...</think>\n{R}", {"think_prefilled": True}, True),
    ("prefilled: guess before the closing tag", "{R}</think>\n{W}", {"think_prefilled": True}, False),
]
UNCLOSED_ROWS = {
    "unclosed block (truncated) holding the answer",
    "right answer, then a block reopened and cut off",
    "custom tags: unclosed",
    "prefilled: no closing tag, no answer",
}


def _verdicts(case: Case, code_verifier) -> list[Verdict]:
    items = [
        Item(template.format(R=case.right, W=case.wrong), case.ground_truth, dict(extra))
        for _, template, extra, _ in MATRIX
    ]
    verifier = code_verifier if case.verifier == "code" else registry.get(case.verifier)
    return verifier.verify_batch(items)


@pytest.mark.parametrize("case", CASES, ids=[c.verifier for c in CASES])
def test_only_the_answer_region_is_paid(case, verifier):
    verdicts = _verdicts(case, verifier)
    for (name, _, _, paid), v in zip(MATRIX, verdicts, strict=True):
        assert (v.score == 1.0 and v.status == OK) is paid, f"{case.verifier}: {name}: {v}"
        if name in UNCLOSED_ROWS:
            assert v.status == PARSE_ERROR and v.detail.startswith(UNCLOSED), f"{case.verifier}: {name}: {v}"


@pytest.mark.parametrize("case", CASES, ids=[c.verifier for c in CASES])
def test_a_response_without_a_block_scores_as_with_the_rule_off(case, verifier):
    v = verifier if case.verifier == "code" else registry.get(case.verifier)
    for answer in (case.right, case.wrong, "no answer at all"):
        on = v.verify_batch([Item(answer, case.ground_truth)])[0]
        off = v.verify_batch([Item(answer, case.ground_truth, {"reasoning_tags": "off"})])[0]
        assert (on.score, on.status, on.detail) == (off.score, off.status, off.detail)


@pytest.mark.parametrize("case", CASES, ids=[c.verifier for c in CASES])
def test_bad_reasoning_settings_are_invalid_input(case, verifier):
    v = verifier if case.verifier == "code" else registry.get(case.verifier)
    out = v.verify_batch([Item(case.right, case.ground_truth, {"reasoning_tags": "think,/think"})])[0]
    assert out.status == INVALID_INPUT and "delimiter" in out.detail


# The issue's own examples, verbatim


def test_math_issue_examples_are_not_paid():
    math = registry.get("math")
    assert math.verify(Item("<think>4*3 = \\boxed{12}</think>\nThe answer is 13.", "12")).score == 0.0
    assert math.verify(Item("<think>Is it \\boxed{12}? ...</think>\nI am not sure.", "12")).score == 0.0
    truncated = math.verify(Item("<think>4*3 = \\boxed{12}, so far so good, now check", "12"))
    assert truncated.status == PARSE_ERROR and truncated.detail.startswith(UNCLOSED)
    # the caller-side quick path (the pool screens math items with it) agrees
    assert math.quick(Item("<think>4*3 = \\boxed{12}</think>\nThe answer is 13.", "12")).score == 0.0
    assert math.quick(Item("<think>\\boxed{12}", "12")).status == PARSE_ERROR


def test_countdown_issue_example_is_not_paid():
    gt = {"target": 24, "numbers": [2, 3, 4]}
    v = registry.get("countdown").verify(
        Item("<think>try <answer>2*3*4</answer>? not sure...</think> I give up.", gt)
    )
    assert v.score == 0.0 and v.status == PARSE_ERROR


def test_tool_call_written_inside_the_reasoning_is_not_a_call():
    gt = {"tools": TOOLS, "expected": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    tool = registry.get("tool_call")
    hedge = f"<think>I could call {call('Paris')} but will not.</think>\nThe weather is probably fine."
    assert tool.verify(Item(hedge, gt)).status == PARSE_ERROR
    assert tool.verify(Item(f"<think>I could call {call('Paris')}", gt)).status == PARSE_ERROR
    # no call expected: thinking about a call and not making it is right; an unclosed block is not paid
    none_expected = {"tools": TOOLS, "expected": []}
    assert tool.verify(Item(hedge, none_expected)).status == OK
    assert tool.verify(Item("<think>no call needed", none_expected)).status == PARSE_ERROR


def test_code_keeps_ignoring_code_inside_the_block(verifier):
    inside = "<think>```python\nprint(int(input()) * 2)\n```</think>\nI would submit that."
    after = "<think>```python\nprint(0)\n```</think>\n```python\nprint(int(input()) * 2)\n```"
    literal = '<think>plan</think>\n```python\nx = "</think>"\nprint(int(input()) * 2)\n```'
    gt = {"inputs": ["21\n"], "outputs": ["42\n"]}
    v_inside, v_after, v_literal = verifier.verify_batch([Item(r, gt) for r in (inside, after, literal)])
    assert v_inside.score == 0.0 and v_inside.status == PARSE_ERROR  # the prose after is not Python
    assert v_after.status == OK
    assert v_literal.score == 0.0  # a literal closing tag cuts the program: rejected, never run whole
    assert extract_code(inside) == "\nI would submit that."  # only the answer region is a candidate
    assert extract_code("<think>```python\nprint(1)\n```") is None  # unclosed: no solution


# ---------------------------------------------------------------------------------------------------
# The format verifier scores the block itself

FORMAT = registry.get("format")


@pytest.mark.parametrize(
    ("response", "extra", "status"),
    [
        ("<think>the answer is 12</think>", {}, "wrong"),  # only inside: no answer after the block
        ("<think>the answer is 12</think>\n12", {}, OK),  # the same answer after it
        ("<think>12</think>\n13", {}, OK),  # format does not judge correctness (math does)
        ("<think>unfinished 12", {}, PARSE_ERROR),  # unclosed: no answer region
        ("<think>a</think>12<think>b", {}, PARSE_ERROR),  # reopened and never closed
        ("12", {}, "wrong"),  # no block: not the R1 format (unchanged)
        ("<THINK>a</THINK>12", {}, "wrong"),  # the format wants the tags spelled exactly
        ("<think>a</think>12</ think>", {}, "wrong"),  # a variant tag is still a stray tag
        ("<reasoning>a</reasoning>12", {"reasoning_tags": "<reasoning>,</reasoning>"}, OK),
        ("<think>a</think>12", {"reasoning_tags": "<reasoning>,</reasoning>"}, "wrong"),
        ("<reasoning>a", {"reasoning_tags": "<reasoning>,</reasoning>"}, PARSE_ERROR),
        ("<think>a</think>12", {"reasoning_tags": "off"}, INVALID_INPUT),  # nothing to check
        ("a</think>12", {"think_prefilled": True}, OK),
        ("a 12", {"think_prefilled": True}, PARSE_ERROR),
    ],
)
def test_format_scores_the_block_with_the_same_rule(response, extra, status):
    v = FORMAT.verify(Item(response, None, extra))
    assert v.status == status, v
    assert v.score == (1.0 if status == OK else 0.0)
    if status == PARSE_ERROR:
        assert v.detail.startswith(UNCLOSED)
