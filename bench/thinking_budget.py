"""Accuracy vs thinking budget of the fused model (the `qwen3` pipeline), side by side with the model before
fusion, in thinking mode at each budget and in non-thinking mode. Not run by CI at full size.

    python bench/thinking_budget.py [--run-dir DIR] [--budgets 0,16,32,48,64,96,128] [--limit N] [STAGE:key=value ...]
    python bench/thinking_budget.py --report bench/results/thinking_budget.json   # print a recorded result

Runs (or resumes: finished stages are skipped) `rlvr pipeline qwen3` on CPU: long-CoT cold start ->
reasoning RL -> thinking-mode fusion SFT -> general RL with the budget agent loop (with no STAGE:key=value
given, the SFT stages run longer than the recipe's test size: DEFAULT_OVERRIDES below). Then `rlvr eval
--thinking-budget` (greedy pass@1 on the task's held-out sums, rlvr's `thinking_budget` agent loop on the hf
server) of two models of that run, in one process:
- `reasoning RL` (stage rl_merge): the model before fusion, trained in thinking mode only (the baseline);
- `fused` (stage fusion_merge): the same model after the fusion SFT.
Printed: per model and budget, pass@1, mean total response tokens (reasoning + the inserted early-stop
phrase + answer), mean reasoning tokens and the budget-hit rate; and each model's non-thinking
(`enable_thinking=False`) pass@1. The JSON goes to --out (default bench/results/thinking_budget.json),
the picture (accuracy vs budget, both models, non-thinking accuracy as lines) next to it as .png.
The load average is printed with the figures (the accuracies do not depend on it; greedy decoding).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = (("reasoning RL", "rl_merge"), ("fused", "fusion_merge"))
# The recipe's SFT stages are sized for the slow e2e test (20 + 10 steps): too short for the tiny model
# to learn to close its reasoning block (every budget then scores 0). With these the cold-start model
# counts the sum up in a closed block on most prompts, so the budget has something to cut.
DEFAULT_OVERRIDES = [
    "cold_start:trainer.total_training_steps=400",
    "cold_start:trainer.save_freq=400",
    "fusion:trainer.total_training_steps=200",
    "fusion:trainer.save_freq=200",
]


def stage_model(run_dir: Path, stage: str) -> Path:
    for path in sorted((run_dir / "stages").glob(f"*-{stage}")):
        manifest = json.loads((path / "manifest.json").read_text())
        return Path(manifest["outputs"]["model"])
    raise SystemExit(f"{run_dir}: no stage {stage!r} (did the pipeline finish?)")


def table(result: dict) -> str:
    lines = [
        f"thinking budget bench: {result['task']} held-out ({result['prompts']} prompts), greedy pass@1; "
        f"load average {result['load_average']}; pipeline overrides: {' '.join(result.get('pipeline_overrides') or []) or 'none'}",
        f"  {'model':<14} {'budget':>6} {'pass@1':>7} {'total tok':>9} {'think tok':>9} {'hit rate':>8}",
    ]
    for name, report in result["models"].items():
        for r in report["thinking"]:
            lines.append(
                f"  {name:<14} {r['budget']:>6} {r['pass@1']:>7.3f} {r['mean_total_tokens']:>9.1f} "
                f"{r['mean_thinking_tokens']:>9.1f} {r['budget_hit_rate']:>8.2f}"
            )
    for name, report in result["models"].items():
        nt = report["non_thinking"]
        lines.append(
            f"  {name:<14} {'non-thinking':>13} pass@1 {nt['pass@1']:.3f}, {nt['mean_total_tokens']:.1f} tokens"
        )
    names = list(result["models"])
    if len(names) == 2:
        a, b = (result["models"][n]["non_thinking"]["pass@1"] for n in names)
        lines.append(f"  non-thinking pass@1 {names[1]} vs {names[0]}: {b:.3f} vs {a:.3f}")
    return "\n".join(lines)


def plot(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    colors = {"reasoning RL": "#9ab", "fused": "#1f5fa8"}
    budgets: list[int] = []
    for name, report in result["models"].items():
        budgets = [r["budget"] for r in report["thinking"]]
        color = colors.get(name, "#444")
        ax.plot(
            budgets, [r["pass@1"] for r in report["thinking"]], "o-", color=color, label=f"{name}: thinking"
        )
        ax.axhline(
            report["non_thinking"]["pass@1"], color=color, linestyle="--", label=f"{name}: non-thinking"
        )
    positive = [b for b in budgets if b > 0]
    if len(positive) > 1:
        ax.set_xscale("symlog", linthresh=min(positive))
    ax.set_xticks(budgets, [str(b) for b in budgets])
    ax.minorticks_off()
    ax.set(xlabel="thinking budget (tokens)", ylabel="pass@1 (greedy, held-out sums)", ylim=(-0.02, 1.02))
    ax.set_title("qwen3 pipeline on CPU: accuracy vs thinking budget", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run-dir", type=Path, default=Path("runs/bench-thinking-budget"))
    parser.add_argument("--budgets", default="0,16,32,48,64,96,128")
    parser.add_argument("--limit", type=int, default=None, help="only the first N held-out prompts")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "thinking_budget.json")
    parser.add_argument("--report", type=Path, default=None, help="print a recorded result; run nothing")
    parser.add_argument(
        "overrides",
        nargs="*",
        help=f"STAGE:key=value for `rlvr pipeline qwen3` (default: {' '.join(DEFAULT_OVERRIDES)})",
    )
    args = parser.parse_args()
    if args.report:
        print(table(json.loads(args.report.read_text())))
        return 0
    args.overrides = args.overrides or list(DEFAULT_OVERRIDES)
    started = time.time()
    cmd = [
        sys.executable,
        "-m",
        "rlvr_launch.cli",
        "pipeline",
        "qwen3",
        *args.overrides,
        "--run-dir",
        str(args.run_dir),
    ]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    from rlvr_launch.pipelines import evaluate

    budgets = evaluate.parse_budgets(args.budgets)
    result: dict = {
        "task": "addition",
        "budgets": budgets,
        "pipeline_overrides": args.overrides,
        "models": {},
    }
    for name, stage in MODELS:
        report = evaluate.budget_sweep(
            str(stage_model(args.run_dir, stage)), "addition", budgets, limit=args.limit
        )
        result["models"][name] = report
        result["prompts"] = report["prompts"]
    result["load_average"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    result["seconds"] = round(time.time() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    result["plot"] = str(plot(result, args.out.with_suffix(".png")))
    args.out.write_text(json.dumps(result, indent=2))
    print(table(result))
    print(f"  {args.out}, {result['plot']} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
