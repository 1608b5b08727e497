"""Every documented command and every algo x task x model combination composes into a config fit for
it: the model's learning rate, whole mini-batches, a run named after what was chosen, no CPU-demo
settings on a GPU run, and DAPO's overlong buffer inside the task's generation budget. Combinations that
cannot run are refused at composition, with the fix named, before anything reaches a cluster.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from rlvr_launch.cli import UserError
from rlvr_launch.recipes import compose, recipe_checks

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"
GPU_MODELS = ["qwen2_5_0_5b_instruct", "qwen2_5_1_5b_instruct", "qwen2_5_7b_instruct", "qwen3_4b"]
TASKS = ["addition", "gsm8k", "math", "code", "countdown", "tool_use"]
ALGOS = ["grpo", "rloo", "dapo", "dr_grpo", "gspo", "reinforce_pp"]
PLACEHOLDERS = {"...", "NAME", "X", "M", "T", "A", "URL", "DIR"}
OVERLONG = "reward.reward_kwargs.overlong_buffer_cfg"


def _model_lr(model: str) -> float:
    text = yaml.safe_load((RECIPES / "model" / f"{model}.yaml").read_text())
    return float(text["actor_rollout_ref"]["actor"]["optim"]["lr"])


def _assert_fit(cfg, label: str) -> None:
    """What every runnable composition must satisfy."""
    model = str(cfg.rlvr.model)
    assert model, f"{label}: no rlvr.model"
    experiment_file = RECIPES / "experiment" / f"{cfg.trainer.experiment_name}.yaml"
    if not experiment_file.is_file():  # an experiment may set its own lr; a bare combination gets the model's
        assert float(cfg.actor_rollout_ref.actor.optim.lr) == _model_lr(model), label
    batch, mini = int(cfg.data.train_batch_size), int(cfg.actor_rollout_ref.actor.ppo_mini_batch_size)
    assert batch >= mini and batch % mini == 0, f"{label}: train_batch_size {batch} vs mini {mini}"
    assert int(cfg.actor_rollout_ref.rollout.n) > 1, label
    gpus = int(cfg.trainer.nnodes) * int(cfg.trainer.n_gpus_per_node)
    assert batch * int(cfg.actor_rollout_ref.rollout.n) % gpus == 0, label
    if str(cfg.trainer.device) == "cuda":
        assert cfg.trainer.experiment_name != "cpu_demo", label
        assert cfg.trainer.total_training_steps != 60, f"{label}: the CPU demo's 60 steps leaked"
        assert float(cfg.actor_rollout_ref.actor.optim.lr) <= 1e-5, f"{label}: a CPU-demo learning rate"
        assert cfg.trainer.max_actor_ckpt_to_keep, f"{label}: checkpoints are never pruned"
    overlong = OmegaConf.select(cfg, OVERLONG, default=None)
    if overlong is not None and overlong.enable:
        assert 0 < int(overlong.len) < int(cfg.data.max_response_length), label


# ---- commands the README and the recipe headers document ------------------------------------------


def _documented_commands() -> list[tuple[str, list[str]]]:
    sources = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),  # the README's topic guides
        ROOT / "bench" / "README.md",
        *sorted(RECIPES.rglob("*.yaml")),
        *sorted((ROOT / "cluster").rglob("*.yaml")),
    ]
    commands = []
    for path in sources:
        text = re.sub(r"\\\n\s*#?\s*", " ", path.read_text())  # join continued lines (also in comments)
        for match in re.finditer(r"\brlvr (train|submit|resolve)\b([^\n`;|]*)", text):
            words = [w.strip("'\"") for w in match.group(2).split(" #")[0].split("&&")[0].split()]
            overrides = [w for w in words if "=" in w and not w.startswith("-")]
            if any(w.partition("=")[2] in PLACEHOLDERS or "[" in w for w in overrides):
                continue
            commands.append((f"{path.relative_to(ROOT)}: rlvr {match.group(1)}{match.group(2)}", overrides))
    unique: dict[tuple, tuple[str, list[str]]] = {}
    for label, overrides in commands:  # one composition per distinct set of overrides
        unique.setdefault(tuple(sorted(overrides)), (label.strip(), overrides))
    return list(unique.values())


DOCUMENTED = _documented_commands()


def test_the_documents_hold_gpu_commands_to_check():
    gpu = [c for c, o in DOCUMENTED if "platform=gpu" in o or any("gsm8k_grpo" in w for w in o)]
    assert len(gpu) >= 8, DOCUMENTED


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
@pytest.mark.parametrize("label,overrides", DOCUMENTED, ids=[c for c, _ in DOCUMENTED])
def test_documented_command_gets_settings_fit_for_it(label, overrides):
    cfg = compose.compose(overrides)
    _assert_fit(cfg, label)


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_a_composed_gpu_combination_gets_none_of_the_cpu_demo():
    cfg = compose.compose(["platform=gpu", "model=qwen2_5_0_5b_instruct", "task=gsm8k", "algo=grpo"])
    assert cfg.trainer.experiment_name == "gsm8k_qwen2_5_0_5b_instruct_grpo"
    assert cfg.actor_rollout_ref.actor.optim.lr == pytest.approx(1e-6)
    assert cfg.data.train_batch_size == 256 and cfg.actor_rollout_ref.actor.ppo_mini_batch_size == 64
    assert cfg.trainer.total_training_steps is None  # verl's epochs, not the demo's 60 steps
    assert cfg.actor_rollout_ref.actor.kl_loss_coef == pytest.approx(0.04)  # GRPO's, not the demo's 0.001
    assert cfg.trainer.logger == ["console", "wandb"]
    # ... while `rlvr train` alone is still the CPU demo
    demo = compose.compose([])
    assert demo.trainer.experiment_name == "cpu_demo" and demo.trainer.total_training_steps == 60
    assert demo.actor_rollout_ref.actor.optim.lr == pytest.approx(5e-4)
    # The demo's debug-loop cuts (README, "The demo vs TRL") stay on the demo: old log-probs from the rollout,
    # verl's TaskRunner in the driver, verifier actors only when an item needs one.
    assert (
        demo.algorithm.rollout_correction.bypass_mode and demo.actor_rollout_ref.rollout.calculate_log_probs
    )
    assert demo.rlvr.task_runner == "driver" and demo.reward.reward_kwargs.rlvr.pool.lazy_start
    assert not cfg.algorithm.rollout_correction.bypass_mode and cfg.rlvr.task_runner == "actor"
    # The demo's update mixes every prompt's responses across its mini-batches (cpu_demo.yaml: measured
    # against TRL's split); other experiments keep verl's default.
    assert demo.actor_rollout_ref.actor.shuffle and not cfg.actor_rollout_ref.actor.shuffle


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_old_log_probs_from_the_rollout_need_the_rollouts_log_probs():
    with pytest.raises(UserError, match=r"bypass_mode=true .*calculate_log_probs=true"):
        compose.compose(["actor_rollout_ref.rollout.calculate_log_probs=false"])
    cfg = compose.compose(
        [
            "actor_rollout_ref.rollout.calculate_log_probs=false",
            "algorithm.rollout_correction.bypass_mode=false",
        ]
    )
    assert not cfg.algorithm.rollout_correction.bypass_mode


# ---- DAPO's overlong buffer ------------------------------------------------------------------------


@pytest.mark.parametrize("task", TASKS)
def test_dapo_overlong_buffer_is_sized_from_the_tasks_budget(task):
    model = "tiny" if task == "addition" else "qwen2_5_7b_instruct"
    platform = "cpu" if task == "addition" else "gpu"
    cfg = compose.compose([f"platform={platform}", f"model={model}", f"task={task}", "algo=dapo"])
    budget = int(cfg.data.max_response_length)
    assert cfg.reward.reward_kwargs.max_resp_len == budget
    assert int(OmegaConf.select(cfg, f"{OVERLONG}.len")) == max(1, budget // 5) < budget


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_an_overlong_buffer_that_cannot_fit_is_refused_before_submission():
    with pytest.raises(UserError) as err:
        compose.compose(
            ["platform=gpu", "model=qwen2_5_0_5b_instruct", "task=gsm8k", "algo=dapo", f"{OVERLONG}.len=4096"]
        )
    message = str(err.value)
    assert (
        "len=4096" in message and "max_response_length=1024" in message and f"{OVERLONG}.len=auto" in message
    )
    # a number that fits is kept
    cfg = compose.compose(["algo=dapo", f"{OVERLONG}.len=2"])
    assert cfg.reward.reward_kwargs.overlong_buffer_cfg.len == 2


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_filtering_dapo_groups_on_a_status_indicator_needs_the_opt_in_columns():
    """The per-status indicators (rlvr_timeout, ...) are returned only when asked: filtering on one
    without them is refused at composition with the switch named, not after every model has loaded."""
    metric = "algorithm.filter_groups.metric=rlvr_timeout"
    with pytest.raises(UserError, match=r"rlvr_timeout .*reward.reward_kwargs.rlvr.status_indicators=true"):
        compose.compose(["algo=dapo", metric])
    cfg = compose.compose(["algo=dapo", metric, "reward.reward_kwargs.rlvr.status_indicators=true"])
    assert cfg.algorithm.filter_groups.metric == "rlvr_timeout"
    compose.compose(["algo=dapo"])  # DAPO's own metric (acc) is always returned


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_scoring_in_the_trainers_process_needs_the_in_process_agent_loop():
    """reward.num_workers=0 (the cpu platform) leaves no reward-loop actor: verl's own agent-loop manager
    would fail on its first sample, so the combination is refused with both fixes named."""
    cfg = compose.compose([])
    assert cfg.reward.num_workers == 0
    with pytest.raises(UserError, match=r"reward.num_workers=0 .*set reward.num_workers=1"):
        compose.compose(["actor_rollout_ref.rollout.agent.agent_loop_manager_class=null"])
    verls_manager = ["actor_rollout_ref.rollout.agent.agent_loop_manager_class=null", "reward.num_workers=1"]
    with pytest.raises(UserError, match=r"in_process_router.yaml .*rlvr:slim_router.yaml"):
        compose.compose(verls_manager)  # the in-process router too needs the in-process agent loop
    cfg = compose.compose(
        [*verls_manager, "actor_rollout_ref.rollout.router_config_path=rlvr:slim_router.yaml"]
    )
    assert cfg.reward.num_workers == 1
    # DAPO's v1 trainer keeps verl's agent-loop workers in actors: its router is the actor variant.
    dapo = compose.compose(["algo=dapo"])
    assert dapo.trainer.use_v1 and dapo.actor_rollout_ref.rollout.router_config_path.endswith(
        "/slim_router.yaml"
    )


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_batches_that_do_not_divide_are_refused():
    with pytest.raises(
        UserError, match=r"train_batch_size=100 is not a multiple of .*ppo_mini_batch_size=64"
    ):
        compose.compose(
            ["platform=gpu", "model=qwen2_5_0_5b_instruct", "task=gsm8k", "data.train_batch_size=100"]
        )
    with pytest.raises(UserError, match=r"rollout.n=1: every advantage would be 0"):
        compose.compose(["actor_rollout_ref.rollout.n=1"])
    with pytest.raises(UserError, match="ppo_max_token_len_per_gpu=1024 is below one full sequence"):
        compose.compose(
            [
                "platform=gpu",
                "model=qwen2_5_7b_instruct",
                "task=code",
                "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=1024",
            ]
        )


def test_the_buffer_rule_is_the_papers_ratio():
    assert recipe_checks.overlong_buffer_len(20480) == 4096  # arXiv:2503.14476 sec. 4.1
    assert recipe_checks.overlong_buffer_len(4) == 1


# ---- the whole matrix ------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_algo_task_model_combination_composes_and_fits():
    """6 algorithms x 6 tasks x 5 models (the tiny one on CPU, the real ones on GPU): each composes, passes
    verl's own validation and rlvr's, and gets settings fit for it."""
    failures = []
    count = 0
    for model in ["tiny", *GPU_MODELS]:
        platform = "cpu" if model == "tiny" else "gpu"
        for task in TASKS:
            for algo in ALGOS:
                label = f"platform={platform} model={model} task={task} algo={algo}"
                try:
                    cfg = compose.compose(
                        [f"platform={platform}", f"model={model}", f"task={task}", f"algo={algo}"]
                    )
                    _assert_fit(cfg, label)
                    assert cfg.trainer.experiment_name == (
                        "cpu_demo" if platform == "cpu" else f"{task}_{model}_{cfg.algorithm.adv_estimator}"
                    ), label
                except (UserError, AssertionError) as e:
                    failures.append(f"{label}: {e}")
                count += 1
    assert count == 180
    assert not failures, "\n".join(failures)
