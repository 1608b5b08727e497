"""The private single-node Ray that `rlvr train` starts outside a Ray job keeps no idle process.

verl runs Ray tasks only at start-up (its worker groups ask a task for a free master port); Ray would
keep each task's worker process (~120 MiB, a Python with Ray loaded) idle for the whole run, and would
prestart one per logical CPU. Both are turned off in `_start_ray`'s system config. The head itself
runs without the autoscaler monitor and, unless --verbose, the log monitor (rlvr_launch.runs.ray_head,
which builds the head through Ray's private node API: the assumptions it makes are checked here).
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
    from rlvr_launch.recipes import compose
    from rlvr_launch.runs import train

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
        train.stop_private_ray(set())
        if temp_dir:
            shutil.rmtree(temp_dir, ignore_errors=True)


def _tree() -> dict[int, str]:
    """This process's live descendants and their command lines. Zombies are left out: under xdist the
    worker may hold an unreaped child of an earlier test, which has no command line and is not running."""
    import psutil

    tree = {}
    for p in psutil.Process().children(recursive=True):
        try:
            tree[p.pid] = " ".join(p.cmdline())
        except psutil.NoSuchProcess:  # ZombieProcess is one
            continue
    return tree


def test_ray_still_starts_a_head_the_way_ray_head_mirrors():
    """ray_head copies ray.init's "start a new cluster" branch and sets two RayParams it does not expose:
    when Ray changes either, this fails (re-read ray/_private/worker.py's init and update ray_head)."""
    import inspect
    from pathlib import Path

    import ray
    import ray._private.node
    import ray._private.parameter
    import ray._private.worker

    from rlvr_launch.runs import ray_head

    params = inspect.signature(ray._private.parameter.RayParams).parameters
    assert {"no_monitor", "include_log_monitor", "_system_config", "temp_dir", "resources"} <= set(params)
    node = inspect.signature(ray._private.node.Node).parameters
    assert {"ray_params", "head", "shutdown_at_exit", "spawn_reaper", "ray_init_cluster"} <= set(node)
    kill = inspect.signature(ray._private.node.Node.kill_all_processes).parameters
    assert {"check_alive", "allow_graceful", "wait"} <= set(kill)
    init = inspect.getsource(ray._private.worker.init)
    for step in (
        "enable_token_auth_by_default()",
        "ensure_token_if_auth_enabled(_system_config, create_token_if_missing=True)",
        "usage_lib.set_usage_stats_enabled_via_env_var(False)",
        "ray_init_cluster=True",
    ):
        assert step in init, f"ray.init no longer does {step!r} when it starts a cluster; ray_head mirrors it"
    # The scripts whose processes the head leaves out still exist under these names (else the process
    # checks below would pass vacuously).
    package = Path(ray.__file__).parent
    for script in (ray_head.AUTOSCALER_MONITOR, ray_head.LOG_MONITOR):
        assert (package / script).is_file(), script


@pytest.mark.slow  # starts a private Ray head twice: ~30 s
@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "verbose"])
def test_the_private_head_runs_no_monitor_it_does_not_need_and_stops_every_process(
    tiny_model_dir, verbose, capfd
):
    import psutil
    import ray

    from rlvr_cluster.env import worker_env
    from rlvr_launch.recipes import compose
    from rlvr_launch.runs import ray_head, train

    assert not ray.is_initialized()
    cfg = compose.compose([f"actor_rollout_ref.model.path={tiny_model_dir}"])
    started, temp_dir, _ = train._start_ray(cfg, worker_env(cfg), verbose=verbose)
    try:
        assert started and ray_head.running()
        if not verbose:  # a quiet start prints none of Ray's warnings (--verbose shows them)
            captured = capfd.readouterr()
            assert "WARNING" not in captured.out + captured.err, captured
        tree = _tree()
        scripts = " | ".join(tree.values())
        # the head is this driver's child tree, so a run's process-tree RSS counts all of it
        assert "gcs_server" in scripts and "raylet" in scripts, scripts
        assert ray_head.AUTOSCALER_MONITOR not in scripts, "the autoscaler monitor runs on a one-machine Ray"
        assert (ray_head.LOG_MONITOR in scripts) == verbose, scripts
        # the head is a working cluster with the verifier pool's resource
        resources = ray.cluster_resources()
        assert resources[str(cfg.rlvr.local_ray.verifier_resource)] == float(
            cfg.rlvr.local_ray.verifier_slots
        )

        @ray.remote(num_cpus=0)
        def square(x: int) -> int:
            return x * x

        assert ray.get(square.remote(7)) == 49
    finally:
        train.stop_private_ray(set())
    assert not ray.is_initialized() and not ray_head.running()
    left = [
        pid for pid in tree if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]
    assert left == [], [tree[pid] for pid in left]
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.slow  # a fresh interpreter importing ray and rlvr_launch: ~2 s
def test_a_run_ends_without_waiting_for_its_own_quick_check_children():
    """The driver's own verifier-pool client runs its quick checks in a child process that only ends
    with its caller (rlvr_verifiers.quick_worker). Ending the run stops it: shutdown used to wait out its
    whole grace period (10 s) for it, then SIGKILL it as a process 'that outlived Ray's shutdown'."""
    import subprocess
    import sys

    script = (
        "from rlvr_verifiers.quick_worker import QuickWorker\n"
        "from rlvr_launch.runs import train\n"
        "w = QuickWorker(preload=('math',)); w.start(); pid = w.pid\n"
        "train.stop_private_ray(set(), log=lambda m: print('LOG', m, flush=True))\n"
        "import os; print('CHILD', pid, os.path.exists(f'/proc/{pid}'), w.pid)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "outlived" not in out.stdout, out.stdout  # nothing was left for the grace period and SIGKILL
    child = [line.split() for line in out.stdout.splitlines() if line.startswith("CHILD")]
    assert child and child[0][2:] == ["False", "None"], out.stdout
