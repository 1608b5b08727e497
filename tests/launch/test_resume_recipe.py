"""A resumed run continues the recipe it was started with (issue 10, item 1): the run directory
stores its overrides (recipe.json), a resume composes them again with the new ones on top, prints
what changed, and refuses changes that make the checkpoint meaningless (model, algorithm, tokenizer).
Real Hydra composition; the CLI cases stop before any training starts."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rlvr_launch import compose, train
from rlvr_launch.cli import UserError
from rlvr_launch.rundir import RunDir


@functools.cache
def _config_yaml(overrides: tuple[str, ...]) -> str:
    return OmegaConf.to_yaml(compose.compose(list(overrides)), resolve=True)


def _started_run(path: Path, overrides: list[str], checkpoint_step: int | None = None) -> RunDir:
    """A run directory as `rlvr train OVERRIDES --run-dir PATH` leaves it (config.yaml, recipe.json)."""
    rd = RunDir(path)
    rd.path.mkdir(parents=True)
    rd.config_path.write_text(_config_yaml(tuple(overrides)))
    rd.save_recipe(overrides)
    if checkpoint_step is not None:
        rd.checkpoints.mkdir()
        (rd.checkpoints / "latest_checkpointed_iteration.txt").write_text(str(checkpoint_step))
    return rd


def test_a_resume_without_overrides_keeps_the_dapo_recipe_and_its_step_count(tmp_path, capsys):
    rd = _started_run(tmp_path / "run", ["algo=dapo", "trainer.total_training_steps=8"])
    cfg, merged = train.resume_recipe(rd, [])
    assert cfg.trainer.total_training_steps == 8
    assert cfg.actor_rollout_ref.actor.clip_ratio_high == pytest.approx(0.28)
    assert cfg.trainer.use_v1 is True
    assert merged == ["algo=dapo", "trainer.total_training_steps=8"]
    assert "changed on this resume" not in capsys.readouterr().out


def test_overrides_on_resume_apply_on_top_and_are_printed_as_a_diff(tmp_path, capsys):
    rd = _started_run(tmp_path / "run", ["algo=dapo", "trainer.total_training_steps=8"])
    cfg, merged = train.resume_recipe(
        rd, ["trainer.total_training_steps=12", "actor_rollout_ref.actor.optim.lr=1e-4"]
    )
    assert cfg.trainer.total_training_steps == 12
    assert cfg.actor_rollout_ref.actor.optim.lr == pytest.approx(1e-4)
    assert cfg.actor_rollout_ref.actor.clip_ratio_high == pytest.approx(0.28), "the stored algo must stay"
    assert merged == ["algo=dapo", "trainer.total_training_steps=12", "actor_rollout_ref.actor.optim.lr=1e-4"]
    out = capsys.readouterr().out
    assert "trainer.total_training_steps: 8 -> 12" in out
    assert "actor_rollout_ref.actor.optim.lr: 0.0005 -> 0.0001" in out


@pytest.mark.parametrize(
    "override, key",
    [
        ("algo=grpo", "algorithm.filter_groups.enable"),
        ("algo=rloo", "algorithm.adv_estimator"),
        ("actor_rollout_ref.model.path=/tmp/another-model", "actor_rollout_ref.model.path"),
        ("data.tokenizer=/tmp/another-tokenizer", "data.tokenizer"),
    ],
)
def test_changes_that_make_the_checkpoint_meaningless_are_refused_with_the_reason(tmp_path, override, key):
    rd = _started_run(tmp_path / "run", ["algo=dapo"])
    with pytest.raises(UserError) as err:
        train.resume_recipe(rd, [override])
    assert "refusing to resume" in str(err.value)
    assert key in str(err.value)
    assert "another --run-dir" in str(err.value)


def test_a_run_directory_from_an_older_rlvr_resumes_only_when_the_overrides_reproduce_it(tmp_path):
    rd = _started_run(
        tmp_path / "run", ["trainer.total_training_steps=8", "actor_rollout_ref.actor.optim.lr=1e-4"]
    )
    rd.recipe_path.unlink()
    with pytest.raises(UserError) as err:
        train.resume_recipe(rd, [])
    assert "no recipe.json" in str(err.value) and "trainer.total_training_steps: 8 -> 60" in str(err.value)
    cfg, _ = train.resume_recipe(
        rd, ["trainer.total_training_steps=10", "actor_rollout_ref.actor.optim.lr=1e-4"]
    )
    assert cfg.trainer.total_training_steps == 10


def rlvr_train(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlvr_launch.cli", "train", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_cli_resume_of_a_finished_8_step_run_is_not_turned_into_the_default_60_steps(tmp_path, rlvr_cache):
    rd = _started_run(tmp_path / "run", ["trainer.total_training_steps=8"], checkpoint_step=8)
    proc = rlvr_train("--run-dir", str(rd.path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "run already complete: the latest checkpoint is step 8 of 8" in proc.stdout
    assert json.loads(rd.recipe_path.read_text())["overrides"] == ["trainer.total_training_steps=8"]


def test_cli_resume_with_another_algorithm_exits_2_before_anything_starts(tmp_path, rlvr_cache):
    rd = _started_run(tmp_path / "run", ["algo=dapo", "trainer.total_training_steps=8"], checkpoint_step=4)
    before = rd.config_path.read_text()
    proc = rlvr_train("--run-dir", str(rd.path), "algo=grpo")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "refusing to resume" in proc.stderr and "Traceback" not in proc.stderr
    assert rd.config_path.read_text() == before, "a refused resume must leave config.yaml as it was"
    assert not rd.attempts_dir.exists()
