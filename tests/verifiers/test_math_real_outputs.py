r"""The `math` verifier on REAL model generations (issue 30): every non-debatable row of
tests/verifiers/data/math_real_outputs.jsonl (five public sources, two held out) is decided as labelled, so
zero false accepts and the recall measured there hold; the answer families models write are read; a prose
answer naming several values is `ambiguous_answer`; and the worst inputs stay within a CPU budget."""

from __future__ import annotations

import gc
import json
import time
from collections import Counter
from pathlib import Path

import pytest

from rlvr_verifiers import registry
from rlvr_verifiers.base import STATUSES, Item

MATH = registry.get("math")
CORPUS = Path(__file__).parent / "data" / "math_real_outputs.jsonl"
ROWS = [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


def verdict(response: str, reference: str, extra: dict | None = None):
    return MATH.verify(Item(response, reference, extra or {}))


def test_corpus_is_real_outputs_from_several_sources_with_provenance() -> None:
    assert len(ROWS) >= 400
    sources = Counter(r["source"] for r in ROWS)
    assert len(sources) >= 4 and {r["source"] for r in ROWS if r["split"] == "heldout"}
    for r in ROWS:
        assert {"repo", "path", "commit", "row"} <= set(r["provenance"]) and len(
            r["provenance"]["commit"]
        ) == 40
        assert r["reason"] and (r["label"] is None) is r["debatable"]


# Correct answers rlvr still does not read (prose answers without a marker or a box): listed, so a fix shows
# as an unexpected pass and a new false reject fails.
KNOWN_FALSE_REJECTS = {
    "theoremqa-109": "'the answer is color (a) is brighter.': an option named inside a sentence",
    "cs336_r1zero_eval-255": "'\\boxed{\\text{2000 calories}}': a count word inside \\text is not read as a unit",
    "cs336_r1zero_eval-342": "'\\frac{21}{3} \\approx 7 servings' outside math delimiters",
    "mathvista-358": "'September 1982 has more actual total income.': a year in prose",
    "mathvista-408": "'lower than 0.2% in **1970**.' then a second paragraph",
}


def _case(row):
    known = KNOWN_FALSE_REJECTS.get(row["id"])
    marks = [pytest.mark.xfail(strict=True, reason=known)] if known else []
    return pytest.param(row, id=row["id"], marks=marks)


@pytest.mark.parametrize("row", [_case(r) for r in ROWS if r["label"] is not None])
def test_real_output_is_decided_as_labelled(row) -> None:
    v = verdict(row["response"], row["gold"], row["extra"])
    assert (v.status == "ok") is row["label"], (row["id"], row["reason"], v)


@pytest.mark.parametrize(
    ("response", "gold"),
    [
        ("She has 60 shells in total.\nA: 60", "60"),
        ("20 + 40 = 60\n#### 60", "60"),
        ("So she has 60 in all. The answer is 60 shells.", "60"),
        ("Final answer: 60", "60"),
        ("**Answer:** 60", "60"),
        ('{"reasoning": "100 + 22 = 122", "answer": "122"}', "122"),
        ('{"reasoning": "...", "answer": 122}\nLet me know if you need more.', "122"),
        ("<answer> 17 </ answer>", "17"),
        ("<answer> adding them gives \\boxed{17}", "17"),
        ("\\boxed{\\text{Answer: } 17}", "17"),
        ("In base 2 this is \\boxed{10001}.", "10001_2"),
        ("The answer is True.", "True"),
        ("Therefore, the answer (Yes or No) is No.", "no"),
        ('Therefore, the answer (Yes or No) is "Yes."', "yes"),
        ("The answer is 60.\nThis answer is correct.\nThis answer is correct.", "60"),
        ("The answer is \\boxed{60}.\n\n## Question: What is 2+3?\nThe answer is \\boxed{5}.", "60"),
        ("The angle is 180 degrees.", "180^\\circ"),
        ("The answer is (b).", "(b)"),
        ("<answer> 8 packs of gum </answer>", "8"),
    ],
)
def test_answer_families_models_write_are_read(response, gold) -> None:
    assert verdict(response, gold).status == "ok"


@pytest.mark.parametrize(
    ("response", "gold"),
    [
        ("In base 2 this is \\boxed{10011}.", "10001_2"),
        ("The answer is True.", "False"),
        ("The answer is True or False.", "True"),
        ("The answer is (b) or (c).", "(b)"),
        ('{"reasoning": "the answer is 122", "answer": "121"}', "122"),
        ("<answer> 17 </answer> <answer> 18 </answer>", "17"),
        ("The answer is 60 degrees.", "60 cm"),
        ("The answer is \\boxed{5}.\nThis answer is correct.", "6"),
        ("Joe has \\frac{22}{3} \\approx 7 servings of crawfish.", "7"),
        ("He has 5 of them left.", "5"),
    ],
)
def test_near_misses_of_those_families_are_not_paid(response, gold) -> None:
    assert verdict(response, gold).status != "ok"


@pytest.mark.parametrize(
    "response",
    [
        "Thus the square root of 64 is 8, and the cube root of 64 is 4.",
        "So the width is 4 and the length is 9.",
    ],
)
def test_prose_naming_several_values_without_a_marker_is_ambiguous_answer(response) -> None:
    v = verdict(response, "4")
    assert v.status == "ambiguous_answer" and v.score == 0.0 and v.status in STATUSES


@pytest.mark.parametrize(
    ("response", "gold"),
    [
        ("So the result is 2^{10} = 1024.", "1024"),
        ("So the number is 10 which is 1,000.99.", "1000.99"),
        ("There are 5 red and 7 blue marbles, so there are 12 marbles in total.", "12"),
    ],
)
def test_one_computation_or_a_restatement_is_not_several_candidates(response, gold) -> None:
    assert verdict(response, gold).status == "ok"


def test_response_over_the_size_limit_is_response_too_large() -> None:
    from rlvr_verifiers.math import MAX_RESPONSE_CHARS

    v = verdict("x" * (MAX_RESPONSE_CHARS + 1) + "\\boxed{5}", "5")
    assert v.status == "response_too_large" and v.score == 0.0 and "max_response_length" in v.detail


N = 256 * 1024
WORST_CASES = {
    "answer_tags_never_closed": "<answer>" * (N // 8),
    "answer_tag_then_text": "<answer> 5 " * (N // 11),
    "loose_closing_tags": "< / answer >" * (N // 12),
    "boxes_far_apart": ("\\boxed{1}" + " " * 5000) * (N // 5010),
    "box_never_closed": "\\boxed{" + "{" * (N - 10),
    "deep_brackets": "(" * (N // 2) + ")" * (N // 2),
    "spaces": " " * N,
    "backticks": "`" * N,
    "json_answer_keys": '{"answer": ' * (N // 11),
    "answer_markers": "The answer (Yes or No) is " * (N // 26),
    "filler_lines": "This answer is correct.\n" * (N // 24),
    "next_turns": "\n## Question: 5" * (N // 15),
    "sentences_with_values": "the root is 8, and " * (N // 19),
}


@pytest.mark.parametrize("name", sorted(WORST_CASES))
def test_worst_case_inputs_stay_within_a_cpu_budget_and_are_not_paid(name) -> None:
    text = WORST_CASES[name]
    verdict("warm up", "17")  # lazy imports and compiled patterns: not a per-response cost
    # This thread's CPU with the cyclic collector paused: a collection's cost is set by what earlier tests
    # left alive in this xdist worker, not by this response (CI saw 1.2 s here once; the check takes 5-14 ms).
    gc.disable()
    start = time.thread_time()
    try:
        v = verdict(text, "17")
    finally:
        spent = time.thread_time() - start
        gc.enable()
    assert v.status != "ok"
    assert spent < 0.5, f"{name}: {spent:.3f} s of CPU for {len(text):,} characters"


def test_ambiguous_answers_are_counted_per_step() -> None:
    from rlvr_verifiers.verl_bridge import step_metrics

    statuses = [verdict(r, "4").status for r in ("So the width is 4 and the length is 9.", "\\boxed{4}")]
    m = step_metrics(
        {
            "rlvr_verifier": ["math", "math"],
            "rlvr_status": statuses,
            "acc": [0.0, 1.0],
            "rlvr_latency_ms": [1.0, 1.0],
        }
    )
    assert m["rlvr/math/ambiguous_answers"] == 1.0 and m["rlvr/math/pass_rate"] == 0.5
    assert m["rlvr/math/responses_too_large"] == 0.0
