"""Composition-time checks of verl's `distillation.*` keys (on-policy distillation, verl 0.9.1).

`check(cfg)` is registered as the composition check `distillation` (recipe_checks.composition_check), so
it runs in `compose.validate` wherever this module has been imported: by `rlvr train` (so a cluster job's
driver and a pipeline's `rl` and `distill` stages), `rlvr resolve`, `rlvr submit`, `rlvr eval` / `sample`
(generation), `rlvr diagnose` and the `distill` stage kind (rlvr_launch.pipelines.distill).
It refuses what verl would fail on deep in a worker (or hang on: a teacher pool Ray cannot place): no
teacher path, a teacher folder that is not a model, a tokenizer that differs from the student's, a pool
that does not fit the replicas, a top-k loss on the hf teacher.
"""

from __future__ import annotations

from pathlib import Path

from rlvr_launch.errors import UserError
from rlvr_launch.recipes import compose
from rlvr_launch.recipes.recipe_checks import composition_check

TEACHER_KEY = "distillation.teacher_models.teacher_model.model_path"


def model_folder(path: str, what: str, key: str) -> Path:
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


def _embedded_build(cfg, path: str) -> bool:
    """An embedded model's cache folder, which `rlvr train` builds before training (rlvr.prepare)."""
    names = ("tiny", "student")
    builds = {compose.embedded_path(compose.EMBEDDED_MODEL_PREFIX + n, cfg.rlvr.cache_dir) for n in names}
    return Path(path).expanduser() in builds


@composition_check("distillation")
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
        folder = model_folder(str(teacher.model_path), "the teacher", f"{key}.model_path")
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
