"""Values users type on the command line are checked for type and range when the recipe is composed,
so `rlvr resolve` and `rlvr train` refuse them at once with the key, the value and the fix (issue 10,
item 8), never a traceback from a worker and never an empty run directory."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlvr_launch.cli import UserError
from rlvr_launch.recipes import compose


@pytest.mark.parametrize(
    "override, words",
    [
        ("trainer.total_training_steps=abc", ["trainer.total_training_steps", "'abc'", "not an integer"]),
        ("actor_rollout_ref.rollout.n=-3", ["actor_rollout_ref.rollout.n=-3", ">= 1"]),
        ("actor_rollout_ref.rollout.n=0", ["actor_rollout_ref.rollout.n=0", ">= 1"]),
        ("data.train_batch_size=1.5", ["data.train_batch_size", "not an integer"]),
        ("data.max_response_length=0", ["data.max_response_length=0", ">= 1"]),
        ("actor_rollout_ref.actor.optim.lr=fast", ["actor_rollout_ref.actor.optim.lr", "not a number"]),
        ("actor_rollout_ref.actor.optim.lr=3", ["actor_rollout_ref.actor.optim.lr=3", "between 0 and 1"]),
        ("actor_rollout_ref.rollout.temperature=-0.5", ["temperature=-0.5", ">= 0"]),
        ("actor_rollout_ref.rollout.top_p=1.5", ["top_p=1.5", "between 0 and 1"]),
        ("actor_rollout_ref.actor.ppo_mini_batch_size=true", ["ppo_mini_batch_size", "not an integer"]),
    ],
)
def test_a_mistyped_or_out_of_range_value_is_refused_at_compose_time(override, words, composed):
    # The value as Hydra parses it from the command line, placed in the composed recipe (one composition
    # for the module); the first two cases also go through the whole of compose() below.
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    parsed = OverridesParser.create().parse_overrides([override])[0]
    cfg = OmegaConf.create(OmegaConf.to_container(composed))
    OmegaConf.update(cfg, parsed.key_or_group, parsed.value(), force_add=True)
    with pytest.raises(UserError) as err:
        compose._check_values(cfg)
    for word in words:
        assert word in str(err.value)


@pytest.fixture(scope="module")
def composed():
    return compose.compose([])


@pytest.mark.parametrize("override", ["trainer.total_training_steps=abc", "actor_rollout_ref.rollout.n=-3"])
def test_compose_itself_refuses_them(override):
    with pytest.raises(UserError, match=override.split("=")[0]):
        compose.compose([override])


@pytest.mark.parametrize(
    "override",
    [
        "trainer.total_training_steps=null",
        "trainer.total_training_steps=3",
        "actor_rollout_ref.rollout.temperature=0",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "trainer.save_freq=-1",
    ],
)
def test_values_in_range_still_compose(override, composed):
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    parsed = OverridesParser.create().parse_overrides([override])[0]
    cfg = OmegaConf.create(OmegaConf.to_container(composed))
    OmegaConf.update(cfg, parsed.key_or_group, parsed.value(), force_add=True)
    compose._check_values(cfg)


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_train_with_a_bad_value_exits_2_in_one_line_and_leaves_no_run_directory(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlvr_launch.cli",
            "train",
            "trainer.total_training_steps=abc",
            "--run-dir",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "trainer.total_training_steps='abc' is not an integer" in proc.stderr
    assert not run_dir.exists()
