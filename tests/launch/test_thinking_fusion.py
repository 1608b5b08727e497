"""Thinking-mode fusion data and the mixed-mode RL data of the `qwen3` pipeline (rlvr_launch.pipelines.thinking_stages)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rlvr_launch.errors import UserError
from rlvr_launch.pipelines import pipeline, stages, thinking_stages
from rlvr_launch.runs import embedded_model as embedded


@pytest.fixture(scope="module")
def long_cot(rlvr_cache):
    path = embedded.ensure_sft_data(rlvr_cache / "data", embedded.ADDITION_LONG_COT)
    return pd.read_parquet(path / "train.parquet" if path.is_dir() else path)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_each_prompt_appears_once_per_mode_with_its_verified_trace_and_its_direct_answer(
    long_cot, rlvr_cache
):
    frame = long_cot.head(6).copy()
    wrong = frame.loc[1, "messages"]
    frame.at[1, "messages"] = [wrong[0], {"role": "assistant", "content": "<think>x</think>99"}]
    frame.at[2, "messages"] = [frame.loc[2, "messages"][0], {"role": "assistant", "content": "<think>7+2=9"}]
    rows, stats = thinking_stages.fusion_rows(frame, "addition")
    assert stats == {
        "input_rows": 6,
        "without_closed_block": 1,  # row 2: its block never closes
        "failed_verification": 1,  # row 1: 99 is not the sum
        "prompts": 4,
        "rows": 8,
    }
    by_prompt: dict[int, dict] = {}
    for row in rows:
        by_prompt.setdefault(row["prompt_id"], {})[row["mode"]] = row["messages"]
    # prompt_id is the row of the task's training file (the worked sums cover its one-digit-a rows)
    assert sorted(by_prompt) == sorted(frame["prompt_id"].iloc[[0, 3, 4, 5]])
    by_id = long_cot.set_index("prompt_id")
    for pid, modes in by_prompt.items():
        source = [dict(m) for m in by_id.loc[pid, "messages"]]
        question, trace = source[0]["content"], source[1]["content"]
        answer = trace.rsplit("</think>", 1)[1].strip()
        assert modes["thinking"] == [
            {"role": "user", "content": question + " /think"},
            {"role": "assistant", "content": trace},
        ]
        assert modes["non_thinking"] == [
            {"role": "user", "content": question + " /no_think"},
            {"role": "assistant", "content": "<think>\n\n</think>\n\n" + answer},
        ]


def test_sft_on_fusion_rows_teaches_what_generation_sees_in_each_mode(long_cot, tokenizer):
    """The chat template renders each fusion row as the generation prompt of its mode + the target: in
    non-thinking mode the prompt already ends with the empty block, so the model learns the answer after it."""
    rows, _ = thinking_stages.fusion_rows(long_cot.head(2), "addition")
    for row in rows:
        prompt, full = row["messages"][:-1], row["messages"]
        rendered = tokenizer.apply_chat_template(full, tokenize=False)
        generation_prompt = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        assert rendered.startswith(generation_prompt)
        closes = generation_prompt.endswith(embedded.EMPTY_THINK_BLOCK)
        assert closes == (row["mode"] == "non_thinking")


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_fusion_refuses_data_it_cannot_pair_with_the_task(long_cot):
    with pytest.raises(UserError, match="`messages` and `prompt_id`"):
        thinking_stages.fusion_rows(long_cot[["messages"]], "addition")
    bad = long_cot.head(1).copy()
    bad.loc[0, "prompt_id"] = 10_000
    with pytest.raises(UserError, match="not a row of task 'addition'"):
        thinking_stages.fusion_rows(bad, "addition")


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_mixed_mode_rl_data_flags_half_the_prompts_each_way_and_budgets_only_thinking_ones(
    rlvr_cache, tokenizer
):
    rows, source = thinking_stages.mixed_mode_rows("addition", seed=0, budget=32)
    original = pd.read_parquet(source)
    assert len(rows) == len(original) == 800
    modes = [r["extra_info"]["thinking_mode"] for r in rows]
    assert modes.count("thinking") == modes.count("non_thinking") == 400
    for row, (_, before) in zip(rows, original.iterrows(), strict=True):
        thinking = row["extra_info"]["thinking_mode"] == "thinking"
        switch = " /think" if thinking else " /no_think"
        assert row["prompt"][0]["content"] == before["prompt"][0]["content"] + switch
        assert row["extra_info"].get("thinking_budget") == (32 if thinking else None)
        assert row["reward_model"] == before["reward_model"]
        prompt = tokenizer.apply_chat_template(
            list(row["prompt"]), tokenize=False, add_generation_prompt=True
        )
        # the budget loop leaves a prompt whose block is already closed alone
        assert prompt.endswith(embedded.EMPTY_THINK_BLOCK) == (not thinking)
    # another seed, another split of the same prompts
    other, _ = thinking_stages.mixed_mode_rows("addition", seed=1, budget=32)
    assert [r["extra_info"]["thinking_mode"] for r in other] != modes


def test_the_qwen3_pipeline_runs_the_four_stages_with_the_new_kinds():
    assert {"fusion", "mixed_mode_rl", "budget_eval"} <= set(stages.STAGE_KINDS)
    spec = pipeline.load_spec("qwen3")
    kinds = [s["kind"] for s in spec["stages"]]
    assert kinds == [
        "sft",
        "merge",
        "rl",
        "merge",
        "fusion",
        "merge",
        "mixed_mode_rl",
        "merge",
        "budget_eval",
    ]
    fusion = next(s for s in spec["stages"] if s["kind"] == "fusion")
    assert fusion["inputs"] == {"model": "rl_merge.model", "data": "embedded://addition_long_cot"}


def test_the_budget_eval_stage_writes_the_sweep_its_picture_and_per_budget_metrics(tiny_model_dir, tmp_path):
    stage = stages.Stage(
        name="budget_eval",
        kind="budget_eval",
        dir=tmp_path,
        inputs={"model": str(tiny_model_dir)},
        args={"task": "addition", "budgets": [4, 0], "limit": 3},
        log=lambda _m: None,
    )
    result = stages.STAGE_KINDS["budget_eval"](stage)
    report = json.loads(Path(result["outputs"]["report"]).read_text())
    assert [r["budget"] for r in report["thinking"]] == [0, 4] and report["prompts"] == 3
    assert result["metrics"] == {
        "pass@1_budget_0": report["thinking"][0]["pass@1"],
        "pass@1_budget_4": report["thinking"][1]["pass@1"],
        "pass@1_non_thinking": report["non_thinking"]["pass@1"],
    }
    assert Path(result["outputs"]["plot"]).read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(UserError, match="needs args.task"):
        stages.STAGE_KINDS["budget_eval"](stages.Stage("b", "budget_eval", tmp_path, args={}))
