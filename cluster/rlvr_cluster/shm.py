"""Shared-memory segments a run leaves in /dev/shm, found and removed at the end of the run.

vLLM's message queues (`psm_*`, 160-250 MB each) and verl's weight-sync buffer (`verl_weights_*`, the
bucket size) live in /dev/shm. Ray stops the processes that created them with SIGKILL, so nothing
unlinks them, and a few runs fill the machine's shared memory. Removed at the end of a run: the
segments a process of this run has open, and those that appeared while it ran and that no live process
holds (a vLLM worker that crashed mid-run leaves its queues unheld and, reparented, outside the run's
process tree). A segment another live run holds is never removed.
"""

from __future__ import annotations

import os
from pathlib import Path

SHM_DIR = Path("/dev/shm")
# Python's SharedMemory default names (vLLM's queues) and verl's weight buffers.
SEGMENT_PREFIXES = ("psm_", "verl_weights_")


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name may contain spaces and parentheses: the ppid follows the last ')'.
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(root: int) -> set[int]:
    tree = _children()
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        for child in tree.get(pid, []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _segments_of(pid: int) -> set[Path]:
    paths: set[str] = set()
    try:
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            parts = line.split(maxsplit=5)
            if len(parts) == 6:
                paths.add(parts[5].removesuffix(" (deleted)"))
    except OSError:
        pass
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                paths.add(os.readlink(f"/proc/{pid}/fd/{fd}").removesuffix(" (deleted)"))
            except OSError:
                continue
    except OSError:
        pass
    return {
        Path(p)
        for p in paths
        if p.startswith(f"{SHM_DIR}/") and Path(p).name.startswith(SEGMENT_PREFIXES) and "/" not in p[9:]
    }


def _start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])  # field 22: start time, survives no pid reuse


def run_processes(root: int | None = None) -> dict[int, int]:
    """The process tree below `root` (default: this process), as pid -> start time."""
    root = os.getpid() if root is None else root
    found = {}
    for pid in descendants(root):
        if (start := _start_time(pid)) is not None:
            found[pid] = start
    return found


def kill_survivors(processes: dict[int, int], grace_s: float = 10.0) -> list[int]:
    """SIGKILL the processes of a stopped run that are still alive after `grace_s`.

    Ray's shutdown stops its own workers, but a process a worker spawned (vLLM's engine core) is
    reparented when its worker dies and can outlive the run, holding its shared memory. The start time
    guards against a reused pid. Returns the pids killed."""
    import signal
    import time

    deadline = time.monotonic() + grace_s
    while True:
        alive = [pid for pid, start in processes.items() if _start_time(pid) == start]
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    killed = []
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except OSError:
            continue
    for pid in killed:  # reaped by init (or by us); wait until they are gone from /proc
        for _ in range(40):
            if _start_time(pid) != processes[pid]:
                break
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.05)
    return killed


def present_segments() -> set[Path]:
    """The segments in /dev/shm now, by name prefix."""
    try:
        return {p for p in SHM_DIR.iterdir() if p.name.startswith(SEGMENT_PREFIXES)}
    except OSError:
        return set()


def held_segments(root: int | None = None) -> set[Path]:
    """Segments open in `root` (default: this process) or any of its descendants."""
    root = os.getpid() if root is None else root
    held: set[Path] = set()
    for pid in {root} | descendants(root):
        held |= _segments_of(pid)
    return held


def segments_in_use() -> set[Path]:
    """Segments any live process on the machine has open."""
    in_use: set[Path] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            in_use |= _segments_of(int(entry))
    return in_use


def remove_segments(candidates: set[Path], wait_s: float = 15.0) -> list[Path]:
    """Unlink the candidates that still exist and that no live process has open (waiting up to
    `wait_s` for the processes of a stopped run to exit). Returns the removed paths."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        candidates = {p for p in candidates if p.exists()}
        if not candidates:
            return []
        in_use = segments_in_use()
        if not (candidates & in_use) or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    removed = []
    for path in sorted(candidates - in_use):
        try:
            path.unlink()
            removed.append(path)
        except FileNotFoundError:
            continue
    return removed
