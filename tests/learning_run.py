"""The shape of the default experiment's shared run (conftest's `default_experiment_run`): its length and
validation interval, which test_learning.py's margins were measured at, and the cleanup of its processes."""

from __future__ import annotations

import os
import signal
from pathlib import Path

STEPS = 40
VAL_EVERY = 5


def end_processes_under(root: str) -> None:
    """Kill what a run left behind (only processes whose command line names its private Ray root)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            if root in cmdline and int(pid) != os.getpid():
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
