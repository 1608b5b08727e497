"""A run's default folder says what the run is, and a run refused before it starts leaves no folder at all,
not even the ./runs it would have gone in (issue 27)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rlvr_launch.recipes import compose
from rlvr_launch.runs import train


def test_a_run_is_named_after_its_experiment_and_the_task_or_model_the_command_line_picked():
    assert train.run_name(compose.compose([]), []) == "cpu_demo"
    assert train.run_name(compose.compose(["task=math"]), ["task=math"]) == "cpu_demo-math"
    overrides = ["task=countdown", "trainer.total_training_steps=3"]
    assert train.run_name(compose.compose(overrides), overrides) == "cpu_demo-countdown"


@pytest.mark.slow  # a compose and a data check in a child process: seconds
def test_a_refused_run_leaves_no_runs_folder_in_the_working_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RLVR_RUNS_DIR"}
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "train", "data.train_files=/nonexistent/x.parquet"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 2 and "dataset /nonexistent/x.parquet does not exist" in done.stderr
    assert list(tmp_path.iterdir()) == []  # before: an empty runs/
