"""Real-model recipes (recipes/model/qwen*.yaml): each composes with the GPU platform into a config
verl validates, points at the model's hub id, and carries the settings its size needs."""

from __future__ import annotations

import pytest

from rlvr_launch.recipes import compose

MODELS = {
    # name: (hub id, vLLM tensor parallel, ref params offloaded)
    "qwen2_5_0_5b_instruct": ("Qwen/Qwen2.5-0.5B-Instruct", 1, False),
    "qwen2_5_1_5b_instruct": ("Qwen/Qwen2.5-1.5B-Instruct", 1, False),
    "qwen2_5_7b_instruct": ("Qwen/Qwen2.5-7B-Instruct", 2, True),
    "qwen3_4b": ("Qwen/Qwen3-4B", 1, True),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_recipe_composes_for_one_gpu_node(name):
    hub_id, tp, ref_offload = MODELS[name]
    cfg = compose.compose(["platform=gpu", f"model={name}", "task=gsm8k"])
    arr = cfg.actor_rollout_ref
    assert arr.model.path == hub_id
    assert cfg.trainer.n_gpus_per_node == 8 and cfg.trainer.nnodes == 1
    assert arr.rollout.name == "vllm" and arr.rollout.tensor_model_parallel_size == tp
    assert 0.3 <= arr.rollout.gpu_memory_utilization <= 0.7  # colocated with the FSDP actor
    assert arr.actor.use_dynamic_bsz is True
    # the token budget holds at least one full prompt + response of the task
    assert arr.actor.ppo_max_token_len_per_gpu >= cfg.data.max_prompt_length + cfg.data.max_response_length
    assert arr.rollout.log_prob_max_token_len_per_gpu >= arr.actor.ppo_max_token_len_per_gpu
    assert arr.ref.fsdp_config.param_offload is ref_offload
    assert arr.model.use_remove_padding is True and arr.model.enable_gradient_checkpointing is True


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_recipe_explains_its_scale_and_multi_node(name):
    text = (compose.recipes_dir() / "model" / f"{name}.yaml").read_text()
    assert text.startswith("# @package _global_")
    assert "Select: rlvr train platform=gpu model=" + name in text
    assert "trainer.nnodes=N" in text and "What matters" in text
