"""The CPU pipelines, long enough to show what each stage does (not CI; its tiny row in tests/test_benches.py).

    python bench/pipeline_r1.py [--sections distill r1_zero r1] [--sft-steps 60] [--rl-steps 60]
        [--on-policy-steps 40] [--out DIR] [--json bench/results/pipeline_r1.json]
    python bench/pipeline_r1.py --report bench/results/pipeline_r1.json   # the figures of a recorded run

Sections (each prints its own side-by-side lines; the README's "Pipelines" section reports a full run):
- `distill`: the embedded teacher (tiny, 332k parameters) -> `rlvr pipeline distill` (teacher samples,
  verified traces, SFT of the embedded student: 55k parameters, not warm-started, same tokenizer) vs
  THE SAME student trained by RL alone (`rlvr train experiment=cpu_demo` from the student) for the same
  number of optimizer steps. Both are evaluated by `rlvr eval` on the task's held-out sums (greedy pass@1,
  sampled pass@k, maj@k). "Same compute" here is the same count of student updates; the wall seconds
  of each are printed next to it (the distilled side also pays for the teacher's sampling).
  With --on-policy-steps N > 0 the pipeline is `distill_on_policy` (the same five stages, then N steps
  of verl's on-policy distillation of the SFT'd student against the same teacher, merged and evaluated
  the same way): it prints the student after SFT and after SFT + on-policy distillation side by side.
- `r1_zero`: `rlvr pipeline r1_zero` with --rl-steps RL steps from the text-only base
  (embedded://tiny_base), paid by the `r1_zero` rubric; prints the format rate (`rubric/format/mean`
  of the step's rollouts, metrics.jsonl) and correctness of the first and last steps, the held-out
  pass@1 after, and writes a PNG of the format rate per step next to the JSON.
- `r1`: `rlvr pipeline r1` (cold start -> RL -> rejection sampling -> SFT of a fresh base -> final RL
  with the `r1` rubric) with --cold-start-steps at --cold-start-lr and --r1-rl-steps RL steps at --rl-lr, vs RL ALONE
  from the same model (embedded://tiny, the RL stage's own overrides, the same RL steps). All models are
  evaluated by the same `rlvr eval` (held-out sums, 160-token responses). Prints: cold start + RL vs RL
  alone (the same RL budget; the cold start's SFT steps and wall are printed besides), and the
  rejection-sampled SFT model (a fresh base SFT'd on the RL model's verified traces) vs the RL model.

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


def distill(args, out: Path) -> dict:
    from rlvr_launch.runs import embedded_model as embedded

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
    from rlvr_launch.pipelines import generation

    actor = generation._actor_dir(rl_dir / "checkpoints")
    generation.merge_checkpoint(actor, merged)
    if not (merged / "tokenizer_config.json").exists():
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(str(actor / "huggingface")).save_pretrained(str(merged))
    rl = _eval(str(merged), args.k, out / "student_rl_eval.json")
    base = _eval(str(student), args.k, out / "student_base_eval.json")
    rows = [json.loads(line) for line in (rl_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rewards = [r["critic/score/mean"] for r in rows if "critic/score/mean" in r]

    figures = {
        "steps": steps,
        "load": os.getloadavg()[0],
        "teacher": _kept(teacher),
        "student_before": _kept(base),
        "traces": {k: sample["metrics"][k] for k in ("responses", "verified", "kept")},
        "sft_steps": sft["metrics"]["step"],
        "distilled": _kept(distilled),
        "pipeline_wall_s": pipeline_s,
        "rl_alone": _kept(rl),
        "rl_alone_wall_s": rl_s,
        "rl_alone_reward_first_last": [rewards[0], rewards[-1]],
    }
    if on_policy:
        stage = _manifest(run_dir, "on_policy")
        final = json.loads((next((run_dir / "stages").glob("*-on_policy_eval")) / "eval.json").read_text())
        m = stage["metrics"]
        figures["on_policy"] = {
            "eval": _kept(final),
            "steps": m["step"],
            "wall_s": stage["finished"] - stage["started"],
            "distill_loss_first_last": [m["distill_loss_first"], m["distill_loss_last"]],
            "reward_first_last": [m.get("reward_first", float("nan")), m.get("reward_last", float("nan"))],
        }
    print_distill(figures)
    return figures


def _kept(report: dict) -> dict:
    """What the report needs of an `rlvr eval` result (its per-prompt rows stay in the run folder)."""
    return {k: report.get(k) for k in ("pass@1", "sampled", "statuses", "lengths") if k in report}


def print_distill(f: dict) -> None:
    print(
        f"\n== distill: teacher = embedded tiny, student = embedded student, {f['steps']} student updates each =="
    )
    print(f"load average {f['load']:.1f}")
    print(f"teacher                    {_fmt(f['teacher'])}")
    print(f"student before training    {_fmt(f['student_before'])}")
    t = f["traces"]
    print(
        f"teacher traces: {t['responses']} sampled, {t['verified']} verified, {t['kept']} kept; "
        f"SFT steps {f['sft_steps']}"
    )
    print(f"student distilled (SFT)    {_fmt(f['distilled'])}   pipeline wall {f['pipeline_wall_s']:.0f} s")
    first, last = f["rl_alone_reward_first_last"]
    print(
        f"student RL alone           {_fmt(f['rl_alone'])}   wall {f['rl_alone_wall_s']:.0f} s; reward first "
        f"{first:.3f} last {last:.3f}"
    )
    print(f"distilled - RL alone, greedy pass@1: {f['distilled']['pass@1'] - f['rl_alone']['pass@1']:+.3f}")
    op = f.get("on_policy")
    if op:
        (l0, l1), (r0, r1_) = op["distill_loss_first_last"], op["reward_first_last"]
        print(
            f"student SFT + on-policy    {_fmt(op['eval'])}   {op['steps']} on-policy steps in "
            f"{op['wall_s']:.0f} s; distillation loss (k1, nats/token) first {l0:.3f} last {l1:.3f}; "
            f"reward first {r0:.3f} last {r1_:.3f}"
        )
        print(f"on-policy - SFT only, greedy pass@1: {op['eval']['pass@1'] - f['distilled']['pass@1']:+.3f}")


def _rows(path: Path) -> list[dict]:  # a run's metrics.jsonl
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _series(rows: list[dict], key: str) -> list[tuple[int, float]]:
    return [(int(r["training/global_step"]), float(r[key])) for r in rows if key in r]


def _stage_wall(run_dir: Path, stage: str) -> float:
    m = _manifest(run_dir, stage)
    return float(m["finished"]) - float(m["started"])


def _plot_format_rate(series: list[tuple[int, float]], correct: list[tuple[int, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(
        [s for s, _ in series],
        [v for _, v in series],
        marker=".",
        label="format rate (<think>...</think> then answer)",
    )
    ax.plot([s for s, _ in correct], [v for _, v in correct], marker=".", label="correctness")
    ax.set_xlabel("RL step")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("rlvr pipeline r1_zero from the text-only base: per-step rollouts", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def r1_zero(args, out: Path) -> dict:
    run_dir = out / "r1_zero"
    steps = args.rl_steps
    overrides = [f"rl:trainer.total_training_steps={steps}", f"rl:trainer.save_freq={steps}"]
    wall = _run([*CLI, "pipeline", "r1_zero", *overrides, "--run-dir", str(run_dir)])
    rl = _manifest(run_dir, "rl")
    rows = _rows(next((run_dir / "stages").glob("*-rl")) / "metrics.jsonl")
    fmt = _series(rows, "rubric/format/mean")
    correct = _series(rows, "rubric/correctness/mean")
    if not fmt:
        raise SystemExit("the r1_zero run logged no rubric/format/mean (no rubric columns in its rollouts)")
    final = json.loads((next((run_dir / "stages").glob("*-eval")) / "eval.json").read_text())
    png = args.json.with_name(args.json.stem + "_r1_zero_format.png")
    _plot_format_rate(fmt, correct, png)
    figures = {
        "rl_steps": steps,
        "load": os.getloadavg()[0],
        "format_rate": fmt,
        "correctness": correct,
        "reward_first": rl["metrics"].get("reward_first"),
        "reward_last": rl["metrics"].get("reward_last"),
        "eval_after": {k: final.get(k) for k in ("pass@1", "sampled")},
        "rl_wall_s": _stage_wall(run_dir, "rl"),
        "call_wall_s": wall,
        "picture": png.name,
    }
    print_r1_zero(figures)
    return figures


def _num(value) -> float:
    return float("nan") if value is None else float(value)


def print_r1_zero(f: dict) -> None:
    fmt, correct = f["format_rate"], f["correctness"]
    load = f" (load average {f['load']:.1f})" if "load" in f else ""
    print(f"\n== r1_zero: {f['rl_steps']} RL steps from embedded://tiny_base{load} ==")
    print(
        f"format rate step {fmt[0][0]} {fmt[0][1]:.3f} -> step {fmt[-1][0]} {fmt[-1][1]:.3f} "
        f"(max {max(v for _, v in fmt):.3f}); correctness {correct[0][1]:.3f} -> {correct[-1][1]:.3f}; "
        f"paid reward {_num(f['reward_first']):.3f} -> {_num(f['reward_last']):.3f}"
    )
    call = f" ({f['call_wall_s']:.0f} s this call)" if "call_wall_s" in f else ""
    print(f"after RL: {_fmt(f['eval_after'])}; wall {f['rl_wall_s']:.0f} s RL{call}; picture {f['picture']}")


R1_EVAL = ["data.max_response_length=160"]  # the r1 pipeline's eval stages' length: room for the worked sums


def _merged(run_dir: Path, out: Path) -> Path:
    """`rlvr train`'s last checkpoint as a Hugging Face folder (as the pipeline's merge stage does it)."""
    from rlvr_launch.pipelines import generation

    actor = generation._actor_dir(run_dir / "checkpoints")
    generation.merge_checkpoint(actor, out)
    if not (out / "tokenizer_config.json").exists():
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(str(actor / "huggingface")).save_pretrained(str(out))
    return out


def _format_rates(rollouts: Path) -> list[tuple[int, float]]:
    """Per dumped step, the share of responses the `format` verifier accepts (for RL runs that are not
    paid by a rubric, whose metrics.jsonl has no rubric/format/mean)."""
    from rlvr_verifiers import registry
    from rlvr_verifiers.base import Item

    fmt = registry.get("format")
    extra = {"reasoning_tags": ["<think>", "</think>"], "think_prefilled": False}
    out = []
    for dump in sorted(rollouts.glob("*.jsonl"), key=lambda p: int(p.stem)):
        lines = _rows(dump)
        verdicts = fmt.verify_batch([Item(x["output"], None, dict(extra)) for x in lines])
        out.append((int(dump.stem), sum(v.score for v in verdicts) / len(verdicts)))
    return out


def _rl_seconds(rows: list[dict]) -> float:
    """verl's own time of the training steps (timing_s/step summed): comparable between runs, and the
    same when a finished run is reused (`rlvr train` into a finished run dir does nothing)."""
    return sum(float(x["timing_s/step"]) for x in rows if "timing_s/step" in x)


def _rewards(rows: list[dict]) -> tuple[float, float]:
    r = [x["critic/score/mean"] for x in rows if "critic/score/mean" in x]
    return (r[0], r[-1]) if r else (float("nan"), float("nan"))


def r1(args, out: Path) -> dict:
    run_dir = out / "r1"
    cs, rl_steps, lr = args.cold_start_steps, args.r1_rl_steps, args.rl_lr
    overrides = [
        f"cold_start:optim.lr={args.cold_start_lr}",
        f"cold_start:trainer.total_training_steps={cs}",
        f"cold_start:trainer.save_freq={cs}",
        f"rl:actor_rollout_ref.actor.optim.lr={lr}",
        f"rl:trainer.total_training_steps={rl_steps}",
        f"rl:trainer.save_freq={rl_steps}",
        f"rl:trainer.test_freq={rl_steps}",
        f"sft:optim.lr={args.r1_sft_lr}",
        f"sft:trainer.total_training_steps={args.r1_sft_steps}",
        f"sft:trainer.save_freq={args.r1_sft_steps}",
        f"final_rl:actor_rollout_ref.actor.optim.lr={lr}",
        f"final_rl:trainer.total_training_steps={args.final_rl_steps}",
        f"final_rl:trainer.save_freq={args.final_rl_steps}",
    ]
    # The pipeline may stop at its sample stage (a model whose samples are never right and well formed):
    # the figures of the stages it finished are still reported, with the reason it stopped.
    cmd = [*CLI, "pipeline", "r1", *overrides, "--run-dir", str(run_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    stopped = None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]

    def finished(name: str) -> dict | None:
        found = list((run_dir / "stages").glob(f"*-{name}/manifest.json"))
        m = json.loads(found[0].read_text()) if found else None
        return m if m and m.get("status") == "done" else None

    if not finished("rl_merge"):
        print(done.stdout[-3000:], done.stderr[-3000:])
        raise SystemExit(f"failed before the RL model existed: {' '.join(cmd)}")
    rl_rows = _rows(next((run_dir / "stages").glob("*-rl")) / "metrics.jsonl")

    # RL alone: the RL stage's own overrides (its lr included), from the model the cold start started from.
    from rlvr_launch.runs import embedded_model as embedded

    cache = Path(os.path.expanduser(os.environ.get("RLVR_CACHE_DIR", "~/.cache/rlvr")))
    tiny = embedded.ensure_tiny_model(cache, log=lambda _m: None)
    rl_overrides = [o for o in finished("rl")["config"]["overrides"] if "model.path=" not in o]
    alone_dir = out / "r1_rl_alone"
    _run([*CLI, "train", *rl_overrides, f"actor_rollout_ref.model.path={tiny}", "--run-dir", str(alone_dir)])
    alone_hf = _merged(alone_dir, out / "r1_rl_alone_hf")
    alone_rows = _rows(alone_dir / "metrics.jsonl")
    rl_s, alone_s = _rl_seconds(rl_rows), _rl_seconds(alone_rows)
    fmt_rl = _format_rates(next((run_dir / "stages").glob("*-rl")) / "rollouts")
    fmt_alone = _format_rates(alone_dir / "rollouts")

    models = [
        ("base (embedded tiny)", str(tiny)),
        ("cold start", finished("cold_start_merge")["outputs"]["model"]),
        ("cold start + RL", finished("rl_merge")["outputs"]["model"]),
        ("RL alone", str(alone_hf)),
    ]
    for label, stage in [
        ("rejection-sampled SFT of a fresh base", "sft_merge"),
        ("+ final RL (r1 rubric)", "final_merge"),
    ]:
        if finished(stage):
            models.append((label, finished(stage)["outputs"]["model"]))
    ev = {}
    for i, (label, path) in enumerate(models):
        report = out / f"r1_eval_{i}.json"
        _run([*CLI, "eval", path, *R1_EVAL, "--task", "addition", "--k", str(args.k), "--out", str(report)])
        ev[label] = json.loads(report.read_text())

    (a, b), (c, d) = _rewards(rl_rows), _rewards(alone_rows)
    result = {
        "cold_start_steps": cs,
        "cold_start_lr": args.cold_start_lr,
        "rl_steps": rl_steps,
        "rl_lr": lr,
        "load": os.getloadavg()[0],
        "overrides": overrides,
        "stopped": stopped,
        "eval": {label: _kept(r) for label, r in ev.items()},
        "rl_reward_first_last": [a, b],
        "rl_alone_reward_first_last": [c, d],
        "rl_format_rate": fmt_rl,
        "rl_alone_format_rate": fmt_alone,
        "cold_start_wall_s": _stage_wall(run_dir, "cold_start"),
        "rl_steps_s": rl_s,
        "rl_alone_steps_s": alone_s,
    }
    sample = finished("sample")
    if sample is not None:
        result["sample"] = sample["metrics"]
    if finished("final_rl"):
        rows = _rows(next((run_dir / "stages").glob("*-final_rl")) / "metrics.jsonl")
        keys = sorted({k for x in rows for k in x if k.startswith("rubric/")})
        result["final_rl_rubric_per_step"] = {k: [x[k] for x in rows if k in x] for k in keys}
    print_r1(result)
    return result


def print_r1(f: dict) -> None:
    load = f" (load average {f['load']:.1f})" if "load" in f else ""
    head = (
        f"cold start {f['cold_start_steps']} SFT steps at lr {f['cold_start_lr']}; RL {f['rl_steps']} steps "
        f"at lr {f['rl_lr']}"
        if "rl_steps" in f
        else "overrides: " + " ".join(f["overrides"])
    )
    print(f"\n== r1: {head}{load} ==")
    ev = f["eval"]
    for label, report in ev.items():
        print(f"{label:40s} {_fmt(report)}")
    (a, b), (c, d) = f["rl_reward_first_last"], f["rl_alone_reward_first_last"]
    fmt_rl, fmt_alone = f["rl_format_rate"], f["rl_alone_format_rate"]
    print(
        f"cold start + RL: reward {a:.3f} -> {b:.3f}, format rate {fmt_rl[0][1]:.3f} -> {fmt_rl[-1][1]:.3f}, "
        f"RL steps {f['rl_steps_s']:.0f} s (+ cold start stage {f['cold_start_wall_s']:.0f} s)"
    )
    print(
        f"RL alone:        reward {c:.3f} -> {d:.3f}, format rate {fmt_alone[0][1]:.3f} -> {fmt_alone[-1][1]:.3f}, "
        f"RL steps {f['rl_alone_steps_s']:.0f} s"
    )
    print(
        f"cold start + RL - RL alone, greedy pass@1: {ev['cold start + RL']['pass@1'] - ev['RL alone']['pass@1']:+.3f}"
    )
    m = f.get("sample")
    if m is None:
        print(f"rejection sampling: the pipeline stopped: {f['stopped']}")
        return
    kept = ev.get("rejection-sampled SFT of a fresh base", {}).get("pass@1")
    print(
        f"rejection sampling: {m.get('responses')} sampled, {m.get('verified')} verified, {m.get('kept')} kept; "
        + (
            f"SFT model greedy pass@1 {kept:.3f} vs the RL model's {ev['cold start + RL']['pass@1']:.3f}"
            if kept is not None
            else f"stopped: {f['stopped']}"
        )
    )
    if f.get("final_rl_rubric_per_step"):
        print(
            "final RL (r1 rubric), per step: "
            + "; ".join(
                f"{k} {[round(v, 3) for v in vals]}" for k, vals in f["final_rl_rubric_per_step"].items()
            )
        )


# section -> (what runs it and returns its figures, what prints them: after a run, or from a saved JSON)
SECTIONS = {"distill": (distill, print_distill), "r1_zero": (r1_zero, print_r1_zero), "r1": (r1, print_r1)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=list(SECTIONS))
    parser.add_argument("--sft-steps", type=int, default=60, help="student updates (SFT steps = RL steps)")
    parser.add_argument("--rl-steps", type=int, default=60, help="r1_zero's RL steps")
    parser.add_argument(
        "--on-policy-steps", type=int, default=0, help="on-policy distillation steps after the SFT (0: none)"
    )
    parser.add_argument(
        "--r1-rl-steps", type=int, default=12, help="RL steps of r1's RL stage and of RL alone"
    )
    parser.add_argument("--rl-lr", default="1e-4", help="r1's RL learning rate (its RL stages and RL alone)")
    parser.add_argument("--cold-start-steps", type=int, default=200, help="r1's cold-start SFT steps")
    parser.add_argument("--cold-start-lr", default="3e-3", help="r1's cold-start learning rate")
    parser.add_argument("--r1-sft-steps", type=int, default=60, help="r1's SFT steps on the sampled traces")
    parser.add_argument("--r1-sft-lr", default="1e-3", help="r1's SFT learning rate on the sampled traces")
    parser.add_argument("--final-rl-steps", type=int, default=4, help="r1's final RL steps (r1 rubric)")
    parser.add_argument(
        "--json", type=Path, default=None, help="write the figures here (default OUT/pipeline_r1.json)"
    )
    parser.add_argument("--k", type=int, default=4, help="sampled responses per held-out prompt in eval")
    parser.add_argument("--out", type=Path, default=Path("runs/pipeline_r1"))
    parser.add_argument("--report", type=Path, default=None, help="only print the figures of a saved JSON")
    parser.add_argument("overrides", nargs="*", help="extra overrides of the RL-alone student run")
    args = parser.parse_args()
    if args.report:
        saved = json.loads(args.report.read_text())
        # A section run again with other arguments is saved under a name of its own and names its kind.
        for name, figures in saved["sections"].items():
            SECTIONS[figures.get("section", name)][1](figures)
        return
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    args.json = (args.json or args.out / "pipeline_r1.json").resolve()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    results = {"sections": {}, "args": {k: str(v) for k, v in vars(args).items()}}
    for section in args.sections:
        load = os.getloadavg()[0]
        figures = SECTIONS[section][0](args, args.out)
        results["sections"][section] = {
            "section": section,
            "load_before": load,
            "load_after": os.getloadavg()[0],
            **(figures or {}),
        }
        args.json.write_text(json.dumps(results, indent=2, default=str))
    print(f"figures: {args.json}")


if __name__ == "__main__":
    main()
