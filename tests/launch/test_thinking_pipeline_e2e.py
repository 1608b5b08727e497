"""The `qwen3` pipeline end to end on CPU (slow): long-CoT cold start -> reasoning RL -> thinking-mode
fusion SFT -> general RL on a mixed-mode set with the thinking budget enforced at rollout -> accuracy vs
budget. Real stages: verl's SFT and RL trainers, the merger, rlvr sample / eval, the budget agent loop."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile

import pytest
from loopback_ray import sweep as _sweep

from rlvr_cluster.thinking_budget import EARLY_STOP_PHRASE

pytestmark = pytest.mark.slow

# fewer steps than the recipe (CI's budget; the shipped sizes are measured in its header): 20 cold-start and
# 10 fusion SFT steps instead of 400 and 200, one RL step per RL stage (each saves it)
TINY = [
    "cold_start:trainer.total_training_steps=20",
    "cold_start:trainer.save_freq=20",
    "fusion:trainer.total_training_steps=10",
    "fusion:trainer.save_freq=10",
    "rl:trainer.total_training_steps=1",
    "rl:trainer.save_freq=1",
    "general_rl:trainer.total_training_steps=1",
    "general_rl:trainer.save_freq=1",
]


@pytest.mark.timeout(900)
def test_qwen3_pipeline_fuses_both_modes_and_enforces_the_budget_in_general_rl(tmp_path, rlvr_cache):
    root = tempfile.mkdtemp(prefix="rlvr-q3-", dir="/tmp")
    run_dir = tmp_path / "run"
    env = {**os.environ, "RLVR_RAY_TMPDIR_ROOT": root, "RLVR_DATA_DIR": str(tmp_path / "data")}
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "pipeline", "qwen3", *TINY, "--run-dir", str(run_dir)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=880, env=env)
    finally:
        _sweep(root)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    stage = {p.name.split("-", 1)[1]: p for p in (run_dir / "stages").iterdir()}
    manifests = {name: json.loads((p / "manifest.json").read_text()) for name, p in stage.items()}
    assert all(m["status"] == "done" for m in manifests.values()), {
        n: m["status"] for n, m in manifests.items()
    }

    # fusion: every kept prompt once per mode; the SFT started from the reasoning-RL model
    fusion = manifests["fusion"]
    stats = json.loads((stage["fusion"] / "data" / "stats.json").read_text())
    assert stats["prompts"] > 0 and stats["rows"] == 2 * stats["prompts"]
    assert fusion["inputs"]["model"]["path"] == manifests["rl_merge"]["outputs"]["model"]
    import pandas as pd

    data = pd.read_parquet(fusion["outputs"]["data"])
    assert sorted(data.groupby("prompt_id")["mode"].apply(sorted).map(tuple).unique()) == [
        ("non_thinking", "thinking")
    ]

    # general RL: the budget figures reach metrics.jsonl; /no_think prompts are never budgeted, and every
    # hit carries the early-stop phrase once
    rows = [json.loads(line) for line in (stage["general_rl"] / "metrics.jsonl").read_text().splitlines()]
    assert [r["training/global_step"] for r in rows] == [1]
    for key in (
        "thinking/budget_hit_rate",
        "thinking/thinking_tokens/mean",
        "thinking/thinking_tokens/p90",
        "thinking/answer_tokens/mean",
    ):
        assert math.isfinite(rows[0][key]), key
    assert 0.0 <= rows[0]["thinking/budget_hit_rate"] <= 1.0
    assert rows[0]["thinking/thinking_tokens/p90"] <= 32  # the stage's budget
    lines = [json.loads(x) for x in (stage["general_rl"] / "rollouts" / "1.jsonl").read_text().splitlines()]
    phrase = EARLY_STOP_PHRASE.strip()
    no_think = [x for x in lines if "/no_think" in x["input"]]
    assert 0 < len(no_think) < len(lines)
    assert all(x["rlvr_thinking_budget_hit"] == 0.0 and x["rlvr_thinking_tokens"] == 0.0 for x in no_think)
    for x in lines:
        assert (phrase in x["output"]) == (x["rlvr_thinking_budget_hit"] == 1.0), x["output"]

    # accuracy vs budget of the final model, both modes, with its picture
    report = json.loads((stage["budget_eval"] / "budget_eval.json").read_text())
    assert [r["budget"] for r in report["thinking"]] == [0, 8, 16, 32, 64, 128]
    assert report["thinking"][0]["budget_hit_rate"] == 1.0 and report["prompts"] == 200
    assert report["non_thinking"]["budget_hit_rate"] == 0.0
    assert (stage["budget_eval"] / "thinking_budget.png").read_bytes()[:4] == b"\x89PNG"
    metrics = manifests["budget_eval"]["metrics"]
    assert metrics["pass@1_non_thinking"] == report["non_thinking"]["pass@1"]
