"""GRPO, Dr. GRPO, DAPO and GSPO on the CPU demo task: same seed, same steps, one picture.

    python bench/compare_algos.py [--steps 40] [--algos grpo dr_grpo dapo gspo] [--out DIR] [overrides ...]

Each algorithm trains the embedded tiny model on the addition task with `rlvr train
experiment=cpu_demo algo=NAME` and otherwise identical settings (seed, prompts per step, group
size, learning rate, steps). Prints the final reward (mean of the last 10 steps) and the mean
response length of each, and writes DIR/compare_algos.png with every reward curve.

DAPO runs verl's v1 trainer (its dynamic sampling needs it), without overlong shaping (see PER_ALGO).
Rerunning with --algos NAME and the same --out replaces that algorithm's results and redraws all.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

PER_ALGO = {
    # The task's answers are 2-3 tokens of a 4-token budget: DAPO's overlong shaping (sec. 3.4) would only
    # punish correct answers for their length (with a 2-token buffer a 3-token answer pays -0.5), so it
    # is off here; clip-higher, dynamic sampling and token-level loss stay on.
    "dapo": ["reward.reward_kwargs.overlong_buffer_cfg.enable=false"],
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--algos", nargs="+", default=["grpo", "dr_grpo", "dapo", "gspo"])
    parser.add_argument("--out", type=Path, default=Path("runs/compare_algos"))
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    # Results of earlier invocations with the same --out are kept, so one algorithm can be rerun alone.
    saved = args.out / "compare_algos.json"
    results = json.loads(saved.read_text()) if saved.exists() else {}
    for algo in args.algos:
        run_dir = args.out / algo
        cmd = [
            sys.executable, "-m", "rlvr_launch.cli", "train", "experiment=cpu_demo", f"algo={algo}",
            f"trainer.total_training_steps={args.steps}", "trainer.test_freq=-1", "trainer.save_freq=-1",
            "trainer.val_before_train=false", *PER_ALGO.get(algo, []), *args.overrides, "--run-dir", str(run_dir),
        ]  # fmt: skip
        started = time.time()
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stdout[-2000:], out.stderr[-2000:])
            raise SystemExit(f"{algo} failed")
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        rows = [r for r in rows if "critic/score/mean" in r]
        rewards = [r["critic/score/mean"] for r in rows]
        lengths = [r["response_length/mean"] for r in rows]
        k = min(10, len(rewards))
        results[algo] = {
            "steps": [r["training/global_step"] for r in rows],
            "rewards": rewards,
            "first10": sum(rewards[:k]) / k,
            "last10": sum(rewards[-k:]) / k,
            "length": sum(lengths) / len(lengths),
            "wall_s": time.time() - started,
        }
        print(
            f"{algo}: reward {results[algo]['first10']:.3f} -> {results[algo]['last10']:.3f}, "
            f"mean response length {results[algo]['length']:.2f} tokens, {results[algo]['wall_s']:.0f} s",
            flush=True,
        )

    print()
    print(f"{'algo':<10}{'first 10':>10}{'last 10':>10}{'gain':>8}{'resp len':>10}{'wall s':>8}")
    for algo, r in results.items():
        print(
            f"{algo:<10}{r['first10']:>10.3f}{r['last10']:>10.3f}{r['last10'] - r['first10']:>+8.3f}"
            f"{r['length']:>10.2f}{r['wall_s']:>8.0f}"
        )
    (args.out / "compare_algos.json").write_text(json.dumps(results, indent=1))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    for algo, r in results.items():
        window = 5
        smooth = [
            sum(r["rewards"][max(0, i - window + 1) : i + 1])
            / len(r["rewards"][max(0, i - window + 1) : i + 1])
            for i in range(len(r["rewards"]))
        ]
        line = ax.plot(r["steps"], smooth, linewidth=2, label=f"{algo} (last 10: {r['last10']:.2f})")
        ax.plot(r["steps"], r["rewards"], linewidth=0.6, alpha=0.4, color=line[0].get_color())
    ax.set_xlabel("training step")
    ax.set_ylabel("mean reward (5-step moving average)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title("CPU demo task, same seed and steps")
    fig.tight_layout()
    fig.savefig(args.out / "compare_algos.png")
    print(f"picture: {args.out / 'compare_algos.png'}")


if __name__ == "__main__":
    main()
