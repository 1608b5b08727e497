"""Symbolic equality in worker processes with a wall-clock kill (works from any thread or process).

The `math` verifier decides most answers exactly in-process (rationals, radicals, pi, polynomials). The
rest (trig, logs, rational functions, nested radicals) go to sympy, and sympy can run for minutes on
adversarial input. `signal.alarm` only works on a process's main thread, so instead sympy runs in
separate worker processes (`python -c ...`, started lazily, each importing sympy once). A request that
outruns its deadline gets its worker killed (SIGKILL) and replaced; the caller gets `None` ("timed
out"). Requests are JSON lines carrying the verifier's own expression trees, which the worker turns
into sympy objects node by node: no string is ever handed to sympy's parser (so `^` is never XOR and
nothing is `eval`ed).

What this does NOT cover: it does not bound the worker's memory (the pool's sandbox/rlimits do that on
verifier nodes); callers must reject huge exponents before sending (the math verifier does).
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import subprocess
import sys
import threading
import time
from fractions import Fraction
from typing import Any

# How long a fresh worker may take to import sympy before it is declared broken.
_START_TIMEOUT_S = 60.0
# Address-space limit of a worker process (sympy on adversarial input can eat memory).
_MEMORY_LIMIT = 4 << 30


# Workers kept at most (each is one process importing sympy, ~100 MB): one per core, at least 2, unless
# RLVR_SYMBOLIC_WORKERS says otherwise (the verifier pool sets it to each actor's CPU share).
def _max_workers() -> int:
    raw = os.environ.get("RLVR_SYMBOLIC_WORKERS", "").strip()
    if not raw:
        return max(2, os.cpu_count() or 2)
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"RLVR_SYMBOLIC_WORKERS={raw!r}: give a whole number >= 1 (sympy worker processes)")
    return int(raw)


_MAX_WORKERS = _max_workers()
# How many symbolic time bounds a request may wait for a busy pool before it gives up (-> timeout).
_WAIT_FACTOR = 10


def _worker_env() -> dict[str, str]:
    # The worker imports rlvr_verifiers even where the parent found it through sys.path edits
    # (e.g. a Ray job's working_dir) rather than an installed distribution.
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class _WorkerDied(Exception):
    pass


class _Worker:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from rlvr_verifiers._symbolic import _serve; _serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=_worker_env(),
        )
        self._buf = b""
        try:  # bound the worker's memory (a best effort: not every platform has prlimit)
            import resource

            resource.prlimit(self.proc.pid, resource.RLIMIT_AS, (_MEMORY_LIMIT, _MEMORY_LIMIT))
        except (ImportError, AttributeError, OSError, ValueError):
            pass
        if self._readline(time.monotonic() + _START_TIMEOUT_S) != "ready":
            self.kill()
            raise RuntimeError("sympy worker failed to start")

    def _readline(self, deadline: float) -> str | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def ask(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """The worker's answer; None when it ran past `timeout_s`; _WorkerDied when it is gone."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            raise _WorkerDied from None
        line = self._readline(time.monotonic() + timeout_s)
        if line is None:
            if self.proc.poll() is not None:
                raise _WorkerDied
            return None
        return json.loads(line)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()


class SymbolicPool:
    """Thread-safe pool of sympy workers; `equal(a, b, timeout_s)` -> True / False / None (timed out)."""

    def __init__(self, max_workers: int = _MAX_WORKERS) -> None:
        self._max = max_workers
        self._idle: list[_Worker] = []
        self._count = 0
        self._cond = threading.Condition()
        self._pid = os.getpid()
        atexit.register(self.close)

    def _acquire(self, deadline: float) -> _Worker | None:
        with self._cond:
            while True:
                while self._idle:
                    worker = self._idle.pop()
                    if worker.proc.poll() is None:
                        return worker
                    self._count -= 1  # died while idle (OOM killer, a stray kill): drop it
                if self._count < self._max:
                    self._count += 1
                    break
                if not self._cond.wait(max(0.0, deadline - time.monotonic())):
                    return None
        try:
            return _Worker()
        except Exception:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _release(self, worker: _Worker | None) -> None:
        with self._cond:
            if worker is None:
                self._count -= 1
            else:
                self._idle.append(worker)
            self._cond.notify()

    def equal(self, a: Any, b: Any, timeout_s: float, wait_s: float | None = None) -> bool | None:
        """True: proven equal; False: not proven (or numerically different); None: timed out.

        `timeout_s` bounds the check itself, from the moment a ready worker has the request. Waiting
        for a free worker (all busy) and starting one are bounded separately by `wait_s` (default
        `_WAIT_FACTOR * timeout_s + _START_TIMEOUT_S`), so a burst of hard items cannot turn easy ones
        into timeouts, yet nothing waits forever.
        """
        if wait_s is None:
            wait_s = _WAIT_FACTOR * timeout_s + _START_TIMEOUT_S
        deadline = time.monotonic() + wait_s
        for _attempt in range(2):  # a worker that died (killed, crashed) is replaced once
            worker = self._acquire(deadline)
            if worker is None:
                return None
            answer = None
            try:
                answer = worker.ask({"a": a, "b": b}, timeout_s)
            except _WorkerDied:
                continue
            finally:
                if answer is None:
                    worker.kill()
                    self._release(None)
                else:
                    self._release(worker)
            if answer is None:
                return None
            return bool(answer.get("equal"))
        return None

    def warm_up(self, a: Any, b: Any, timeout_s: float) -> int:
        """Start every worker this pool may keep, at once, and have each check `a == b` (sympy imports
        and caches a lot on first use: ~1 s of CPU per worker). Returns how many workers are warm.

        Without this, workers start lazily when requests first overlap, which is in the middle of a
        training step, and the step pays for it."""
        deadline = time.monotonic() + _START_TIMEOUT_S + timeout_s
        held: list[_Worker | None] = [None] * self._max

        def start_and_ask(slot: int) -> None:
            worker = self._acquire(deadline)
            if worker is None:
                return
            try:
                answer = worker.ask({"a": a, "b": b}, timeout_s)
            except _WorkerDied:
                answer = None
            if answer is None:
                worker.kill()
                self._release(None)
            else:
                held[slot] = worker  # released together below, so every thread gets its own worker

        threads = [threading.Thread(target=start_and_ask, args=(i,), daemon=True) for i in range(self._max)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        warm = [w for w in held if w is not None]
        for worker in warm:
            self._release(worker)
        return len(warm)

    def close(self) -> None:
        if os.getpid() != self._pid:
            return  # a forked child must not kill its parent's workers (it gets its own pool)
        with self._cond:
            workers, self._idle = self._idle, []
            self._count -= len(workers)
        for worker in workers:
            worker.kill()


_POOL: SymbolicPool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> SymbolicPool:
    with _POOL_LOCK:
        if _POOL is None or _POOL_PID != os.getpid():
            _set_pool(SymbolicPool())
        return _POOL  # type: ignore[return-value]


_POOL_PID = -1


def _set_pool(p: SymbolicPool) -> None:
    # A forked child must not share its parent's worker pipes.
    global _POOL, _POOL_PID
    _POOL, _POOL_PID = p, os.getpid()


# --------------------------------------------------------------------------------------------------
# Worker side: expression trees (see rlvr_verifiers.math) -> sympy.


def _to_sympy(node: list[Any], sp: Any) -> Any:
    op = node[0]
    if op == "num":
        return sp.Rational(node[1])
    if op == "var":
        name = node[1]
        if name == "e":
            return sp.E
        if name == "i":
            return sp.I
        return sp.Symbol(name)
    if op == "pi":
        return sp.pi
    if op == "inf":
        return sp.oo
    args = [_to_sympy(child, sp) for child in node[1:] if isinstance(child, list)]
    if op == "add":
        return sp.Add(*args)
    if op == "mul":
        return sp.Mul(*args)
    if op == "neg":
        return -args[0]
    if op in ("div", "frac"):
        return args[0] / args[1]
    if op == "pow":
        return sp.Pow(args[0], args[1])
    if op == "sqrt":
        return sp.sqrt(args[0])
    if op == "root":
        return sp.root(args[1], args[0])
    if op == "abs":
        return sp.Abs(args[0])
    if op == "fact":
        return sp.factorial(args[0])
    if op == "binom":
        return sp.binomial(args[0], args[1])
    if op == "log":  # ["log", base, arg]
        return sp.log(args[1], args[0])
    if op == "fn":
        fn = {
            "sin": sp.sin,
            "cos": sp.cos,
            "tan": sp.tan,
            "cot": sp.cot,
            "sec": sp.sec,
            "csc": sp.csc,
            "arcsin": sp.asin,
            "arccos": sp.acos,
            "arctan": sp.atan,
            "sinh": sp.sinh,
            "cosh": sp.cosh,
            "tanh": sp.tanh,
            "ln": sp.log,
            "log": sp.log,
            "exp": sp.exp,
        }[node[1]]
        return fn(args[0])
    raise ValueError(f"unknown node {op!r}")


_POINTS = ("0.5377", "1.8339", "-2.2588", "0.8622", "0.3188", "-1.3077", "-0.4336", "0.3426")


def _mp_eval(node: list[Any], env: dict[str, Any], mp: Any) -> Any:
    op = node[0]

    def ev(child: list[Any]) -> Any:
        return _mp_eval(child, env, mp)

    if op == "num":
        q = Fraction(node[1])
        return mp.mpf(q.numerator) / q.denominator
    if op == "var":
        if node[1] == "e":
            return mp.e
        if node[1] == "i":
            return mp.mpc(0, 1)
        return env[node[1]]
    if op == "pi":
        return mp.pi
    if op == "inf":
        return mp.inf
    if op == "add":
        return ev(node[1]) + ev(node[2])
    if op == "neg":
        return -ev(node[1])
    if op == "mul":
        return ev(node[1]) * ev(node[2])
    if op in ("div", "frac"):
        return ev(node[1]) / ev(node[2])
    if op == "pow":
        return mp.power(ev(node[1]), ev(node[2]))
    if op == "sqrt":
        return mp.sqrt(mp.mpc(ev(node[1])))
    if op == "root":
        return mp.power(mp.mpc(ev(node[2])), 1 / ev(node[1]))
    if op == "abs":
        return abs(ev(node[1]))
    if op == "fact":
        return mp.factorial(ev(node[1]))
    if op == "binom":
        return mp.binomial(ev(node[1]), ev(node[2]))
    if op == "log":
        return mp.log(ev(node[2]), ev(node[1]))
    if op == "fn":
        name = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "ln": "log"}.get(node[1], node[1])
        return getattr(mp, name)(mp.mpc(ev(node[2])) if name in ("log", "asin", "acos") else ev(node[2]))
    raise ValueError(op)


def _symbols(node: list[Any], out: set[str]) -> set[str]:
    if node[0] == "var" and node[1] not in ("e", "i"):
        out.add(node[1])
    for child in node[1:]:
        if isinstance(child, list):
            _symbols(child, out)
    return out


def _numerically_different(a: list[Any], b: list[Any]) -> bool:
    """True only when 40-digit evaluation shows a clear difference at some sample point."""
    import mpmath

    names = sorted(_symbols(a, set()) | _symbols(b, set()))
    with mpmath.workdps(40):
        for p in range(3 if names else 1):
            env = {n: mpmath.mpf(_POINTS[(p * 3 + j) % len(_POINTS)]) + j for j, n in enumerate(names)}
            try:
                va, vb = _mp_eval(a, env, mpmath), _mp_eval(b, env, mpmath)
            except (ZeroDivisionError, ValueError, OverflowError, KeyError, TypeError):
                continue
            if not (mpmath.isfinite(va) and mpmath.isfinite(vb)):
                continue
            scale = max(1, abs(va), abs(vb))
            if abs(va - vb) > mpmath.mpf(10) ** -25 * scale:
                return True
    return False


def _decide(a: Any, b: Any, sp: Any) -> bool:
    # A clear numeric difference at a sample point settles it without sympy (reject only).
    if _numerically_different(a, b):
        return False
    diff = _to_sympy(a, sp) - _to_sympy(b, sp)
    if diff == 0:
        return True
    for simplify in (sp.expand, sp.radsimp, sp.simplify):
        if simplify(diff) == 0:
            return True
    if not diff.free_symbols:
        # Rigorous for algebraic numbers: the minimal polynomial of 0 is x.
        try:
            x = sp.Symbol("x")
            return sp.minimal_polynomial(diff, x) == x
        except Exception:  # noqa: BLE001 - sympy raises many types; "not proven" is the safe answer
            return False
    return False


def _serve() -> None:
    import sympy as sp

    out = sys.stdout
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        try:
            request = json.loads(line)
            result = {"equal": bool(_decide(request["a"], request["b"], sp))}
        except Exception as exc:  # noqa: BLE001 - a tree sympy cannot handle is "not proven equal"
            result = {"equal": False, "error": type(exc).__name__}
        out.write(json.dumps(result) + "\n")
        out.flush()
