"""A new user's first hour, end to end with verl's real trainer on CPU (issue 10; slow: two short runs
share every assert). The first run is a 2-step run in a shell that exported RAY_ADDRESS; the second
resumes it with only `trainer.total_training_steps=3` on the command line.

- item 1: the resume keeps the stored recipe (the first run's learning rate), applies the new step
  count on top and prints the change; metrics hold steps 1..3 once each;
- item 4: the first line says RAY_ADDRESS is ignored, and the run still trains on its private Ray;
- item 9: no Ray/verl log lines without --verbose, no rlvr-ray-* folder left in the temp root,
  "step 1 -> step 2" (not "first 1 steps"), the run directory is the last line;
- item 10: validation is labelled with what it measures, one line per data source (held-out sums and
  the training sums, greedy).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SMALL = [
    "data.train_batch_size=8",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.optim.lr=4e-4",
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, rlvr_cache):
    run_dir = tmp_path_factory.mktemp("first-hour") / "run"
    ray_root = tempfile.mkdtemp(prefix="rlvr-fh-", dir="/tmp")  # short: Ray's socket paths
    env = {**os.environ, "RLVR_RAY_TMPDIR_ROOT": ray_root, "RAY_ADDRESS": "http://127.0.0.1:9"}
    env.pop("VERL_LOGGING_LEVEL", None)

    def train(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "rlvr_launch.cli", "train", *args, "--run-dir", str(run_dir)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
        print(f"$ {' '.join(cmd[3:])}\n{proc.stdout}{proc.stderr}")
        return proc

    first = train(*SMALL, "trainer.total_training_steps=2")
    resumed = train("trainer.total_training_steps=3")
    left = sorted(p.name for p in Path(ray_root).iterdir())
    shutil.rmtree(ray_root, ignore_errors=True)
    return first, resumed, run_dir, left


def test_both_runs_succeed(runs):
    first, resumed, _, _ = runs
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]


def test_ray_address_of_the_shell_is_announced_on_the_first_line_and_ignored(runs):
    first, _, _, _ = runs
    assert first.stdout.splitlines()[0].startswith(
        "[rlvr] RAY_ADDRESS=http://127.0.0.1:9 is set in this shell and ignored"
    )
    assert "step 2/2" in first.stdout


def test_output_is_quiet_and_ends_with_the_run_directory(runs):
    first, resumed, run_dir, _ = runs
    for proc in (first, resumed):
        lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        # rlvr's own: its [rlvr] lines and the run directory it prints last. Anything else is noise, a
        # Python warning ("/path/file.py:12: UserWarning: ...") included.
        noise = [line for line in lines if not line.startswith("[rlvr]") and line != str(run_dir.resolve())]
        assert noise == [], f"lines that are not rlvr's own: {noise[:10]}"
        assert proc.stdout.splitlines()[-1] == str(run_dir.resolve())
    assert "first 1 steps" not in first.stdout
    assert "[rlvr] reward: step 1 " in first.stdout


def test_no_ray_temp_dir_is_left_behind(runs):
    assert runs[3] == []


def test_validation_says_what_it_measures_per_data_source(runs):
    first, _, run_dir, _ = runs
    assert (
        "validation at step 0: greedy accuracy, 200 held-out sums (never trained; s.e. 0.035) "
        in first.stdout
    )
    assert "greedy accuracy, 200 of the 800 training sums (s.e. 0.035) " in first.stdout
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    keys = {k for row in rows for k in row if k.startswith("val-core/")}
    assert {k.split("/")[1] for k in keys} == {"addition", "addition_trained"}
    assert (run_dir / "reward_curve.png").stat().st_size > 0


def test_the_resume_keeps_the_recipe_and_extends_the_run(runs):
    _, resumed, run_dir, _ = runs
    assert (
        "resuming" in resumed.stdout and "with its stored recipe; changed on this resume:" in resumed.stdout
    )
    assert "[rlvr]   trainer.total_training_steps: 2 -> 3" in resumed.stdout
    assert "resuming from the checkpoint at step 2" in resumed.stdout
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(run_dir / "config.yaml")
    assert cfg.trainer.total_training_steps == 3
    assert cfg.actor_rollout_ref.actor.optim.lr == pytest.approx(4e-4), "the first run's override was lost"
    assert cfg.data.train_batch_size == 8 and cfg.actor_rollout_ref.rollout.n == 4
    stored = json.loads((run_dir / "recipe.json").read_text())["overrides"]
    assert stored == [*SMALL, "trainer.total_training_steps=3"]
    steps = [
        json.loads(line)["training/global_step"]
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    assert [s for s in steps if s > 0] == [1, 2, 3]
