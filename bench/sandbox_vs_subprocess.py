"""Benchmark: the pre-forked sandbox vs a fresh `python -c` subprocess per test, side by side.

    python bench/sandbox_vs_subprocess.py              # 1000 pairs, prints both times and the ratio
    python bench/sandbox_vs_subprocess.py --pairs 200
    from sandbox_vs_subprocess import run; run()        # -> dict (bench/verifiers.py calls this)

The same N (solution, test) pairs, stdin/stdout style, run both ways with the same concurrency (one
job per worker / thread, `--workers`, default: usable CPUs) and judged by the same function
(rlvr_verifiers.code.judge_stdio: exit 0, not killed, whitespace-normalised stdout equal).  The pairs
(built here, deterministic) mix six small problems with correct solutions (~50%), wrong ones (~30%: off
by one, wrong order, missing output) and failing ones (~20%: exceptions, syntax errors, sys.exit(1),
recursion errors).  No infinite loops: both sides would wait out the same timeout, which measures the
timeout, not the runner.

Baselines: `subprocess.run([<real python>, *flags, source], input=stdin, capture_output=True, timeout=T)`
with the real interpreter binary (not a pyenv shim, which would cost ~130 ms more per call), no isolation
at all, in two flavours: `python -c` (what graders run; its start-up imports `site` and every .pth file of
the interpreter, 100+ ms on this machine because of one heavy .pth) and `python -I -S -c` (no site, no
environment: the cheapest fresh interpreter).  The headline `ratio` is the smaller (conservative) one.
Ours: `Sandbox.run_batch` with every layer on (a clean zygote per worker; mount/network/PID/IPC
namespaces with a minimal read-only root and a tmpfs job dir; a job cgroup; setsid, rlimits, dedicated uid,
Landlock, seccomp, output caps, sweep).  The headline must stay >= 1.5x (the zygote and namespaces were
allowed to cost some of the 2.2x this had before them).  The verdicts of all sides must be identical (asserted).  Wall time on a shared
machine moves with its load, so the pairs run in rotating rounds, and CPU per job (every process
counted) is reported too.
Sandbox start-up (spawning and probing the workers) is reported separately; it is paid once per
verifier process, not per batch.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from rlvr_verifiers.code import judge_stdio
from rlvr_verifiers.sandbox import Job, RunResult, Sandbox, SandboxConfig

TIMEOUT_S = 5.0

# problem -> (reference(stdin) -> stdout, input generator, correct, wrong variants, failing variants)
PROBLEMS: dict[str, dict[str, Any]] = {
    "sum": {
        "ref": lambda s: f"{sum(map(int, s.split()))}\n",
        "gen": lambda r: " ".join(str(r.randint(-1000, 1000)) for _ in range(r.randint(1, 20))) + "\n",
        "correct": [
            "print(sum(map(int, input().split())))",
            "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))",
        ],
        "wrong": ["print(sum(map(int, input().split())) + 1)", "print(max(map(int, input().split())))"],
        "failing": ["print(sum(map(int, input().split()))", "xs = input().split()\nprint(xs[100])"],
    },
    "reverse": {
        "ref": lambda s: s.strip()[::-1] + "\n",
        "gen": lambda r: "".join(r.choice("abcdefgh") for _ in range(r.randint(1, 30))) + "\n",
        "correct": ["print(input().strip()[::-1])", "s = input().strip()\nprint(''.join(reversed(s)))"],
        "wrong": ["print(input().strip())", "print(input().strip()[::-1].upper())"],
        "failing": ["import sys\nsys.exit(1)", "print(input().strip()[::-1]\n"],
    },
    "sort": {
        "ref": lambda s: " ".join(map(str, sorted(map(int, s.split()[1:])))) + "\n",
        "gen": lambda r: _counted([r.randint(0, 99) for _ in range(r.randint(1, 15))]),
        "correct": ["n, *xs = map(int, input().split())\nprint(*sorted(xs))"],
        "wrong": [
            "n, *xs = map(int, input().split())\nprint(*sorted(xs, reverse=True))",
            "n, *xs = map(int, input().split())\nprint(*xs)",
        ],
        "failing": [
            "n, *xs = map(int, input().split())\nprint(*sorted(xs)[n + 5])",
            "raise RuntimeError('x')",
        ],
    },
    "fib": {
        "ref": lambda s: f"{_fib(int(s))}\n",
        "gen": lambda r: f"{r.randint(0, 60)}\n",
        "correct": ["n = int(input())\na, b = 0, 1\nfor _ in range(n):\n    a, b = b, a + b\nprint(a)"],
        "wrong": ["n = int(input())\na, b = 1, 1\nfor _ in range(n):\n    a, b = b, a + b\nprint(a)"],
        "failing": [
            (
                "import sys\nsys.setrecursionlimit(50)\nf = lambda n: n if n < 2 else f(n-1) + f(n-2)\n"
                "print(f(int(input()) + 60))"
            ),
            "print(1 / 0)",
        ],
    },
    "words": {
        "ref": lambda s: f"{len(s.split())}\n",
        "gen": lambda r: " ".join(r.choice(["a", "bb", "ccc", "dd"]) for _ in range(r.randint(0, 12))) + "\n",
        "correct": ["print(len(input().split()))", "import sys\nprint(len(sys.stdin.read().split()))"],
        "wrong": ["print(len(input()))", "print(input().count(' '))"],
        "failing": ["print(len(input().split())", "import os\nos._exit(3)"],
    },
    "grid": {
        "ref": lambda s: _grid(*map(int, s.split())),
        "gen": lambda r: f"{r.randint(1, 8)} {r.randint(1, 8)}\n",
        "correct": ["h, w = map(int, input().split())\nfor _ in range(h):\n    print('#' * w)"],
        "wrong": [
            "h, w = map(int, input().split())\nfor _ in range(w):\n    print('#' * h)",
            "h, w = map(int, input().split())\nprint('#' * w)",
        ],
        "failing": ["h, w = map(int, input().split())\nprint(undefined_name)", "assert False, 'nope'"],
    },
}


def _counted(xs: list[int]) -> str:
    return f"{len(xs)} " + " ".join(map(str, xs)) + "\n"


def _grid(h: int, w: int) -> str:
    return "\n".join("#" * w for _ in range(h)) + "\n"


def _fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def pairs(n: int, seed: int = 0) -> list[tuple[str, str, str]]:
    """n deterministic (source, stdin, expected stdout) triples: ~50% correct, ~30% wrong, ~20% failing."""
    rng = random.Random(seed)
    out = []
    names = sorted(PROBLEMS)
    for i in range(n):
        problem = PROBLEMS[names[i % len(names)]]
        kind = rng.choices(["correct", "wrong", "failing"], weights=[5, 3, 2])[0]
        source = rng.choice(problem[kind])
        stdin = problem["gen"](rng)
        out.append((source, stdin, problem["ref"](stdin)))
    return out


# The baselines: a fresh interpreter per test. "python -c" is what graders run; its start-up includes
# `site` (every .pth file of the interpreter's site-packages: 100+ ms on a machine with a heavy one).
# "python -I -S -c" skips site and the environment: the cheapest fresh interpreter there is.
BASELINES = {"python -c": ("-c",), "python -I -S -c": ("-I", "-S", "-c")}
BASELINE_KEYS = {"python -c": "subprocess", "python -I -S -c": "subprocess_isolated"}  # keys in run()'s dict


def _subprocess_result(command: list[str], source: str, stdin: str) -> RunResult:
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [*command, source], input=stdin.encode(), capture_output=True, timeout=TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as e:
        return RunResult(
            None, 9, e.stdout or b"", e.stderr or b"", b"", True, "timeout", time.perf_counter() - start
        )
    code = done.returncode
    return RunResult(
        code if code >= 0 else None,
        -code if code < 0 else None,
        done.stdout,
        done.stderr,
        b"",
        False,
        None,
        time.perf_counter() - start,
    )


def _cpu_s() -> float:
    self_, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return self_.ru_utime + self_.ru_stime + children.ru_utime + children.ru_stime


def _cpu_per_job(
    commands: dict[str, list[str]], data: list[tuple[str, str, str]], workers: int
) -> dict[str, float]:
    """CPU seconds per job of each side, every process counted (this one, the workers and their jobs,
    the subprocesses), each side alone. Sandbox start-up is left out: it runs once per verifier."""
    out = {}
    work_dir = tempfile.mkdtemp(prefix="rlvr-bench-sandbox-", dir="/tmp")
    os.chmod(work_dir, 0o755)
    config = SandboxConfig(workers=workers, work_dir=work_dir, timeout_s=TIMEOUT_S)
    try:
        # the workers' CPU (and their jobs') is counted once they are reaped, at close(): measure a
        # start+close alone, then a start+batch+close, and subtract
        begin = _cpu_s()
        Sandbox(config).start().close()
        startup_cpu = _cpu_s() - begin
        begin = _cpu_s()
        sandbox = Sandbox(config).start()
        sandbox.run_batch([Job(src, stdin=stdin.encode()) for src, stdin, _ in data])
        sandbox.close()
        out["sandbox"] = max(0.0, _cpu_s() - begin - startup_cpu) / len(data)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    for name, command in commands.items():
        begin = _cpu_s()
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda p, c=command: _subprocess_result(c, p[0], p[1]), data))
        out[name] = (_cpu_s() - begin) / len(data)
    return out


def run(
    n_pairs: int = 1000,
    workers: int | None = None,
    seed: int = 0,
    rounds: int = 10,
    quiet: bool = False,
    cpu_pairs: int = 200,
) -> dict[str, Any]:
    """Run every side on the same pairs; returns the figures (and asserts identical verdicts).

    The pairs are cut into `rounds` slices; each slice is run by every side in a rotating order, so load
    from other processes on a shared machine hits all sides alike.
    """
    workers = workers or SandboxConfig().workers
    python = os.path.realpath(sys.executable)
    commands = {name: [python, *flags] for name, flags in BASELINES.items()}
    sides = ["sandbox", *commands]
    data = pairs(n_pairs, seed)
    slices = [data[i * len(data) // rounds : (i + 1) * len(data) // rounds] for i in range(rounds)]
    work_dir = tempfile.mkdtemp(prefix="rlvr-bench-sandbox-", dir="/tmp")
    os.chmod(work_dir, 0o755)
    results: dict[str, list[RunResult]] = {side: [] for side in sides}
    seconds = dict.fromkeys(sides, 0.0)
    latency: dict[str, list[float]] = {side: [] for side in sides}
    probe = "print(sum(range(1000)))"
    load_before = os.getloadavg()[0]
    try:
        start = time.perf_counter()
        sandbox = Sandbox(SandboxConfig(workers=workers, work_dir=work_dir, timeout_s=TIMEOUT_S)).start()
        start_s = time.perf_counter() - start
        try:
            with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                sandbox.run_batch([Job("pass")] * workers)  # warm every side
                for command in commands.values():
                    list(pool.map(lambda _, c=command: _subprocess_result(c, "pass", ""), range(workers)))
                for k, chunk in enumerate(slices):
                    for side in sides[k % len(sides) :] + sides[: k % len(sides)]:
                        t = time.perf_counter()
                        if side == "sandbox":
                            results[side] += sandbox.run_batch(
                                [Job(src, stdin=i.encode()) for src, i, _ in chunk]
                            )
                        else:
                            c = commands[side]
                            results[side] += pool.map(lambda p, c=c: _subprocess_result(c, p[0], p[1]), chunk)
                        seconds[side] += time.perf_counter() - t
            for _ in range(50):  # one job at a time: latency, interleaved too
                latency["sandbox"].append(sandbox.run(probe).wall_s)
                for name, command in commands.items():
                    latency[name].append(_subprocess_result(command, probe, "").wall_s)
            layers = [n for n, st in sandbox.isolation_report()["layers"].items() if st["active"]]
        finally:
            sandbox.close()
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    cpu = _cpu_per_job(commands, data[:cpu_pairs], workers) if cpu_pairs else {}

    verdicts = {
        side: [judge_stdio(r, expected) for r, (_, _, expected) in zip(results[side], data, strict=True)]
        for side in sides
    }
    mismatches = [
        (i, side, verdicts["sandbox"][i], verdicts[side][i])
        for side in commands
        for i in range(n_pairs)
        if verdicts["sandbox"][i] != verdicts[side][i]
    ]
    kinds = [v[0] for v in verdicts["sandbox"]]
    counts = {k: kinds.count(k) for k in sorted(set(kinds))}
    result: dict[str, Any] = {
        "pairs": n_pairs,
        "workers": workers,
        "sandbox_s": seconds["sandbox"],
        "sandbox_jobs_per_s": n_pairs / seconds["sandbox"],
        "latency_ms_sandbox_p50": 1000 * statistics.median(latency["sandbox"]),
        "sandbox_start_s": start_s,
    }
    for name in commands:
        tag = BASELINE_KEYS[name]
        result[f"{tag}_s"] = seconds[name]
        result[f"ratio_vs_{tag}"] = seconds[name] / seconds["sandbox"]
        result[f"latency_ms_{tag}_p50"] = 1000 * statistics.median(latency[name])
        if cpu:
            result[f"cpu_ratio_vs_{tag}"] = cpu[name] / cpu["sandbox"] if cpu["sandbox"] else float("nan")
    if cpu:
        result["cpu_ms_per_job"] = {side: round(1000 * v, 2) for side, v in cpu.items()}
    result["ratio"] = min(result[k] for k in result if k.startswith("ratio_vs_"))  # the conservative one
    result.update(
        verdicts_identical=not mismatches,
        verdict_counts=counts,
        layers_active=len(layers),
        load_avg_1m=[round(load_before, 1), round(os.getloadavg()[0], 1)],
    )
    if not quiet:
        print(
            f"{n_pairs} (solution, test) pairs, {workers} workers/threads per side, {rounds} rotating rounds; "
            f"verdicts {counts}; load average {result['load_avg_1m']}"
        )
        print(
            f"  {'sandbox (all ' + str(len(layers)) + ' layers)':28s} {seconds['sandbox']:7.2f} s  "
            f"({n_pairs / seconds['sandbox']:5.0f} jobs/s, p50 latency {result['latency_ms_sandbox_p50']:6.1f} ms"
            f"{', CPU/job %.1f ms' % (1000 * cpu['sandbox']) if cpu else ''}); start-up {start_s:.2f} s once"
        )
        for name in commands:
            print(
                f"  {'fresh ' + name:28s} {seconds[name]:7.2f} s  ({n_pairs / seconds[name]:5.0f} jobs/s, p50 latency "
                f"{1000 * statistics.median(latency[name]):6.1f} ms"
                f"{', CPU/job %.1f ms' % (1000 * cpu[name]) if cpu else ''}) -> sandbox "
                f"{seconds[name] / seconds['sandbox']:.2f}x faster"
                f"{', %.2fx less CPU' % (cpu[name] / cpu['sandbox']) if cpu and cpu['sandbox'] else ''}"
            )
        print(
            f"  ratio (conservative): {result['ratio']:.2f}x (target >= 1.5x); verdicts identical: {not mismatches}"
        )
        for i, side, a, b in mismatches[:5]:
            print(f"  MISMATCH pair {i}: sandbox {a} vs {side} {b}")
    assert not mismatches, f"{len(mismatches)} verdicts differ between the sandbox and plain subprocesses"
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1000, help="(solution, test) pairs")
    parser.add_argument("--workers", type=int, default=None, help="sandbox workers = subprocess threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=10, help="alternating slices (fairness under load)")
    args = parser.parse_args(argv)
    run(args.pairs, args.workers, args.seed, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
