"""Verifier figures, each a ratio measured side by side in this one run.

1. The pool vs a serial loop (the shape of verl's classic NaiveRewardManager: one sample after another,
   in the trainer's process) on the same batch of mixed math and code responses (default 1024: 768 math,
   256 code). Both sides use rlvr's own `math` and `code` verifiers, so the ratio measures the pool
   (parallel actors, batched calls, the code verifier's sandbox workers kept busy), not a different
   grader; the verdicts of both sides are compared and must be identical. Both sides are warmed up
   first (actors started, sandbox workers forked); the median of `--repeats` timed rounds is reported.
   Target: >= 1.8x on 2 cores.
2. bench/math_vs_math_verify.py `run()`: rlvr `math` vs HF math-verify (accuracy, false accepts,
   throughput).
3. bench/sandbox_vs_subprocess.py `run()`: the sandbox vs a fresh `python -c` subprocess per test.

    python bench/verifiers.py [--n 1024] [--actors 2] [--repeats 3] [--only pool]

Starts a private local Ray (own temp dir, no dashboard, random ports) and shuts it down at the end.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rlvr_verifiers import registry
from rlvr_verifiers.base import Item

BENCH_DIR = Path(__file__).resolve().parent

FILLER = (
    "Let us work through the problem step by step. First we restate what is given and what is asked. "
    "Then we set up the relevant quantities, simplify, and check the result against the constraints. "
)


def _long(text: str, rng: random.Random) -> str:
    return FILLER * rng.randint(3, 12) + text


def math_items(n: int, rng: random.Random) -> list[Item]:
    """Long reasoning responses ending in an answer; right and wrong, exact and symbolic cases."""
    out = []
    for i in range(n):
        kind = i % 8
        a, b = rng.randint(2, 999), rng.randint(2, 99)
        right = rng.random() < 0.6
        if kind == 0:
            gt, ans = str(a * b), str(a * b if right else a * b + 1)
        elif kind == 1:
            gt, ans = (
                f"\\frac{{{a}}}{{{b}}}",
                (f"\\frac{{{2 * a}}}{{{2 * b}}}" if right else f"\\frac{{{b}}}{{{a}}}"),
            )
        elif kind == 2:
            gt, ans = f"{a / 4:g}", (f"\\frac{{{a}}}{{4}}" if right else f"{a / 4 + 0.5:g}")
        elif kind == 3:
            gt, ans = f"{b}\\sqrt{{2}}", (f"\\sqrt{{{2 * b * b}}}" if right else f"{b}\\sqrt{{3}}")
        elif kind == 4:
            gt, ans = f"{a}{{,}}000", (f"{a}000" if right else f"{a}00")
        elif kind == 5:
            gt, ans = f"x^2 + {2 * b}x + {b * b}", (f"(x+{b})^2" if right else f"(x+{b})^2 + 1")
        elif kind == 6:
            gt, ans = f"\\left[{-b}, {a}\\right)", (f"[{-b},{a})" if right else f"[{-b},{a}]")
        else:  # needs the symbolic path (trig identity)
            gt, ans = "1", ("\\sin^2 x + \\cos^2 x" if right else "\\sin^2 x + \\cos^2 x + \\sin x")
        out.append(Item(_long(f"Therefore the answer is \\boxed{{{ans}}}.", rng), gt))
    return out


CODE_TASKS = [
    # (right solution, wrong solution, tests)
    (
        "a, b = map(int, input().split())\nprint(a + b)",
        "a, b = map(int, input().split())\nprint(a - b)",
        lambda rng: _stdin_tests(rng, lambda a, b: a + b),
    ),
    (
        "s = input()\nprint(s[::-1])",
        "s = input()\nprint(s)",
        lambda rng: {
            "inputs": [w + "\n" for w in ("abc", "racecar", "hello", "xy")],
            "outputs": [w[::-1] + "\n" for w in ("abc", "racecar", "hello", "xy")],
        },
    ),
    (
        "def solve(xs):\n    return sorted(xs)",
        "def solve(xs):\n    return xs",
        lambda rng: _call_tests(rng),
    ),
]


def _stdin_tests(rng: random.Random, fn) -> dict:
    pairs = [(rng.randint(-99, 99), rng.randint(-99, 99)) for _ in range(3)]
    return {"inputs": [f"{a} {b}\n" for a, b in pairs], "outputs": [f"{fn(a, b)}\n" for a, b in pairs]}


def _call_tests(rng: random.Random) -> dict:
    lists = [[rng.randint(0, 50) for _ in range(5)] for _ in range(3)]
    return {"fn_name": "solve", "inputs": [[xs] for xs in lists], "outputs": [sorted(xs) for xs in lists]}


def code_items(n: int, rng: random.Random) -> list[Item]:
    out = []
    for i in range(n):
        right, wrong, tests = CODE_TASKS[i % len(CODE_TASKS)]
        src = right if rng.random() < 0.6 else wrong
        out.append(Item(_long(f"Here is my solution.\n```python\n{src}\n```", rng), tests(rng)))
    return out


def serial_loop(names: list[str], items: list[Item]) -> list:
    """One sample after another in this process, like verl's classic NaiveRewardManager."""
    return [registry.get(name).verify_batch([item])[0] for name, item in zip(names, items, strict=True)]


def bench_pool(
    n: int, actors: int, repeats: int, code_fraction: float = 0.25, items_per_call: int = 8
) -> dict[str, Any]:
    import ray

    from rlvr_verifiers.pool import PoolConfig, VerifierPool

    rng = random.Random(1234)
    n_code = int(n * code_fraction)
    items = math_items(n - n_code, rng) + code_items(n_code, rng)
    names = ["math"] * (n - n_code) + ["code"] * n_code
    order = list(range(n))
    rng.shuffle(order)  # mixed, as a training batch is
    items, names = [items[i] for i in order], [names[i] for i in order]

    temp_dir = tempfile.mkdtemp(prefix="rlvr-bench-", dir="/tmp")
    ray.init(
        num_cpus=os.cpu_count() or 2,
        resources={"rlvr_verifier": actors},
        include_dashboard=False,
        _temp_dir=temp_dir,
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        preload = ("math", "code") if n_code else ("math",)
        pool = VerifierPool(
            PoolConfig(name="bench-pool", num_actors=actors, items_per_call=items_per_call, preload=preload)
        )
        # Warm both sides alike (a training run is long-lived): sandbox workers forked, sympy workers
        # started and imported, in this process and in every actor.
        warm = min(n, 256)
        serial_loop(names[:warm], items[:warm])
        pool.verify(names[:warm], items[:warm])
        serial_s, pool_s = [], []
        mismatches = 0
        for round_ in range(repeats):
            # Alternate which side goes first, so load from other processes hits both alike.
            for side in ("serial", "pool") if round_ % 2 == 0 else ("pool", "serial"):
                t = time.perf_counter()
                if side == "serial":
                    serial = serial_loop(names, items)
                    serial_s.append(time.perf_counter() - t)
                else:
                    result = pool.verify(names, items)
                    pool_s.append(time.perf_counter() - t)
            mismatches += sum(
                (a.status, a.score) != (b.status, b.score)
                for a, b in zip(serial, result.verdicts, strict=True)
            )
        metrics = result.flat_metrics()
        pool.shutdown()
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
    s, p = statistics.median(serial_s), statistics.median(pool_s)
    return {
        "n": n,
        "n_code": n_code,
        "actors": actors,
        "serial_s": s,
        "pool_s": p,
        "speedup": s / p,
        "serial_rounds_s": serial_s,
        "pool_rounds_s": pool_s,
        "verdict_mismatches": mismatches,
        "metrics": metrics,
    }


def _load_run(filename: str):
    path = BENCH_DIR / filename
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(f"rlvr_bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run


def _call(run, **quiet_kwargs):
    """Call a sibling bench's run() quietly when it takes such a keyword."""
    accepted = inspect.signature(run).parameters
    return run(**{k: v for k, v in quiet_kwargs.items() if k in accepted})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--n", type=int, default=1024, help="responses in the mixed batch (>= 1024 for the claim)"
    )
    parser.add_argument("--actors", type=int, default=2, help="pool actors")
    parser.add_argument("--code-fraction", type=float, default=0.25, help="share of code responses")
    parser.add_argument("--items-per-call", type=int, default=8, help="pool items per actor call")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (median reported)")
    parser.add_argument("--only", choices=("pool", "math", "sandbox"), default=None, help="run one figure")
    args = parser.parse_args(argv)
    table: list[tuple[str, str, str, str, str]] = []
    details: list[str] = []

    if args.only in (None, "pool"):
        r = bench_pool(args.n, args.actors, args.repeats, args.code_fraction, args.items_per_call)
        table.append(
            (
                f"pool ({r['actors']} actors) vs serial loop, {r['n']} mixed ({r['n_code']} code)",
                f"{r['pool_s']:.2f} s",
                f"{r['serial_s']:.2f} s",
                f"{r['speedup']:.2f}x",
                ">= 1.8x",
            )
        )
        details.append(
            f"pool vs serial: rounds serial {[round(x, 2) for x in r['serial_rounds_s']]} s, pool "
            f"{[round(x, 2) for x in r['pool_rounds_s']]} s; verdict mismatches: {r['verdict_mismatches']}"
        )
        keys = ("pass_rate", "latency_p50_ms", "latency_p99_ms", "timeouts", "sandbox_errors", "calls")
        for verifier in ("math", "code"):
            figures = ", ".join(
                f"{k} {r['metrics'].get(f'rlvr/{verifier}/{k}', float('nan')):.4g}" for k in keys
            )
            details.append(f"  pool metrics, {verifier}: {figures}")
        if r["verdict_mismatches"]:
            details.append("  WARNING: pool and serial verdicts differ")

    if args.only in (None, "math"):
        run = _load_run("math_vs_math_verify.py")
        if run is None:
            table.append(("math vs HF math-verify", "-", "-", "missing", "bench/math_vs_math_verify.py"))
        else:
            r = _call(run, verbose=False)
            us, mv, ratios = r["ours"], r["math_verify"], r["ratios"]
            table += [
                (
                    "math vs math-verify: throughput (excl. pathological)",
                    f"{us['verifications_per_s_excluding_pathological']:.0f}/s",
                    f"{mv['verifications_per_s_excluding_pathological']:.0f}/s",
                    f"{ratios['throughput_x_excluding_pathological']:.1f}x",
                    ">= 10x",
                ),
                (
                    "math vs math-verify: throughput (all)",
                    f"{us['verifications_per_s']:.0f}/s",
                    f"{mv['verifications_per_s']:.0f}/s",
                    f"{ratios['throughput_x']:.1f}x",
                    "",
                ),
                (
                    "math vs math-verify: accuracy",
                    f"{100 * us['accuracy']:.1f}%",
                    f"{100 * mv['accuracy']:.1f}%",
                    f"{ratios['accuracy_diff_pts']:+.1f} pts",
                    ">= math-verify",
                ),
                (
                    "math vs math-verify: false accepts",
                    str(us["false_accepts"]),
                    str(mv["false_accepts"]),
                    "",
                    "0",
                ),
            ]
            details.append(f"math targets met: {r.get('targets_met')}")

    if args.only in (None, "sandbox"):
        run = _load_run("sandbox_vs_subprocess.py")
        if run is None:
            table.append(
                ("sandbox vs fresh subprocess", "-", "-", "missing", "bench/sandbox_vs_subprocess.py")
            )
        else:
            r = _call(run, quiet=True)
            table.append(
                (
                    f"sandbox vs fresh `python -c` per test, {r['pairs']} pairs",
                    f"{r['sandbox_s']:.2f} s",
                    f"{r['subprocess_s']:.2f} s",
                    f"{r['ratio']:.2f}x",
                    ">= 2x, same verdicts",
                )
            )
            details.append(
                f"sandbox: verdicts identical: {r['verdicts_identical']}; {r['workers']} workers; "
                f"{r['sandbox_jobs_per_s']:.0f} vs {r['subprocess_jobs_per_s']:.0f} jobs/s; "
                f"isolation layers active: {r.get('layers_active')}"
            )

    headers = ("figure", "ours", "baseline", "ratio", "target")
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("-" * len(line))
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print()
    for d in details:
        print(d)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
