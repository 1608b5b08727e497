"""The end of a run removes the shared-memory segments its crashed processes left, never a live one's."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from rlvr_cluster import shm

# Creates a segment the way Python's SharedMemory does (a file in /dev/shm, mapped), then either exits
# without unlinking it (a worker killed mid-run) or keeps it mapped until stdin closes (a live run).
CREATOR = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(fd, 4096)
m = mmap.mmap(fd, 4096)
print("ready", flush=True)
if sys.argv[2] == "live":
    sys.stdin.read()
os._exit(0)
"""


def _create(mode: str):
    path = shm.SHM_DIR / f"psm_rlvrtest_{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        [sys.executable, "-c", CREATOR, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    return path, proc


def test_a_crashed_workers_segment_is_removed_and_a_live_processs_is_kept():
    before = shm.present_segments()
    crashed, proc = _create("crash")
    proc.wait(timeout=10)
    live, holder = _create("live")
    try:
        appeared = shm.present_segments() - before
        assert {crashed, live} <= appeared
        assert live in shm.segments_in_use() and crashed not in shm.segments_in_use()
        removed = shm.remove_segments(appeared & {crashed, live}, wait_s=0.5)
        assert removed == [crashed]
        assert not crashed.exists() and live.exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
        for path in (crashed, live):
            path.unlink(missing_ok=True)


# A worker that starts a helper process and dies: the helper is reparented and outlives the worker
# (vLLM's engine core after its Ray worker is killed), holding a segment.
ORPHANING_WORKER = """
import subprocess, sys
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print(helper.pid, flush=True)
sys.stdin.read()
"""


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_a_process_of_the_run_that_outlives_its_worker_is_stopped():
    worker = subprocess.Popen(
        [sys.executable, "-c", ORPHANING_WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    helper = int(worker.stdout.readline())
    processes = shm.run_processes()  # taken while the run is up, as train.py does before ray.shutdown()
    assert {worker.pid, helper} <= set(processes)
    worker.stdin.close()
    worker.wait(timeout=10)  # the worker exits; its helper lives on, reparented
    assert shm._start_time(helper) == processes[helper]
    # Only this run's processes: the snapshot of the test process's tree also holds whatever an earlier test
    # left running below pytest (CI once saw one), which is not this run's to judge.
    run = {pid: processes[pid] for pid in (worker.pid, helper)}
    assert shm.kill_survivors(run, grace_s=0.5) == [helper]
    assert shm._start_time(helper) is None


def test_a_reused_pid_is_never_killed():
    unrelated = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        # The recorded start time differs: the pid now names another process than the run's.
        stale = {unrelated.pid: shm._start_time(unrelated.pid) - 1}
        assert shm.kill_survivors(stale, grace_s=0.1) == []
        assert unrelated.poll() is None
    finally:
        unrelated.kill()
        unrelated.wait()
