"""On-policy distillation (issue 14): the `distill` stage kind, verl's `distillation.*` with rlvr's hf teacher.

Fast: the shipped `distill_on_policy` spec is the `distill` pipeline plus an on-policy phase of the SFT'd
student against the same teacher, evaluated like it; misconfigurations (no teacher, a folder that is not a
model, another tokenizer, a teacher pool Ray cannot place, a top-k loss the hf teacher cannot size, a loss
verl refuses) are refused with the key to set, before anything starts.
Slow (one short verl run of the stage, top_k=1: the student's greedy response to every training prompt):
verl's distillation loss is logged and finite every step, and step 1's token-mean, min and max equal the
k1 = log p_student - log p_teacher of those tokens computed here with plain transformers — the teacher's
log-probs reached training, position-aligned (zeros, a shift by one token or another teacher would give
other values); the merged student loads, generates and moved.
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
    from rlvr_launch.pipelines import pipeline

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
    from rlvr_launch.runs import embedded_model as embedded

    return embedded.ensure_student_model(rlvr_cache, log=lambda _m: None), tiny_model_dir


def _compose(*overrides):
    from rlvr_launch.recipes import (
        compose,
        distillation,  # noqa: F401 - registers the `distillation` composition check
    )

    return compose.compose(["experiment=cpu_on_policy_distill", *overrides])


def test_the_recipe_distills_the_embedded_student_against_the_embedded_teacher_by_default(pair):
    student, teacher = pair
    cfg = _compose()
    assert cfg.actor_rollout_ref.model.path == str(student)
    assert cfg.distillation.teacher_models.teacher_model.model_path == str(teacher)
    assert cfg.rlvr.prepare.student_model and cfg.rlvr.prepare.tiny_model  # `rlvr train` builds both


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
        (["T=null"], "needs the teacher model: set distillation.teacher_models.teacher_model.model_path="),
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
    from rlvr_launch.pipelines.stages import STAGE_KINDS, Stage

    student, _ = pair
    run = STAGE_KINDS["distill"]
    with pytest.raises(UserError, match="needs input 'teacher'"):
        run(Stage("on_policy", "distill", tmp_path, inputs={"model": str(student)}, log=lambda _m: None))
    with pytest.raises(UserError, match="differs from the student's"):
        inputs = {"model": str(student), "teacher": str(other_tokenizer_teacher)}
        run(Stage("on_policy", "distill", tmp_path, inputs=inputs, log=lambda _m: None))
    assert not (tmp_path / "metrics.jsonl").exists()  # nothing was started


# --- slow: the stage runs verl's distillation with the hf teacher -----------------------------------------

# Every training prompt in each step (a training file of 80 rows, `_first_rows`: one batch = one mini-batch,
# so the step's loss is computed at the starting weights), and top_k=1 sampling (the student's greedy response, with log-probs at
# temperature 1): what each sampled token's k1 must be is then known without the run.
QUICK = [
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "rlvr.dump_rollouts=false",
    "data.train_batch_size=80",
    "actor_rollout_ref.actor.ppo_mini_batch_size=80",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.rollout.top_k=1",
]


def _rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return sorted(
        (r for r in rows if r.get("training/global_step", 0) > 0), key=lambda r: r["training/global_step"]
    )


def _expected_k1(student: Path, teacher: Path, config: dict) -> list[float]:
    """log p_student(y_t) - log p_teacher(y_t) for every token y_t of the student's greedy response to every
    training prompt, computed here with plain transformers (no verl, no server)."""
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(student)
    s_model, t_model = (
        AutoModelForCausalLM.from_pretrained(p, dtype=torch.float32).eval() for p in (student, teacher)
    )
    eos = {tok.eos_token_id}
    for source in (s_model.generation_config, s_model.config):
        value = getattr(source, "eos_token_id", None)
        eos.update(value if isinstance(value, list) else [value] if value is not None else [])
    values: list[float] = []
    with torch.no_grad():
        for messages in pq.read_table(config["data"]["train_files"]).column("prompt").to_pylist():
            text = tok.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
            prompt = tok.encode(text, add_special_tokens=False)
            response: list[int] = []
            while len(response) < config["data"]["max_response_length"]:
                response.append(
                    int(s_model(input_ids=torch.tensor([prompt + response])).logits[0, -1].argmax())
                )
                if response[-1] in eos:
                    break
            seq = torch.tensor([prompt + response])
            ls, lt = (torch.log_softmax(m(input_ids=seq).logits[0].float(), -1) for m in (s_model, t_model))
            for j, token in enumerate(response):
                values.append(float(ls[len(prompt) - 1 + j, token] - lt[len(prompt) - 1 + j, token]))
    return values


def _first_rows(rlvr_cache: Path, out: Path, n: int = 80) -> Path:
    """The first n rows of the addition task's training file (it has 800), as a file of their own."""
    import pyarrow.parquet as pq

    from rlvr_launch.runs import embedded_model as embedded

    table = pq.read_table(embedded.ensure_addition_data(rlvr_cache / "data") / "train.parquet")
    pq.write_table(table.slice(0, n), out)
    return out


@pytest.mark.slow
def test_the_distill_stage_trains_the_student_on_the_teachers_log_probs(pair, tmp_path, rlvr_cache):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr_launch.pipelines.distill import LOSS_KEY
    from rlvr_launch.pipelines.stages import STAGE_KINDS, Stage

    student, teacher = pair
    stage = Stage(
        "on_policy",
        "distill",
        tmp_path / "on_policy",
        inputs={"model": str(student), "teacher": str(teacher)},
        overrides=[
            *QUICK,
            f"data.train_files={_first_rows(rlvr_cache, tmp_path / 'train80.parquet')}",
            "trainer.total_training_steps=2",
            "trainer.save_freq=2",
        ],
        log=lambda _m: None,
    )
    stage.dir.mkdir()
    result = STAGE_KINDS["distill"](stage)
    rows = _rows(stage.dir)
    assert [r["training/global_step"] for r in rows] == [1, 2]
    losses = [r[LOSS_KEY] for r in rows]
    assert all(math.isfinite(v) for v in losses), losses
    assert result["metrics"]["distill_loss_first"] == losses[0] and result["metrics"]["step"] == 2

    # Step 1's loss is exactly the teacher's view of the student's tokens: token-mean, min and max of k1.
    # Teacher log-probs of zero would give the student's own mean log-prob, rows shifted by one position
    # another token's, a different teacher other values.
    config = yaml.safe_load((stage.dir / "config.yaml").read_text())
    expected = _expected_k1(student, teacher, config)
    first = rows[0]
    assert first[LOSS_KEY] == pytest.approx(sum(expected) / len(expected), abs=1e-3)
    assert first["actor/distillation/loss_min"] == pytest.approx(min(expected), abs=1e-3)
    assert first["actor/distillation/loss_max"] == pytest.approx(max(expected), abs=1e-3)
    assert sum(expected) / len(expected) > 0.5  # an untrained 55k student is far from the 332k teacher

    # the result merges, loads, generates, and is the student, moved by training
    merge = Stage("merge", "merge", tmp_path / "merge", inputs=result["outputs"], log=lambda _m: None)
    merge.dir.mkdir()
    model_dir = Path(STAGE_KINDS["merge"](merge)["outputs"]["model"])
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    assert (model.config.hidden_size, model.config.num_hidden_layers) == (64, 1)
    before = AutoModelForCausalLM.from_pretrained(student).state_dict()
    moved = max(float((p - before[n]).abs().max()) for n, p in model.state_dict().items())
    assert moved > 1e-6, "training did not change the student"
    tok = AutoTokenizer.from_pretrained(model_dir)
    text = tok.apply_chat_template(
        [{"role": "user", "content": "3+4="}], add_generation_prompt=True, tokenize=False
    )
    ids = torch.tensor([tok.encode(text, add_special_tokens=False)])
    out = model.generate(
        input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False
    )
    assert out.shape[1] > ids.shape[1]
