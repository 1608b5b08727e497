"""The bounded process in which the verifier pool runs its quick checks (the "quick path").

    worker = QuickWorker(preload=("math",))
    worker.check("math", item)   # the verifier's quick(item): a Verdict, or None (ship it to an actor)
    worker.close()

The pool (rlvr_verifiers.pool, `quick_in_caller`) decides cheap items without a Ray round trip: a built-in
verifier's `quick(item)` (math's exact path) answers what it can and the rest is shipped to the actors.
That used to run inside the caller, i.e. the trainer's own reward worker, with no time limit: one
response on which a parser goes super-linear would stall the training step for every other sample. The
parsers are linear by construction now (rlvr_verifiers.scan, tests/verifiers/test_bounded_parsing.py),
but the guarantee here does not depend on that care: NO verifier code runs in the caller's process.

How: one small child process per pool client (started with `subprocess`, so a posix_spawn/vfork, never a
fork of the big trainer process; it imports only rlvr_verifiers and the preloaded verifiers) reads
`(verifier name, item)` frames on its stdin and writes one pickled verdict (or None) per item on its
stdout. For each item the caller waits on the pipe and reads the child's CPU time (/proc/<pid>/stat):
once the child has spent `cpu_budget_s` CPU seconds on the item (default QUICK_CPU_BUDGET_S), the caller
SIGKILLs it, counts it (`gave_up`), and answers None, so the item goes to an actor, where the pool's
per-item timeout bounds it like any other. The next check starts a fresh child. A child that dies or
answers garbage is treated the same way (None, restart). The budget is CPU time, not wall time, so a
loaded machine does not turn normal items away; a wall-clock cap (`wall_cap_s`, far above any budget)
only guards against a child that is stopped and never runs.

Cost: a round trip over two pipes, about 0.1 ms per item (pickling a long response included), against
about 0.8 ms for a Ray call; the child's start (imports) is paid once per caller process, before the first
item (`start()`; the pool calls it when it starts).

The child is trusted code (the verifiers) on data (responses); no model-written code runs there (that is
rlvr_verifiers.sandbox's job). It inherits the caller's environment so it imports the same modules.
"""

from __future__ import annotations

import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

logger = logging.getLogger(__name__)

QUICK_CPU_BUDGET_S = 0.25  # CPU seconds the child may spend on one item before it is killed
_HEADER = struct.Struct("!I")
_READY = "ready"
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _write(stream: Any, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read(fd: int) -> tuple[bool, Any]:
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return False, None
    body = _read_exact(fd, _HEADER.unpack(header)[0])
    return (False, None) if body is None else (True, pickle.loads(body))


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (from /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime (fields 14 and 15)


# Every worker of this process with a child running: a run that ends closes them all (close_all) instead
# of leaving children that only exit with their caller.
_RUNNING: weakref.WeakSet[QuickWorker] = weakref.WeakSet()


def close_all() -> int:
    """Stop the child of every QuickWorker of this process (a caller that checks again starts a fresh
    one). `rlvr train` calls it when its run ends: the children of the driver's own pool clients would
    otherwise live on until the driver exits, and the run's shutdown waited for them. Returns how many
    children were stopped."""
    stopped = 0
    for worker in list(_RUNNING):
        if worker.pid is not None:
            stopped += 1
        worker.close()
    return stopped


class QuickWorker:
    """A child process running built-in verifiers' quick checks, each bounded by `cpu_budget_s`."""

    def __init__(
        self,
        preload: Sequence[str] = (),
        imports: Sequence[str] = (),
        cpu_budget_s: float = QUICK_CPU_BUDGET_S,
        wall_cap_s: float = 30.0,
        start_timeout_s: float = 120.0,
    ) -> None:
        if not cpu_budget_s > 0:
            raise ValueError(f"QuickWorker cpu_budget_s must be > 0, got {cpu_budget_s}")
        self.preload = tuple(preload)
        self.imports = tuple(imports)  # modules the child imports first (user verifiers register there)
        self.cpu_budget_s = cpu_budget_s
        self.wall_cap_s = wall_cap_s
        self.start_timeout_s = start_timeout_s
        self.gave_up = 0  # items the child was killed on (over budget, died, or garbled)
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._loaded: set[str] = set()  # verifiers the running child has imported (not charged to items)
        self._lock = threading.RLock()  # one request on the pipes at a time (callers in several threads)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def start(self) -> None:
        """Start the child if it is not running (returns at once; check() waits for it to be ready)."""
        if self._proc is not None and self._proc.poll() is None:
            return
        env = dict(os.environ)  # the same modules as here: this package's root first on the path
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rlvr_verifiers.quick_worker",
                *(f"import:{m}" for m in self.imports),
                *self.preload,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            env=env,
        )
        self._ready = False
        self._loaded = set(self.preload)
        _RUNNING.add(self)

    def _wait_ready(self) -> bool:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            readable, _, _ = select.select([fd], [], [], 0.05)
            if readable:
                ok, message = _read(fd)
                self._ready = ok and message == _READY
                return self._ready
            if self._proc.poll() is not None:
                return False
        return False

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        self._ready = False
        _RUNNING.discard(self)
        if proc is None:
            return
        try:
            proc.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()

    def check(self, name: str, item: Any) -> Any:
        """`registry.get(name).quick(item)` in the child: its Verdict, or None (over budget, no verdict,
        or the child failed: the caller ships the item). Thread-safe (one request at a time)."""
        with self._lock:
            return self._check(name, item)

    def _check(self, name: str, item: Any) -> Any:
        self.start()
        assert self._proc is not None
        if not self._ready and not self._wait_ready():
            logger.warning("quick worker did not start; items go to the actors")
            self._kill()
            return None
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        if name not in self._loaded:  # import it first: its import time is no item's
            try:
                _write(proc.stdin, ("load", name))
            except (OSError, ValueError):
                self._give_up("died")
                return None
            if not self._wait_ready():
                self._give_up(f"could not load verifier {name!r}")
                return None
            self._loaded.add(name)
        try:
            frame = pickle.dumps(("check", name, item), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an item that cannot travel this way goes to an actor
            return None
        try:
            cpu_before = cpu_seconds(proc.pid)
            proc.stdin.write(_HEADER.pack(len(frame)) + frame)
            proc.stdin.flush()
        except (OSError, ValueError):
            self._give_up("died")
            return None
        fd = proc.stdout.fileno()
        wall_deadline = time.monotonic() + self.wall_cap_s
        while True:
            readable, _, _ = select.select([fd], [], [], 0.01)
            if readable:
                ok, verdict = _read(fd)
                if not ok:
                    self._give_up("died")
                    return None
                return verdict
            try:
                spent = cpu_seconds(proc.pid) - cpu_before
            except OSError:
                spent = 0.0
            if spent > self.cpu_budget_s or time.monotonic() > wall_deadline or proc.poll() is not None:
                self._give_up(f"over its budget ({spent:.2f} CPU s on one {name} item)")
                return None

    def _give_up(self, why: str) -> None:
        self.gave_up += 1
        logger.warning("quick worker %s: killed, the item goes to an actor", why)
        self._kill()

    def close(self) -> None:
        with self._lock:
            self._kill()

    def __del__(self) -> None:
        try:
            self._kill()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def main(argv: Sequence[str]) -> int:
    """The child: import `import:MODULE` args, preload the named verifiers, answer `ready`, then serve
    ("load", name) and ("check", name, item) frames."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a verifier prints goes to stderr, never into the protocol
    import importlib

    from rlvr_verifiers import registry

    for arg in argv:
        if arg.startswith("import:"):
            importlib.import_module(arg[len("import:") :])
        else:
            registry.get(arg)
    _write(out, _READY)
    stdin_fd = sys.stdin.fileno()
    while True:
        ok, frame = _read(stdin_fd)
        if not ok:
            return 0  # the caller closed the pipe (or died)
        if frame[0] == "load":
            try:
                registry.get(frame[1])
            except Exception:  # noqa: BLE001 - the caller hears "not ready" and ships the items
                return 1
            _write(out, _READY)
            continue
        _, name, item = frame
        try:
            quick = getattr(registry.get(name), "quick", None)
            verdict = quick(item) if callable(quick) else None
        except Exception:  # noqa: BLE001 - a failing quick check leaves the item to an actor
            verdict = None
        _write(out, verdict)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
