"""The private single-node Ray that `rlvr train` starts outside a Ray job keeps no idle worker process.

verl runs Ray tasks only at start-up (its worker groups ask a task for a free master port); Ray would
keep each task's worker process (~120 MiB, a Python with Ray loaded) idle for the whole run, and would
prestart one per logical CPU. Both are turned off in `_start_ray`'s system config.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest


def _idle_workers_of(temp_dir: str) -> list[int]:
    """Idle Python workers ("ray::IDLE") whose raylet runs from this Ray's temp dir."""
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline"]):
        if not " ".join(process.info["cmdline"] or []).startswith("ray::IDLE"):
            continue
        parent = process.parent()
        if parent is not None and temp_dir in " ".join(parent.cmdline()):
            found.append(process.pid)
    return found


@pytest.mark.slow  # starts a private Ray head: ~15 s
def test_a_tasks_worker_process_is_gone_soon_after_the_task(tiny_model_dir):
    import psutil
    import ray

    from rlvr_cluster.env import worker_env
    from rlvr_launch import compose, train

    assert not ray.is_initialized()
    cfg = compose.compose([f"actor_rollout_ref.model.path={tiny_model_dir}"])
    started, temp_dir, _ = train._start_ray(cfg, worker_env(cfg), verbose=False)
    try:
        assert started

        @ray.remote(num_cpus=0)
        def worker_pid() -> int:
            return os.getpid()

        pid = ray.get(worker_pid.remote())
        deadline = time.monotonic() + 20
        while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, f"the task's worker {pid} is still kept idle"
            time.sleep(0.2)
        assert _idle_workers_of(temp_dir) == []  # and none prestarted per logical CPU
    finally:
        ray.shutdown()
        if temp_dir:
            shutil.rmtree(temp_dir, ignore_errors=True)
