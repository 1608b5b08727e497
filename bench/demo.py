"""The CPU demo, measured: wall time, peak memory of the whole process tree, and the reward's rise.

    python bench/demo.py [overrides ...]

Runs `rlvr train` (the default experiment unless overridden) in a fresh run directory, samples the
resident memory of rlvr and every process it starts (Ray, verl workers) twice a second, and prints
the mean reward of the first and last 10 steps side by side with their ratio.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil


def tree_rss(root: psutil.Process) -> int:
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def main() -> None:
    overrides = sys.argv[1:]
    run_dir = Path(tempfile.mkdtemp(prefix="rlvr-demo-")) / "run"
    started = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvr_launch.cli", "train", *overrides, "--run-dir", str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    root = psutil.Process(proc.pid)
    peak = 0
    lines = []
    import threading

    def pump():
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[rlvr]"):
                print(line, end="", flush=True)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    while proc.poll() is None:
        peak = max(peak, tree_rss(root))
        time.sleep(0.5)
    reader.join(timeout=5)
    wall = time.time() - started
    if proc.returncode != 0:
        print("".join(lines[-40:]))
        raise SystemExit(f"rlvr train failed with exit code {proc.returncode}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rewards = [r["critic/score/mean"] for r in rows if "critic/score/mean" in r]
    k = min(10, len(rewards) // 2)
    first, last = sum(rewards[:k]) / k, sum(rewards[-k:]) / k
    steps = [r["timing_s/step"] for r in rows if "timing_s/step" in r][1:]
    print()
    print(
        f"steps: {len(rewards)}; wall time {wall / 60:.1f} min (install excluded, model build included if first run)"
    )
    print(
        f"median step time {sorted(steps)[len(steps) // 2]:.2f} s; peak RSS of the process tree {peak / 2**30:.2f} GiB"
    )
    print(f"{'mean reward':<20}{'first ' + str(k):>10}{'last ' + str(k):>10}{'ratio':>8}")
    print(f"{'':<20}{first:>10.3f}{last:>10.3f}{last / first:>8.2f}")
    print(f"run directory: {run_dir}")


if __name__ == "__main__":
    main()
