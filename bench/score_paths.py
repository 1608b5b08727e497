"""Benchmark: `rlvr score`'s two paths against a serial math-verify loop, on 10, 354 and 4096 lines.

    python bench/score_paths.py [--sizes 10 354 4096]

Each figure is the wall clock of one fresh process, as a user runs it (interpreter start and imports
included): `rlvr score --path local` (no Ray: math's exact path in-process, sympy in local worker
processes), `rlvr score --path ray` (a private Ray plus the verifier pool, what every call paid
before), and `python bench/score_paths.py --math-verify-loop IN` (HF math-verify 0.9.0, `verify(parse(
gold), parse(answer))` per line, serially). The lines are the adversarial math pairs of
bench/math_vs_math_verify.py without its pathological ones (where math-verify waits out its own 5 s
timeouts), cycled to the size. Run under `heavy` on a shared machine; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def lines(n: int) -> list[str]:
    from math_vs_math_verify import pairs

    base = [p for p in pairs() if p["category"] != "pathological"]
    return [
        json.dumps({"response": p["response"], "ground_truth": p["reference"]})
        for p in (base * (n // len(base) + 1))[:n]
    ]


def math_verify_loop(path: str) -> None:
    from math_verify import parse, verify

    ok = 0
    for raw in Path(path).read_text().splitlines():
        obj = json.loads(raw)
        gold = (
            obj["ground_truth"]
            if "\\boxed" in obj["ground_truth"]
            else "\\boxed{" + obj["ground_truth"] + "}"
        )
        ok += bool(verify(parse(gold), parse(obj["response"])))
    print(f"math-verify: {ok} accepted", file=sys.stderr)


def timed(cmd: list[str]) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return wall, proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 354, 4096])
    parser.add_argument("--math-verify-loop", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.math_verify_loop:
        math_verify_loop(args.math_verify_loop)
        return
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}, {os.cpu_count()} CPUs")
    print(f"{'lines':>6} {'local':>8} {'ray':>8} {'math-verify':>12} {'ray/local':>10} {'mv/local':>9}")
    rlvr = [sys.executable, "-m", "rlvr_launch.cli", "score", "--verifier", "math"]
    with tempfile.TemporaryDirectory(prefix="rlvr-bench-score-") as tmp:
        for n in args.sizes:
            src = Path(tmp) / f"in{n}.jsonl"
            src.write_text("\n".join(lines(n)) + "\n")
            local, local_line = timed(
                [*rlvr, "--input", str(src), "--output", f"{tmp}/local{n}", "--path", "local"]
            )
            ray, ray_line = timed([*rlvr, "--input", str(src), "--output", f"{tmp}/ray{n}", "--path", "ray"])
            mv, _ = timed([sys.executable, __file__, "--math-verify-loop", str(src)])
            same = Path(f"{tmp}/local{n}").read_text() == Path(f"{tmp}/ray{n}").read_text()
            print(
                f"{n:>6} {local:>7.1f}s {ray:>7.1f}s {mv:>11.1f}s {ray / local:>9.1f}x {mv / local:>8.1f}x"
                f"  verdicts local == ray: {same}"
            )
            print(f"         local: {local_line}\n         ray:   {ray_line}")
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
