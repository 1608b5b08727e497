"""The CPU pipelines, long enough to show what each stage does (not CI; its tiny row in tests/test_benches.py).

    python bench/pipeline_r1.py [--sections distill r1_zero] [--sft-steps 60] [--rl-steps 60]
        [--on-policy-steps 40] [--out DIR]

Sections (each prints its own side-by-side lines; the README's "Pipelines" section reports a full run):
- `distill`: the embedded teacher (tiny, 332k parameters) -> `rlvr pipeline distill` (teacher samples,
  verified traces, SFT of the embedded student: 55k parameters, not warm-started, same tokenizer) vs
  THE SAME student trained by RL alone (`rlvr train experiment=cpu_demo` from the student) for the same
  number of optimizer steps. Both are evaluated by `rlvr eval` on the 20 held-out sums (greedy pass@1,
  sampled pass@k, maj@k). "Same compute" here is the same count of student updates; the wall seconds
  of each are printed next to it (the distilled side also pays for the teacher's sampling).
  With --on-policy-steps N > 0 the pipeline is `distill_on_policy` (the same five stages, then N steps
  of verl's on-policy distillation of the SFT'd student against the same teacher, merged and evaluated
  the same way): it prints the student after SFT and after SFT + on-policy distillation side by side.
- `r1_zero`: `rlvr pipeline r1_zero` with --rl-steps RL steps from the pipeline's model; prints the
  held-out pass@1 of the model before and after and the first/last step's reward.

Every run goes through the rlvr CLI in a subprocess, as a user would run it; the figures depend on the
machine and its load (printed with them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CLI = [sys.executable, "-m", "rlvr_launch.cli"]


def _run(cmd: list[str]) -> float:
    started = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stdout[-3000:], out.stderr[-3000:])
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return time.time() - started


def _eval(model: str, k: int, out: Path) -> dict:
    _run([*CLI, "eval", model, "--task", "addition", "--k", str(k), "--out", str(out)])
    return json.loads(out.read_text())


def _fmt(report: dict) -> str:
    sampled = report.get("sampled") or {}
    extra = "  ".join(
        f"{key} {value:.3f}" for key, value in sampled.items() if key.startswith(("pass@", "maj@"))
    )
    return f"greedy pass@1 {report['pass@1']:.3f}  {extra}"


def _manifest(run_dir: Path, stage: str) -> dict:
    return json.loads(next((run_dir / "stages").glob(f"*-{stage}/manifest.json")).read_text())


def distill(args, out: Path) -> None:
    from rlvr_launch import embedded

    cache = Path(os.path.expanduser(os.environ.get("RLVR_CACHE_DIR", "~/.cache/rlvr")))
    student = embedded.ensure_student_model(cache, log=lambda _m: None)
    run_dir = out / "distill"
    steps = args.sft_steps
    overrides = [f"sft:trainer.total_training_steps={steps}", f"sft:trainer.save_freq={steps}"]
    overrides.append("sft:trainer.total_epochs=1000")  # verl's SFT stops at the last epoch otherwise
    on_policy = args.on_policy_steps
    if on_policy:
        overrides += [f"on_policy:trainer.{key}={on_policy}" for key in ("total_training_steps", "save_freq")]
        overrides.append(f"on_policy:trainer.test_freq={on_policy}")
    name = "distill_on_policy" if on_policy else "distill"
    pipeline_s = _run([*CLI, "pipeline", name, *overrides, "--run-dir", str(run_dir)])
    sample, sft = _manifest(run_dir, "sample"), _manifest(run_dir, "sft")
    teacher = json.loads((next((run_dir / "stages").glob("*-teacher_eval")) / "eval.json").read_text())
    distilled = json.loads((next((run_dir / "stages").glob("*-eval")) / "eval.json").read_text())
    if "teacher" in distilled.get("model", ""):
        raise SystemExit("the final eval is not the student's")

    # The same student, RL alone, the same number of updates (one per step: mini-batch = batch).
    rl_dir = out / "student_rl"
    rl_s = _run(
        [
            *CLI, "train", "experiment=cpu_demo", f"actor_rollout_ref.model.path={student}",
            f"trainer.total_training_steps={steps}", "trainer.test_freq=-1", "trainer.val_before_train=false",
            f"trainer.save_freq={steps}", "data.train_batch_size=8", "actor_rollout_ref.rollout.n=4",
            "actor_rollout_ref.actor.ppo_mini_batch_size=8", *args.overrides, "--run-dir", str(rl_dir),
        ]
    )  # fmt: skip
    merged = out / "student_rl_hf"  # as the pipeline's merge stage does it
    from rlvr_launch import generation

    actor = generation._actor_dir(rl_dir / "checkpoints")
    generation.merge_checkpoint(actor, merged)
    if not (merged / "tokenizer_config.json").exists():
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(str(actor / "huggingface")).save_pretrained(str(merged))
    rl = _eval(str(merged), args.k, out / "student_rl_eval.json")
    base = _eval(str(student), args.k, out / "student_base_eval.json")
    rows = [json.loads(line) for line in (rl_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rewards = [r["critic/score/mean"] for r in rows if "critic/score/mean" in r]

    print(
        f"\n== distill: teacher = embedded tiny, student = embedded student, {steps} student updates each =="
    )
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"teacher                    {_fmt(teacher)}")
    print(f"student before training    {_fmt(base)}")
    print(
        f"teacher traces: {sample['metrics']['responses']} sampled, {sample['metrics']['verified']} verified, "
        f"{sample['metrics']['kept']} kept; SFT steps {sft['metrics']['step']}"
    )
    print(f"student distilled (SFT)    {_fmt(distilled)}   pipeline wall {pipeline_s:.0f} s")
    print(
        f"student RL alone           {_fmt(rl)}   wall {rl_s:.0f} s; reward first {rewards[0]:.3f} "
        f"last {rewards[-1]:.3f}"
    )
    print(f"distilled - RL alone, greedy pass@1: {distilled['pass@1'] - rl['pass@1']:+.3f}")
    if on_policy:
        stage = _manifest(run_dir, "on_policy")
        final = json.loads((next((run_dir / "stages").glob("*-on_policy_eval")) / "eval.json").read_text())
        m = stage["metrics"]
        print(
            f"student SFT + on-policy    {_fmt(final)}   {m['step']} on-policy steps in "
            f"{stage['finished'] - stage['started']:.0f} s; distillation loss (k1, nats/token) first "
            f"{m['distill_loss_first']:.3f} last {m['distill_loss_last']:.3f}; reward first "
            f"{m.get('reward_first', float('nan')):.3f} last {m.get('reward_last', float('nan')):.3f}"
        )
        print(f"on-policy - SFT only, greedy pass@1: {final['pass@1'] - distilled['pass@1']:+.3f}")


def r1_zero(args, out: Path) -> None:
    run_dir = out / "r1_zero"
    steps = args.rl_steps
    overrides = [f"rl:trainer.total_training_steps={steps}", f"rl:trainer.save_freq={steps}"]
    wall = _run([*CLI, "pipeline", "r1_zero", *overrides, "--run-dir", str(run_dir)])
    rl = _manifest(run_dir, "rl")
    final = json.loads((next((run_dir / "stages").glob("*-eval")) / "eval.json").read_text())
    print(f"\n== r1_zero: {steps} RL steps (load average {os.getloadavg()[0]:.1f}) ==")
    print(
        f"reward first {rl['metrics'].get('reward_first', float('nan')):.3f} "
        f"last {rl['metrics'].get('reward_last', float('nan')):.3f}; after RL {_fmt(final)}; wall {wall:.0f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sections", nargs="+", default=["distill", "r1_zero"], choices=["distill", "r1_zero"]
    )
    parser.add_argument("--sft-steps", type=int, default=60, help="student updates (SFT steps = RL steps)")
    parser.add_argument("--rl-steps", type=int, default=60, help="r1_zero's RL steps")
    parser.add_argument(
        "--on-policy-steps", type=int, default=0, help="on-policy distillation steps after the SFT (0: none)"
    )
    parser.add_argument("--k", type=int, default=4, help="sampled responses per held-out prompt in eval")
    parser.add_argument("--out", type=Path, default=Path("runs/pipeline_r1"))
    parser.add_argument("overrides", nargs="*", help="extra overrides of the RL-alone student run")
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    for section in args.sections:
        {"distill": distill, "r1_zero": r1_zero}[section](args, args.out)


if __name__ == "__main__":
    main()
