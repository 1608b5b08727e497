"""The GRPO-family recipes (recipes/algo/*.yaml): each composes into the exact verl keys its paper
prescribes, every value that differs from verl's default says which paper and section it comes from,
and (slow) each trains 2 real steps on CPU with the metrics its patch is about present.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlvr_launch.recipes import compose

ALGOS = ["grpo", "rloo", "dapo", "dr_grpo", "gspo", "reinforce_pp"]
ACTOR = "actor_rollout_ref.actor"

# What each algorithm must resolve to (full verl paths). None = must be null.
EXPECTED: dict[str, dict[str, object]] = {
    "grpo": {
        "algorithm.adv_estimator": "grpo",
        "algorithm.norm_adv_by_std_in_grpo": True,
        f"{ACTOR}.loss_agg_mode": "seq-mean-token-mean",
        f"{ACTOR}.policy_loss.loss_mode": "vanilla",
        f"{ACTOR}.use_kl_loss": True,
        f"{ACTOR}.kl_loss_type": "low_var_kl",
        "algorithm.filter_groups.enable": False,
    },
    "rloo": {
        "algorithm.adv_estimator": "rloo",
        f"{ACTOR}.loss_agg_mode": "seq-mean-token-sum",
        f"{ACTOR}.use_kl_loss": False,
    },
    "dapo": {
        "algorithm.adv_estimator": "grpo",
        f"{ACTOR}.clip_ratio_low": 0.2,
        f"{ACTOR}.clip_ratio_high": 0.28,
        f"{ACTOR}.loss_agg_mode": "token-mean",
        f"{ACTOR}.use_kl_loss": False,
        "algorithm.use_kl_in_reward": False,
        "algorithm.filter_groups.enable": True,
        "algorithm.filter_groups.metric": "acc",
        "algorithm.filter_groups.max_num_gen_batches": 10,
        "reward.reward_kwargs.overlong_buffer_cfg.enable": True,
        "reward.reward_kwargs.overlong_buffer_cfg.len": 1,  # auto: max(1, 4 // 5) on the demo
        "reward.reward_kwargs.overlong_buffer_cfg.penalty_factor": 1.0,
        "trainer.use_v1": True,
        "trainer.v1.sampler.custom_sampler.path": "pkg://rlvr_cluster.dynamic_sampling",
        "trainer.v1.sampler.custom_sampler.name": "DynamicSamplingReplayBuffer",
        "trainer.v1.sampler.sampler_kwargs.filter_groups_metric": "acc",
        "trainer.v1.sampler.sampler_kwargs.max_num_gen_batches": 10,
    },
    "dr_grpo": {
        "algorithm.adv_estimator": "grpo",
        "algorithm.norm_adv_by_std_in_grpo": False,
        f"{ACTOR}.loss_agg_mode": "seq-mean-token-sum-norm",
        f"{ACTOR}.use_kl_loss": False,
    },
    "gspo": {
        "algorithm.adv_estimator": "grpo",
        f"{ACTOR}.policy_loss.loss_mode": "gspo",
        f"{ACTOR}.loss_agg_mode": "seq-mean-token-mean",
        f"{ACTOR}.clip_ratio_low": 0.0003,
        f"{ACTOR}.clip_ratio_high": 0.0004,
    },
    "reinforce_pp": {
        "algorithm.adv_estimator": "reinforce_plus_plus_baseline",
        "algorithm.use_kl_in_reward": True,
        "algorithm.kl_penalty": "kl",
        f"{ACTOR}.use_kl_loss": False,
        f"{ACTOR}.loss_agg_mode": "token-mean",
    },
}


@pytest.fixture(scope="module")
def composed():
    return {name: compose.compose([f"algo={name}"]) for name in ALGOS}


# The installed console script (`python -m rlvr_launch.cli` would import cli twice, as __main__ too).
RLVR = str(Path(sys.executable).parent / "rlvr")


def test_every_algorithm_file_is_covered():
    assert sorted(compose.group_entries("algo")) == sorted(ALGOS)


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
@pytest.mark.parametrize("name", ALGOS)
def test_algorithm_resolves_to_its_papers_verl_keys(composed, name):
    from omegaconf import OmegaConf

    cfg = composed[name]
    for key, expected in EXPECTED[name].items():
        value = OmegaConf.select(cfg, key, throw_on_missing=True)
        assert value == expected, f"algo={name}: {key} = {value!r}, expected {expected!r}"


def test_dr_grpo_normaliser_is_the_constant_generation_budget(composed):
    cfg = composed["dr_grpo"]
    # Not null: verl's null divides by each micro-batch's padded width (tests/launch/test_loss_properties.py)
    assert cfg.actor_rollout_ref.actor.loss_scale_factor == cfg.data.max_response_length > 0


def test_dapo_overlong_shaping_is_bounded_by_the_generation_budget(composed):
    cfg = composed["dapo"]
    assert cfg.reward.reward_kwargs.max_resp_len == cfg.data.max_response_length


def test_selecting_an_algorithm_changes_nothing_outside_it(composed):
    """algo=X touches only the algorithm's keys: the data, model and rollout stay the experiment's."""
    base = composed["grpo"]
    for name in ALGOS:
        cfg = composed[name]
        assert cfg.data == base.data
        assert cfg.actor_rollout_ref.model == base.actor_rollout_ref.model
        assert cfg.actor_rollout_ref.rollout.n == base.actor_rollout_ref.rollout.n > 1


def test_the_dynamic_sampler_the_recipe_names_loads_through_verls_loader(composed):
    import transfer_queue  # noqa: F401  (the `train` extra's; never a skip)
    from verl.utils.import_utils import load_extern_type

    sampler = composed["dapo"].trainer.v1.sampler.custom_sampler
    cls = load_extern_type(sampler.path, sampler.name)
    assert cls.__name__ == "DynamicSamplingReplayBuffer"


# ---- every non-default value cites its paper ---------------------------------------------------------


@functools.cache
def _verl_defaults():
    import verl.trainer.config as verl_config
    from omegaconf import OmegaConf

    return OmegaConf.load(Path(verl_config.__file__).parent / "_generated_ppo_trainer.yaml")


def _leaves_with_comments(path: Path):
    """(dotted key, raw value, comment lines above the key and above each ancestor key, line number) per
    leaf. The file's header (the comment lines before the first key) is not a comment on any key."""
    stack: list[tuple[int, str, list[str]]] = []  # (indent, key, the comment block right above it)
    pending: list[str] = []
    seen_key = False
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            pending = pending + [stripped] if seen_key else []
            continue
        seen_key = True
        indent = len(line) - len(line.lstrip())
        key, _, value = stripped.partition(":")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        own, pending = pending, []
        if value.strip():
            inherited = [c for _, _, block in stack for c in block]
            yield ".".join([k for _, k, _ in stack] + [key]), value.strip(), own + inherited, lineno
        else:
            stack.append((indent, key, own))


@pytest.mark.parametrize("name", ALGOS)
def test_every_non_default_value_cites_its_paper_and_section(name):
    from omegaconf import OmegaConf

    defaults = _verl_defaults()
    path = compose.recipes_dir() / "algo" / f"{name}.yaml"
    text = path.read_text()
    assert "# @package _global_" in text
    assert text.lstrip().startswith("#") and "Select on any experiment: rlvr train algo=" in text
    uncited = []
    for key, raw, comments, lineno in _leaves_with_comments(path):
        if key.startswith("trainer."):  # wiring (which trainer, which sampler), not an algorithm value
            assert comments, f"{path.name}:{lineno} {key} has no comment saying why"
            continue
        default = OmegaConf.select(defaults, key, default="<absent>")
        value = raw if raw.startswith("${") else yaml.safe_load(raw)
        if value == default:
            continue
        cited = any(re.search(r"arXiv:\d{4}\.\d{4,5}", c) and re.search(r"sec\.|eq\.", c) for c in comments)
        if not cited:
            uncited.append(f"{path.name}:{lineno} {key}: {raw}")
    assert not uncited, "non-default values without a paper + section comment:\n" + "\n".join(uncited)


@pytest.mark.slow  # a fresh interpreter importing verl: ~7 s
def test_rlvr_resolve_prints_the_algorithms_keys():
    out = subprocess.run(
        [RLVR, "resolve", "algo=dapo"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "clip_ratio_high: 0.28" in out.stdout
    assert "DynamicSamplingReplayBuffer" in out.stdout
    assert re.search(r"filter_groups:\n(\s+.*\n)*?\s+enable: true", out.stdout)


# ---- slow: two real training steps per algorithm on CPU -----------------------------------------------


def read_metrics(run_dir: Path) -> list[dict]:
    """metrics.jsonl rows as flat {key: value} dicts with a `step` (accepts verl's {"step", "data"} form)."""
    rows = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if isinstance(row.get("data"), dict):
            row = {"step": row.get("step"), **row["data"]}
        rows.append(row)
    return rows


# Metrics each variant is about (beyond the ones every run has).
VARIANT_METRICS = {
    "grpo": ["actor/kl_loss"],
    "rloo": [],
    "dapo": [
        "actor/pg_clipfrac",
        "actor/pg_clipfrac_high",  # clip-higher at work (rlvr_cluster/clip_higher.py)
        "actor/pg_clipfrac_low",
        "training/filter_groups/budget_exhausted",
        "training/filter_groups/refill_prompts",
        "training/filter_groups/admitted_zero_variance_groups",
    ],
    "dr_grpo": [],
    "gspo": ["actor/pg_clipfrac"],
    "reinforce_pp": ["actor/reward_kl_penalty"],
}
COMMON_METRICS = ["critic/score/mean", "critic/advantages/mean", "response_length/mean", "actor/pg_loss"]
# DAPO on the CPU demo: the overlong buffer must fit in its 4-token budget; the v1 trainer on few cores
# needs one TransferQueue storage unit (shared/design/verl-on-cpu.md, blocker 9).
DAPO_CPU_OVERRIDES = [
    "reward.reward_kwargs.overlong_buffer_cfg.len=2",
    "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
]


def _train(tmp_path: Path, overrides: list[str], steps: int = 2) -> list[dict]:
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "rlvr_launch.cli",
        "train",
        "experiment=cpu_demo",
        f"trainer.total_training_steps={steps}",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        "trainer.save_freq=-1",
        *overrides,
        "--run-dir",
        str(run_dir),
    ]
    env = dict(os.environ, WANDB_MODE="disabled")
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=900, env=env)
    assert out.returncode == 0, f"{' '.join(cmd)}\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
    rows = [r for r in read_metrics(run_dir) if "critic/score/mean" in r]
    assert len(rows) == steps, f"expected {steps} training steps in metrics.jsonl, got {len(rows)}"
    return rows


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    # grpo asks for the shared run by name at run time: its xdist unit is that run's (conftest), named here
    [
        pytest.param(a, marks=pytest.mark.xdist_group("default_experiment_run")) if a == "grpo" else a
        for a in ALGOS
    ],
)
def test_algorithm_trains_two_steps_on_cpu_with_its_metrics(tmp_path, name, request):
    if name == "grpo":
        # GRPO is the default experiment's algorithm: its first two steps are the shared learning run's
        # (conftest's default_experiment_run), not a run of their own.
        run_dir, out = request.getfixturevalue("default_experiment_run")
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        assert "adv_estimator: grpo" in (run_dir / "config.yaml").read_text()
        rows = [r for r in read_metrics(run_dir) if "critic/score/mean" in r][:2]
        assert len(rows) == 2
    else:
        overrides = [f"algo={name}"] + (DAPO_CPU_OVERRIDES if name == "dapo" else [])
        rows = _train(tmp_path, overrides)
    for row in rows:
        missing = [k for k in COMMON_METRICS + VARIANT_METRICS[name] if k not in row]
        assert not missing, f"algo={name} step {row.get('step')} lacks {missing}"
        # Present is not enough: a NaN loss or KL is logged too.
        bad = {k: row[k] for k in COMMON_METRICS + VARIANT_METRICS[name] if not math.isfinite(float(row[k]))}
        assert not bad, f"algo={name} step {row.get('step')}: not finite {bad}"
    if name == "dapo":
        for row in rows:
            # Refills happen only to replace evicted (zero-variance) groups, and verl counts those.
            if row["training/filter_groups/refill_prompts"] > 0:
                assert row.get("training/filter_groups/evicted_samples", 0) > 0


@pytest.mark.slow
def test_dapo_degrades_instead_of_hanging_when_no_group_is_informative(tmp_path):
    """Filter on a reward_extra_info field that is the same for every response (`rlvr_sandbox_error`,
    0 when the sandbox works): every group is zero-variance, so no batch can ever be filled. verl's
    own sampler would regenerate forever; rlvr's must finish each step within max_num_gen_batches,
    admitting the groups and saying so in the metrics."""
    overrides = [
        "algo=dapo",
        *DAPO_CPU_OVERRIDES,
        "algorithm.filter_groups.metric=rlvr_sandbox_error",
        "reward.reward_kwargs.rlvr.status_indicators=true",  # the indicator columns are opt-in
        "algorithm.filter_groups.max_num_gen_batches=2",
    ]
    rows = _train(tmp_path, overrides)
    batch = 32  # cpu_demo's data.train_batch_size
    for row in rows:
        assert row["training/filter_groups/budget_exhausted"] == 1.0
        assert row["training/filter_groups/admitted_zero_variance_groups"] > 0
        # one extra batch allowed: at least the budget, at most what 2 credits per eviction can add
        assert batch <= row["training/filter_groups/refill_prompts"] <= 4 * batch
