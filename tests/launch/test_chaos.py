"""Chaos (issue 35, item 3): SIGKILL a process of a real `rlvr train` run at a random point of a step.

- the FSDP worker (`ray::WorkerDict`), then, in the restarted attempt, the `hf` rollout server
  (`ray::HFServer`): the run restarts itself from its newest checkpoint each time (rlvr.restart) and
  ends with every step exactly once, every sample of every step scored, both causes named;
- the driver (`rlvr train` itself): nothing in the run can survive that; its Ray goes with it, and
  `rlvr train --run-dir DIR` resumes, naming the previous attempt's end.

Each leaves no process of the run and no orphaned /dev/shm segment behind. Real processes, slow.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from loopback_ray import sweep as _sweep

pytestmark = pytest.mark.slow

# The small recipe of test_train_e2e: a few seconds a step on 2 cores; a checkpoint every step so a
# restart loses at most the step it was killed in; the rollouts dumped to check every sample's score.
BATCH, GROUP = 8, 4
SMALL = [
    f"data.train_batch_size={BATCH}",
    f"actor_rollout_ref.rollout.n={GROUP}",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=1",
    "rlvr.dump_rollouts=true",
]


@pytest.fixture
def ray_root(rlvr_cache):
    root = tempfile.mkdtemp(prefix="rlvr-chaos-", dir="/tmp")
    yield root
    _sweep(root)


def _start(run_dir: Path, ray_root: str, *overrides: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "train", *SMALL, *overrides, "--run-dir", str(run_dir)]
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "RLVR_RAY_TMPDIR_ROOT": ray_root},
        start_new_session=True,
    )


def _logged_steps(run_dir: Path, attempt: int) -> set[int]:
    from rlvr_launch.runs.rundir import RunDir

    return set(RunDir.read_attempt(run_dir / "attempts" / f"{attempt}.jsonl"))


def _wait_for_step(proc: subprocess.Popen, run_dir: Path, attempt: int, step_at_least: int) -> None:
    deadline = time.time() + 900
    while time.time() < deadline:
        if any(s >= step_at_least for s in _logged_steps(run_dir, attempt)):
            return
        if proc.poll() is not None:
            pytest.fail(
                f"the run ended before attempt {attempt} logged step {step_at_least}:\n{proc.stdout.read()[-3000:]}"
            )
        time.sleep(0.2)
    pytest.fail(f"attempt {attempt} never logged step {step_at_least}")


def _kill_in_a_step(driver: int, title: str, rng: random.Random) -> str:
    """SIGKILL the driver's descendant whose process title starts with `title`, at a random point of
    the step under way (0-1 s after the previous step's row: a step takes ~1-3 s here)."""
    time.sleep(rng.uniform(0.0, 1.0))
    for proc in psutil.Process(driver).children(recursive=True):
        try:
            if proc.cmdline() and proc.cmdline()[0].startswith(title):
                proc.kill()
                return f"{title} pid {proc.pid}"
        except psutil.Error:
            continue
    pytest.fail(f"no process titled {title} under the driver")


def _leftovers(ray_root: str) -> list[str]:
    out = []
    for proc in psutil.process_iter():
        try:
            if ray_root in " ".join(proc.cmdline()) and proc.pid != os.getpid():
                out.append(f"{proc.pid} {proc.cmdline()[:2]}")
        except psutil.Error:
            continue
    return out


def _orphaned_segments(before: set[Path]) -> set[Path]:
    from rlvr_cluster import shm

    return (shm.present_segments() - before) - shm.segments_in_use()


def _assert_complete(run_dir: Path, steps: int) -> None:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["training/global_step"] for r in rows] == list(range(1, steps + 1)), "each step exactly once"
    for step in range(1, steps + 1):
        samples = [
            json.loads(line) for line in (run_dir / "rollouts" / f"{step}.jsonl").read_text().splitlines()
        ]
        assert len(samples) == BATCH * GROUP, f"step {step}: {len(samples)} samples dumped"
        assert all(math.isfinite(float(s["score"])) and 0 <= float(s["score"]) <= 1 for s in samples), step


def test_a_killed_fsdp_worker_and_a_killed_rollout_server_are_restarted_from_the_checkpoint(
    tmp_path, ray_root
):
    from rlvr_cluster import shm
    from rlvr_launch.runs.restart import attempt_records

    rng = random.Random(int(os.environ.get("RLVR_CHAOS_SEED", time.time())))
    segments_before = shm.present_segments()
    run_dir = tmp_path / "run"
    proc = _start(run_dir, ray_root, "trainer.total_training_steps=10", "rlvr.restart.max_restarts=2")
    killed = []
    _wait_for_step(proc, run_dir, attempt=1, step_at_least=2)
    killed.append(_kill_in_a_step(proc.pid, "ray::WorkerDict", rng))
    _wait_for_step(proc, run_dir, attempt=2, step_at_least=1)
    killed.append(_kill_in_a_step(proc.pid, "ray::HFServer", rng))
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, f"killed {killed}\n{out[-4000:]}"
    _assert_complete(run_dir, 10)
    records = attempt_records(run_dir / "attempts")
    assert len(records) == 3, (killed, records)
    for record in records[1:]:
        assert "died" in record["restart_of"] or "Actor" in record["restart_of"], record
    assert all(r.get("status") == 1 and r.get("restartable") for r in records[:2]), records
    assert "3 attempts, 2 restarts" in out
    assert _leftovers(ray_root) == []
    assert _orphaned_segments(segments_before) == set()


def test_a_killed_driver_leaves_nothing_running_and_the_same_run_dir_resumes(tmp_path, ray_root):
    from rlvr_cluster import shm
    from rlvr_launch.runs.restart import attempt_records

    rng = random.Random(int(os.environ.get("RLVR_CHAOS_SEED", time.time())))
    segments_before = shm.present_segments()
    run_dir = tmp_path / "run"
    proc = _start(run_dir, ray_root, "trainer.total_training_steps=4")
    _wait_for_step(proc, run_dir, attempt=1, step_at_least=2)
    time.sleep(rng.uniform(0.0, 2.0))
    os.kill(proc.pid, signal.SIGKILL)  # the driver alone: its Ray must not outlive it
    proc.communicate(timeout=60)
    deadline = time.time() + 60
    while _leftovers(ray_root) and time.time() < deadline:
        time.sleep(0.5)
    assert _leftovers(ray_root) == [], "processes of the run outlived its driver"
    again = _start(run_dir, ray_root, "trainer.total_training_steps=4")
    out, _ = again.communicate(timeout=900)
    assert again.returncode == 0, out[-4000:]
    _assert_complete(run_dir, 4)
    records = attempt_records(run_dir / "attempts")
    # A person's resume, not an automatic restart (none counted against rlvr.restart), naming the end.
    assert len(records) == 2 and "driver died" in records[1]["resumed_after"], records
    assert "restart_of" not in records[1]
    assert "the previous attempt ended: the previous attempt's driver died" in out
    assert "2 attempts, 0 restarts: attempt 2 resumed by hand after" in out
    assert _leftovers(ray_root) == []
    assert _orphaned_segments(segments_before) == set()
