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

import os
import random
import signal
import tempfile
import time
from pathlib import Path

import chaos_run as chaos
import pytest
from loopback_ray import sweep as _sweep

pytestmark = pytest.mark.slow


@pytest.fixture
def ray_root(rlvr_cache):
    root = tempfile.mkdtemp(prefix="rlvr-chaos-", dir="/tmp")
    yield root
    _sweep(root)


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
    proc = chaos.start(
        run_dir,
        ray_root,
        "trainer.total_training_steps=14",
        "rlvr.restart.max_restarts=2",
        "+reward.reward_kwargs.rlvr.pool.quick_in_caller=false",
        "rlvr.cpu_allocator=jemalloc",
    )
    killed = []
    chaos.wait_for_rows(proc, run_dir, attempt=1, rows=2)
    _on_the_cpu_allocator(proc.pid)
    killed.append(chaos.kill_in_a_step(proc.pid, "ray::WorkerDict", rng, run_dir, 1))
    chaos.wait_for_rows(proc, run_dir, attempt=2, rows=2)
    _on_the_cpu_allocator(proc.pid)  # a restarted attempt's new workers too
    killed.append(chaos.kill_in_a_step(proc.pid, "ray::HFServer", rng, run_dir, 2))
    # Each kill lands within a step time of a row: attempt 1 logged <= 3, attempt 2 resumed at <= 3 and
    # logged <= 6, attempt 3 resumes at <= 6; its pool actor is killed after its second row (<= 8), and
    # the check below runs at a row <= 11 of 14, while the run goes on.
    chaos.wait_for_rows(proc, run_dir, attempt=3, rows=2)
    pool_pids = {p.pid for p in chaos.titled(proc.pid, "ray::VerifierActor")}
    killed.append(chaos.kill_in_a_step(proc.pid, "ray::VerifierActor", rng, run_dir, 3))
    # Two rows after the kill: at least one step's scoring began after it.
    chaos.wait_for_rows(proc, run_dir, attempt=3, rows=len(chaos.logged_steps(run_dir, 3)) + 2)
    # The pool replaced its actor (a new process) and the run went on in the same attempt.
    assert {p.pid for p in chaos.titled(proc.pid, "ray::VerifierActor")} - pool_pids, killed
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, f"killed {killed}\n{out[-4000:]}"
    chaos.assert_complete(run_dir, 14, by_the_pool=True)
    records = attempt_records(run_dir / "attempts")
    assert len(records) == 3, (killed, records)
    for record in records[1:]:
        assert "died" in record["restart_of"] or "Actor" in record["restart_of"], record
    assert all(r.get("status") == 1 and r.get("restartable") for r in records[:2]), records
    assert "3 attempts, 2 restarts" in out
    assert chaos.leftovers(ray_root) == []
    assert chaos.orphaned_segments(segments_before) == set()


def _on_the_cpu_allocator(driver: int) -> None:
    """With rlvr.cpu_allocator=jemalloc the run's FSDP worker and hf rollout server run on jemalloc where it
    is installed, on glibc's malloc where it is not."""
    from rlvr_cluster.env import find_jemalloc

    expected = find_jemalloc()
    expected = expected and os.path.realpath(expected)
    for title in ("ray::WorkerDict", "ray::HFServer"):
        procs = chaos.titled(driver, title)
        assert procs, f"no {title} process under the driver"
        assert {chaos.preloaded_allocator(p.pid) for p in procs} == {expected}, title


def _ended_mid_run(run_dir: Path, attempt: int, steps: int) -> None:
    """The signal landed mid-run: the attempt logged fewer than all `steps` (else the next start would
    find the run complete and record no attempt; CI saw that with 4 steps)."""
    logged = chaos.logged_steps(run_dir, attempt)
    assert logged and max(logged) < steps, f"attempt {attempt} logged {sorted(logged)} of {steps} steps"


def _gone(ray_root: str) -> None:
    deadline = time.time() + 60
    while chaos.leftovers(ray_root) and time.time() < deadline:
        time.sleep(0.5)
    assert chaos.leftovers(ray_root) == [], "processes of the run outlived its driver"


def test_a_driver_stopped_by_sigterm_then_killed_leaves_nothing_running_and_resumes(tmp_path, ray_root):
    from rlvr_cluster import shm
    from rlvr_launch.runs.restart import attempt_records

    rng = random.Random(int(os.environ.get("RLVR_CHAOS_SEED", time.time())))
    segments_before = shm.present_segments()
    run_dir = tmp_path / "run"
    # 10 steps: attempt 1 is stopped within a step time of its second row (logged <= 3), attempt 2 within
    # one of its second row (resumed at <= 3, logged <= 6): each signal lands with >= 4 steps to go.
    steps = 10
    proc = chaos.start(run_dir, ray_root, f"trainer.total_training_steps={steps}")
    chaos.wait_for_rows(proc, run_dir, attempt=1, rows=2)
    chaos.into_the_step(run_dir, 1, rng)
    os.kill(proc.pid, signal.SIGTERM)  # what `kill` and Kubernetes send: a clean stop, not a crash
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, out[-4000:]
    assert "stopped by SIGTERM; `rlvr train --run-dir" in out
    _ended_mid_run(run_dir, 1, steps)
    record = attempt_records(run_dir / "attempts")[0]
    assert record["status"] == 143 and record["cause"] == "stopped by SIGTERM" and not record["restartable"]
    assert chaos.leftovers(ray_root) == [], "processes of the run outlived its driver's SIGTERM"
    assert chaos.orphaned_segments(segments_before) == set()

    again = chaos.start(run_dir, ray_root)  # the run's own recipe (recipe.json)
    chaos.wait_for_rows(again, run_dir, attempt=2, rows=2)
    chaos.into_the_step(run_dir, 2, rng)
    os.kill(again.pid, signal.SIGKILL)  # the driver alone: its Ray must not outlive it
    resumed_out, _ = again.communicate(timeout=60)
    _ended_mid_run(run_dir, 2, steps)
    _gone(ray_root)

    last = chaos.start(run_dir, ray_root)
    out, _ = last.communicate(timeout=900)
    assert last.returncode == 0, out[-4000:]
    chaos.assert_complete(run_dir, steps)
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
    assert chaos.leftovers(ray_root) == []
    assert chaos.orphaned_segments(segments_before) == set()
