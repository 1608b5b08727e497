"""Where the pool's time goes: wall AND CPU seconds of every process involved, pool vs serial loop.

The batch, the verifiers and the serial loop are bench/verifiers.py's (1024 mixed math and code responses,
one sample at a time in the driver, a one-worker sandbox). For each side this prints the wall time and
the CPU seconds spent by every process of this run's tree (driver, Ray's own processes and the verifier
actors, sandbox workers with their job children, sympy workers), per process name.

Why CPU seconds: on a shared 2-core machine the wall-clock ratio swings with other people's load (rounds
from 1.2x to 2.2x in one run at load ~6), while the CPU a side spends barely moves. `cpu-bound ratio` =
min(serial wall, serial CPU) / (pool CPU / cores) is what the pool would reach with the cores to itself
and none idle (the serial loop keeps about one core busy; under load its wall time overstates it); the
gap between it and the wall ratio is load, or cores the pool's schedule leaves idle.

    python bench/pool_cpu.py [--n 1024] [--repeats 3] [--items-per-call N] [--actor-concurrency N]

Starts a private local Ray (own temp dir, no dashboard) and shuts it down at the end.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _verifiers_bench():
    path = Path(__file__).resolve().parent / "verifiers.py"
    spec = importlib.util.spec_from_file_location("rlvr_bench_verifiers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tree_cpu_s(root: int) -> collections.Counter:
    """CPU seconds (user + system, plus reaped children's) of `root` and its live descendants, by name."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    info: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # exited meanwhile
        name = stat[stat.find("(") + 1 : stat.rfind(")")]
        rest = stat[stat.rfind(")") + 2 :].split()
        # utime, stime, cutime, cstime: a sandbox worker's reaped job children count in its cutime/cstime
        ticks = sum(int(x) for x in rest[11:15])
        children[int(rest[1])].append(int(entry))
        info[int(entry)] = (name, ticks / _TICK)
    out: collections.Counter = collections.Counter()
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid in info:
            out["driver" if pid == root else info[pid][0]] += info[pid][1]
        stack.extend(children.get(pid, ()))
    return out


def measure(fn) -> tuple[float, collections.Counter]:
    before = tree_cpu_s(os.getpid())
    t = time.perf_counter()
    fn()
    wall = time.perf_counter() - t
    after = tree_cpu_s(os.getpid())
    return wall, collections.Counter({k: after[k] - before.get(k, 0.0) for k in after})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1024, help="responses in the mixed batch")
    parser.add_argument("--repeats", type=int, default=3, help="rounds (medians reported)")
    bench = _verifiers_bench()
    bench.add_tuning_args(parser)
    args = parser.parse_args(argv)

    import ray

    from rlvr_verifiers.pool import PoolConfig, VerifierPool

    rng = random.Random(1234)
    n_code = args.n // 4
    items = bench.math_items(args.n - n_code, rng) + bench.code_items(n_code, rng)
    names = ["math"] * (args.n - n_code) + ["code"] * n_code
    order = list(range(args.n))
    rng.shuffle(order)
    items, names = [items[i] for i in order], [names[i] for i in order]
    cores = os.cpu_count() or 2
    temp_dir = tempfile.mkdtemp(prefix="rlvr-bench-", dir="/tmp")
    ray.init(
        num_cpus=cores,
        resources={"rlvr_verifier": 2},
        include_dashboard=False,
        _temp_dir=temp_dir,
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        pool = VerifierPool(
            PoolConfig(
                name="bench-pool-cpu",
                num_actors=2,
                cpus_per_actor=min(1.0, cores / 2),
                preload=("math", "code"),
                **bench.tuning(args.items_per_call, args.actor_concurrency),
            )
        )
        serial = bench.serial_verifiers(strict=True)
        warm = min(args.n, 256)
        bench.serial_loop(serial, names[:warm], items[:warm])
        pool.verify(names[:warm], items[:warm])
        rows = []
        for _ in range(args.repeats):
            s_wall, s_cpu = measure(lambda: bench.serial_loop(serial, names, items))
            p_wall, p_cpu = measure(lambda: pool.verify(names, items))
            rows.append((s_wall, s_cpu, p_wall, p_cpu))
            print(
                f"round: serial {s_wall:.2f} s wall {sum(s_cpu.values()):.2f} s CPU | pool {p_wall:.2f} s wall "
                f"{sum(p_cpu.values()):.2f} s CPU | load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        pool.shutdown()
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
    med = statistics.median
    s_wall, p_wall = med(r[0] for r in rows), med(r[2] for r in rows)
    s_cpu, p_cpu = med(sum(r[1].values()) for r in rows), med(sum(r[3].values()) for r in rows)
    print(f"\n{args.n} mixed ({n_code} code), {cores} cores, medians of {args.repeats} rounds")
    print(f"serial loop: {s_wall:.2f} s wall, {s_cpu:.2f} s CPU")
    print(f"pool:        {p_wall:.2f} s wall, {p_cpu:.2f} s CPU")
    bound = min(s_wall, s_cpu) / (p_cpu / cores)
    print(f"wall ratio {s_wall / p_wall:.2f}x; cpu-bound ratio {bound:.2f}x")
    for side, j in (("serial", 1), ("pool", 3)):
        names_ = sorted({k for r in rows for k in r[j]}, key=lambda k: -med(r[j].get(k, 0.0) for r in rows))
        parts = [f"{k} {med(r[j].get(k, 0.0) for r in rows):.2f}" for k in names_]
        print(f"  {side} CPU s by process: " + ", ".join(p for p in parts if not p.endswith(" 0.00")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
