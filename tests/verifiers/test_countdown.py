"""The `countdown` verifier: the expression must hit the target using given numbers at most once each,
and it is parsed with an ast whitelist, so injection strings and huge powers never run."""

from __future__ import annotations

import json
import time

import pytest

from rlvr_verifiers import registry
from rlvr_verifiers.base import Item

COUNTDOWN = registry.get("countdown")
GT = {"target": 24, "numbers": [4, 6, 1, 3]}


def verdict(response: str, gt: object = None, **extra: object):
    return COUNTDOWN.verify(Item(response, GT if gt is None else gt, dict(extra)))


def test_correct_expression_in_answer_tags_is_accepted() -> None:
    v = verdict("<think>try 4*6</think><answer>(4 * 6) * 1</answer>")
    assert (v.status, v.score) == ("ok", 1.0)


def test_ground_truth_as_json_string_is_accepted() -> None:
    assert verdict("<answer>4*6</answer>", json.dumps(GT)).status == "ok"


def test_exact_rational_arithmetic() -> None:
    assert verdict("<answer>6/(1-3/4)</answer>").status == "ok"  # 6 / (1/4) = 24 exactly
    assert verdict("<answer>4/3*6*3</answer>", {"target": 24, "numbers": [4, 3, 6, 3]}).status == "ok"


def test_wrong_value_is_wrong() -> None:
    v = verdict("<answer>4+6+1+3</answer>")
    assert v.status == "wrong" and "14" in v.detail


def test_reusing_a_number_is_wrong() -> None:
    v = verdict("<answer>4*6*1*1</answer>")
    assert v.status == "wrong" and "not given" in v.detail


def test_a_number_not_given_is_wrong() -> None:
    assert verdict("<answer>8*3</answer>").status == "wrong"
    assert verdict("<answer>24</answer>").status == "wrong"


def test_duplicated_given_numbers_may_each_be_used() -> None:
    assert verdict("<answer>(2+2)*6</answer>", {"target": 24, "numbers": [2, 2, 6]}).status == "ok"


def test_use_all_requires_every_number_exactly_once() -> None:
    gt = {**GT, "use_all": True}
    assert verdict("<answer>4*6</answer>", gt).status == "wrong"
    assert (
        verdict(
            "<answer>4*6*(3-1-1)</answer>", {"target": 24, "numbers": [4, 6, 3, 1, 1], "use_all": True}
        ).status
        == "ok"
    )
    assert verdict("<answer>4*6</answer>", gt, use_all=False).status == "ok"  # extra overrides


def test_division_by_zero_is_wrong_not_a_crash() -> None:
    v = verdict("<answer>4/(3-3)</answer>", {"target": 24, "numbers": [4, 3, 3]})
    assert v.status == "wrong" and "division by zero" in v.detail


@pytest.mark.parametrize(
    "payload",
    [
        "__import__('os').system('touch MARKER')",
        "().__class__.__bases__[0].__subclasses__()",
        "open('MARKER', 'w').write('24')",
        "exec(\"open('MARKER', 'w')\")",
        "[open('MARKER', 'w') for x in (4, 6)]",
        "(lambda: open('MARKER', 'w'))()",
        "lambda: 24",
        "'24'",
        "4*6 if open('MARKER', 'w') else 0",
        "globals()",
    ],
)
def test_eval_injection_is_rejected_without_running(payload: str, tmp_path) -> None:
    marker = tmp_path / "pwned"  # what running the payload would create
    v = verdict(f"<answer>{payload.replace('MARKER', str(marker))}</answer>")
    assert v.status in ("wrong", "parse_error") and v.score == 0.0
    assert not marker.exists(), "the payload ran"


@pytest.mark.parametrize(
    "expr", ["9**9**9**9", "2**10**10", "4**6", "4^6", "-4*-6", "4.0*6", "True*24", "4//1*6", "25%24"]
)
def test_operators_outside_the_whitelist_are_rejected(expr: str) -> None:
    start = time.process_time()  # CPU time: nothing is computed (9**9**9**9 would never finish)
    v = verdict(f"<answer>{expr}</answer>", {"target": 24, "numbers": [4, 6, 9, 2, 10, 1, 25]})
    assert v.status in ("wrong", "parse_error")
    assert time.process_time() - start < 1


def test_expression_size_and_depth_are_bounded() -> None:
    long_expr = "+".join(["1"] * 500)
    assert verdict(f"<answer>{long_expr}</answer>", {"target": 500, "numbers": [1] * 500}).status == "wrong"
    deep = "(" * 5000 + "4" + ")" * 5000
    start = time.process_time()
    v = verdict(f"<answer>{deep}</answer>", {"target": 4, "numbers": [4]})
    assert v.status in ("wrong", "parse_error") and time.process_time() - start < 1


def test_last_expression_line_is_used_without_answer_tags() -> None:
    assert verdict("Let me think.\nWe can do 4*6.\n4 * 6 * 1 = 24").status == "ok"
    # The number after '=' is ignored: the left side's value counts.
    assert verdict("4 * 6 + 1 = 24").status == "wrong"


def test_last_answer_block_wins() -> None:
    assert verdict("<answer>4+6</answer> hmm <answer>4*6</answer>").status == "ok"
    assert verdict("<answer>4*6</answer> hmm <answer>4+6</answer>").status == "wrong"


def test_no_expression_is_a_parse_error() -> None:
    assert verdict("I could not find one.").status == "parse_error"
    assert verdict("<answer>four times six</answer>").status in ("parse_error", "wrong")


@pytest.mark.parametrize(
    "gt",
    [
        {"target": "24", "numbers": [4, 6]},
        {"target": 24},
        {"target": 24, "numbers": []},
        "not json",
        [24, 4, 6],
        {"target": 24, "numbers": [4, True]},
    ],
)
def test_malformed_ground_truth_is_invalid_input(gt: object) -> None:
    assert verdict("<answer>4*6</answer>", gt).status == "invalid_input"
