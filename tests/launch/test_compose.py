"""Recipe composition: every experiment validates; bad input names the problem and the fix."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlvr_launch.cli import UserError
from rlvr_launch.recipes import compose


def rlvr(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlvr_launch.cli", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("experiment", compose.group_entries("experiment"))
def test_every_experiment_composes_and_validates(experiment):
    cfg = compose.compose([f"experiment={experiment}"])
    assert cfg.actor_rollout_ref.rollout.n > 1, "a GRPO-family experiment needs a group"
    assert cfg.rlvr.description, f"experiment {experiment} has no rlvr.description"
    assert str(cfg.data.train_files).startswith("/"), "data paths must be absolute before verl sees them"


def test_default_experiment_is_the_cpu_demo_with_fsdp2_reference_and_kl():
    cfg = compose.compose([])
    assert cfg.trainer.experiment_name == "cpu_demo"
    assert cfg.trainer.device == "cpu"
    assert cfg.actor_rollout_ref.rollout.name == "hf"
    assert cfg.actor_rollout_ref.actor.strategy == "fsdp2"
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.actor_rollout_ref.actor.use_kl_loss is True
    assert cfg.actor_rollout_ref.rollout.n >= 4
    assert cfg.reward.reward_manager.name == "rlvr"


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_group_overrides_replace_the_experiments_choice():
    assert compose.compose(["algo=rloo"]).algorithm.adv_estimator == "rloo"


def test_unknown_experiment_lists_the_available_ones():
    with pytest.raises(UserError) as err:
        compose.compose(["experiment=cpu_dmo"])
    message = str(err.value)
    assert "unknown experiment 'cpu_dmo'" in message
    assert "cpu_demo" in message


def test_unknown_key_names_the_closest_valid_keys():
    with pytest.raises(UserError) as err:
        compose.compose(["trainer.total_training_stepz=3"])
    message = str(err.value)
    assert "'trainer.total_training_stepz'" in message
    assert "trainer.total_training_steps" in message


def test_a_value_verl_rejects_is_reported_with_verls_reason():
    # 32 prompts x 8 responses cannot be split into mini-batches of 500 prompts. (verl checks this only
    # with fixed micro-batch sizes; the demo sizes its micro-batches by tokens.)
    with pytest.raises(UserError, match="does not validate"):
        compose.compose(
            [
                "actor_rollout_ref.actor.ppo_mini_batch_size=500",
                "actor_rollout_ref.actor.use_dynamic_bsz=false",
            ]
        )


def test_cli_errors_are_one_line_without_a_traceback():
    out = rlvr("resolve", "experiment=nope")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "unknown experiment 'nope'" in out.stderr


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_resolve_prints_the_full_verl_config():
    import yaml

    out = rlvr("resolve", "algo=dr_grpo")
    assert out.returncode == 0, out.stderr
    cfg = yaml.safe_load(out.stdout)
    assert cfg["algorithm"]["norm_adv_by_std_in_grpo"] is False
    assert cfg["actor_rollout_ref"]["actor"]["loss_agg_mode"] == "seq-mean-token-sum-norm"
    assert "${" not in out.stdout, "resolve prints resolved values"


def test_ls_lists_every_group_with_purposes():
    out = rlvr("ls")
    assert out.returncode == 0, out.stderr
    for group in compose.GROUPS:
        assert f"{group}s ({group}=NAME):" in out.stdout
    for name in compose.group_entries("experiment") + compose.group_entries("algo"):
        line = next(line for line in out.stdout.splitlines() if line.strip().startswith(name + " "))
        assert len(line.strip()) > len(name) + 10, f"{name} has no purpose line"


def test_micro_batches_that_do_not_divide_the_batch_are_caught_before_training():
    """verl would assert this inside a Ray worker after start-up; rlvr names the key at once.

    With fixed micro-batch sizes, that is: the demo sizes them by tokens, where nothing must divide."""
    with pytest.raises(UserError) as err:
        compose.compose(
            [
                "actor_rollout_ref.actor.use_dynamic_bsz=false",
                "data.train_batch_size=6",
                "actor_rollout_ref.rollout.n=4",
                "actor_rollout_ref.actor.ppo_mini_batch_size=6",
            ]
        )
    message = str(err.value)
    assert "ppo_micro_batch_size_per_gpu=16 does not divide the 24 samples" in message
    assert "=12" in message


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_dynamic_sampling_on_the_legacy_trainer_is_refused():
    """verl's legacy trainer silently ignores algorithm.filter_groups."""
    with pytest.raises(UserError, match="set trainer.use_v1=true"):
        compose.compose(["algo=dapo", "trainer.use_v1=false"])
    assert compose.compose(["algo=dapo"]).trainer.use_v1 is True
