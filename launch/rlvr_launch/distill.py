"""On-policy distillation: the `distill` stage kind, and the checks of verl's `distillation.*` keys.

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
- `check(cfg)`: refuses what verl would fail on deep in a worker (or hang on: a teacher pool Ray cannot
  place): no teacher path, a teacher folder that is not a model, a tokenizer that differs from the
  student's, a pool that does not fit the replicas, a top-k loss on the hf teacher.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

from rlvr_launch.errors import UserError
from rlvr_launch.stages import Stage, _need, run_rl, stage_kind

EXPERIMENT = "cpu_on_policy_distill"
LOSS_KEY = "actor/distillation/loss"  # verl's distillation loss, one value per step in metrics.jsonl
TEACHER_KEY = "distillation.teacher_models.teacher_model.model_path"


def _model_folder(path: str, what: str, key: str) -> Path:
    folder = Path(path).expanduser()
    if not (folder / "config.json").is_file():
        raise UserError(
            f"{what} {path!r} is not a Hugging Face model folder (no config.json there); set {key} to one "
            "(a merged checkpoint: a pipeline's merge stage output, or `rlvr eval`'s merged folder)"
        )
    return folder


def check_same_tokenizer(student: str | Path, teacher: str | Path, teacher_key: str = TEACHER_KEY) -> None:
    """Teacher log-probs are read token by token against the student's ids: one tokenizer for both."""
    from transformers import AutoTokenizer

    s_tok = AutoTokenizer.from_pretrained(str(student))
    t_tok = AutoTokenizer.from_pretrained(str(teacher))
    s_vocab, t_vocab = s_tok.get_vocab(), t_tok.get_vocab()
    differ = sorted(tok for tok in set(s_vocab) | set(t_vocab) if s_vocab.get(tok) != t_vocab.get(tok))
    if differ or s_tok.eos_token != t_tok.eos_token:
        if differ:
            what = (
                f"{len(differ)} tokens map to different ids ("
                + ", ".join(
                    f"{tok!r}: student {s_vocab.get(tok)} / teacher {t_vocab.get(tok)}" for tok in differ[:3]
                )
                + ")"
            )
        else:
            what = f"the end token differs ({s_tok.eos_token!r} / {t_tok.eos_token!r})"
        raise UserError(
            f"the teacher's tokenizer ({teacher}) differs from the student's ({student}): {what}; on-policy "
            f"distillation compares log-probs token by token on the student's ids, so {teacher_key} must "
            "share the student's tokenizer (same model family)"
        )


def finalise(cfg) -> None:
    """`embedded://NAME` teacher paths -> their cache folders (as compose does for the actor's model)."""
    from omegaconf import OmegaConf

    from rlvr_launch import compose

    for teacher in (OmegaConf.select(cfg, "distillation.teacher_models", default=None) or {}).values():
        path = teacher.get("model_path")
        if isinstance(path, str) and path.startswith(compose.EMBEDDED_MODEL_PREFIX):
            teacher.model_path = str(compose.embedded_path(path, cfg.rlvr.cache_dir))


def _embedded_build(cfg, path: str) -> bool:
    """An embedded model's cache folder, which `rlvr train` builds before training (rlvr.prepare)."""
    from rlvr_launch import compose

    names = ("tiny", "student")
    builds = {compose.embedded_path(compose.EMBEDDED_MODEL_PREFIX + n, cfg.rlvr.cache_dir) for n in names}
    return Path(path).expanduser() in builds


def check(cfg) -> None:
    """Refuse a distillation config that cannot run, naming the key and the fix (no-op when disabled)."""
    from omegaconf import OmegaConf

    if not OmegaConf.select(cfg, "distillation.enabled", default=False):
        return
    d = cfg.distillation
    teachers = dict(d.teacher_models or {})
    if not teachers:
        raise UserError(
            "distillation.enabled=true needs a teacher: set distillation.teacher_models.teacher_model.*"
        )
    pool = int(d.n_gpus_per_node) * int(d.nnodes)
    needed = 0
    for name, teacher in teachers.items():
        key = f"distillation.teacher_models.{name}"
        if teacher.get("model_path") in (None, ""):
            raise UserError(
                f"distillation.enabled=true needs the teacher model: set {key}.model_path=TEACHER_HF_DIR "
                "(it must share the student's tokenizer)"
            )
        if teacher.get("key") in (None, ""):
            raise UserError(f"{key}.key is not set: name the teacher (e.g. {key}.key=teacher)")
        replicas = int(teacher.get("num_replicas") or 0)
        if replicas < 1:
            raise UserError(f"{key}.num_replicas={replicas}: set it to at least 1 (teacher servers to start)")
        inference = teacher.inference
        width = 1
        for part in ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size"):
            width *= int(inference.get(part) or 1)
        needed += replicas * width
        loss_mode = str(d.distillation_loss.loss_mode)
        if loss_mode == "forward_kl_topk" and str(inference.name) not in ("vllm", "sglang"):
            raise UserError(
                f"distillation.distillation_loss.loss_mode=forward_kl_topk needs a vLLM or SGLang teacher "
                f"(verl 0.9.1 sizes top-k log-probs for those only), and {key}.inference.name is "
                f"{inference.name!r}: use an estimator loss (k1 with use_policy_gradient=true, k3, low_var_kl)"
            )
        student = (
            OmegaConf.select(cfg, "actor_rollout_ref.model.tokenizer_path")
            or cfg.actor_rollout_ref.model.path
        )
        if _embedded_build(cfg, str(teacher.model_path)) and not Path(str(teacher.model_path)).is_dir():
            continue  # built by `rlvr train` before training (rlvr.prepare); embedded models share a tokenizer
        folder = _model_folder(str(teacher.model_path), "the teacher", f"{key}.model_path")
        if Path(str(student)).expanduser().is_dir():
            check_same_tokenizer(Path(str(student)).expanduser(), folder, f"{key}.model_path")
    if pool != needed:
        raise UserError(
            f"the teacher pool has {pool} devices (distillation.n_gpus_per_node x distillation.nnodes) but the "
            f"teachers' replicas need {needed}: make them equal (e.g. distillation.n_gpus_per_node={needed} "
            "distillation.nnodes=1)"
        )
    local_gpus = int(OmegaConf.select(cfg, "rlvr.local_ray.num_gpus", default=0) or 0)
    trainer_gpus = int(cfg.trainer.n_gpus_per_node) * int(cfg.trainer.nnodes)
    if str(cfg.trainer.device) == "cpu" and local_gpus and local_gpus < trainer_gpus + pool:
        raise UserError(
            f"rlvr.local_ray.num_gpus={local_gpus} logical GPUs cannot hold the trainer's {trainer_gpus} and the "
            f"teacher pool's {pool} (Ray would wait for them forever): set rlvr.local_ray.num_gpus="
            f"{trainer_gpus + pool}"
        )
    try:
        from verl.utils.config import omega_conf_to_dataclass

        omega_conf_to_dataclass(d)  # verl's own checks (e.g. k1 needs use_policy_gradient)
    except Exception as e:  # hydra wraps verl's ValueError in an InstantiationException
        cause = e.__cause__ or e
        raise UserError(f"distillation config refused by verl: {cause}") from None


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
    _model_folder(student, "the student (input model)", f"stage {stage.name}: inputs.model")
    _model_folder(teacher, "the teacher (input teacher)", f"stage {stage.name}: inputs.teacher")
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
