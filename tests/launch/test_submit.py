"""`rlvr submit` without a cluster: what the job's runtime_env carries, how secrets travel, how the
address and the auth token are found, and the job driver's side of the shipped recipe.

The real-cluster behaviour (a head with token auth, a job that trains, stop, 401/403) is in
test_submit_cluster.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from loopback_ray import free_ports

from rlvr_launch.cli import UserError
from rlvr_launch.jobs import driver as job
from rlvr_launch.jobs import job_control as jobs
from rlvr_launch.jobs import submit

SECRET = "s3cr3t-value-that-must-never-print"


def _shared() -> dict:
    return yaml.safe_load(submit.SHARED_RUNTIME_ENV.read_text())


def _build(tmp_path: Path, **kw) -> dict:
    defaults = {
        "shared": _shared(),
        "user": None,
        "worker_env": {"VERL_PLATFORM": "cpu"},
        "plain_env": {},
        "secrets_env": {},
        "jobspec_dir": tmp_path / "rlvr_jobspec",
        "working_dir": None,
        "pip_install": False,
    }
    defaults.update(kw)
    return submit.build_runtime_env(**defaults)


def test_shared_runtime_env_ships_the_three_packages_the_recipes_and_names_the_plugin():
    shared = _shared()
    packages = [m for m in shared["py_modules"] if Path(m).name != "recipes"]
    for module in packages:
        assert (submit.PROJECT_ROOT / module / "__init__.py").is_file(), module
    assert {Path(m).name for m in packages} == {"rlvr_launch", "rlvr_verifiers", "rlvr_cluster"}
    # Plain `ray job submit --runtime-env cluster/runtime_env.yaml` needs the recipes beside the code.
    assert "recipes" in shared["py_modules"] and (submit.PROJECT_ROOT / "recipes" / "rlvr.yaml").is_file()
    assert shared["env_vars"]["VERL_USE_EXTERNAL_MODULES"] == "rlvr_cluster.plugin"
    assert "working_dir" not in shared


def test_runtime_env_never_ships_runs_caches_checkpoints_or_data():
    excludes = _shared()["excludes"]
    for pattern in ("runs/", ".cache/", "checkpoints/", "*.parquet", ".venv/", ".git/", "__pycache__/"):
        assert pattern in excludes


def test_user_working_dir_is_kept_not_overwritten(tmp_path):
    user = {"working_dir": "s3://bucket/my_code.zip", "py_modules": ["/opt/mine"], "excludes": ["big/"]}
    env = _build(tmp_path, user=user)
    assert env["working_dir"] == "s3://bucket/my_code.zip"
    assert env["py_modules"][-1] == "/opt/mine"
    assert env["py_modules"][0].endswith(
        "launch/rlvr_launch"
    )  # ours first: shadows a stale rlvr in the image
    assert str(tmp_path / "rlvr_jobspec") in env["py_modules"]
    # rlvr submit's recipes travel in the jobspec (validated here), not a second time
    assert not any(Path(m).name == "recipes" for m in env["py_modules"])
    assert "big/" in env["excludes"] and "runs/" in env["excludes"]
    assert (
        env["working_dir"]
        == _build(tmp_path, working_dir="s3://bucket/my_code.zip", user=None)["working_dir"]
    )


def test_no_working_dir_is_invented(tmp_path):
    assert "working_dir" not in _build(tmp_path)


def test_conflicting_working_dirs_are_refused(tmp_path):
    with pytest.raises(UserError, match="disagree"):
        _build(tmp_path, user={"working_dir": "a"}, working_dir="b")


def test_env_layers_worker_env_then_user_then_flags_then_secrets(tmp_path):
    env = _build(
        tmp_path,
        worker_env={"VERL_PLATFORM": "cpu", "A": "worker"},
        user={"env_vars": {"A": "user", "B": "user"}},
        plain_env={"B": "flag"},
        secrets_env={"WANDB_API_KEY": SECRET},
    )["env_vars"]
    assert env["VERL_PLATFORM"] == "cpu" and env["A"] == "user" and env["B"] == "flag"
    assert env["WANDB_API_KEY"] == SECRET
    assert env["PYTHONUNBUFFERED"] == "1"


def test_pip_install_uses_pyproject_pins_without_torch(tmp_path):
    env = _build(tmp_path, pip_install=True)
    packages = env["pip"]["packages"]
    assert "verl==0.9.1" in packages and any(p.startswith("ray[default]") for p in packages)
    assert not any(p.split("=")[0].split("[")[0].strip() == "torch" for p in packages)
    with pytest.raises(UserError, match="pip"):
        _build(tmp_path, pip_install=True, user={"pip": ["x"]})


def test_missing_secret_names_the_variable_and_not_a_value():
    with pytest.raises(UserError, match="WANDB_API_KEY is not set"):
        submit.secret_env(["WANDB_API_KEY"], environ={})
    with pytest.raises(UserError, match="NAME"):
        submit.secret_env([f"KEY={SECRET}"], environ={})
    assert submit.secret_env(["WANDB_API_KEY"], environ={"WANDB_API_KEY": SECRET}) == {
        "WANDB_API_KEY": SECRET
    }


def test_env_pairs_must_be_key_value():
    assert submit.parse_env_pairs(["A=1", "B=x=y"]) == {"A": "1", "B": "x=y"}
    with pytest.raises(UserError, match="KEY=VALUE"):
        submit.parse_env_pairs(["nonsense"])


def test_address_forms():
    assert jobs.normalise_address("127.0.0.1:8265/") == "http://127.0.0.1:8265"
    assert jobs.normalise_address("https://ray.example:443") == "https://ray.example:443"
    with pytest.raises(UserError, match="Ray Client address"):
        jobs.normalise_address("ray://head:10001")
    with pytest.raises(UserError, match="--address"):
        jobs.normalise_address(None)


def test_token_lookup_follows_rays_order(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("from-home\n")
    path_file = tmp_path / "tok"
    path_file.write_text("from-path")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    assert jobs.find_token().value == "from-home"
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(path_file))
    assert jobs.find_token().value == "from-path"
    monkeypatch.setenv("RAY_AUTH_TOKEN", "from-env")
    assert jobs.find_token().value == "from-env"
    flag = tmp_path / "flag"
    flag.write_text("from-flag")
    assert jobs.find_token(flag).value == "from-flag"
    assert "from-flag" not in repr(jobs.find_token(flag))
    (tmp_path / "empty").write_text("")
    with pytest.raises(UserError, match="empty"):
        jobs.find_token(tmp_path / "empty")


def test_dead_address_says_unreachable_and_how_to_check():
    port = free_ports(1)[0]
    with pytest.raises(UserError, match=r"cannot reach a Ray dashboard at http://127.0.0.1:\d+ .*8265"):
        jobs.connect(f"127.0.0.1:{port}")


def test_job_id_is_named_after_the_experiment():
    job_id = submit.new_job_id("cpu demo/1")
    assert job_id.startswith("rlvr-cpu-demo-1-")


def test_relative_run_dir_is_refused_before_anything_is_sent(capsys):
    from rlvr_launch.cli import main

    assert main(["submit", "--address", "http://127.0.0.1:1", "--run-dir", "runs/x"]) == 2
    assert "absolute" in capsys.readouterr().err


@pytest.mark.slow
def test_shipped_recipe_composes_on_the_cluster_with_the_clusters_paths(tmp_path):
    """The jobspec carries recipes + overrides; the driver composes them in the cluster's environment,
    so rlvr's paths are the cluster's, not the submitting machine's."""
    from omegaconf import OmegaConf

    from rlvr_launch.recipes.compose import recipes_dir

    submitted = OmegaConf.create({"rlvr": {"cache_dir": "/home/submitter/.cache/rlvr"}})
    package = submit.write_jobspec(submitted, ["trainer.total_training_steps=3"], tmp_path, recipes_dir())
    assert (package / "recipes" / "rlvr.yaml").is_file()
    assert "/home/submitter" in (package / "config.submitted.yaml").read_text()
    script = (
        "from rlvr_launch.jobs import driver as job; "
        "cfg = job.load_config(job.parse_args(['--job-id', 'j', '--config-package', 'rlvr_jobspec'])); "
        "print(cfg.rlvr.cache_dir, cfg.trainer.total_training_steps, cfg.actor_rollout_ref.model.path)"
    )
    env = {
        **os.environ,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "RLVR_CACHE_DIR": str(tmp_path / "on-the-cluster"),
        "RLVR_RECIPES_DIR": "/nonexistent",  # the job must use the shipped recipes, not its own setting
    }
    out = subprocess.run(
        [sys.executable, "-c", script], check=False, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    cache_dir, steps, model_path = out.stdout.split()[-3:]
    assert cache_dir == str(tmp_path / "on-the-cluster") and steps == "3"
    assert model_path.startswith(cache_dir)


def test_job_driver_refuses_overrides_next_to_a_shipped_recipe():
    with pytest.raises(UserError, match="give them to `rlvr submit`"):
        job.load_config(job.parse_args(["--job-id", "j", "--config-package", "x", "a=1"]))


def test_job_run_dir_defaults_under_runs_dir_named_after_the_job(monkeypatch, tmp_path):
    monkeypatch.setenv("RLVR_RUNS_DIR", str(tmp_path))
    assert job.run_dir_for(job.parse_args(["--job-id", "rlvr-x-1"])) == tmp_path / "rlvr-x-1"
    with pytest.raises(UserError, match="relative"):
        job.run_dir_for(job.parse_args(["--job-id", "j", "--run-dir", "rel"]))


def test_entrypoint_quotes_paths():
    command = submit.entrypoint("rlvr-x-1", "/data/my runs/x")
    assert command.startswith(
        "python -m rlvr_launch.jobs.driver --job-id rlvr-x-1 --config-package rlvr_jobspec"
    )
    assert "'/data/my runs/x'" in command


def test_status_shows_env_var_names_never_values():
    from ray.job_submission import JobDetails, JobStatus

    info = JobDetails(
        type="SUBMISSION",
        submission_id="rlvr-x-1",
        entrypoint="python -m rlvr_launch.jobs.driver",
        status=JobStatus.RUNNING,
        runtime_env={"env_vars": {"WANDB_API_KEY": SECRET, "VERL_PLATFORM": "cpu"}},
        metadata={"rlvr_experiment": "cpu_demo"},
        start_time=1_700_000_000_000,
    )
    text = "\n".join(jobs.describe(info))
    # both ids: ours (the submission id) and the one Ray's dashboard calls Job ID, once the driver runs
    assert "job:        rlvr-x-1\nray job id: (assigned when its driver starts)\n" in text
    info.job_id = "02000000"
    assert "ray job id: 02000000" in "\n".join(jobs.describe(info))
    assert "WANDB_API_KEY" in text and "VERL_PLATFORM" in text and "cpu_demo" in text
    assert (
        SECRET not in text
        and "VERL_PLATFORM=" not in text
        and not any(line.endswith(" cpu") for line in text.splitlines())
    )


def test_failure_headline_names_the_cause_not_the_whole_log():
    log = "step 1\nTraceback (most recent call last):\n  File x\nFileNotFoundError: [Errno 2] no '/data'\n"
    ray_message = "Job entrypoint command failed with exit code 1, last available logs:\n" + log
    assert jobs.failure_headline(ray_message, log) == "FileNotFoundError: [Errno 2] no '/data'"
    ours = "loading\nrlvr job: error: unknown experiment 'x'. Available experiments: cpu_demo\n"
    assert (
        jobs.failure_headline("exit code 2", ours)
        == "error: unknown experiment 'x'. Available experiments: cpu_demo"
    )
    assert jobs.failure_headline("Job was killed\nmore", "") == "Job was killed"


def test_a_bad_recipe_fails_on_the_submitting_machine_before_any_request(capsys):
    """Composition comes first: the address is dead, yet the message is about the recipe."""
    from rlvr_launch.cli import main

    port = free_ports(1)[0]
    assert main(["submit", "--address", f"http://127.0.0.1:{port}", "experiment=no_such_experiment"]) == 2
    err = capsys.readouterr().err
    assert "unknown experiment 'no_such_experiment'" in err and "cannot reach" not in err
