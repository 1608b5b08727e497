"""Policy loss `clip_higher`: verl's vanilla clipped objective, with the clip fraction of each side.

DAPO's clip-higher (arXiv:2503.14476 sec. 3.1) decouples the clip range, eps_low=0.2 / eps_high=0.28,
so low-probability tokens with positive advantage can grow further before clipping. Whether that
matters in a run shows in how often each bound binds, but verl 0.9.1 logs only `actor/pg_clipfrac`
(either side) and `actor/pg_clipfrac_lower` (the dual-clip bound, not the low side). This loss is
verl's `vanilla` unchanged (same value, same gradient) plus:

  actor/pg_clipfrac_high  share of response tokens with A > 0 and ratio > 1 + eps_high
  actor/pg_clipfrac_low   share of response tokens with A < 0 and ratio < 1 - eps_low

(their sum is verl's actor/pg_clipfrac). Registered through verl's `register_policy_loss`; selected
with actor_rollout_ref.actor.policy_loss.loss_mode=clip_higher (recipes/algo/dapo.yaml).
"""

from __future__ import annotations

import torch
from verl.trainer.ppo import core_algos
from verl.utils import torch_functional as verl_F

NAME = "clip_higher"


def compute_policy_loss_clip_higher(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config=None,
    rollout_is_weights: torch.Tensor | None = None,
):
    vanilla = core_algos.get_policy_loss_fn("vanilla")
    pg_loss, metrics = vanilla(
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        advantages=advantages,
        response_mask=response_mask,
        loss_agg_mode=loss_agg_mode,
        config=config,
        rollout_is_weights=rollout_is_weights,
    )
    eps_low = config.clip_ratio_low if config.clip_ratio_low is not None else config.clip_ratio
    eps_high = config.clip_ratio_high if config.clip_ratio_high is not None else config.clip_ratio
    with torch.no_grad():
        # The same clamped ratio as verl's vanilla loss.
        ratio = torch.exp(torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0))
        high = (advantages > 0) & (ratio > 1 + eps_high)
        low = (advantages < 0) & (ratio < 1 - eps_low)
        metrics = {
            **metrics,
            "actor/pg_clipfrac_high": verl_F.masked_mean(high.float(), response_mask).item(),
            "actor/pg_clipfrac_low": verl_F.masked_mean(low.float(), response_mask).item(),
        }
    return pg_loss, metrics


def register() -> None:
    existing = core_algos.POLICY_LOSS_REGISTRY.get(NAME)
    if existing is not None and existing.__qualname__ != compute_policy_loss_clip_higher.__qualname__:
        raise RuntimeError(
            f"policy loss {NAME!r} is already registered to {existing.__module__}.{existing.__qualname__}"
        )
    # verl's register_policy_loss overwrites silently; the check above makes a second owner an error.
    core_algos.register_policy_loss(NAME)(compute_policy_loss_clip_higher)


register()
