"""The verifier pool's placement and size on a cluster, the job driver's recipes and data, and resume
safety, without a cluster: `placement.plan` over node resource lists (what the state API and ray.nodes()
return), the submit retry on a just-started head, `rlvr_launch.jobs.driver`'s recipe lookup and --prepare-data on
real files, and the refusal to resume a run directory of another recipe.

The real clusters are in test_cluster_loopback.py and test_submit_cluster.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rlvr_launch.cli import UserError
from rlvr_launch.jobs import driver as job
from rlvr_launch.jobs import submit
from rlvr_launch.recipes import compose, recipe_checks
from rlvr_launch.runs import placement

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures" / "data"
HEAD = {"CPU": 0.0, "memory": 1e10}
TRAINER = {"CPU": 96.0, "GPU": 8.0}


def verifier(slots: float) -> dict:
    return {"CPU": 0.0, "rlvr_verifier": slots}


@pytest.fixture(scope="module")
def cfg():
    return compose.compose(["platform=gpu", "model=qwen2_5_0_5b_instruct", "task=gsm8k"])


def _with(cfg, *overrides: str):
    fresh = OmegaConf.create(OmegaConf.to_container(cfg))
    for item in overrides:
        key, _, value = item.partition("=")
        OmegaConf.update(fresh, key, yaml_value(value), force_add=True)
    return fresh


def yaml_value(text: str):
    import yaml

    return yaml.safe_load(text)


def test_the_pool_asks_for_no_generic_cpu_so_verifier_nodes_can_advertise_none(cfg):
    pool = cfg.reward.reward_kwargs.rlvr.pool
    assert pool.cpus_per_actor == 0
    assert "num_actors" not in pool  # sized from the cluster, not pinned


def test_pool_is_sized_from_the_clusters_verifier_slots(cfg):
    planned = placement.plan(cfg, [HEAD, TRAINER, TRAINER, *[verifier(16)] * 4])
    assert (planned.num_actors, planned.resource_name, planned.slots, planned.verifier_nodes) == (
        64,
        "rlvr_verifier",
        64.0,
        4,
    )
    assert planned.cpus_per_actor == 0 and not planned.fallback
    placed = _with(cfg)
    placement.apply(placed, planned)
    assert placed.reward.reward_kwargs.rlvr.pool.num_actors == 64


def test_a_pinned_pool_size_is_kept_or_refused_when_it_cannot_fit(cfg):
    pinned = _with(cfg, "reward.reward_kwargs.rlvr.pool.num_actors=8")
    assert placement.plan(pinned, [HEAD, verifier(16)]).num_actors == 8
    with pytest.raises(UserError, match=r"num_actors=80 needs 80 of resource 'rlvr_verifier'.*has 16"):
        placement.plan(_with(cfg, "reward.reward_kwargs.rlvr.pool.num_actors=80"), [HEAD, verifier(16)])


def test_a_cluster_without_verifier_nodes_fails_in_one_line_with_the_fix(cfg):
    with pytest.raises(UserError) as err:
        placement.plan(cfg, [HEAD, TRAINER])
    message = str(err.value)
    assert "\n" not in message
    assert "no node of this Ray cluster carries the verifier pool's resource 'rlvr_verifier'" in message
    assert "--num-cpus 0" in message and "rlvr.verifier_placement=any_cpu" in message


def test_any_cpu_runs_the_pool_on_general_cpu_nodes_with_a_warning(cfg, capsys):
    fallback = _with(cfg, "rlvr.verifier_placement=any_cpu")
    planned = placement.plan(fallback, [HEAD, TRAINER])
    assert planned.fallback and planned.resource_name == "" and planned.cpus_per_actor == 1.0
    assert planned.num_actors == placement.FALLBACK_ACTORS
    placement.apply(fallback, planned)
    assert fallback.reward.reward_kwargs.rlvr.pool.resource_name == ""
    placement.warn_or_log(planned, log=print)
    out = capsys.readouterr()
    assert "WARNING" in out.err and "general CPU nodes" in out.err and "general CPU nodes" in out.out


def test_a_recipe_without_the_pool_or_with_cpu_placement_is_left_alone(cfg):
    assert placement.plan(_with(cfg, "reward.reward_manager.name=naive"), [HEAD]) is None
    assert placement.plan(_with(cfg, "reward.reward_kwargs.rlvr.pool.resource_name=''"), [HEAD]) is None


def test_an_unknown_placement_policy_is_refused_at_composition():
    with pytest.raises(UserError, match="rlvr.verifier_placement='anywhere'"):
        compose.compose(["rlvr.verifier_placement=anywhere"])


def test_the_resource_name_is_the_pools():
    from rlvr_verifiers import pool

    assert placement.DEFAULT_RESOURCE == pool.DEFAULT_RESOURCE


class _JustStartedHead:
    """The Jobs API of a head whose job agent is not up yet: refuses `fails` times, then accepts."""

    def __init__(
        self, fails: int, message: str = "No available agent to submit job, please try again later."
    ):
        self.fails, self.message, self.calls = fails, message, 0

    def submit_job(self, **job):
        self.calls += 1
        if self.calls <= self.fails:
            raise RuntimeError(f"Request failed with status code 503: {self.message}")
        return job["submission_id"]


def test_submit_retries_while_a_just_started_head_has_no_job_agent(capsys):
    head = _JustStartedHead(fails=2)
    assert submit.submit_with_retry(head, poll_s=0.01, submission_id="j1", entrypoint="x") == "j1"
    assert head.calls == 3
    assert "job agent is not up yet" in capsys.readouterr().out


def test_submit_does_not_retry_other_refusals_or_forever():
    other = _JustStartedHead(fails=5, message="runtime_env is invalid")
    with pytest.raises(RuntimeError, match="runtime_env is invalid"):
        submit.submit_with_retry(other, poll_s=0.01, submission_id="j", entrypoint="x")
    assert other.calls == 1
    stuck = _JustStartedHead(fails=10**6)
    with pytest.raises(RuntimeError, match="No available agent"):
        submit.submit_with_retry(stuck, retry_s=0.05, poll_s=0.01, submission_id="j", entrypoint="x")


def test_submit_passes_prepare_data_to_the_job():
    assert submit.entrypoint("j", "/runs/j", prepare_data=True).endswith("--run-dir /runs/j --prepare-data")
    assert "--prepare-data" not in submit.entrypoint("j", None)


# ---- the job's driver ---------------------------------------------------------------------------------


def test_job_finds_recipes_shipped_beside_code_from_rays_package_cache(tmp_path, monkeypatch):
    """`ray job submit --runtime-env cluster/runtime_env.yaml` without a working_dir: the job's cwd has no
    recipes and the code is a copy away from any; the `recipes` py_module is on sys.path."""
    shipped = tmp_path / "_ray_pkg_abc"
    (shipped / "recipes").mkdir(parents=True)
    (shipped / "recipes" / "rlvr.yaml").write_text("defaults: []\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "elsewhere"), str(shipped), *sys.path])
    assert job.find_recipes() == shipped / "recipes"


def test_job_finds_the_projects_recipes_when_nothing_is_shipped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert job.find_recipes() == ROOT / "recipes"


def test_prepare_data_converts_the_task_onto_the_data_dir_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLVR_DATA_DIR", str(tmp_path / "runs" / "data"))
    cfg = compose.compose(["platform=gpu", "model=qwen2_5_0_5b_instruct", "task=gsm8k"])
    assert cfg.data.train_files == str(tmp_path / "runs" / "data" / "gsm8k" / "train.parquet")
    assert job.prepare_task_data(cfg, str(FIXTURES / "gsm8k")) is True
    assert Path(cfg.data.train_files).is_file() and Path(cfg.data.val_files).is_file()
    report = json.loads((tmp_path / "runs" / "data" / "gsm8k" / "conversion_report.json").read_text())
    assert report["splits"]["train"]["written"] > 0
    assert job.prepare_task_data(cfg, str(FIXTURES / "gsm8k")) is False  # already there: not again
    assert "already in place" in capsys.readouterr().out


def test_prepare_data_leaves_generated_tasks_to_rlvr(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_DATA_DIR", str(tmp_path / "data"))
    assert job.prepare_task_data(compose.compose([])) is False  # addition: built by rlvr before training


def test_job_parses_prepare_data():
    args = job.parse_args(["--job-id", "x", "--prepare-data", "--data-source", "/d", "experiment=cpu_demo"])
    assert args.prepare_data and args.data_source == "/d" and args.overrides == ["experiment=cpu_demo"]


# ---- resume --------------------------------------------------------------------------------------------


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_resume_is_refused_when_the_model_or_algorithm_changed(tmp_path, cfg):
    stored = tmp_path / "config.yaml"
    OmegaConf.save(cfg, stored, resolve=True)
    recipe_checks.check_resume(cfg, stored)  # the same recipe resumes
    recipe_checks.check_resume(_with(cfg, "trainer.total_training_steps=500"), stored)  # more steps: fine
    other_model = compose.compose(["platform=gpu", "model=qwen2_5_7b_instruct", "task=gsm8k"])
    with pytest.raises(
        UserError, match=r"model.path: Qwen/Qwen2.5-0.5B-Instruct -> Qwen/Qwen2.5-7B-Instruct"
    ):
        recipe_checks.check_resume(other_model, stored)
    other_algo = compose.compose(["platform=gpu", "model=qwen2_5_0_5b_instruct", "task=gsm8k", "algo=gspo"])
    with pytest.raises(UserError, match=r"policy_loss.loss_mode: vanilla -> gspo.*new --run-dir"):
        recipe_checks.check_resume(other_algo, stored)
    recipe_checks.check_resume(other_model, tmp_path / "nothing-here.yaml")  # a fresh run dir
