"""`rlvr train` end to end with verl's real trainer on CPU (slow: each run starts Ray and verl)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from loopback_ray import sweep as _sweep

pytestmark = pytest.mark.slow

# Small enough for a few seconds per step on 2 cores; the same recipe as the demo otherwise.
SMALL = [
    "data.train_batch_size=8",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
]


@pytest.fixture
def ray_root(rlvr_cache):
    root = tempfile.mkdtemp(prefix="rlvr-t-", dir="/tmp")
    yield root
    _sweep(root)


def _env(ray_root: str) -> dict[str, str]:
    return {**os.environ, "RLVR_RAY_TMPDIR_ROOT": ray_root}


def rlvr_train(
    run_dir: Path, ray_root: str, *overrides: str, timeout: int = 900
) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "train", *SMALL, *overrides, "--run-dir", str(run_dir)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(ray_root))


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _actor_weights(checkpoint: Path) -> dict:
    import torch

    state = torch.load(
        checkpoint / "actor" / "model_world_size_1_rank_0.pt", weights_only=False, map_location="cpu"
    )
    return {k: (v.to_local() if hasattr(v, "to_local") else v).float() for k, v in state.items()}


@pytest.fixture(scope="module")
def killed_and_resumed_run(tmp_path_factory, rlvr_cache):
    """One 5-step run (a checkpoint every step) SIGKILLed after a checkpoint at step 2-4, resumed to the end,
    then started once more: the two tests below assert on it (what a finished run leaves; how the resume
    went), so CI trains it once. Returns what they read."""
    from rlvr_launch.runs.rundir import RunDir

    root = tempfile.mkdtemp(prefix="rlvr-t-", dir="/tmp")
    run_dir = tmp_path_factory.mktemp("killed-and-resumed") / "run"
    try:
        cmd = [
            sys.executable, "-m", "rlvr_launch.cli", "train", *SMALL,
            "trainer.total_training_steps=5", "trainer.save_freq=1", "--run-dir", str(run_dir),
        ]  # fmt: skip
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(root), start_new_session=True
        )
        marker = run_dir / "checkpoints" / "latest_checkpointed_iteration.txt"
        deadline = time.time() + 900
        while time.time() < deadline:
            if marker.exists() and marker.read_text().strip() in {"2", "3", "4"}:
                break
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.2)
        else:
            pytest.fail("no checkpoint appeared")
        os.killpg(proc.pid, signal.SIGKILL)  # a crash: no cleanup runs
        proc.wait()
        _sweep(root)
        newest = int(marker.read_text().strip())
        # {step: row} of the killed attempt; a line cut short by the kill is skipped
        logged = RunDir.read_attempt(run_dir / "attempts" / "1.jsonl")
        resumed = rlvr_train(run_dir, root, "trainer.total_training_steps=5", "trainer.save_freq=1")
        again = rlvr_train(run_dir, root, "trainer.total_training_steps=5", "trainer.save_freq=1")
    finally:
        _sweep(root)
    return {"run_dir": run_dir, "newest": newest, "logged": logged, "resumed": resumed, "again": again}


def test_a_finished_run_leaves_finite_metrics_changed_weights_and_a_curve(
    killed_and_resumed_run, tiny_model_dir
):
    import torch
    from safetensors.torch import load_file

    run_dir, out = killed_and_resumed_run["run_dir"], killed_and_resumed_run["resumed"]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == str(run_dir.resolve()), "the last line is the run directory"
    assert "step 5/5 | reward" in out.stdout, "progress is printed while it runs"
    rows = _rows(run_dir)
    assert [r["training/global_step"] for r in rows] == [1, 2, 3, 4, 5]
    for row in rows:
        for key in (
            "critic/score/mean",
            "actor/pg_loss",
            "actor/kl_loss",
            "actor/grad_norm",
            "response_length/mean",
        ):
            assert math.isfinite(row[key]), (key, row[key])
        assert 0.0 <= row["critic/score/mean"] <= 1.0
    assert (run_dir / "reward_curve.png").stat().st_size > 1000
    assert (run_dir / "config.yaml").exists()
    # verl's TaskRunner ran in the `rlvr train` process (rlvr.task_runner: driver on the cpu platform): its
    # own output went to the attempt's log, not to the terminal (an actor's would be in Ray's logs only).
    verl_output = (run_dir / "attempts" / "2.log").read_text()
    assert "TaskRunner hostname" in verl_output and "TaskRunner hostname" not in out.stdout + out.stderr
    # Old log-probs from the rollout (verl's bypass mode): no recomputation phase; entropy from the update.
    assert all("timing_s/old_log_prob" not in r and math.isfinite(r["actor/entropy_loss"]) for r in rows)
    trained = _actor_weights(run_dir / "checkpoints" / "global_step_5")
    initial = load_file(str(tiny_model_dir / "model.safetensors"))
    moved = {k: float((trained[k] - initial[k].float()).abs().max()) for k in initial if k in trained}
    assert moved and max(moved.values()) > 1e-4, "the actor's weights did not change"
    assert torch.isfinite(torch.tensor(list(moved.values()))).all()


def test_kill_and_resume_continues_at_the_right_step(killed_and_resumed_run):
    run_dir, newest = killed_and_resumed_run["run_dir"], killed_and_resumed_run["newest"]
    assert 2 <= newest < 5
    # verl saves a step's checkpoint before it logs the step's metrics: a kill between the two leaves a
    # checkpoint without its row, and the resume must then redo that step from the checkpoint before it.
    resume_from = newest if newest in killed_and_resumed_run["logged"] else newest - 1
    out = killed_and_resumed_run["resumed"]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"resuming from the checkpoint at step {resume_from}" in out.stdout
    steps = [r["training/global_step"] for r in _rows(run_dir)]
    assert steps == [1, 2, 3, 4, 5], "each step exactly once: none repeated, none lost"
    second = [
        json.loads(line)["step"] for line in (run_dir / "attempts" / "2.jsonl").read_text().splitlines()
    ]
    assert min(second) == resume_from + 1, "the resumed attempt starts right after its checkpoint"

    again = killed_and_resumed_run["again"]
    assert again.returncode == 0
    assert "run already complete" in again.stdout
    assert [r["training/global_step"] for r in _rows(run_dir)] == [1, 2, 3, 4, 5]


def test_two_runs_at_once_do_not_disturb_each_other(tmp_path, ray_root):
    # Run b also recomputes the old log-probs with the actor (the demo takes the rollout's): verl then logs
    # how far the hf rollout's log-probs are from the actor's, which is what makes the bypass exact.
    recompute = ["algorithm.rollout_correction.bypass_mode=false"]
    cmds = [
        [sys.executable, "-m", "rlvr_launch.cli", "train", *SMALL, "trainer.total_training_steps=2",
         *extra, "--run-dir", str(tmp_path / name)]
        for name, extra in (("a", []), ("b", recompute))
    ]  # fmt: skip
    procs = [
        subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(ray_root))
        for c in cmds
    ]
    outputs = [p.communicate(timeout=1200)[0] for p in procs]
    for proc, output in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, output[-3000:]
    for name in ("a", "b"):
        assert [r["training/global_step"] for r in _rows(tmp_path / name)] == [1, 2]
    for row in _rows(tmp_path / "b"):
        assert row["timing_s/old_log_prob"] > 0
        # The rollout's log-probs are the old policy's: the same fp32 weights, synced before the step.
        assert row["training/rollout_probs_diff_max"] < 1e-4, row["training/rollout_probs_diff_max"]
        assert row["training/rollout_actor_probs_pearson_corr"] > 0.9999


def test_ctrl_c_stops_the_run_at_once_and_says_how_to_resume(tmp_path, ray_root):
    """verl's TaskRunner runs in the `rlvr train` process on the cpu platform: Ctrl-C must still stop it
    wherever verl is (its asyncio loops included), clean up, and say how to resume."""
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "train", *SMALL, "trainer.total_training_steps=50",
           "--run-dir", str(run_dir)]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(ray_root),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as from a terminal
    )
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "step 2/50" in line:
            break
    else:
        pytest.fail("".join(lines)[-3000:])
    interrupted = time.time()
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, "".join(lines)[-2000:] + rest[-3000:]
    assert time.time() - interrupted < 60
    assert "interrupted; `rlvr train --run-dir" in rest
    assert "step 50/50" not in rest
    assert rest.strip().splitlines()[-1] == str(run_dir.resolve())


def test_a_run_directory_in_use_is_refused_at_once(tmp_path, ray_root):
    from rlvr_launch.runs.rundir import RunDir

    holder = RunDir(tmp_path / "busy")
    holder.acquire()
    try:
        started = time.time()
        out = rlvr_train(tmp_path / "busy", ray_root, "trainer.total_training_steps=2", timeout=300)
        assert out.returncode == 2
        assert "is in use by pid" in out.stderr
        assert time.time() - started < 120, "refused before starting Ray or verl"
        assert not (tmp_path / "busy" / "attempts").exists(), "nothing of the holder's run was touched"
    finally:
        holder.release()


def test_a_missing_dataset_is_named_before_anything_starts(tmp_path, ray_root):
    out = rlvr_train(
        tmp_path / "run", ray_root, f"data.train_files={tmp_path}/nope/train.parquet", timeout=300
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert f"{tmp_path}/nope/train.parquet does not exist" in out.stderr
