"""Chaos (issue 35, item 3): kill a process of a real `rlvr train` run at a random point of a step.

- the FSDP worker (`ray::WorkerDict`), then, in the restarted attempt, the `hf` rollout server
  (`ray::HFServer`): the run restarts itself from its newest checkpoint each time (rlvr.restart);
  then, in the third attempt, a verifier pool actor (`ray::VerifierActor`; the run's pool scores every
  sample in its actors: quick_in_caller=false): the pool re-sends its items to a new actor, no restart.
  The run ends with every step exactly once, every sample of every step scored by the pool (or an
  explicit, counted failure status), both restarts' causes named;
- the driver (`rlvr train` itself), in one run: SIGTERM (`kill`, Kubernetes, `rlvr stop`) ends it
  cleanly (exit 143, the attempt recorded `stopped by SIGTERM`); resumed, SIGKILL, which nothing in the
  run can survive (its Ray goes with it); resumed again, it finishes, each resume naming how the attempt
  before it ended.

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

from rlvr_launch.runs.rundir import RunDir

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
    return set(RunDir.read_attempt(run_dir / "attempts" / f"{attempt}.jsonl"))


def _wait_for_rows(proc: subprocess.Popen, run_dir: Path, attempt: int, rows: int) -> int:
    """Wait until the attempt logged `rows` steps (its first row's step time holds its warm-up: the
    second one is a step like the others); returns its newest step."""
    deadline = time.time() + 900
    while time.time() < deadline:
        logged = _logged_steps(run_dir, attempt)
        if len(logged) >= rows:
            return max(logged)
        if proc.poll() is not None:
            pytest.fail(
                f"the run ended before attempt {attempt} logged {rows} steps:\n{proc.stdout.read()[-3000:]}"
            )
        time.sleep(0.2)
    pytest.fail(f"attempt {attempt} never logged {rows} steps")


def _titled(driver: int, title: str) -> list[psutil.Process]:
    """The driver's descendants whose process title starts with `title`."""
    out = []
    for proc in psutil.Process(driver).children(recursive=True):
        try:
            if proc.cmdline() and proc.cmdline()[0].startswith(title):
                out.append(proc)
        except psutil.Error:
            continue
    return out


def _into_the_step(run_dir: Path, attempt: int, rng: random.Random) -> None:
    """Sleep to a random point of the step under way: up to one step time (the attempt's last row's
    `timing_s/step`: 0.3 s on a quiet 2-core machine, 2-3 s under load) after the previous step's row.
    So a signal lands within a step or so of the row it followed, however fast the machine."""
    rows = RunDir.read_attempt(run_dir / "attempts" / f"{attempt}.jsonl")
    step_s = float(rows[max(rows)].get("timing_s/step", 1.0)) if rows else 1.0
    time.sleep(rng.uniform(0.0, step_s))


def _kill_in_a_step(driver: int, title: str, rng: random.Random, run_dir: Path, attempt: int) -> str:
    """SIGKILL the driver's descendant whose process title starts with `title`, at a random point of
    the step under way."""
    _into_the_step(run_dir, attempt, rng)
    for proc in _titled(driver, title):
        try:
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
    """Segments that appeared since `before` and that no live process holds. The machine is shared: a
    segment another run is creating or removing (its vLLM's `psm_*` queues) shows up unheld for a moment,
    so only those still there, unheld, 30 s on count (a leak of this run's stays: nothing is left to
    remove it)."""
    from rlvr_cluster import shm

    deadline = time.time() + 30
    while True:
        orphans = (shm.present_segments() - before) - shm.segments_in_use()
        if not orphans or time.time() > deadline:
            return orphans
        time.sleep(1)


def _assert_complete(run_dir: Path, steps: int, by_the_pool: bool = False) -> None:
    """Steps 1..steps logged exactly once, each with all its samples scored; `by_the_pool`: each sample
    scored in a pool actor (its latency measured there) or given an explicit failure status the step
    counts (the pool's `sandbox_error` for an item whose actor died under it alone, `timeout`)."""
    from rlvr_verifiers.base import SANDBOX_ERROR, STATUSES, TIMEOUT

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["training/global_step"] for r in rows] == list(range(1, steps + 1)), "each step exactly once"
    for step in range(1, steps + 1):
        samples = [
            json.loads(line) for line in (run_dir / "rollouts" / f"{step}.jsonl").read_text().splitlines()
        ]
        assert len(samples) == BATCH * GROUP, f"step {step}: {len(samples)} samples dumped"
        assert all(math.isfinite(float(s["score"])) and 0 <= float(s["score"]) <= 1 for s in samples), step
        assert all(s["rlvr_status"] in STATUSES for s in samples), step
        if by_the_pool:
            unscored = [
                s
                for s in samples
                if s["rlvr_latency_ms"] is None and s["rlvr_status"] not in (SANDBOX_ERROR, TIMEOUT)
            ]
            assert unscored == [], (
                f"step {step}: samples neither scored by the pool nor failed: {unscored[:2]}"
            )


def test_a_killed_fsdp_worker_and_rollout_server_are_restarted_and_a_killed_pool_actor_replaced(
    tmp_path, ray_root
):
    from rlvr_cluster import shm
    from rlvr_launch.runs.restart import attempt_records

    rng = random.Random(int(os.environ.get("RLVR_CHAOS_SEED", time.time())))
    segments_before = shm.present_segments()
    run_dir = tmp_path / "run"
    # The demo's math verifier decides exact answers in the caller; off, every sample goes to the pool's
    # actor (one, cpu_demo's num_actors), so that the pool actor killed below holds the step's scoring.
    proc = _start(
        run_dir,
        ray_root,
        "trainer.total_training_steps=14",
        "rlvr.restart.max_restarts=2",
        "+reward.reward_kwargs.rlvr.pool.quick_in_caller=false",
    )
    killed = []
    _wait_for_rows(proc, run_dir, attempt=1, rows=2)
    killed.append(_kill_in_a_step(proc.pid, "ray::WorkerDict", rng, run_dir, 1))
    _wait_for_rows(proc, run_dir, attempt=2, rows=2)
    killed.append(_kill_in_a_step(proc.pid, "ray::HFServer", rng, run_dir, 2))
    # Each kill lands within a step time of a row: attempt 1 logged <= 3, attempt 2 resumed at <= 3 and
    # logged <= 6, attempt 3 resumes at <= 6; its pool actor is killed after its second row (<= 8), and
    # the check below runs at a row <= 11 of 14, while the run goes on.
    _wait_for_rows(proc, run_dir, attempt=3, rows=2)
    pool_pids = {p.pid for p in _titled(proc.pid, "ray::VerifierActor")}
    killed.append(_kill_in_a_step(proc.pid, "ray::VerifierActor", rng, run_dir, 3))
    # Two rows after the kill: at least one step's scoring began after it.
    _wait_for_rows(proc, run_dir, attempt=3, rows=len(_logged_steps(run_dir, 3)) + 2)
    # The pool replaced its actor (a new process) and the run went on in the same attempt.
    assert {p.pid for p in _titled(proc.pid, "ray::VerifierActor")} - pool_pids, killed
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, f"killed {killed}\n{out[-4000:]}"
    _assert_complete(run_dir, 14, by_the_pool=True)
    records = attempt_records(run_dir / "attempts")
    assert len(records) == 3, (killed, records)
    for record in records[1:]:
        assert "died" in record["restart_of"] or "Actor" in record["restart_of"], record
    assert all(r.get("status") == 1 and r.get("restartable") for r in records[:2]), records
    assert "3 attempts, 2 restarts" in out
    assert _leftovers(ray_root) == []
    assert _orphaned_segments(segments_before) == set()


def _ended_mid_run(run_dir: Path, attempt: int, steps: int) -> None:
    """The signal landed mid-run: the attempt logged fewer than all `steps` (else the next start would
    find the run complete and record no attempt; CI saw that with 4 steps)."""
    logged = _logged_steps(run_dir, attempt)
    assert logged and max(logged) < steps, f"attempt {attempt} logged {sorted(logged)} of {steps} steps"


def _gone(ray_root: str) -> None:
    deadline = time.time() + 60
    while _leftovers(ray_root) and time.time() < deadline:
        time.sleep(0.5)
    assert _leftovers(ray_root) == [], "processes of the run outlived its driver"


def test_a_driver_stopped_by_sigterm_then_killed_leaves_nothing_running_and_resumes(tmp_path, ray_root):
    from rlvr_cluster import shm
    from rlvr_launch.runs.restart import attempt_records

    rng = random.Random(int(os.environ.get("RLVR_CHAOS_SEED", time.time())))
    segments_before = shm.present_segments()
    run_dir = tmp_path / "run"
    # 10 steps: attempt 1 is stopped within a step time of its second row (logged <= 3), attempt 2 within
    # one of its second row (resumed at <= 3, logged <= 6): each signal lands with >= 4 steps to go.
    steps = 10
    proc = _start(run_dir, ray_root, f"trainer.total_training_steps={steps}")
    _wait_for_rows(proc, run_dir, attempt=1, rows=2)
    _into_the_step(run_dir, 1, rng)
    os.kill(proc.pid, signal.SIGTERM)  # what `kill` and Kubernetes send: a clean stop, not a crash
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, out[-4000:]
    assert "stopped by SIGTERM; `rlvr train --run-dir" in out
    _ended_mid_run(run_dir, 1, steps)
    record = attempt_records(run_dir / "attempts")[0]
    assert record["status"] == 143 and record["cause"] == "stopped by SIGTERM" and not record["restartable"]
    assert _leftovers(ray_root) == [], "processes of the run outlived its driver's SIGTERM"
    assert _orphaned_segments(segments_before) == set()

    again = _start(run_dir, ray_root)  # the run's own recipe (recipe.json)
    _wait_for_rows(again, run_dir, attempt=2, rows=2)
    _into_the_step(run_dir, 2, rng)
    os.kill(again.pid, signal.SIGKILL)  # the driver alone: its Ray must not outlive it
    resumed_out, _ = again.communicate(timeout=60)
    _ended_mid_run(run_dir, 2, steps)
    _gone(ray_root)

    last = _start(run_dir, ray_root)
    out, _ = last.communicate(timeout=900)
    assert last.returncode == 0, out[-4000:]
    _assert_complete(run_dir, steps)
    records = attempt_records(run_dir / "attempts")
    # Two resumes by hand, none an automatic restart (none counted against rlvr.restart), each naming
    # how the attempt before it ended.
    assert len(records) == 3, records
    assert records[1]["resumed_after"] == "stopped by SIGTERM", records
    assert "driver died" in records[2]["resumed_after"], records
    assert not any("restart_of" in r for r in records), records
    assert "the previous attempt ended: the previous attempt's driver died" in out
    assert "the previous attempt ended: stopped by SIGTERM" in resumed_out
    assert "3 attempts, 0 restarts: attempt 2 resumed by hand after: stopped by SIGTERM; attempt 3" in out
    assert _leftovers(ray_root) == []
    assert _orphaned_segments(segments_before) == set()
