"""A chaos test's run (tests/launch/test_chaos.py, tests/cluster/test_vllm_chaos.py): a small `rlvr train`
started as a child in its own session, the process kills timed into a step, and the checks every chaos
test makes afterwards (each step exactly once, every sample scored, nothing left running or in /dev/shm)."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from rlvr_launch.runs.rundir import RunDir

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


def start(
    run_dir: Path, ray_root: str, *overrides: str, env: dict[str, str] | None = None
) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "train", *SMALL, *overrides, "--run-dir", str(run_dir)]
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "RLVR_RAY_TMPDIR_ROOT": ray_root, **(env or {})},
        start_new_session=True,
    )


def logged_steps(run_dir: Path, attempt: int) -> set[int]:
    return set(RunDir.read_attempt(run_dir / "attempts" / f"{attempt}.jsonl"))


def wait_for_rows(proc: subprocess.Popen, run_dir: Path, attempt: int, rows: int) -> int:
    """Wait until the attempt logged `rows` steps (its first row's step time holds its warm-up: the
    second one is a step like the others); returns its newest step."""
    deadline = time.time() + 900
    while time.time() < deadline:
        logged = logged_steps(run_dir, attempt)
        if len(logged) >= rows:
            return max(logged)
        if proc.poll() is not None:
            pytest.fail(
                f"the run ended before attempt {attempt} logged {rows} steps:\n{proc.stdout.read()[-3000:]}"
            )
        time.sleep(0.2)
    pytest.fail(f"attempt {attempt} never logged {rows} steps")


def titled(driver: int, title: str) -> list[psutil.Process]:
    """The driver's descendants whose process title starts with `title`."""
    out = []
    for proc in psutil.Process(driver).children(recursive=True):
        try:
            if proc.cmdline() and proc.cmdline()[0].startswith(title):
                out.append(proc)
        except psutil.Error:
            continue
    return out


def into_the_step(run_dir: Path, attempt: int, rng: random.Random) -> None:
    """Sleep to a random point of the step under way: up to one step time (the attempt's last row's
    `timing_s/step`: 0.3 s on a quiet 2-core machine, 2-3 s under load) after the previous step's row.
    So a signal lands within a step or so of the row it followed, however fast the machine."""
    rows = RunDir.read_attempt(run_dir / "attempts" / f"{attempt}.jsonl")
    step_s = float(rows[max(rows)].get("timing_s/step", 1.0)) if rows else 1.0
    time.sleep(rng.uniform(0.0, step_s))


def kill_in_a_step(driver: int, title: str, rng: random.Random, run_dir: Path, attempt: int) -> str:
    """SIGKILL the driver's descendant whose process title starts with `title`, at a random point of
    the step under way."""
    into_the_step(run_dir, attempt, rng)
    for proc in titled(driver, title):
        try:
            proc.kill()
            return f"{title} pid {proc.pid}"
        except psutil.Error:
            continue
    pytest.fail(f"no process titled {title} under the driver")


def leftovers(ray_root: str) -> list[str]:
    out = []
    for proc in psutil.process_iter():
        try:
            if ray_root in " ".join(proc.cmdline()) and proc.pid != os.getpid():
                out.append(f"{proc.pid} {proc.cmdline()[:2]}")
        except psutil.Error:
            continue
    return out


def orphaned_segments(before: set[Path]) -> set[Path]:
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


def assert_complete(run_dir: Path, steps: int, by_the_pool: bool = False) -> None:
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


def preloaded_allocator(pid: int) -> str | None:
    """The malloc library the process has mapped (jemalloc or tcmalloc), or None: glibc's own."""
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()  # address perms offset dev inode [path]
            path = fields[5] if len(fields) >= 6 else ""
            if "libjemalloc" in path or "libtcmalloc" in path:
                return os.path.realpath(path)
    return None
