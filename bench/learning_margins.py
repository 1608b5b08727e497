"""The learning test's margins, measured: many healthy runs and many runs whose update is switched off.

    python bench/learning_margins.py [--runs 10] [--parallel 2] [--out bench/results/learning_margins.json]
    python bench/learning_margins.py --report bench/results/learning_margins.json   # re-print a record

tests/launch/test_learning.py asserts on one run of the default experiment (40 steps, validation every
5; the shape is tests/learning_run.py's): the mean reward of the last 10 steps beats the first 10's by
MARGIN, and the held-out greedy accuracy (mean of the last 4 validations against the one before
training) by HELD_OUT_MARGIN. A margin is right when a healthy run almost never falls under it and a run
that does not learn almost never reaches it. This bench runs --runs of each kind with that exact command:
healthy (as shipped) and no-update (`actor_rollout_ref.actor.optim.lr=0`: rollouts, rewards and the
whole step run, the weights never change), and prints per figure each distribution and how many of its
standard deviations separate the test's margin from each side, with the one-sided normal tail that
distance implies (the false-failure and false-pass rates per CI run, under a normal model; the
observed extremes are printed beside it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "launch"))

from learning_run import STEPS, VAL_EVERY, end_processes_under  # noqa: E402
from test_learning import HELD_OUT, HELD_OUT_LATE, HELD_OUT_MARGIN, MARGIN, WINDOW  # noqa: E402

KINDS = {"healthy": [], "no_update": ["actor_rollout_ref.actor.optim.lr=0"]}


def one_run(kind: str, index: int, workdir: Path, extra: list[str]) -> dict:
    """The test's run (same command as conftest's default_experiment_run), its two figures."""
    run_dir = workdir / f"{kind}-{index}"
    ray_root = tempfile.mkdtemp(prefix="rlvr-margins-", dir="/tmp")
    cmd = [
        sys.executable, "-m", "rlvr_launch.cli", "train",
        f"trainer.total_training_steps={STEPS}", "trainer.val_before_train=true", f"trainer.test_freq={VAL_EVERY}",
        "trainer.save_freq=-1", *KINDS[kind], *extra, "--run-dir", str(run_dir),
    ]  # fmt: skip
    env = dict(os.environ, WANDB_MODE="disabled", RLVR_RAY_TMPDIR_ROOT=ray_root)
    start = time.time()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    finally:
        end_processes_under(ray_root)
        shutil.rmtree(ray_root, ignore_errors=True)
    row: dict = {"kind": kind, "index": index, "rc": out.returncode, "wall_s": round(time.time() - start, 1)}
    if out.returncode != 0:
        row["error"] = (out.stdout[-1500:] + out.stderr[-1500:]).strip()
        return row
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rewards = [r["critic/score/mean"] for r in rows if "critic/score/mean" in r]
    held = [r[HELD_OUT] for r in rows if HELD_OUT in r]
    row["rewards"] = rewards
    row["held_out"] = held
    row["reward_gain"] = sum(rewards[-WINDOW:]) / WINDOW - sum(rewards[:WINDOW]) / WINDOW
    row["held_out_gain"] = sum(held[-HELD_OUT_LATE:]) / HELD_OUT_LATE - held[0]
    shutil.rmtree(run_dir, ignore_errors=True)
    return row


def normal_tail(z: float) -> float:
    """P(Z > z) for a standard normal."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def stats(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    sd = (
        math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        if len(values) > 1
        else float("nan")
    )
    return mean, sd


def report(record: dict) -> str:
    runs = [r for r in record["runs"] if r["rc"] == 0]
    failed = [r for r in record["runs"] if r["rc"] != 0]
    lines = [f"learning margins: {len(runs)} runs of {record['steps']} steps ({len(failed)} failed to run)"]
    # The test's margins as they are now (a record keeps the ones its runs were made under).
    for figure, margin in (("reward_gain", MARGIN), ("held_out_gain", HELD_OUT_MARGIN)):
        healthy = [r[figure] for r in runs if r["kind"] == "healthy"]
        flat = [r[figure] for r in runs if r["kind"] == "no_update"]
        if len(healthy) < 2 or len(flat) < 2:
            lines.append(f"{figure}: too few runs ({len(healthy)} healthy, {len(flat)} no-update)")
            continue
        h_mean, h_sd = stats(healthy)
        f_mean, f_sd = stats(flat)
        z_fail = (h_mean - margin) / h_sd if h_sd > 0 else math.inf
        z_pass = (margin - f_mean) / f_sd if f_sd > 0 else math.inf
        lines += [
            f"{figure} (margin {margin:+.3f})",
            f"  healthy   n={len(healthy):2d} mean {h_mean:+.3f} sd {h_sd:.3f} min {min(healthy):+.3f} max {max(healthy):+.3f}"
            f"  margin {z_fail:.1f} sd below: false failure {normal_tail(z_fail):.1e}/run;"
            f" under the margin: {sum(v < margin for v in healthy)}",
            f"  no-update n={len(flat):2d} mean {f_mean:+.3f} sd {f_sd:.3f} min {min(flat):+.3f} max {max(flat):+.3f}"
            + (
                f"  margin {z_pass:.1f} sd above: false pass {normal_tail(z_pass):.1e}/run;"
                if math.isfinite(z_pass)
                else "  every no-update run gives the same figure (sd 0): it can never reach the margin;"
            )
            + f" at or over the margin: {sum(v >= margin for v in flat)}",
        ]
    for r in failed:
        lines.append(f"failed: {r['kind']} #{r['index']} rc {r['rc']}: {r.get('error', '')[-300:]}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each kind (healthy, no-update)")
    parser.add_argument("--parallel", type=int, default=2, help="runs at once (each has its own private Ray)")
    parser.add_argument("--kinds", default="healthy,no_update", help="which kinds to run, comma-separated")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "learning_margins.json"))
    parser.add_argument("--report", help="print the report of a recorded result and exit")
    parser.add_argument("overrides", nargs="*", help="extra recipe overrides for every run (a size, a seed)")
    args = parser.parse_args()
    if args.report:
        print(report(json.loads(Path(args.report).read_text())))
        return 0
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown kind(s) {unknown}: choose from {sorted(KINDS)}")
    workdir = Path(tempfile.mkdtemp(prefix="rlvr-margins-runs-"))
    jobs = [(kind, i) for i in range(args.runs) for kind in kinds]  # interleaved: load hits both kinds alike
    record = {
        "steps": STEPS, "val_every": VAL_EVERY, "window": WINDOW, "held_out_late": HELD_OUT_LATE,
        "margin": MARGIN, "held_out_margin": HELD_OUT_MARGIN, "overrides": args.overrides,
        "load_before": os.getloadavg(), "runs": [],
    }  # fmt: skip
    out = Path(args.out)
    with ThreadPoolExecutor(args.parallel) as pool:
        futures = [pool.submit(one_run, kind, i, workdir, args.overrides) for kind, i in jobs]
        for done, future in enumerate(futures, 1):
            row = future.result()
            record["runs"].append(row)
            gains = (
                f"reward {row['reward_gain']:+.3f} held-out {row['held_out_gain']:+.3f}"
                if row["rc"] == 0
                else "FAILED"
            )
            print(
                f"[{done}/{len(jobs)}] {row['kind']} #{row['index']}: {gains} ({row['wall_s']} s, load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(record, indent=1) + "\n")  # each run kept as it ends
    shutil.rmtree(workdir, ignore_errors=True)
    print(report(record))
    return 0 if all(r["rc"] == 0 for r in record["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
