"""Verifier figures, each a ratio measured side by side in this one run.

1. The pool vs a serial loop (the shape of verl's NaiveRewardManager: one sample after another, in the
   trainer's process) on the same batch of mixed math and code responses (default 1024: 768 math, 256
   code). Every side uses rlvr's own `math` and `code` verifiers, so the ratio measures the pool
   (parallel actors, batched calls, sandbox workers kept busy), not a different grader; verdicts are
   compared and must be identical. The serial loop runs an item's code tests one after another (a
   one-worker sandbox), as verl's code scorers do; a second row gives the serial loop whose code verifier
   runs one item's tests in parallel over its own sandbox workers (already using both cores on code).
   All sides are warmed up first (actors started, sandbox workers forked); sides rotate which goes first
   in each round; medians of `--repeats` rounds. Target: >= 1.8x on 2 cores against the serial loop.
2. bench/math_vs_math_verify.py `run()`: rlvr `math` vs HF math-verify (accuracy, false accepts,
   throughput).
3. bench/sandbox_vs_subprocess.py `run()`: the sandbox vs a fresh `python -c` subprocess per test.
4. Worst case per verifier (`--only worst`): for every built-in verifier and rubric, the CPU seconds
   (time.process_time of this process, the one that parses) of its costliest response among the
   pathological shapes of tests/verifiers/test_bounded_parsing.py, each MAX_RESPONSE_CHARS (256 Ki
   characters) long, against the test's budget; and, side by side on 32 KB, the regular expressions the
   verifiers used before (rescanning from every start) against today's linear scanners.
6. The quick path's cost (`--only quick`): math's quick check on the pool bench's math responses, in this
   process (how the pool ran it before) vs in the bounded quick worker (rlvr_verifiers.quick_worker, how
   it runs now), wall ms per item, rounds alternating; verdicts must be identical.
5. Deadline precision (`--only deadlines`): wall-clock seconds from submitting a job to its result, for a
   CPU loop ignoring signals (deadline 1 s) and a sleeper (0.5 s): the latency the sandbox tests no
   longer assert (their bound is CPU time or the kill itself; a wall-clock limit fails under load).

    python bench/verifiers.py [--n 1024] [--actors 2] [--repeats 3] [--only pool|math|sandbox|worst|deadlines]

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


def serial_loop(verifiers: dict[str, Any], names: list[str], items: list[Item]) -> list:
    """One sample after another in this process, like verl's NaiveRewardManager."""
    return [verifiers[name].verify_batch([item])[0] for name, item in zip(names, items, strict=True)]


def serial_verifiers(strict: bool) -> dict[str, Any]:
    """The verifiers a serial loop uses. `strict`: the code sandbox has ONE worker, so an item's tests run
    one after another (as verl's code scorers run them); otherwise the code verifier's own sandbox (one
    worker per core) runs the tests of one item in parallel."""
    verifiers = {"math": registry.get("math"), "code": registry.get("code")}
    if strict:
        from rlvr_verifiers.code import CodeVerifier
        from rlvr_verifiers.sandbox import SandboxConfig

        verifiers["code"] = CodeVerifier(sandbox_config=SandboxConfig.from_env(workers=1))
    return verifiers


def add_tuning_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--items-per-call", type=int, default=None, help="pool items per actor call (default: PoolConfig's)"
    )
    parser.add_argument(
        "--actor-concurrency",
        type=int,
        default=None,
        help="calls one actor runs at once (default: PoolConfig's)",
    )


def tuning(items_per_call: int | None, actor_concurrency: int | None) -> dict[str, int]:
    """PoolConfig overrides for the two knobs; None keeps the pool's own default (what users get)."""
    out: dict[str, int] = {}
    if items_per_call is not None:
        out["items_per_call"] = items_per_call
    if actor_concurrency is not None:
        out["actor_concurrency"] = actor_concurrency
        out["max_in_flight_per_actor"] = max(2, actor_concurrency)
    return out


def bench_pool(
    n: int,
    actors: int,
    repeats: int,
    code_fraction: float = 0.25,
    items_per_call: int | None = None,
    actor_concurrency: int | None = None,
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
            PoolConfig(
                name="bench-pool",
                num_actors=actors,
                cpus_per_actor=min(1.0, (os.cpu_count() or 2) / actors),  # more actors than cores: share
                preload=preload,
                **tuning(items_per_call, actor_concurrency),
            )
        )
        # Warm every side alike (a training run is long-lived): sandbox workers forked, sympy workers
        # started and imported, in this process and in every actor.
        sides = {
            "serial": serial_verifiers(strict=True),
            "serial_parallel_tests": serial_verifiers(strict=False),
        }
        warm = min(n, 256)
        for verifiers in sides.values():
            serial_loop(verifiers, names[:warm], items[:warm])
        pool.verify(names[:warm], items[:warm])
        rounds: dict[str, list[float]] = {"serial": [], "serial_parallel_tests": [], "pool": []}
        mismatches = 0
        order = list(rounds)
        for round_ in range(repeats):
            # Rotate which side goes first, so load from other processes hits every side alike.
            outputs = {}
            for side in order[round_ % 3 :] + order[: round_ % 3]:
                t = time.perf_counter()
                if side == "pool":
                    result = pool.verify(names, items)
                    outputs[side] = result.verdicts
                else:
                    outputs[side] = serial_loop(sides[side], names, items)
                rounds[side].append(time.perf_counter() - t)
            for side in ("serial", "serial_parallel_tests"):
                mismatches += sum(
                    (a.status, a.score) != (b.status, b.score)
                    for a, b in zip(outputs[side], outputs["pool"], strict=True)
                )
        metrics = result.flat_metrics()
        pool.shutdown()
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
    s, p = statistics.median(rounds["serial"]), statistics.median(rounds["pool"])
    sp = statistics.median(rounds["serial_parallel_tests"])
    return {
        "n": n,
        "n_code": n_code,
        "actors": actors,
        "serial_s": s,
        "serial_parallel_tests_s": sp,
        "pool_s": p,
        "speedup": s / p,
        "speedup_vs_parallel_tests": sp / p,
        "serial_rounds_s": rounds["serial"],
        "serial_parallel_tests_rounds_s": rounds["serial_parallel_tests"],
        "pool_rounds_s": rounds["pool"],
        "verdict_mismatches": mismatches,
        "metrics": metrics,
    }


# The regular expressions the verifiers used before they were replaced by linear scanners
# (rlvr_verifiers.scan), timed side by side with their replacements on the shape that defeats each.
OLD_PATTERNS = {
    "tool_call <tool_call> blocks": (
        r"<tool_call>(.*?)</tool_call>",
        "<tool_call>",
        lambda text: __import__("rlvr_verifiers.scan").scan.tagged_blocks(
            text, "<tool_call>", "</tool_call>"
        ),
    ),
    "countdown <answer> blocks": (
        r"(?i)<answer>(.*?)</answer>",
        "<answer>",
        lambda text: __import__("rlvr_verifiers.scan").scan.tagged_blocks(
            text, "<answer>", "</answer>", ignore_case=True
        ),
    ),
    "code fences (fence then spaces)": (
        r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)```",
        None,
        lambda text: __import__("rlvr_verifiers.code").code._fenced_blocks(text),
    ),
    "tool_call ```json fences (fence then spaces)": (
        r"```(?:json|JSON)?\s*\n?(.*?)```",
        None,
        lambda text: __import__("rlvr_verifiers.tool_call").tool_call._fenced_blocks(text),
    ),
}


def _cpu(fn) -> float:
    began = time.process_time()
    fn()
    return time.process_time() - began


def bench_worst_case() -> dict[str, Any]:
    """Per verifier: its costliest known pathological response at the size limit; old vs new patterns."""
    import re

    from rlvr_verifiers.base import MAX_RESPONSE_CHARS

    spec = importlib.util.spec_from_file_location(
        "rlvr_bench_bounded", BENCH_DIR.parent / "tests" / "verifiers" / "test_bounded_parsing.py"
    )
    shapes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shapes)
    from rlvr_verifiers.code import CodeConfig, CodeVerifier
    from rlvr_verifiers.sandbox import SandboxConfig

    work_dir = tempfile.mkdtemp(prefix="rlvr-bench-worst-", dir="/tmp")
    os.chmod(work_dir, 0o755)
    verifiers = {name: registry.get(name) for name in shapes.VERIFIERS}
    verifiers["code"] = CodeVerifier(CodeConfig(), SandboxConfig(workers=1, work_dir=work_dir))
    worst: dict[str, tuple[float, str, str]] = {}
    try:
        for name, verifier in verifiers.items():
            verifier.verify(Item("warm up", shapes.GROUND_TRUTH[name], {"routed_verifier": "math"}))
            for case, response in shapes.KNOWN.items():
                spent, status = shapes.cpu_cost(verifier, name, response)
                if name not in worst or spent > worst[name][0]:
                    worst[name] = (spent, case, status)
    finally:
        verifiers["code"].close()
        shutil.rmtree(work_dir, ignore_errors=True)
    size = 32 << 10
    patterns = {}
    for label, (pattern, motif, new) in OLD_PATTERNS.items():
        text = ("```" + " " * size) if motif is None else (motif * (size // len(motif)))
        old_s = _cpu(lambda p=pattern, t=text: re.compile(p, re.DOTALL).findall(t))
        new_s = _cpu(lambda n=new, t=text: n(t))
        patterns[label] = (old_s, new_s, len(text))
    return {
        "worst": worst,
        "budget_s": shapes.CPU_BUDGET_S,
        "chars": MAX_RESPONSE_CHARS,
        "patterns": patterns,
    }


def bench_deadlines(repeats: int) -> dict[str, list[float]]:
    """Wall seconds from submit to result for jobs that only the sandbox's wall-clock kill ends."""
    from rlvr_verifiers.sandbox import Sandbox, SandboxConfig

    spin = "import signal\nfor s in (signal.SIGTERM, signal.SIGXCPU):\n    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass"
    cases = {
        "cpu loop, deadline 1 s": (spin, 1.0),
        "sleeper, deadline 0.5 s": ("import time; time.sleep(3600)", 0.5),
    }
    work_dir = tempfile.mkdtemp(prefix="rlvr-bench-deadline-", dir="/tmp")
    os.chmod(work_dir, 0o755)
    out: dict[str, list[float]] = {k: [] for k in cases}
    try:
        with Sandbox(SandboxConfig(workers=1, work_dir=work_dir)) as box:
            for _ in range(repeats):
                for label, (source, deadline) in cases.items():
                    began = time.monotonic()
                    result = box.run(source, timeout_s=deadline)
                    assert result.timed_out, result
                    out[label].append(time.monotonic() - began)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return out


def bench_quick(n: int, repeats: int) -> dict[str, Any]:
    """Per-item wall time of math's quick check in-process vs through the quick worker."""
    from rlvr_verifiers.quick_worker import QuickWorker

    items = math_items(n, random.Random(7))
    quick = registry.get("math").quick
    worker = QuickWorker(preload=("math",))
    worker.start()
    inproc, child, mismatches = [], [], 0
    try:
        worker.check("math", items[0])  # started and loaded
        for _ in range(repeats):
            began = time.perf_counter()
            local = [quick(item) for item in items]
            inproc.append((time.perf_counter() - began) / n)
            began = time.perf_counter()
            remote = [worker.check("math", item) for item in items]
            child.append((time.perf_counter() - began) / n)
            mismatches += sum(a != b for a, b in zip(local, remote, strict=True))
    finally:
        worker.close()
    return {"in_process_s": inproc, "quick_worker_s": child, "mismatches": mismatches, "n": n}


def bench_pool_deadlines(repeats: int) -> dict[str, Any]:
    """Wall seconds until verify() returns when only the per-item bound, or only the batch deadline, can
    end it (the test-only `pool_test_echo` verifier's "hang" sleeps an hour)."""
    import ray

    from rlvr_verifiers.pool import PoolConfig, VerifierPool

    tests_dir = str(BENCH_DIR.parent / "tests" / "verifiers")  # pool_test_verifiers, for the actors
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (tests_dir, os.environ.get("PYTHONPATH")) if p)
    sys.path.insert(0, tests_dir)
    from pool_test_verifiers import EchoVerifier  # noqa: F401 - registers pool_test_echo here too

    temp_dir = tempfile.mkdtemp(prefix="rlvr-bench-", dir="/tmp")
    ray.init(
        num_cpus=os.cpu_count() or 2,
        resources={"rlvr_verifier": 2},
        include_dashboard=False,
        _temp_dir=temp_dir,
        log_to_driver=False,
        configure_logging=False,
    )
    common = {"num_actors": 2, "cpus_per_actor": 1, "items_per_call": 4, "imports": ("pool_test_verifiers",)}
    out: dict[str, Any] = {"item_bound": [], "batch_deadline": []}
    try:
        for round_ in range(repeats):
            pool = VerifierPool(
                PoolConfig(name=f"bench-hang-{round_}", item_timeout_s=2.0, batch_timeout_s=150.0, **common)
            )
            values = [str(i) for i in range(16)]
            values[5] = "hang"
            items = [Item(v, i) for i, v in enumerate(values)]
            began = time.monotonic()
            pool.verify("pool_test_echo", items)
            out["item_bound"].append(time.monotonic() - began)
            cfg = pool.config
            out["item_bound_s"] = (
                cfg.item_timeout_s * (cfg.items_per_call * cfg.max_in_flight_per_actor + 1) + 1.0
            )
            pool.shutdown()
            pool = VerifierPool(
                PoolConfig(
                    name=f"bench-deadline-{round_}",
                    item_timeout_s=600.0,
                    batch_timeout_s=3.0,
                    **{**common, "items_per_call": 1},
                )
            )
            items = [Item("hang", 0), Item("hang", 1)] + [Item(str(i), i) for i in range(2, 8)]
            began = time.monotonic()
            pool.verify("pool_test_echo", items)
            out["batch_deadline"].append(time.monotonic() - began)
            pool.shutdown()
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
    return out


def _load_run(filename: str):
    path = BENCH_DIR / filename
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(f"rlvr_bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


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
    add_tuning_args(parser)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (median reported)")
    parser.add_argument(
        "--only",
        choices=("pool", "math", "sandbox", "worst", "deadlines", "quick"),
        default=None,
        help="run one figure",
    )
    args = parser.parse_args(argv)
    table: list[tuple[str, str, str, str, str]] = []
    details: list[str] = []

    if args.only in (None, "pool"):
        r = bench_pool(
            args.n, args.actors, args.repeats, args.code_fraction, args.items_per_call, args.actor_concurrency
        )
        label = f"{r['n']} mixed ({r['n_code']} code)"
        table.append(
            (
                f"pool ({r['actors']} actors) vs serial loop, {label}",
                f"{r['pool_s']:.2f} s",
                f"{r['serial_s']:.2f} s",
                f"{r['speedup']:.2f}x",
                ">= 1.8x",
            )
        )
        table.append(
            (
                f"pool vs serial loop whose code tests run in parallel, {label}",
                f"{r['pool_s']:.2f} s",
                f"{r['serial_parallel_tests_s']:.2f} s",
                f"{r['speedup_vs_parallel_tests']:.2f}x",
                "",
            )
        )
        paired = [a / b for a, b in zip(r["serial_rounds_s"], r["pool_rounds_s"], strict=True)]
        details.append(f"pool vs serial, per-round ratios: {[round(x, 2) for x in paired]}")
        details.append(
            f"rounds: serial {[round(x, 2) for x in r['serial_rounds_s']]} s, serial with parallel tests "
            f"{[round(x, 2) for x in r['serial_parallel_tests_rounds_s']]} s, pool "
            f"{[round(x, 2) for x in r['pool_rounds_s']]} s; verdict mismatches: {r['verdict_mismatches']}"
        )
        keys = (
            "pass_rate",
            "latency_p50_ms",
            "latency_p99_ms",
            "timeouts",
            "sandbox_errors",
            "calls",
            "quick",
        )
        for verifier in ("math", "code"):
            figures = ", ".join(
                f"{k} {r['metrics'].get(f'rlvr/{verifier}/{k}', float('nan')):.4g}" for k in keys
            )
            details.append(f"  pool metrics, {verifier}: {figures}")
        if r["verdict_mismatches"]:
            details.append("  WARNING: pool and serial verdicts differ")
        print(" | ".join(table[-2]), "|", details[0], flush=True)  # kept even if a later figure fails

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
            baselines = sorted(k[len("ratio_vs_") :] for k in r if k.startswith("ratio_vs_"))
            for tag in baselines or [None]:
                ratio = r.get(f"ratio_vs_{tag}", r.get("ratio"))
                table.append(
                    (
                        f"sandbox vs {tag or 'fresh subprocess'}, {r.get('pairs')} (solution, test) pairs",
                        f"{r.get('sandbox_s', float('nan')):.2f} s",
                        f"{r.get(f'{tag}_s', r.get('subprocess_s', float('nan'))):.2f} s",
                        f"{ratio:.2f}x" if isinstance(ratio, float) else str(ratio),
                        ">= 1.5x, same verdicts",
                    )
                )
            details.append("sandbox vs subprocess: " + ", ".join(f"{k}={_fmt(v)}" for k, v in r.items()))

    if args.only in (None, "worst"):
        r = bench_worst_case()
        for name, (spent, case, status) in sorted(r["worst"].items()):
            table.append(
                (
                    f"worst case, {name}: {case} ({r['chars']} chars, {status})",
                    f"{spent * 1000:.1f} CPU ms",
                    f"{r['budget_s'] * 1000:.0f} CPU ms budget",
                    f"{spent / r['budget_s']:.2f} of budget",
                    "<= 1 of budget",
                )
            )
        for label, (old_s, new_s, chars) in r["patterns"].items():
            table.append(
                (
                    f"scanner vs old regex, {label}, {chars} chars",
                    f"{new_s * 1000:.2f} CPU ms",
                    f"{old_s * 1000:.0f} CPU ms",
                    f"{old_s / max(new_s, 1e-6):.0f}x",
                    "linear",
                )
            )

    if args.only in (None, "deadlines"):
        r = bench_deadlines(args.repeats)
        for label, walls in r.items():
            deadline = 1.0 if label.startswith("cpu") else 0.5
            med = statistics.median(walls)
            table.append(
                (
                    f"sandbox kill at the wall-clock deadline: {label}",
                    f"{med:.2f} s wall (median)",
                    f"{deadline:.1f} s deadline",
                    f"+{med - deadline:.2f} s",
                    "",
                )
            )
            details.append(f"deadline rounds, {label}: {[round(x, 3) for x in walls]} s")
        r = bench_pool_deadlines(max(1, min(args.repeats, 3)))
        for label, key, bound in (
            ("pool, one item hangs: its per-item bound ends it", "item_bound", r["item_bound_s"]),
            ("pool, every actor hangs: the batch deadline ends it", "batch_deadline", 3.0),
        ):
            med = statistics.median(r[key])
            table.append(
                (
                    label,
                    f"{med:.2f} s wall (median)",
                    f"{bound:.1f} s bound",
                    f"{med - bound:+.2f} s",
                    "bound (+ load)",
                )
            )
            details.append(f"{label}: rounds {[round(x, 2) for x in r[key]]} s")

    if args.only in (None, "quick"):
        r = bench_quick(min(args.n, 512), args.repeats)
        ours, base = statistics.median(r["quick_worker_s"]), statistics.median(r["in_process_s"])
        table.append(
            (
                f"quick path in its bounded worker vs in-process, {r['n']} math responses",
                f"{ours * 1000:.3f} ms/item",
                f"{base * 1000:.3f} ms/item",
                f"{ours / base:.2f}x the time",
                "identical verdicts",
            )
        )
        details.append(f"quick path verdict mismatches: {r['mismatches']}")

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
