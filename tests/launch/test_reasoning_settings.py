"""Reasoning settings on the launch side: `rlvr score --reasoning-tags OPEN,CLOSE|off [--think-prefilled]`
reaches every line's verifier (only the answer region after the last closing tag is read), a bad flag or
a bad task setting is a one-line error before anything starts, and `rlvr diagnose`'s per-step figures
count the responses without an answer region.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr_launch import cli
from rlvr_launch.cli import UserError
from rlvr_launch.diagnosis import diagnose
from rlvr_launch.recipes import compose
from rlvr_launch.scoring.score import add_arguments, parse_line, reasoning_defaults
from rlvr_verifiers import registry
from rlvr_verifiers.base import Item

GUESS_INSIDE = r"<think>\boxed{12}</think> so 13"
CUSTOM_GUESS_INSIDE = r"<reasoning>\boxed{12}</reasoning> so 13"
CUSTOM_ANSWER_AFTER = r"<reasoning>4*3</reasoning> \boxed{12}"
PREFILLED_ANSWER_AFTER = r"4*3</reasoning> \boxed{12}"
PREFILLED_TRUNCATED = r"4*3 = \boxed{12} and"


def args_for(*flags: str):
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--verifier", "math", "--input", "-", "--output", "o", *flags])


def line(response: str, **extra) -> str:
    obj = {"response": response, "ground_truth": "12"}
    if extra:
        obj["extra"] = extra
    return json.dumps(obj)


def scored(response_line: str, defaults: dict) -> str:
    item = parse_line("math", response_line, defaults)
    assert isinstance(item, Item)
    return registry.get("math").verify(item).status


def test_without_the_flag_lines_keep_the_default_think_tags():
    assert reasoning_defaults(args_for()) == {}
    assert scored(line(GUESS_INSIDE), {}) == "wrong"


def test_the_flag_sets_the_pair_for_every_line_and_a_line_may_still_say_otherwise():
    defaults = reasoning_defaults(args_for("--reasoning-tags", "<reasoning>,</reasoning>"))
    assert defaults == {"reasoning_tags": ["<reasoning>", "</reasoning>"], "think_prefilled": False}
    assert scored(line(CUSTOM_GUESS_INSIDE), defaults) == "wrong"
    assert scored(line(CUSTOM_ANSWER_AFTER), defaults) == "ok"
    assert scored(line(CUSTOM_GUESS_INSIDE, reasoning_tags="off"), defaults) == "ok"  # the line's own extra


def test_off_reads_the_whole_response_and_prefilled_needs_a_closing_tag():
    off = reasoning_defaults(args_for("--reasoning-tags", "off"))
    assert off == {"reasoning_tags": "off", "think_prefilled": False}
    assert scored(line(r"<think>\boxed{12}"), off) == "ok"
    prefilled = reasoning_defaults(
        args_for("--reasoning-tags", "<reasoning>,</reasoning>", "--think-prefilled")
    )
    assert scored(line(PREFILLED_ANSWER_AFTER), prefilled) == "ok"
    assert scored(line(PREFILLED_TRUNCATED), prefilled) == "parse_error"
    assert scored(line(PREFILLED_TRUNCATED), {}) == "ok"  # without the prefill known, no block is seen


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--reasoning-tags", "think"], "OPEN,CLOSE"),
        (["--reasoning-tags", "think,/think"], "delimiter"),
        (
            ["--reasoning-tags", "off", "--think-prefilled"],
            "think_prefilled is set but reasoning tags are off",
        ),
    ],
)
def test_a_bad_flag_is_a_one_line_error_before_any_ray_starts(tmp_path, capsys, flags, problem):
    src = tmp_path / "in.jsonl"
    src.write_text(line(GUESS_INSIDE) + "\n")
    argv = ["score", "--verifier", "math", "--input", str(src), "--output", str(tmp_path / "out.jsonl")]
    assert cli.main(argv + flags) == 2
    err = capsys.readouterr().err
    assert "--reasoning-tags/--think-prefilled" in err and problem in err and "Traceback" not in err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_every_task_recipe_sets_the_default_pair_and_a_bad_one_is_refused_at_compose():
    for task in ("addition", "gsm8k", "math", "countdown", "code", "tool_use"):
        cfg = compose.compose([f"task={task}"], check=False)
        assert list(cfg.reward.reward_kwargs.rlvr.reasoning_tags) == ["<think>", "</think>"], task
        assert cfg.reward.reward_kwargs.rlvr.think_prefilled is False, task
    with pytest.raises(UserError, match=r"reasoning_tags.*delimiter"):
        compose.compose(["task=math", "reward.reward_kwargs.rlvr.reasoning_tags=[think,/think]"])


def test_diagnose_counts_responses_without_an_answer_region_per_step():
    lines = [
        {
            "uid": "p0_0",
            "score": 1.0,
            "output": "x",
            "rlvr_verifier": "math",
            "rlvr_status": "ok",
            "rlvr_no_answer_region": 0.0,
        },
        {
            "uid": "p0_1",
            "score": 0.0,
            "output": "x",
            "rlvr_verifier": "math",
            "rlvr_status": "parse_error",
            "rlvr_no_answer_region": 1.0,
        },
        {
            "uid": "p1_0",
            "score": 0.0,
            "output": "x",
            "rlvr_verifier": "math",
            "rlvr_status": "parse_error",
            "rlvr_no_answer_region": 1.0,
        },
    ]
    assert diagnose.step_metrics_from_rollouts(lines)["rlvr/no_answer_region"] == 2.0


# ---------------------------------------------------------------------------------------------------
# End to end through the pool (one Ray for the module; `rlvr score` uses a Ray already initialised)

RAY_NUM_CPUS = 2
RAY_VERIFIER_SLOTS = 8


@pytest.mark.slow
def test_rlvr_score_with_the_flag_through_the_pool(private_ray, tmp_path: Path, capsys):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    responses = [CUSTOM_GUESS_INSIDE, CUSTOM_ANSWER_AFTER, PREFILLED_ANSWER_AFTER, PREFILLED_TRUNCATED]
    src.write_text("".join(line(r) + "\n" for r in responses))
    argv = ["score", "--verifier", "math", "--input", str(src), "--output", str(dst), "--num-actors", "1"]
    assert cli.main(argv + ["--reasoning-tags", "<reasoning>,</reasoning>", "--think-prefilled"]) == 0
    out = [json.loads(x) for x in dst.read_text().splitlines()]
    assert [o["status"] for o in out] == ["wrong", "ok", "ok", "parse_error"]
    assert out[3]["detail"].startswith("unclosed reasoning block")
    assert "pass rate 0.5000" in capsys.readouterr().err
