"""Stage kinds of `rlvr pipeline`: kind name -> function, each calling what already exists.

A kind is `fn(stage: Stage) -> dict` returning `{"outputs": {name: path}, "metrics": {name: number}}`.
`stage.dir` is the stage's folder (a run directory plus manifest.json), `stage.inputs` the resolved
input paths (by input name), `stage.args` the kind's settings and `stage.overrides` recipe overrides.
Register another kind with `@stage_kind("name")` (one function; a module of its own when it grows).

- `rl`:     `rlvr train` (its run, its resume from the latest checkpoint) in the stage folder; input
            `model` (an HF folder) replaces the recipe's model path. Output `checkpoint`.
- `sft`:    verl's own SFT trainer (`torchrun -m verl.trainer.sft_trainer`, MultiTurnSFTDataset on the
            `messages` column) on input `data` from input `model`; resumes from its own checkpoints
            (resume_mode auto). Output `checkpoint`; each step's metrics in the stage's metrics.jsonl,
            metrics loss_first / loss_last (the SFT loss of the first and last step).
- `merge`:  verl's model merger on input `checkpoint` (the latest step). Output `model` (HF folder).
- `sample`: `rlvr sample` of input `model` (args: task, k, and sample's options; optional input `mix`,
            general SFT data mixed in by args.mix_ratio). Output `data`.
- `eval`:   `rlvr eval` of input `model` (args: task, k, ...). Output `report`; metrics pass@1, ...
            For both, args.rollout (hf | vllm; `STAGE:args.rollout=vllm` on the command line) picks the
            server that generates, as `--rollout` does; unset, the platform's own.
Kinds in modules of their own: `distill` (pipelines/distill.py), `filter` (pipelines/filter.py: `rlvr filter`
of input `model` on the task's data or input `data`; output `data`), the Qwen3-style kinds
(pipelines/thinking_stages.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr_launch.errors import UserError


@dataclass
class Stage:
    name: str
    kind: str
    dir: Path
    inputs: dict[str, str] = field(default_factory=dict)
    args: dict[str, Any] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    log: Callable[[str], None] = print


STAGE_KINDS: dict[str, Callable[[Stage], dict]] = {}


def stage_kind(name: str):
    def register(fn: Callable[[Stage], dict]) -> Callable[[Stage], dict]:
        if name in STAGE_KINDS:
            raise ValueError(f"stage kind {name!r} is already registered")
        STAGE_KINDS[name] = fn
        return fn

    return register


def _need(stage: Stage, name: str) -> str:
    value = stage.inputs.get(name)
    if not value:
        raise UserError(
            f"stage {stage.name!r} ({stage.kind}) needs input {name!r} (inputs: {{{name}: STAGE.OUTPUT}})"
        )
    return value


def _run(
    cmd: list[str], stage: Stage, env: dict[str, str] | None = None, log_name: str = "stage.log"
) -> None:
    """Run a child in this process group (a kill of the pipeline's group kills it too), logging to a file."""
    stage.log(f"  $ {' '.join(cmd)}")
    with open(stage.dir / log_name, "a") as log_file:
        done = subprocess.run(
            cmd, stdout=log_file, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
    if done.returncode != 0:
        tail = (stage.dir / log_name).read_text(errors="replace").strip().splitlines()[-8:]
        raise RuntimeError(
            f"exit status {done.returncode}; last lines of {stage.dir / log_name}:\n  " + "\n  ".join(tail)
        )


def latest_step(checkpoints: Path) -> int:
    marker = checkpoints / "latest_checkpointed_iteration.txt"
    try:
        return int(marker.read_text().strip())
    except (OSError, ValueError):
        return 0


@stage_kind("rl")
def run_rl(stage: Stage) -> dict:
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "train", *stage.overrides]
    if stage.inputs.get("model"):
        cmd.append(f"actor_rollout_ref.model.path={stage.inputs['model']}")
    cmd += ["--run-dir", str(stage.dir)]
    _run(cmd, stage)
    checkpoints = stage.dir / "checkpoints"
    step = latest_step(checkpoints)
    if step == 0:
        raise UserError(
            f"stage {stage.name!r}: training left no checkpoint in {checkpoints}; set trainer.save_freq so the "
            "last step is saved (the next stage reads the model from it)"
        )
    metrics: dict[str, float] = {"step": step}
    metrics_file = stage.dir / "metrics.jsonl"
    if metrics_file.is_file():
        from rlvr_launch.runs.rundir import REWARD_KEY

        rows = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
        rewards = [r[REWARD_KEY] for r in rows if isinstance(r.get(REWARD_KEY), int | float)]
        if rewards:
            metrics["reward_first"], metrics["reward_last"] = rewards[0], rewards[-1]
    return {"outputs": {"checkpoint": str(checkpoints)}, "metrics": metrics}


# verl's SFT trainer on CPU (design/verl-on-cpu.md, "SFT and checkpoints between stages").
SFT_CPU_OVERRIDES = [
    "trainer.device=cpu",
    "trainer.n_gpus_per_node=1",
    "engine.strategy=fsdp2",
    "engine.use_torch_compile=false",
    "+engine.mixed_precision.param_dtype=fp32",
    "+engine.mixed_precision.reduce_dtype=fp32",
    "+engine.mixed_precision.buffer_dtype=fp32",
    "model.use_remove_padding=false",
    "model.enable_gradient_checkpointing=false",
    "+model.override_config.attn_implementation=eager",
    "data.num_workers=0",
    "data.use_dynamic_bsz=false",
]


@stage_kind("sft")
def run_sft(stage: Stage) -> dict:
    from rlvr_cluster.env import COMMON_ENV, CPU_ENV

    model, data = _need(stage, "model"), _need(stage, "data")
    data_file = Path(data) / "train.parquet" if Path(data).is_dir() else Path(data)
    # torchrun's own module under this interpreter: a `torchrun` on PATH may be missing (venv not activated)
    # or another environment's.
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1"]
    cmd += ["-m", "verl.trainer.sft_trainer"]
    cmd += [f"model.path={model}", f"data.train_files={data_file}", "data.val_files=null"]
    cmd += [f"trainer.default_local_dir={stage.dir / 'checkpoints'}", "trainer.resume_mode=auto"]
    cmd.append(f"hydra.run.dir={stage.dir / 'hydra'}")  # not ./outputs/DATE of wherever rlvr was started
    # verl's file logger writes each step's metrics (train/loss, ...) to the attempt's file, which it
    # truncates when it starts; what an attempt logged is merged into the stage's metrics.jsonl.
    attempt_file = stage.dir / SFT_ATTEMPT_METRICS
    cmd.append("trainer.logger=[console,file]")
    env = {**COMMON_ENV, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    env["VERL_FILE_LOGGER_PATH"] = str(attempt_file)
    if stage.args.get("platform", "cpu") == "cpu":
        cmd += SFT_CPU_OVERRIDES
        env.update(CPU_ENV)
    cmd += stage.overrides
    cmd += _sft_epochs(cmd, data_file, stage.name)
    sft_metrics(stage.dir)  # a killed attempt's rows, before the next attempt's logger truncates its file
    _run(cmd, stage, env)
    step = latest_step(stage.dir / "checkpoints")
    if step == 0:
        raise UserError(f"stage {stage.name!r}: the SFT trainer saved no checkpoint; set trainer.save_freq")
    return {
        "outputs": {"checkpoint": str(stage.dir / "checkpoints")},
        "metrics": {"step": step, **sft_metrics(stage.dir)},
    }


SFT_ATTEMPT_METRICS = "attempt_metrics.jsonl"  # verl's file logger, this attempt: {"step": N, "data": {...}}
SFT_LOSS_KEY = "train/loss"


def sft_metrics(stage_dir: Path) -> dict[str, float]:
    """Merge the latest attempt's logged steps into the stage's metrics.jsonl (one row per step; a step an
    attempt redid after a resume replaces the killed attempt's row) and return the SFT loss of the first
    and the last logged step (`loss_first`, `loss_last`), the stage's evidence that it trained."""
    rows: dict[int, dict] = {}
    merged, attempt = stage_dir / "metrics.jsonl", stage_dir / SFT_ATTEMPT_METRICS
    for path in (merged, attempt):
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line cut short by a kill
            if isinstance(row.get("data"), dict):
                row = {"step": row.get("step"), **row["data"]}
            if isinstance(row.get("step"), int):
                rows[row["step"]] = row
    if not rows:
        return {}
    merged.write_text("".join(json.dumps(rows[step]) + "\n" for step in sorted(rows)))
    attempt.unlink(missing_ok=True)
    losses = [
        rows[s][SFT_LOSS_KEY] for s in sorted(rows) if isinstance(rows[s].get(SFT_LOSS_KEY), int | float)
    ]
    return {"loss_first": losses[0], "loss_last": losses[-1]} if losses else {}


def _last_value(cmd: list[str], key: str) -> str | None:
    values = [arg.split("=", 1)[1] for arg in cmd if arg.startswith(key + "=")]
    return values[-1] if values else None


def _sft_epochs(cmd: list[str], data_file: Path, name: str) -> list[str]:
    """verl's SFT loop stops after trainer.total_epochs even when trainer.total_training_steps is not
    reached (no final checkpoint then): with a step count, give it as many epochs as it needs. A set
    smaller than one batch (verl drops the incomplete batch) would train nothing: refused with the fix."""
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(data_file).metadata.num_rows
    batch = int(_last_value(cmd, "data.train_batch_size") or 0)
    if batch and rows < batch:
        raise UserError(
            f"stage {name!r}: {rows} training rows are fewer than one batch (data.train_batch_size={batch}), "
            f"and verl drops an incomplete batch; set {name}:data.train_batch_size=N with N <= {rows}, or give "
            "the stage more data"
        )
    steps = _last_value(cmd, "trainer.total_training_steps")
    if steps in (None, "null") or _last_value(cmd, "trainer.total_epochs") is not None or not batch:
        return []
    return [f"trainer.total_epochs={-(-int(steps) // max(1, rows // batch))}"]


@stage_kind("merge")
def run_merge(stage: Stage) -> dict:
    from rlvr_launch.pipelines import generation

    checkpoint = Path(_need(stage, "checkpoint"))
    target = stage.dir / "model"
    actor = generation._actor_dir(checkpoint)
    if actor is None:
        raise UserError(f"stage {stage.name!r}: {checkpoint} holds no verl checkpoint to merge")
    generation.merge_checkpoint(actor, target)
    # The merger writes the actor's tokenizer only when it finds it; the stage must hand on a whole model.
    if not any((target / name).exists() for name in ("tokenizer.json", "tokenizer_config.json")):
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(str(actor / "huggingface")).save_pretrained(str(target))
    return {"outputs": {"model": str(target)}, "metrics": {"step": latest_step(checkpoint)}}


def _task_args(stage: Stage) -> dict:
    args = dict(stage.args)
    if "task" not in args:
        raise UserError(f"stage {stage.name!r} ({stage.kind}) needs args.task")
    return args


@stage_kind("sample")
def run_sample(stage: Stage) -> dict:
    from rlvr_launch.pipelines import sample

    args = _task_args(stage)
    task, k = args.pop("task"), int(args.pop("k", 4))
    if "select" in args:  # the CLI's --select, sample()'s mode
        args["mode"] = args.pop("select")
    if stage.inputs.get("mix"):  # general data mixed in (args.mix_ratio rows per accepted row)
        args["mix"] = stage.inputs["mix"]
    report = sample.sample(
        _need(stage, "model"), task, k, stage.dir / "data", overrides=stage.overrides, log=stage.log, **args
    )
    metrics = {key: report[key] for key in ("responses", "verified", "acceptance_rate", "kept", "mixed")}
    if not report["kept"]:
        raise UserError(
            f"stage {stage.name!r}: rlvr sample kept none of {report['responses']} responses "
            f"({report['verified']} verified; drop reasons in {stage.dir / 'data' / 'stats.json'}), so the "
            "next stage would train on nothing: train the model longer, raise args.k, or loosen the filters"
        )
    return {"outputs": {"data": str(stage.dir / "data" / "train.parquet")}, "metrics": metrics}


@stage_kind("eval")
def run_eval(stage: Stage) -> dict:
    from rlvr_launch.pipelines import evaluate

    args = _task_args(stage)
    report = evaluate.evaluate(
        _need(stage, "model"), args.pop("task"), overrides=stage.overrides, log=stage.log, **args
    )
    path = stage.dir / "eval.json"
    path.write_text(json.dumps(report, indent=2))
    stage.log(evaluate.table(report))
    metrics = {"pass@1": report["pass@1"]}
    for key, value in (report.get("sampled") or {}).items():
        if key.startswith(("pass@", "maj@")) and key != "pass@1":
            metrics[key] = value
    return {"outputs": {"report": str(path)}, "metrics": metrics}
