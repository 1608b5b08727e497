"""On-policy distillation: the `distill` stage kind.

verl 0.9.1 trains a student against a teacher on the student's own samples (`distillation.enabled`):
the agent loop sends each sampled sequence to the teacher's rollout servers with `prompt_logprobs`, and
the actor's loss compares the student's per-token log-probs with the teacher's (reverse-KL estimators
k1/k2/k3/low_var_kl/abs/mse, optionally as a policy gradient; forward_kl_topk on vLLM/SGLang teachers).
On the cpu platform the teacher is rlvr's `hf` rollout in teacher mode (rlvr_cluster/hf_server.py,
`prompt_logprobs_reply`) on verl's own teacher resource pool (`distillation.n_gpus_per_node x nnodes`
logical GPUs, hence `rlvr.local_ray.num_gpus` must count them).

- `distill` stage: `rlvr train experiment=cpu_on_policy_distill` (args.experiment) with input `model`
  (the student, an HF folder) as the actor and input `teacher` (an HF folder) as the teacher; resumes
  like an `rl` stage. Output `checkpoint`; metrics step, distill_loss_first/last, reward_first/last.
- The checks of verl's `distillation.*` keys run at composition (rlvr_launch.recipes.distillation,
  a registered composition check; importing this module registers them).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

from rlvr_launch.errors import UserError
from rlvr_launch.pipelines.stages import Stage, _need, run_rl, stage_kind
from rlvr_launch.recipes.distillation import TEACHER_KEY, check_same_tokenizer, model_folder

EXPERIMENT = "cpu_on_policy_distill"
LOSS_KEY = "actor/distillation/loss"  # verl's distillation loss, one value per step in metrics.jsonl


def loss_values(metrics_file: Path) -> list[float]:
    """verl's distillation loss per step, in step order (steps without it are skipped)."""
    if not metrics_file.is_file():
        return []
    rows = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
    rows.sort(key=lambda r: r.get("training/global_step", 0))
    return [float(r[LOSS_KEY]) for r in rows if isinstance(r.get(LOSS_KEY), int | float)]


@stage_kind("distill")
def run_distill(stage: Stage) -> dict:
    student, teacher = _need(stage, "model"), _need(stage, "teacher")
    model_folder(student, "the student (input model)", f"stage {stage.name}: inputs.model")
    model_folder(teacher, "the teacher (input teacher)", f"stage {stage.name}: inputs.teacher")
    check_same_tokenizer(student, teacher, f"stage {stage.name}'s input teacher")
    experiment = str(stage.args.get("experiment", EXPERIMENT))
    overrides = [f"experiment={experiment}", f"{TEACHER_KEY}={teacher}", *stage.overrides]
    result = run_rl(replace(stage, overrides=overrides))
    losses = loss_values(stage.dir / "metrics.jsonl")
    if not losses or not all(math.isfinite(v) for v in losses):
        raise UserError(
            f"stage {stage.name!r}: the run logged no finite {LOSS_KEY} (got {losses}); the teacher's log-probs "
            f"did not reach training — see {stage.dir / 'stage.log'}"
        )
    result["metrics"]["distill_loss_first"], result["metrics"]["distill_loss_last"] = losses[0], losses[-1]
    return result
