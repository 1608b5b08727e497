"""A few RL steps with the `thinking_budget` agent loop: verl's real trainer, hf rollout, CPU (slow); the run
saves its last step, so `rlvr eval RUN` evaluates it (issue 27: the recipe saved nothing, and eval failed)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from loopback_ray import sweep as _sweep

from rlvr_cluster.thinking_budget import EARLY_STOP_PHRASE

pytestmark = pytest.mark.slow


def test_rl_steps_with_the_budget_loop_insert_the_early_stop_phrase_and_log_the_budget_metrics(
    tmp_path, rlvr_cache, tiny_model_dir
):
    root = tempfile.mkdtemp(prefix="rlvr-tb-", dir="/tmp")
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "rlvr_launch.cli", "train", "experiment=cpu_thinking_budget",
        "trainer.total_training_steps=2", "data.train_batch_size=8", "--run-dir", str(run_dir),
    ]  # fmt: skip
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "RLVR_RAY_TMPDIR_ROOT": root}
        )
    finally:
        _sweep(root)
        shutil.rmtree(root, ignore_errors=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["training/global_step"] for r in rows] == [1, 2]
    for row in rows:
        for key in ("critic/score/mean", "actor/pg_loss", "actor/grad_norm", "response_length/mean"):
            assert math.isfinite(row[key]), (key, row[key])
        # every response hits the budget of 2 (the tiny model never closes a block): 2 generated tokens
        # + the 111-token phrase at least, unless a response ended before its budget
        assert row["response_length/mean"] > 2
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    phrase = EARLY_STOP_PHRASE.rstrip("\n")  # verl's dump strips trailing whitespace
    dumps = sorted((run_dir / "rollouts").glob("*.jsonl"))
    assert [p.stem for p in dumps] == ["1", "2"]
    hits = 0
    for dump, row in zip(dumps, rows, strict=True):
        lines = [json.loads(line) for line in dump.read_text().splitlines()]
        assert len(lines) == 8 * 4
        # the loop's per-sample fields reached the reward columns (hit <=> the phrase in the text) and the
        # step's row of metrics.jsonl: hit rate, thinking mean/p90, answer length, accuracy by hit
        step_hits = [line["rlvr_thinking_budget_hit"] for line in lines]
        assert step_hits == [float(phrase in line["output"]) for line in lines]
        assert row["thinking/budget_hit_rate"] == pytest.approx(sum(step_hits) / len(lines))
        assert all(line["rlvr_thinking_tokens"] == 2.0 for line in lines if line["rlvr_thinking_budget_hit"])
        thinking = [row[k] for k in ("thinking/thinking_tokens/mean", "thinking/thinking_tokens/p90")]
        assert all(math.isfinite(x) and 0 <= x <= 2 for x in thinking), thinking
        assert math.isfinite(row["thinking/answer_tokens/mean"]) and row["thinking/answer_tokens/mean"] >= 0
        for split, flag in (("hit", 1.0), ("not_hit", 0.0)):
            group = [float(line["acc"]) > 0 for line in lines if line["rlvr_thinking_budget_hit"] == flag]
            if group:
                assert row[f"thinking/accuracy/{split}"] == pytest.approx(sum(group) / len(group))
            else:
                assert f"thinking/accuracy/{split}" not in row
        for line in lines:
            text, score = line["output"], float(line["score"])
            assert math.isfinite(score)
            if phrase in text:
                # a hit: the budget's 2 generated tokens, then the inserted phrase, then the answer
                hits += 1
                # (the exact ids are checked in tests/cluster/test_thinking_budget.py; here the text, whose
                # 2 tokens may each be half a UTF-8 character that decodes to U+FFFD)
                prefix = text[: text.index(phrase)]
                assert 1 <= len(prefix) <= 16, text
                assert text.count(phrase) == 1, text
            else:
                # no hit only when the response ended (end of turn) within its 2-token budget: the loop's
                # own token counts (thinking + answer, end of turn included) say so; the text cannot, since
                # one byte-level token that is half a UTF-8 character decodes to U+FFFD, 3 tokens re-encoded
                assert line["rlvr_thinking_tokens"] + line["rlvr_answer_tokens"] <= 2, line
                if "\ufffd" not in text:
                    assert len(tokenizer.encode(text, add_special_tokens=False)) <= 1, text
    assert hits > 0, "no response hit the budget"

    # The recipe's run ends with a checkpoint of its last step (the next command reads it): `rlvr eval RUN`
    # merges it and evaluates the trained model.
    assert (run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    assert "config.yaml, checkpoints/" in out.stdout  # the last line lists it because it exists
    report_file = tmp_path / "eval.json"
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "eval", str(run_dir), "--task", "addition"]
    cmd += ["--limit", "8", "--out", str(report_file)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(report_file.read_text())
    assert report["prompts"] == 8 and 0.0 <= report["pass@1"] <= 1.0
    assert report["model"] == str(run_dir / "checkpoints" / "global_step_2" / "merged_hf")
