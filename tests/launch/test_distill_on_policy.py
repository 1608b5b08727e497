"""On-policy distillation (issue 14): the `distill` stage kind, verl's `distillation.*` with rlvr's hf teacher.

Fast: the shipped `distill_on_policy` spec is the `distill` pipeline plus an on-policy phase of the SFT'd
student against the same teacher, evaluated like it; misconfigurations (no teacher, a folder that is not a
model, another tokenizer, a teacher pool Ray cannot place, a top-k loss the hf teacher cannot size, a loss
verl refuses) are refused with the key to set, before anything starts.
Slow (two short verl runs of the stage): with the tiny model as teacher, verl's distillation loss is
logged, finite, every step, and the merged student loads, generates and moved; with the student as its own
teacher, the same loss is zero to float precision at step 1 — the teacher's log-probs reached training,
position-aligned (zeros or a shift by one token would give the student's own mean log-prob or a large KL).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

from rlvr_launch.errors import UserError

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def _spec(name: str) -> list[dict]:
    return yaml.safe_load((RECIPES / "pipeline" / f"{name}.yaml").read_text())["stages"]


def test_on_policy_spec_is_the_distill_pipeline_then_distillation_of_its_sft_student():
    from rlvr_launch import pipeline

    off, on = _spec("distill"), _spec("distill_on_policy")
    assert on[: len(off)] == off  # same stages, names and settings: its first half IS `distill`
    extra = {s["name"]: s for s in on[len(off) :]}
    assert extra["on_policy"]["kind"] == "distill"
    assert extra["on_policy"]["inputs"] == {"model": "merge.model", "teacher": "embedded://tiny"}
    assert extra["on_policy_merge"]["inputs"] == {"checkpoint": "on_policy.checkpoint"}
    # evaluated exactly like the SFT student, so the two eval stages compare
    eval_off = next(s for s in off if s["name"] == "eval")
    assert extra["on_policy_eval"]["args"] == eval_off["args"]
    assert extra["on_policy_eval"]["inputs"] == {"model": "on_policy_merge.model"}
    spec = pipeline.load_spec("distill_on_policy")  # the runner accepts it (kind registered, inputs upstream)
    assert [s["kind"] for s in spec["stages"]][-3:] == ["distill", "merge", "eval"]


@pytest.fixture(scope="module")
def pair(rlvr_cache, tiny_model_dir):
    from rlvr_launch import embedded

    return embedded.ensure_student_model(rlvr_cache, log=lambda _m: None), tiny_model_dir


def _compose(*overrides):
    from rlvr_launch import compose

    return compose.compose(["experiment=cpu_on_policy_distill", *overrides])


def test_the_recipe_composes_with_a_teacher_that_shares_the_students_tokenizer(pair):
    student, teacher = pair
    cfg = _compose(
        f"actor_rollout_ref.model.path={student}",
        f"distillation.teacher_models.teacher_model.model_path={teacher}",
    )
    assert cfg.distillation.enabled and cfg.distillation.teacher_models.teacher_model.inference.name == "hf"
    assert int(cfg.rlvr.local_ray.num_gpus) == 2  # the student's device and the teacher pool's


@pytest.fixture(scope="module")
def other_tokenizer_teacher(pair, tmp_path_factory):
    from transformers import AutoTokenizer

    _, teacher = pair
    folder = tmp_path_factory.mktemp("other-teacher") / "model"
    shutil.copytree(teacher, folder)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.add_tokens(["<|tool|>"])
    tok.save_pretrained(folder)
    return folder


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ([], "needs the teacher model: set distillation.teacher_models.teacher_model.model_path="),
        (["T=/"], "is not a Hugging Face model folder"),
        (["T=OTHER"], "tokenizer .* differs from the student's .* 1 tokens map to different ids"),
        (["T=TEACHER", "rlvr.local_ray.num_gpus=1"], "set rlvr.local_ray.num_gpus=2"),
        (["T=TEACHER", "distillation.n_gpus_per_node=2"], "teacher pool has 2 devices .* need 1"),
        (["T=TEACHER", "distillation.teacher_models.teacher_model.num_replicas=0"], "num_replicas=0"),
        (["T=TEACHER", "distillation.distillation_loss.loss_mode=forward_kl_topk"], "needs a vLLM or SGLang"),
        (["T=TEACHER", "distillation.distillation_loss.use_policy_gradient=false"], "refused by verl: .*k1"),
    ],
)
def test_a_misconfigured_distillation_is_refused_naming_the_fix(
    pair, other_tokenizer_teacher, overrides, says
):
    student, teacher = pair
    key = "distillation.teacher_models.teacher_model.model_path"
    paths = {"TEACHER": teacher, "OTHER": other_tokenizer_teacher}
    resolved = [f"{key}={paths.get(o[2:], o[2:])}" if o.startswith("T=") else o for o in overrides]
    with pytest.raises(UserError, match=says):
        _compose(f"actor_rollout_ref.model.path={student}", *resolved)


def test_the_stage_refuses_a_missing_teacher_or_another_tokenizer_before_training(
    pair, other_tokenizer_teacher, tmp_path
):
    from rlvr_launch.stages import STAGE_KINDS, Stage

    student, _ = pair
    run = STAGE_KINDS["distill"]
    with pytest.raises(UserError, match="needs input 'teacher'"):
        run(Stage("on_policy", "distill", tmp_path, inputs={"model": str(student)}, log=lambda _m: None))
    with pytest.raises(UserError, match="differs from the student's"):
        inputs = {"model": str(student), "teacher": str(other_tokenizer_teacher)}
        run(Stage("on_policy", "distill", tmp_path, inputs=inputs, log=lambda _m: None))
    assert not (tmp_path / "metrics.jsonl").exists()  # nothing was started


# --- slow: the stage runs verl's distillation with the hf teacher -----------------------------------------

QUICK = ["trainer.val_before_train=false", "trainer.test_freq=-1", "rlvr.dump_rollouts=false"]


def _rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return sorted(
        (r for r in rows if r.get("training/global_step", 0) > 0), key=lambda r: r["training/global_step"]
    )


@pytest.mark.slow
def test_the_distill_stage_trains_the_student_on_the_teachers_log_probs(pair, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr_launch.distill import LOSS_KEY
    from rlvr_launch.stages import STAGE_KINDS, Stage

    student, teacher = pair
    stage = Stage(
        "on_policy",
        "distill",
        tmp_path / "tiny-teacher",
        inputs={"model": str(student), "teacher": str(teacher)},
        overrides=[*QUICK, "trainer.total_training_steps=2", "trainer.save_freq=2"],
        log=lambda _m: None,
    )
    stage.dir.mkdir()
    result = STAGE_KINDS["distill"](stage)
    rows = _rows(stage.dir)
    assert [r["training/global_step"] for r in rows] == [1, 2]
    losses = [r[LOSS_KEY] for r in rows]
    assert all(math.isfinite(v) for v in losses), losses
    # an untrained 55k student against the 332k teacher: far apart (nats per token)
    assert losses[0] > 0.5, losses
    assert result["metrics"]["distill_loss_first"] == losses[0] and result["metrics"]["step"] == 2

    # the student as its own teacher: k1 = log p_student - log p_teacher is 0 on every sampled token
    same = Stage(
        "self",
        "distill",
        tmp_path / "self-teacher",
        inputs={"model": str(student), "teacher": str(student)},
        overrides=[*QUICK, "trainer.total_training_steps=1", "trainer.save_freq=1"],
        log=lambda _m: None,
    )
    same.dir.mkdir()
    STAGE_KINDS["distill"](same)
    (row,) = _rows(same.dir)
    for key in (LOSS_KEY, "actor/distillation/loss_min", "actor/distillation/loss_max"):
        assert abs(row[key]) < 1e-3, (key, row[key])

    # the result merges, loads, generates, and is the student, moved by training
    merged = STAGE_KINDS["merge"](_merge_stage(result, tmp_path))
    model_dir = Path(merged["outputs"]["model"])
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    assert (model.config.hidden_size, model.config.num_hidden_layers) == (64, 1)
    before = AutoModelForCausalLM.from_pretrained(student).state_dict()
    moved = max(float((p - before[n]).abs().max()) for n, p in model.state_dict().items())
    assert moved > 1e-4, "training did not change the student"
    tok = AutoTokenizer.from_pretrained(model_dir)
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "3+4="}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    out = model.generate(**ids, max_new_tokens=4, do_sample=False)
    assert out.shape[1] > ids["input_ids"].shape[1] and torch.is_tensor(out)


def _merge_stage(result: dict, tmp_path: Path):
    from rlvr_launch.stages import Stage

    folder = tmp_path / "merge"
    folder.mkdir()
    return Stage(
        "merge", "merge", folder, inputs={"checkpoint": result["outputs"]["checkpoint"]}, log=lambda _m: None
    )
