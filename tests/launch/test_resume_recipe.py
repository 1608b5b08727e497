"""A resumed run continues the recipe it was started with (issue 10, item 1): the run directory
stores its overrides (recipe.json), a resume composes them again with the new ones on top, prints
what changed, and refuses changes that make the checkpoint meaningless (model, algorithm, tokenizer).
Real Hydra composition; the CLI cases stop before any training starts."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rlvr_launch.cli import UserError
from rlvr_launch.recipes import compose
from rlvr_launch.runs import train
from rlvr_launch.runs.rundir import RunDir


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


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
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


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
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


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
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


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_cli_resume_of_a_finished_8_step_run_is_not_turned_into_the_default_60_steps(tmp_path, rlvr_cache):
    rd = _started_run(tmp_path / "run", ["trainer.total_training_steps=8"], checkpoint_step=8)
    proc = rlvr_train("--run-dir", str(rd.path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "run already complete: the latest checkpoint is step 8 of 8" in proc.stdout
    assert json.loads(rd.recipe_path.read_text())["overrides"] == ["trainer.total_training_steps=8"]


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_cli_resume_with_another_algorithm_exits_2_before_anything_starts(tmp_path, rlvr_cache):
    rd = _started_run(tmp_path / "run", ["algo=dapo", "trainer.total_training_steps=8"], checkpoint_step=4)
    before = rd.config_path.read_text()
    proc = rlvr_train("--run-dir", str(rd.path), "algo=grpo")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "refusing to resume" in proc.stderr and "Traceback" not in proc.stderr
    assert rd.config_path.read_text() == before, "a refused resume must leave config.yaml as it was"
    assert not rd.attempts_dir.exists()


# --- the same resume for a submitted run (rlvr_launch.jobs.driver, the driver `rlvr submit` runs) -----------


# Its own experiment name: _config_yaml caches by overrides, and the tests above compose without the
# session's RLVR_CACHE_DIR (another model path), which a job's resume would rightly refuse.
SUBMITTED_DAPO = ["algo=dapo", "trainer.total_training_steps=8", "trainer.experiment_name=dapo_job"]


@pytest.fixture
def job_env(monkeypatch, rlvr_cache):
    """The job driver runs in this process (as Ray runs it: `python -m rlvr_launch.jobs.driver`); what it sets
    in the environment (RLVR_RECIPES_DIR) and the jobspec module are undone afterwards."""
    # monkeypatch.delenv of an unset variable records nothing to undo, so a value the job sets would
    # leak into every later test (a loopback head started later inherits it): restore by hand.
    names = ("RLVR_RECIPES_DIR", "RAY_OVERRIDE_JOB_RUNTIME_ENV")
    saved = {name: os.environ.pop(name, None) for name in names}
    yield monkeypatch
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    sys.modules.pop("rlvr_jobspec", None)


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_a_submitted_resume_continues_the_stored_dapo_recipe_with_its_overrides_on_top(
    tmp_path, job_env, capsys
):
    """`rlvr submit --run-dir D OVERRIDES` on a run dir a submitted DAPO run left: the job driver
    composes the stored recipe with the jobspec's overrides on top (printed as a diff), as `rlvr train
    --run-dir` does; before, it composed the jobspec's overrides alone (GRPO, 60 steps) and refused."""
    from rlvr_launch.jobs import driver as job
    from rlvr_launch.jobs import submit

    rd = _started_run(tmp_path / "run", SUBMITTED_DAPO, checkpoint_step=8)
    submitted = ["actor_rollout_ref.actor.optim.lr=1e-4"]
    submit.write_jobspec(OmegaConf.create({}), submitted, tmp_path / "ship", compose.recipes_dir())
    job_env.syspath_prepend(str(tmp_path / "ship"))  # as Ray's py_modules put the jobspec on the path
    code = job.main(
        ["--job-id", "rlvr-resume-1", "--config-package", "rlvr_jobspec", "--run-dir", str(rd.path)]
    )
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert "actor_rollout_ref.actor.optim.lr: 0.0005 -> 0.0001" in out.out
    assert "run already complete: the latest checkpoint is step 8 of 8" in out.out, "the stored 8 steps"


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_a_plain_ray_job_on_a_finished_run_dir_keeps_its_recipe_and_says_it_is_complete(
    tmp_path, job_env, capsys
):
    """`ray job submit -- python -m rlvr_launch.jobs.driver --run-dir D` with no overrides on a finished 8-step
    DAPO run: complete (not restarted as the default 60-step GRPO run, nor refused as another recipe);
    a refused algorithm change exits 2 with the reason and leaves the run dir as it was."""
    from rlvr_launch.jobs import driver as job

    rd = _started_run(tmp_path / "run", SUBMITTED_DAPO, checkpoint_step=8)
    code = job.main(["--job-id", "rlvr-resume-1", "--run-dir", str(rd.path)])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert "run already complete: the latest checkpoint is step 8 of 8" in out.out
    before = rd.config_path.read_text()
    code = job.main(["--job-id", "rlvr-resume-1", "--run-dir", str(rd.path), "algo=rloo"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "refusing to resume" in err and "algorithm.adv_estimator: grpo -> rloo" in err
    assert rd.config_path.read_text() == before and not rd.attempts_dir.exists()
