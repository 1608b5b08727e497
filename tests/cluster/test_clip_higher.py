"""`clip_higher` is verl's vanilla loss exactly, plus the clip fraction of each bound."""

from __future__ import annotations

import math

import pytest
import torch
from omegaconf import OmegaConf
from verl.trainer.ppo import core_algos

from rlvr_cluster import clip_higher


def _config(low=0.2, high=0.28):
    from verl.utils.config import omega_conf_to_dataclass

    cfg = OmegaConf.create(
        {
            "_target_": "verl.workers.config.FSDPActorConfig",
            "strategy": "fsdp2",
            "ppo_mini_batch_size": 4,
            "ppo_micro_batch_size_per_gpu": 4,
            "clip_ratio": 0.2,
            "clip_ratio_low": low,
            "clip_ratio_high": high,
            "rollout_n": 1,
        }
    )
    return omega_conf_to_dataclass(cfg)


def _batch(seed=0, rows=6, width=9):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(rows, width, generator=g) * 3
    new = (old + torch.randn(rows, width, generator=g) * 0.4).requires_grad_(True)
    adv = torch.randn(rows, 1, generator=g).expand(rows, width).contiguous()
    mask = (torch.rand(rows, width, generator=g) > 0.2).float()
    return old, new, adv, mask


def test_it_is_registered_in_verls_policy_loss_registry():
    assert core_algos.get_policy_loss_fn("clip_higher") is clip_higher.compute_policy_loss_clip_higher


def test_another_owner_of_the_name_is_an_error():
    saved = core_algos.POLICY_LOSS_REGISTRY["clip_higher"]
    core_algos.POLICY_LOSS_REGISTRY["clip_higher"] = core_algos.get_policy_loss_fn("vanilla")
    try:
        with pytest.raises(RuntimeError, match="already registered"):
            clip_higher.register()
    finally:
        core_algos.POLICY_LOSS_REGISTRY["clip_higher"] = saved


@pytest.mark.parametrize("seed", range(5))
def test_loss_and_gradient_equal_verls_vanilla(seed):
    config = _config()
    old, new, adv, mask = _batch(seed)
    ours, metrics = clip_higher.compute_policy_loss_clip_higher(old, new, adv, mask, "token-mean", config)
    (grad_ours,) = torch.autograd.grad(ours, new)
    theirs, their_metrics = core_algos.get_policy_loss_fn("vanilla")(
        old_log_prob=old,
        log_prob=new,
        advantages=adv,
        response_mask=mask,
        loss_agg_mode="token-mean",
        config=config,
    )
    (grad_theirs,) = torch.autograd.grad(theirs, new)
    assert torch.equal(ours, theirs)
    assert torch.equal(grad_ours, grad_theirs)
    # The two sides add up to verl's either-side clip fraction.
    assert metrics["actor/pg_clipfrac_high"] + metrics["actor/pg_clipfrac_low"] == pytest.approx(
        their_metrics["actor/pg_clipfrac"], abs=1e-6
    )


def test_each_side_counts_only_its_own_bound():
    config = _config(low=0.2, high=0.28)
    old = torch.zeros(1, 4)
    # ratios: 1.5 (above 1.28), 1.1 (inside), 0.5 (below 0.8), 0.5
    new = torch.log(torch.tensor([[1.5, 1.1, 0.5, 0.5]]))
    adv = torch.tensor([[1.0, 1.0, -1.0, 1.0]])  # the last token is below 0.8 but A > 0: not clipped
    mask = torch.ones(1, 4)
    _, metrics = clip_higher.compute_policy_loss_clip_higher(old, new, adv, mask, "token-mean", config)
    assert metrics["actor/pg_clipfrac_high"] == pytest.approx(0.25)
    assert metrics["actor/pg_clipfrac_low"] == pytest.approx(0.25)


@pytest.mark.parametrize("seed", range(5))
def test_each_sides_clip_fraction_equals_a_hand_count(seed):
    """The figures that matter (the loss equality above holds by construction): on random batches, each
    side's fraction is the share of response tokens a plain loop finds beyond that side's bound."""
    low, high = 0.2, 0.28
    config = _config(low=low, high=high)
    old, new, adv, mask = _batch(seed, rows=8, width=16)
    new = (old + (new - old) * 2.5).detach()  # wider ratios: both bounds bind on some tokens
    _, metrics = clip_higher.compute_policy_loss_clip_higher(old, new, adv, mask, "token-mean", config)
    counted = {"high": 0, "low": 0}
    tokens = 0
    for i in range(old.shape[0]):
        for j in range(old.shape[1]):
            if mask[i, j] == 0:
                continue
            tokens += 1
            ratio = math.exp(float(new[i, j]) - float(old[i, j]))
            if adv[i, j] > 0 and ratio > 1 + high:
                counted["high"] += 1
            elif adv[i, j] < 0 and ratio < 1 - low:
                counted["low"] += 1
    assert counted["high"] > 0 and counted["low"] > 0, counted  # the batch exercises both sides
    assert metrics["actor/pg_clipfrac_high"] == pytest.approx(counted["high"] / tokens, abs=1e-6)
    assert metrics["actor/pg_clipfrac_low"] == pytest.approx(counted["low"] / tokens, abs=1e-6)
