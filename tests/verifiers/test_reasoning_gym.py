"""The `reasoning_gym` verifier (reasoning-gym's own scorers) and `rlvr data reasoning_gym`."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rlvr_launch.data import convert as data
from rlvr_launch.data.converters import reasoning_gym as converter
from rlvr_launch.errors import UserError
from rlvr_verifiers import reasoning_gym as rg_verifier
from rlvr_verifiers import registry
from rlvr_verifiers.base import INVALID_INPUT, OK, PARSE_ERROR, WRONG, Item

DATASETS = (
    "chain_sum",
    "countdown",
    "polynomial_multiplication",
    "binary_matrix",
    "spiral_matrix",
    "leg_counting",
)


def _rows(dataset: str, count: int = 6, seed: int = 0) -> list[dict]:
    return [converter.convert(r, "train", i) for i, r in enumerate(converter.generate(count, seed, dataset))]


def verify(response: str, row: dict, **extra):
    return registry.get("reasoning_gym").verify(Item(response, row["reward_model"]["ground_truth"], extra))


@pytest.mark.parametrize("dataset", DATASETS)
def test_the_reference_answer_scores_and_a_wrong_one_does_not(dataset):
    for source, row in zip(converter.generate(6, 0, dataset), _rows(dataset), strict=True):
        answer = source["answer"]
        assert verify(f"<think>let me see</think>\n<answer>{answer}</answer>", row).status == OK
        wrong = verify("<think>hmm</think><answer>definitely not it</answer>", row)
        assert (wrong.score, wrong.status) == (0.0, WRONG)


def test_answer_region_and_tag_rules():
    source = converter.generate(1, 3, "chain_sum")[0]
    row = _rows("chain_sum", 1, 3)[0]
    answer = source["answer"]
    assert verify(f"<answer>{answer}</answer>", row).status == OK
    assert verify(f"  {answer}\n", row).status == OK  # no tag: the whole answer region
    assert verify(f"<think><answer>{answer}</answer></think><answer>0{answer}1</answer>", row).status == WRONG
    assert verify(f"<think>{answer}", row).status == PARSE_ERROR  # unclosed reasoning block
    assert verify("<think>x</think><answer> </answer>", row).status == PARSE_ERROR
    assert verify(f"<answer>1</answer> then <answer>{answer}</answer>", row).status == OK  # the last one


def test_partial_credit_pays_the_scorers_value_only_when_asked():
    row = _rows("countdown", 1)[0]
    numbers = json.loads(row["reward_model"]["ground_truth"])["entry"]["metadata"]["numbers"]
    wrong_value = " + ".join(str(n) for n in numbers) + " + 0"  # well-formed, numbers misused: 0.05 there
    default = verify(f"<answer>{wrong_value}</answer>", row)
    assert default.status == WRONG and default.score == 0.0 and 0 < default.metrics["rg_score"] < 1
    partial = verify(f"<answer>{wrong_value}</answer>", row, partial_credit=True)
    assert partial.status == OK and partial.score == default.metrics["rg_score"]


def test_bad_ground_truths_are_invalid_input():
    v = registry.get("reasoning_gym")
    assert v.verify(Item("x", "not json")).status == INVALID_INPUT
    assert v.verify(Item("x", {"dataset": "chain_sum"})).status == INVALID_INPUT
    unknown = v.verify(Item("x", {"dataset": "no_such_set", "entry": {"answer": "1"}}))
    assert unknown.status == INVALID_INPUT and "no_such_set" in unknown.detail
    long = v.verify(
        Item("<answer>" + "1" * 20_000 + "</answer>", {"dataset": "chain_sum", "entry": {"answer": "1"}})
    )
    assert long.status == WRONG and "longer than" in long.detail


EXPLOIT = "__import__('pathlib').Path({marker!r}).write_text('ran')"


@pytest.mark.parametrize("dataset", ["countdown", "binary_matrix", "polynomial_multiplication"])
def test_scorers_that_evaluate_answers_run_code_unless_guarded(dataset, tmp_path):
    """reasoning-gym's scorer runs an answer as code (the evidence, in a child process); through the
    verifier, the guarded primitives refuse it and the answer is just wrong."""
    marker = tmp_path / "ran"
    entry = json.loads(_rows(dataset, 1)[0]["reward_model"]["ground_truth"])["entry"]
    answer = EXPLOIT.format(marker=str(marker))
    child = (
        "import json, sys, reasoning_gym\n"
        f"reasoning_gym.get_score_answer_fn({dataset!r})({answer!r}, json.loads({json.dumps(entry)!r}))\n"
    )
    subprocess.run([sys.executable, "-c", child], check=True, capture_output=True, timeout=120)
    assert marker.read_text() == "ran"  # unguarded: the answer ran
    marker.unlink()
    row = {"reward_model": {"ground_truth": json.dumps({"dataset": dataset, "entry": entry})}}
    verdict = verify(f"<answer>{answer}</answer>", row)
    assert verdict.status == WRONG and not marker.exists()


def test_guarded_parse_expr_takes_small_arithmetic_only():
    for fine in ("3*x**2 - 4*x + 1", "(1 + 2) * 3 / 4", "sin(x) + exp(2*x)", "x^3 - y", "-x**(3/2)"):
        rg_verifier.check_expression(fine)
    for bad in (
        "2**9**9",
        "9**(9**9)",
        "10**1000",
        "x.__class__",
        "lambda: 1",
        "f(x)",
        "[1]",
        "'a'",
        "x" * 201,
    ):
        with pytest.raises(ValueError):
            rg_verifier.check_expression(bad)
    with pytest.raises(ValueError):
        rg_verifier.literal_eval("__import__('os')")
    assert rg_verifier.literal_eval("[[1, 0], [0, 1]]") == [[1, 0], [0, 1]]


def test_every_scorer_that_evaluates_text_is_guarded_or_reviewed():
    """A reasoning-gym upgrade that adds eval / exec / parse_expr / sympify to a scorer module fails here."""
    from reasoning_gym.factory import DATASETS as ALL

    pattern = re.compile(r"parse_expr|sympify|\beval\(|\bexec\(|parse_latex")
    flagged = {
        name
        for name, (cls, _config) in ALL.items()
        if pattern.search(inspect.getsource(sys.modules[cls.__module__]))
    }
    assert flagged == set(rg_verifier.UNSAFE_SCORERS) | set(rg_verifier.REVIEWED_SAFE)
    for name, (module_name, _names) in rg_verifier.UNSAFE_SCORERS.items():
        assert ALL[name][0].__module__ == module_name


def test_rlvr_data_reasoning_gym_generates_by_name_size_seed_and_difficulty(tmp_path):
    source = "gym:chain_sum,min_terms=2,max_terms=2,min_digits=1,max_digits=1"
    report = data.prepare("reasoning_gym", tmp_path, source, limit=30, test_size=5, seed=7)
    assert report["verifier"] == "reasoning_gym"
    assert report["splits"]["train"]["written"] == 25 and report["splits"]["test"]["written"] == 5
    rows = pq.read_table(tmp_path / "train.parquet").to_pylist()
    assert (
        rows[0]["data_source"] == "reasoning_gym/chain_sum"
        and rows[0]["extra_info"]["verifier"] == "reasoning_gym"
    )
    for row in rows:
        entry = json.loads(row["reward_model"]["ground_truth"])["entry"]
        assert re.fullmatch(r"\d [+-] \d", entry["metadata"]["expression"])  # the difficulty knobs took
        assert "<answer>" in row["prompt"][0]["content"]
        assert verify(f"<answer>{entry['answer']}</answer>", row).status == OK
    again = tmp_path / "again"
    data.prepare("reasoning_gym", again, source, limit=30, test_size=5, seed=7)
    assert pq.read_table(again / "train.parquet").to_pylist() == rows


def test_rlvr_data_reasoning_gym_refuses_bad_specs_and_drops_rows_json_breaks(tmp_path):
    with pytest.raises(UserError, match="no such reasoning-gym dataset"):
        data.prepare("reasoning_gym", tmp_path, "gym:no_such_set", limit=3)
    with pytest.raises(UserError, match="refused the config"):
        data.prepare("reasoning_gym", tmp_path, "gym:chain_sum,colour=red", limit=3)
    with pytest.raises(UserError, match="is not KEY=VALUE"):
        data.prepare("reasoning_gym", tmp_path, "gym:chain_sum,oops", limit=3)
    with pytest.raises(UserError, match="reference_answer_fails"):  # arc grids are tuples; JSON makes lists
        data.prepare("reasoning_gym", tmp_path / "arc", "gym:arc_agi", limit=3)


def test_generated_rows_convert_from_a_local_file(tmp_path):
    rows = converter.generate(12, 1, "leg_counting")
    path = Path(tmp_path) / "entries.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"question": "", "answer": "1"}\n')
    report = data.prepare("reasoning_gym", tmp_path / "out", str(path), test_size=2)
    assert report["splits"]["train"]["dropped"] == {"empty_question": 1}
    assert report["splits"]["train"]["written"] + report["splits"]["test"]["written"] == 12
