"""Composition-time checks of a recipe combination: what verl would only find out after the cluster has
started vLLM and FSDP, found here in a second, with the fix named.

`check(cfg)` (called by `compose.validate`, so by `rlvr train`, `resolve`, `submit` and a cluster job's
driver) first derives the values rlvr sizes from others, then refuses combinations that cannot run:

- DAPO's overlong buffer (`reward.reward_kwargs.overlong_buffer_cfg.len: auto`, recipes/algo/dapo.yaml)
  becomes a fifth of `data.max_response_length` (the paper's L_cache / L_max = 4096 / 20480), at least 1;
  a number given instead must lie in (0, data.max_response_length) when shaping is on (the reward
  manager raises otherwise, after every model is loaded).
- Batches: `data.train_batch_size` must be a multiple of `actor.ppo_mini_batch_size` (verl splits each
  step's prompts into whole mini-batches), and a group-based advantage (the GRPO family) needs
  `rollout.n > 1`.
- Token budgets: with dynamic batch sizing, one sequence (max_prompt_length + max_response_length) must
  fit in `actor.ppo_max_token_len_per_gpu`.
- `rlvr.verifier_placement` is one of the known policies (rlvr_launch/runs/placement.py).
- `rlvr.cpu_allocator` is one of rlvr_cluster.env.ALLOCATOR_CHOICES or the absolute path of a shared library.
- A DAPO `algorithm.filter_groups.metric` that is a per-status indicator (`rlvr_timeout`, ...) needs
  `reward.reward_kwargs.rlvr.status_indicators: true` (the reward returns them only when asked).
- `actor_rollout_ref.rollout.router_config_path: rlvr:<file>` becomes the path of <file> in the
  rlvr_cluster package (the cpu platform's verl-free load balancer, rlvr_cluster/slim_router.py).
- `reward.num_workers: 0` (the cpu platform: samples scored in the trainer's process) needs rlvr's
  in-process agent-loop manager; verl's own manager would get no reward worker to call. So does the
  in-process load balancer (`router_config_path: rlvr:in_process_router.yaml`): its handle cannot
  reach agent-loop workers in other processes; the v1 trainer's are, so with `trainer.use_v1` it becomes
  `rlvr:slim_router.yaml` (the same policy in an actor).
- `algorithm.rollout_correction.bypass_mode: true` (old log-probs from the rollout, the CPU demo) needs
  `actor_rollout_ref.rollout.calculate_log_probs: true`; verl raises only at the first step otherwise.

Then every check registered with `@composition_check(NAME)` (COMPOSITION_CHECKS), e.g. `distillation`
(rlvr_launch/recipes/distillation.py), which its importers register.

`check_resume(cfg, stored)` refuses to resume a run directory whose checkpoints were written for another
model or algorithm (a re-applied RayJob with a fixed --run-dir, or `rlvr train --run-dir` with a changed
recipe): verl would load an incompatible checkpoint, or silently continue another experiment.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvr_launch.errors import UserError

OVERLONG = "reward.reward_kwargs.overlong_buffer_cfg"
# arXiv:2503.14476 sec. 4.1: L_cache = 4096 of L_max = 20480.
OVERLONG_BUFFER_SHARE = 5
# Advantage estimators that compare the responses of one prompt with each other (need rollout.n > 1).
GROUP_ESTIMATORS = ("grpo", "rloo", "reinforce_plus_plus_baseline", "grpo_passk", "gpg", "opo")
PLACEMENTS = ("require", "any_cpu")


def overlong_buffer_len(max_response_length: int) -> int:
    """DAPO's L_cache for a generation budget: the paper's ratio, at least one token."""
    return max(1, int(max_response_length) // OVERLONG_BUFFER_SHARE)


def size_overlong_buffer(cfg) -> None:
    from omegaconf import OmegaConf, open_dict

    node = OmegaConf.select(cfg, OVERLONG, default=None)
    if node is None or str(node.get("len")) != "auto":
        return
    with open_dict(cfg):
        node.len = overlong_buffer_len(cfg.data.max_response_length)


def _check_overlong(cfg) -> None:
    from omegaconf import OmegaConf

    node = OmegaConf.select(cfg, OVERLONG, default=None)
    if node is None or not node.get("enable", False):
        return
    budget = int(OmegaConf.select(cfg, "reward.reward_kwargs.max_resp_len", default=None) or 0) or int(
        cfg.data.max_response_length
    )
    try:
        length = int(node.get("len"))
    except (TypeError, ValueError):
        raise UserError(
            f"{OVERLONG}.len={node.get('len')!r} is not a number of tokens; write `auto` (a fifth of "
            "data.max_response_length) or a number below it"
        ) from None
    if not 0 < length < budget:
        raise UserError(
            f"DAPO's overlong buffer {OVERLONG}.len={length} does not fit in the generation budget "
            f"data.max_response_length={budget}: the penalty ramp must start after token 0. Set "
            f"{OVERLONG}.len=auto (= {overlong_buffer_len(budget)} here) or a number in 1..{budget - 1}, "
            f"or turn the shaping off with {OVERLONG}.enable=false"
        )


def _check_batches(cfg) -> None:
    from omegaconf import OmegaConf

    batch = int(cfg.data.train_batch_size)
    mini = int(cfg.actor_rollout_ref.actor.ppo_mini_batch_size)
    if batch < mini or batch % mini:
        raise UserError(
            f"data.train_batch_size={batch} is not a multiple of actor_rollout_ref.actor.ppo_mini_batch_size="
            f"{mini}: verl updates the actor once per whole mini-batch of prompts. Set data.train_batch_size "
            f"to a multiple of {mini} (e.g. {mini * max(1, round(batch / mini))}) or lower the mini-batch"
        )
    estimator = str(OmegaConf.select(cfg, "algorithm.adv_estimator", default=""))
    n = int(cfg.actor_rollout_ref.rollout.n)
    if estimator in GROUP_ESTIMATORS and n < 2:
        raise UserError(
            f"algorithm.adv_estimator={estimator} compares the responses to one prompt, but "
            f"actor_rollout_ref.rollout.n={n}: every advantage would be 0. Set actor_rollout_ref.rollout.n=8"
        )
    actor = cfg.actor_rollout_ref.actor
    if actor.get("use_dynamic_bsz", False):
        longest = int(cfg.data.max_prompt_length) + int(cfg.data.max_response_length)
        budget = int(actor.ppo_max_token_len_per_gpu)
        if budget < longest:
            raise UserError(
                f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={budget} is below one full sequence "
                f"(data.max_prompt_length + data.max_response_length = {longest}): raise it to at least {longest}"
            )


def _check_placement(cfg) -> None:
    from omegaconf import OmegaConf

    placement = str(OmegaConf.select(cfg, "rlvr.verifier_placement", default="require"))
    if placement not in PLACEMENTS:
        raise UserError(f"rlvr.verifier_placement={placement!r}: use one of {', '.join(PLACEMENTS)}")


def _check_cpu_allocator(cfg) -> None:
    from omegaconf import OmegaConf

    from rlvr_cluster.env import ALLOCATOR_CHOICES

    # Only the value's shape here: whether a path exists is known on the machine the workers start on
    # (rlvr_cluster.env.cpu_allocator_env), which a submitting laptop is not.
    choice = str(OmegaConf.select(cfg, "rlvr.cpu_allocator", default="system"))
    if choice not in ALLOCATOR_CHOICES and not (choice.startswith("/") and ".so" in Path(choice).name):
        raise UserError(
            f"rlvr.cpu_allocator={choice!r}: use one of {', '.join(ALLOCATOR_CHOICES)}, or the absolute path "
            "of a malloc library (e.g. rlvr.cpu_allocator=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4)"
        )


def _check_filter_metric(cfg) -> None:
    from omegaconf import OmegaConf

    from rlvr_verifiers.base import STATUSES

    if not OmegaConf.select(cfg, "algorithm.filter_groups.enable", default=False):
        return
    metric = str(OmegaConf.select(cfg, "algorithm.filter_groups.metric", default=""))
    opted_in = OmegaConf.select(cfg, "reward.reward_kwargs.rlvr.status_indicators", default=False)
    if metric in {f"rlvr_{s}" for s in STATUSES} and not opted_in:
        raise UserError(
            f"algorithm.filter_groups.metric={metric} is a per-status indicator, which the rlvr reward returns "
            "only when asked: add reward.reward_kwargs.rlvr.status_indicators=true, or filter on acc"
        )


IN_PROCESS_AGENT_LOOP_MANAGER = "rlvr_cluster.in_process_agent_loop.InProcessAgentLoopManager"


def _check_reward_workers(cfg) -> None:
    from omegaconf import OmegaConf

    if OmegaConf.select(cfg, "reward.num_workers", default=1) != 0:
        return
    manager = OmegaConf.select(cfg, "actor_rollout_ref.rollout.agent.agent_loop_manager_class", default=None)
    if manager != IN_PROCESS_AGENT_LOOP_MANAGER:
        raise UserError(
            "reward.num_workers=0 scores samples in the trainer's process, which only rlvr's in-process "
            f"agent loop does (actor_rollout_ref.rollout.agent.agent_loop_manager_class={manager}): set "
            "reward.num_workers=1, or the manager back to " + IN_PROCESS_AGENT_LOOP_MANAGER
        )


IN_PROCESS_ROUTER = "rlvr:in_process_router.yaml"


def fit_router_to_trainer(cfg) -> None:
    """The in-process router serves an agent loop in the trainer's process; the v1 trainer (DAPO's dynamic
    sampling) keeps verl's TransferQueue agent-loop workers in Ray actors, so it gets the same policy in
    an actor (rlvr:slim_router.yaml)."""
    from omegaconf import OmegaConf, open_dict

    router = OmegaConf.select(cfg, "actor_rollout_ref.rollout.router_config_path", default=None)
    if router == IN_PROCESS_ROUTER and OmegaConf.select(cfg, "trainer.use_v1", default=False):
        with open_dict(cfg):
            cfg.actor_rollout_ref.rollout.router_config_path = "rlvr:slim_router.yaml"


def _check_in_process_router(cfg) -> None:
    from omegaconf import OmegaConf

    router = OmegaConf.select(cfg, "actor_rollout_ref.rollout.router_config_path", default=None)
    if router != IN_PROCESS_ROUTER and not str(router).endswith("/in_process_router.yaml"):
        return
    manager = OmegaConf.select(cfg, "actor_rollout_ref.rollout.agent.agent_loop_manager_class", default=None)
    if manager != IN_PROCESS_AGENT_LOOP_MANAGER:
        raise UserError(
            f"actor_rollout_ref.rollout.router_config_path={IN_PROCESS_ROUTER} routes requests in the trainer's "
            "process, which only rlvr's in-process agent loop sends from (agent_loop_manager_class="
            f"{manager}): set router_config_path=rlvr:slim_router.yaml, or the manager back to "
            + IN_PROCESS_AGENT_LOOP_MANAGER
        )


def _check_bypass(cfg) -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.select(cfg, "algorithm.rollout_correction.bypass_mode", default=False):
        return
    if not OmegaConf.select(cfg, "actor_rollout_ref.rollout.calculate_log_probs", default=False):
        raise UserError(
            "algorithm.rollout_correction.bypass_mode=true takes the old policy's log-probs from the rollout, "
            "which returns them only with actor_rollout_ref.rollout.calculate_log_probs=true: set it, or "
            "bypass_mode=false to recompute them with the actor"
        )


PACKAGED_PREFIX = "rlvr:"


def locate_router_config(cfg) -> None:
    """`rollout.router_config_path: rlvr:<file>` -> the path of <file> in the rlvr_cluster package (verl
    resolves the path in its TaskRunner, which may run elsewhere than the checkout)."""
    from omegaconf import OmegaConf, open_dict

    value = OmegaConf.select(cfg, "actor_rollout_ref.rollout.router_config_path", default=None)
    if not isinstance(value, str) or not value.startswith(PACKAGED_PREFIX):
        return
    import rlvr_cluster

    path = Path(rlvr_cluster.__file__).parent / value[len(PACKAGED_PREFIX) :]
    if not path.is_file():
        raise UserError(
            f"actor_rollout_ref.rollout.router_config_path={value}: rlvr_cluster has no {path.name} "
            "(it ships rlvr:slim_router.yaml and rlvr:in_process_router.yaml); give a file path or null for "
            "verl's own router"
        )
    with open_dict(cfg):
        cfg.actor_rollout_ref.rollout.router_config_path = str(path)


# Checks that modules building on composition add (name -> check(cfg), raising UserError): composition
# never imports them; a module registers its check with @composition_check(NAME) when it is imported,
# and whoever composes configs that need it imports that module (the CLI subcommand, the pipeline).
COMPOSITION_CHECKS: dict[str, Callable[[Any], None]] = {}


def composition_check(name: str):
    """Register `check(cfg)` to run, after the built-in checks, in every `check(cfg)`; one name once."""

    def register(fn: Callable[[Any], None]) -> Callable[[Any], None]:
        if name in COMPOSITION_CHECKS:
            raise ValueError(f"composition check {name!r} is already registered")
        COMPOSITION_CHECKS[name] = fn
        return fn

    return register


def _check_model_platform(cfg) -> None:
    """A model recipe sized for another platform (the Qwen recipes: 8 x 80 GB GPUs) is refused in one line
    naming the platform, before the arithmetic of its batch sizes against this platform's fails."""
    platforms = [str(p) for p in (cfg.rlvr.get("model_platforms") or [])]
    platform = "cpu" if str(cfg.trainer.get("device", "")) == "cpu" else "gpu"
    if platforms and platform not in platforms:
        raise UserError(
            f"model={cfg.rlvr.model}'s recipe is for platform={' or platform='.join(platforms)} (its batch "
            f"sizes, parallelism and memory settings are sized for it), not platform={platform}: add "
            f"platform={platforms[0]}, or on CPU train model=tiny"
        )


def check(cfg) -> None:
    """Derive what rlvr sizes, then refuse a combination that cannot run (UserError naming the fix)."""
    _check_model_platform(cfg)
    size_overlong_buffer(cfg)
    fit_router_to_trainer(cfg)
    locate_router_config(cfg)
    _check_overlong(cfg)
    _check_batches(cfg)
    _check_placement(cfg)
    _check_cpu_allocator(cfg)
    _check_filter_metric(cfg)
    _check_reward_workers(cfg)
    _check_in_process_router(cfg)
    _check_bypass(cfg)
    for registered in COMPOSITION_CHECKS.values():
        registered(cfg)  # e.g. `distillation` (recipes/distillation.py): teacher path, tokenizer, pool


# What a checkpoint is tied to: a run directory resumes only under the same values.
RESUME_KEYS = (
    "actor_rollout_ref.model.path",
    "algorithm.adv_estimator",
    "actor_rollout_ref.actor.policy_loss.loss_mode",
    "actor_rollout_ref.actor.loss_agg_mode",
    "actor_rollout_ref.actor.strategy",
)


def check_resume(cfg, stored_config) -> None:
    """UserError when the run directory's stored config (config.yaml) trained another model or algorithm."""
    from pathlib import Path

    from omegaconf import OmegaConf

    path = Path(stored_config)
    if not path.is_file():
        return
    old = OmegaConf.load(path)
    changed = []
    for key in RESUME_KEYS:
        before = OmegaConf.select(old, key, default=None)
        now = OmegaConf.select(cfg, key, default=None)
        if before is not None and str(before) != str(now):
            changed.append(f"{key}: {before} -> {now}")
    if changed:
        raise UserError(
            f"{path.parent} holds checkpoints of another recipe ({'; '.join(changed)}); resuming would load "
            "them into this one. Give a new --run-dir (or remove that directory to start over)"
        )
