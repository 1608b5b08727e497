"""Every benchmark under bench/ still runs, at a tiny size (slow set): a bench that rots fails CI.

Figures are not asserted (they depend on the machine and its load); that each bench runs to the end and
prints its side-by-side line is. One row per bench in BENCHES: the script, the arguments that make it
tiny, and a line of its report. A new bench adds its row; test_every_bench_has_a_row fails until it does.
The training benches share one tiny size (TINY_TRAIN, the e2e tests' shape): 2 steps of 8 prompts x 4 responses.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"

TINY_TRAIN = [
    "data.train_batch_size=8",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
]

# script -> (arguments for a tiny run, a regex its report must print)
BENCHES: dict[str, tuple[list[str], str]] = {
    "demo.py": (["trainer.total_training_steps=2", *TINY_TRAIN], r"mean reward\s+first 1\s+last 1\s+ratio"),
    "compare_algos.py": (
        ["--steps", "2", "--algos", "grpo", "--out", "{tmp}/compare", *TINY_TRAIN],
        r"grpo\s+[-\d.]+\s+[-\d.]+\s+[-+\d.]+",
    ),
    "overhead.py": (["--steps", "2", "--rounds", "1", *TINY_TRAIN[:3]], r"median s/step \(after step 1\)"),
    "verifiers.py": (["--n", "24", "--repeats", "1", "--only", "pool"], r"ratio"),
    "pool_cpu.py": (["--n", "24", "--repeats", "1"], r"ratio"),
    "math_vs_math_verify.py": ([], r"accuracy"),
    "sandbox_vs_subprocess.py": (["--pairs", "12", "--rounds", "2"], r"ratio"),
    "rollout_cpu.py": (["--steps", "2", *TINY_TRAIN], r"vllm/hf"),
    "score_paths.py": (["--sizes", "10"], r"verdicts local == ray: True"),
    "pipeline_r1.py": (
        ["--sections", "distill", "--sft-steps", "2", "--k", "2", "--out", "{tmp}/pipeline_r1"],
        r"distilled - RL alone, greedy pass@1: [-+\d.]+",
    ),
    # TRL is an optional bench-only extra (it is not in the test install): the report path runs on the
    # recorded result of a real run (bench/results/vs_trl.json, copied into the test's folder).
    "vs_trl.py": (["--report", "{tmp}/vs_trl.json"], r"TRL GRPOTrainer\s+ratio"),
    # The qwen3 pipeline is minutes of training: the report path runs on a recorded result
    # (bench/results/thinking_budget.json, the bench's default size).
    "thinking_budget.py": (
        ["--report", "{tmp}/thinking_budget.json"],
        r"non-thinking pass@1 fused vs reasoning RL",
    ),
}
RECORDED = BENCH / "results"


def test_every_bench_has_a_row():
    scripts = {p.name for p in BENCH.glob("*.py") if not p.name.startswith("_")}
    assert scripts == set(BENCHES), f"benches without a row here: {sorted(scripts - set(BENCHES))}"


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("script", sorted(BENCHES))
def test_bench_runs_at_a_tiny_size(script, tmp_path, rlvr_cache):
    args, report = BENCHES[script]
    for recorded in RECORDED.glob("*.json"):
        (tmp_path / recorded.name).write_bytes(recorded.read_bytes())
    cmd = [sys.executable, str(BENCH / script), *(a.replace("{tmp}", str(tmp_path)) for a in args)]
    env = dict(os.environ, WANDB_MODE="disabled", TMPDIR=str(tmp_path))
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=280, env=env)
    tail = f"{' '.join(cmd)}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    assert out.returncode == 0, tail
    assert re.search(report, out.stdout), tail
