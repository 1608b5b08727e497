"""Correctness of the policy update, checked on verl 0.9.1's own functions (verl.trainer.ppo.core_algos).

The bug class: a masked mean that silently depends on how much padding surrounds the real tokens (or on
how a mini-batch is cut into micro-batches) gives subtly wrong gradients on long, heavily padded
reasoning batches. Each property below states exactly which invariance a loss aggregation mode
promises; hypothesis searches sequence lengths, advantages, log-probabilities and padding layouts.

Also: GRPO's and RLOO's advantages relate as the literature says, and Dr. GRPO's aggregation removes
the per-token length weighting that GRPO's has.

Found in verl 0.9.1 (reported, asserted as it is, not hidden): `seq-mean-token-sum-norm` with
`loss_scale_factor=null` (verl's default) divides by the padded WIDTH of the tensor it is given
(core_algos.py:1191 in agg_loss: `loss_scale_factor = loss_mask.shape[-1]`), so the loss and the gradient
change with right padding. In verl 0.9.1's engine workers that width is each MICRO-batch's own longest
response (verl/workers/utils/losses.py:91 pads the jagged batch with `to_padded_tensor()`), so the
normaliser varies from micro-batch to micro-batch within one update. recipes/algo/dr_grpo.yaml sets the constant the Dr. GRPO paper uses
(`loss_scale_factor: ${data.max_response_length}`), under which the invariance holds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from verl.trainer.ppo.core_algos import (
    agg_loss,
    compute_grpo_outcome_advantage,
    compute_rloo_outcome_advantage,
    get_policy_loss_fn,
)
from verl.workers.config import ActorConfig, PolicyLossConfig

# The aggregation modes the recipes use (recipes/algo/*.yaml), with a constant normaliser where needed.
CONSTANT_SCALE = 64
MODES = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
POLICY_LOSSES = ["vanilla", "gspo"]  # vanilla: grpo, rloo, dapo, dr_grpo, reinforce_pp; gspo: gspo

GARBAGE = 7.5  # what padded positions hold: finite nonsense that must not leak into loss or gradient


def _actor_config(loss_mode: str, loss_agg_mode: str, loss_scale_factor=None) -> ActorConfig:
    config = ActorConfig(
        strategy="fsdp2",
        ppo_mini_batch_size=4,
        ppo_micro_batch_size_per_gpu=1,
        rollout_n=1,
        clip_ratio_low=0.2,
        clip_ratio_high=0.28,
        loss_agg_mode=loss_agg_mode,
        loss_scale_factor=loss_scale_factor,
        policy_loss=PolicyLossConfig(loss_mode=loss_mode),
    )
    # What verl's actor does before calling the policy loss (verl/workers/utils/losses.py, ppo_loss):
    # the configured constant reaches agg_loss only through global_batch_info.
    config.global_batch_info["loss_scale_factor"] = config.loss_scale_factor
    return config


# A batch of real sequences: per sequence a length, an advantage, and per token (new, old) log-probs.
@st.composite
def batches(draw, min_seqs=1, max_seqs=4, max_len=6):
    n = draw(st.integers(min_seqs, max_seqs))
    lengths = draw(st.lists(st.integers(1, max_len), min_size=n, max_size=n))
    advantages = draw(
        st.lists(st.floats(-2, 2, allow_nan=False).filter(lambda a: abs(a) > 1e-3), min_size=n, max_size=n)
    )
    total = sum(lengths)
    logp = draw(st.lists(st.floats(-3, -0.05), min_size=total, max_size=total))
    # old log-probs within a band around new ones so that some tokens clip and some do not
    drift = draw(st.lists(st.floats(-0.4, 0.4), min_size=total, max_size=total))
    return lengths, advantages, logp, drift


@st.composite
def layouts(draw, lengths):
    """How the same sequences sit in a padded tensor: extra width, side, and fully padded extra rows."""
    extra_width = draw(st.integers(0, 5))
    left = draw(st.booleans())
    extra_rows = draw(st.integers(0, 3))
    return extra_width, left, extra_rows


def _materialise(batch, extra_width, left, extra_rows):
    """Place the batch in padded tensors; return (logp_leaf, old, adv, mask) with logp_leaf the real tokens."""
    lengths, advantages, logp, drift = batch
    width = max(lengths) + extra_width
    rows = len(lengths) + extra_rows
    leaf = torch.tensor(logp, dtype=torch.float64, requires_grad=True)
    old_flat = leaf.detach() + torch.tensor(drift, dtype=torch.float64)
    logp_mat = torch.full((rows, width), -GARBAGE, dtype=torch.float64)
    old_mat = torch.full((rows, width), GARBAGE, dtype=torch.float64)
    adv_mat = torch.full((rows, width), GARBAGE, dtype=torch.float64)
    mask = torch.zeros((rows, width), dtype=torch.float64)
    index_rows, index_cols = [], []
    for i, length in enumerate(lengths):
        start = width - length if left else 0
        index_rows += [i] * length
        index_cols += list(range(start, start + length))
        adv_mat[i, start : start + length] = advantages[i]
    idx = (torch.tensor(index_rows), torch.tensor(index_cols))
    logp_mat = logp_mat.index_put(idx, leaf)  # differentiable scatter: gradients flow back to `leaf`
    old_mat[idx] = old_flat
    mask[idx] = 1.0
    return leaf, old_mat, logp_mat, adv_mat, mask


def _loss_and_grad(batch, layout, loss_mode, loss_agg_mode, loss_scale_factor=None):
    leaf, old, logp, adv, mask = _materialise(batch, *layout)
    config = _actor_config(loss_mode, loss_agg_mode, loss_scale_factor)
    loss, _metrics = get_policy_loss_fn(loss_mode)(
        old_log_prob=old,
        log_prob=logp,
        advantages=adv,
        response_mask=mask,
        loss_agg_mode=loss_agg_mode,
        config=config,
    )
    (grad,) = torch.autograd.grad(loss, leaf)
    return loss.detach(), grad


def _scale_for(mode):
    return CONSTANT_SCALE if mode == "seq-mean-token-sum-norm" else None


@pytest.mark.parametrize("loss_mode", POLICY_LOSSES)
@pytest.mark.parametrize("loss_agg_mode", MODES)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_loss_and_gradient_ignore_padding(loss_mode, loss_agg_mode, data):
    """For every mode the recipes use (seq-mean-token-sum-norm with a constant loss_scale_factor), the
    policy loss and its gradient w.r.t. every real token's log-prob are identical whether the same
    sequences are right- or left-padded, padded to any width, or accompanied by fully padded rows; and
    padded positions, whatever they hold, get no gradient (they are not even in the graph's leaf)."""
    batch = data.draw(batches())
    reference = _loss_and_grad(batch, (0, False, 0), loss_mode, loss_agg_mode, _scale_for(loss_agg_mode))
    layout = data.draw(layouts(batch[0]))
    other = _loss_and_grad(batch, layout, loss_mode, loss_agg_mode, _scale_for(loss_agg_mode))
    torch.testing.assert_close(other[0], reference[0], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(other[1], reference[1], rtol=1e-10, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(batch=batches(), extra_width=st.integers(1, 5))
# Every token clipped (ratio exp(0.4) > 1 + 0.28 with a positive advantage): zero gradient, which made
# `not allclose(0 * r, 0)` fail on 1 in 6 fresh seeds before the first token was kept in the clip band.
@example(batch=([1], [1.0], [-1.0], [-0.4]), extra_width=1)
def test_verl_default_sum_norm_scales_with_padded_width(batch, extra_width):
    """verl 0.9.1 finding: seq-mean-token-sum-norm with loss_scale_factor=None normalises by the padded
    width W, so the same tokens padded to W' give loss(W') = loss(W) * W / W' (not invariant). This is
    why recipes/algo/dr_grpo.yaml pins loss_scale_factor to a constant."""
    # The scaling is visible only in a non-zero gradient: the first token's old log-prob equals its new
    # one (ratio 1, inside any clip band), so with its non-zero advantage it always carries a gradient.
    lengths, advantages, logp, drift = batch
    batch = (lengths, advantages, logp, [0.0, *drift[1:]])
    width = max(batch[0])
    loss_tight, grad_tight = _loss_and_grad(batch, (0, False, 0), "vanilla", "seq-mean-token-sum-norm", None)
    loss_wide, grad_wide = _loss_and_grad(
        batch, (extra_width, False, 0), "vanilla", "seq-mean-token-sum-norm", None
    )
    ratio = width / (width + extra_width)
    torch.testing.assert_close(loss_wide, loss_tight * ratio, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(grad_wide, grad_tight * ratio, rtol=1e-10, atol=1e-12)
    assert not torch.allclose(grad_wide, grad_tight)


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
@pytest.mark.parametrize("loss_agg_mode", MODES)
@settings(max_examples=30, deadline=None)
@given(batch=batches(min_seqs=2, max_seqs=5), data=st.data())
def test_micro_batches_with_global_batch_info_sum_to_the_mini_batch(loss_agg_mode, batch, data):
    """Cutting a mini-batch into micro-batches, each padded only to its own longest sequence, and
    summing their losses (gradient accumulation, what verl's actor does with global_batch_info =
    {batch_num_tokens, global_batch_size} of the whole mini-batch) gives the mini-batch's loss and
    gradient: the normaliser is global, never a micro-batch's own token or row count."""
    lengths, advantages, logp, drift = batch
    n = len(lengths)
    cut = data.draw(st.integers(1, n - 1))
    scale = _scale_for(loss_agg_mode)
    full_loss, full_grad = _loss_and_grad(batch, (0, False, 0), "vanilla", loss_agg_mode, scale)

    offsets = np.cumsum([0] + lengths)
    parts = [(0, cut), (cut, n)]
    total_loss = torch.zeros((), dtype=torch.float64)
    grads = []
    for lo, hi in parts:
        sub = (
            lengths[lo:hi],
            advantages[lo:hi],
            logp[offsets[lo] : offsets[hi]],
            drift[offsets[lo] : offsets[hi]],
        )
        leaf, old, lp, adv, mask = _materialise(sub, 0, False, 0)
        config = _actor_config("vanilla", loss_agg_mode, scale)
        config.global_batch_info.update(
            dp_size=1, batch_num_tokens=int(sum(lengths)), global_batch_size=n, loss_scale_factor=scale
        )
        loss, _ = get_policy_loss_fn("vanilla")(
            old_log_prob=old,
            log_prob=lp,
            advantages=adv,
            response_mask=mask,
            loss_agg_mode=loss_agg_mode,
            config=config,
        )
        (g,) = torch.autograd.grad(loss, leaf)
        total_loss = total_loss + loss.detach()
        grads.append(g)
    torch.testing.assert_close(total_loss, full_loss, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(torch.cat(grads), full_grad, rtol=1e-10, atol=1e-12)


# ---- advantages: GRPO vs RLOO -------------------------------------------------------------------------


@st.composite
def grouped_rewards(draw):
    groups = draw(st.integers(1, 4))
    size = draw(st.integers(2, 6))
    rewards = draw(
        st.lists(st.sampled_from([0.0, 0.5, 1.0, -0.25]), min_size=groups * size, max_size=groups * size)
    )
    order = draw(st.permutations(range(groups * size)))  # groups interleaved, as after batch balancing
    index = np.array([f"p{k // size}" for k in range(groups * size)], dtype=object)[list(order)]
    return np.array(rewards)[list(order)], index, size


def _outcome(rewards, width=3):
    mask = torch.ones((len(rewards), width), dtype=torch.float64)
    token_rewards = torch.zeros_like(mask)
    token_rewards[:, -1] = torch.tensor(rewards, dtype=torch.float64)
    return token_rewards, mask


@settings(max_examples=60, deadline=None)
@given(grouped_rewards())
def test_rloo_is_leave_one_out_and_a_rescaled_unnormalised_grpo(sample):
    """For a group of G responses, RLOO's advantage is r_i - mean_{j != i} r_j (Kool et al. 2019), which
    equals G/(G-1) * (r_i - mean_j r_j), and GRPO without std normalisation (Dr. GRPO) is r_i - mean_j r_j:
    the two differ only by the constant G/(G-1), whatever order the groups arrive in."""
    rewards, index, size = sample
    token_rewards, mask = _outcome(rewards)
    rloo, _ = compute_rloo_outcome_advantage(token_rewards.clone(), mask, index)
    grpo, _ = compute_grpo_outcome_advantage(
        token_rewards.clone(), mask, index, norm_adv_by_std_in_grpo=False
    )
    rloo, grpo = rloo[:, 0].numpy(), grpo[:, 0].numpy()
    for i in range(len(rewards)):
        others = [rewards[j] for j in range(len(rewards)) if index[j] == index[i] and j != i]
        group = [rewards[j] for j in range(len(rewards)) if index[j] == index[i]]
        assert rloo[i] == pytest.approx(rewards[i] - np.mean(others), abs=1e-9)
        assert grpo[i] == pytest.approx(rewards[i] - np.mean(group), abs=1e-9)
        assert rloo[i] == pytest.approx(size / (size - 1) * grpo[i], abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(grouped_rewards())
def test_grpo_divides_by_the_groups_sample_std_and_zero_variance_groups_get_zero(sample):
    """GRPO (DeepSeekMath sec. 4.1.2): A_i = (r_i - mean) / (std + eps) with the group's sample std; a
    group whose responses all got the same reward gets advantage 0 for every response under both GRPO
    and RLOO: such a group carries no gradient, which is what DAPO's dynamic sampling filters."""
    rewards, index, _size = sample
    token_rewards, mask = _outcome(rewards)
    grpo, _ = compute_grpo_outcome_advantage(token_rewards.clone(), mask, index, norm_adv_by_std_in_grpo=True)
    rloo, _ = compute_rloo_outcome_advantage(token_rewards.clone(), mask, index)
    for i in range(len(rewards)):
        group = np.array([rewards[j] for j in range(len(rewards)) if index[j] == index[i]])
        expected = (rewards[i] - group.mean()) / (group.std(ddof=1) + 1e-6)
        assert grpo[i, 0].item() == pytest.approx(expected, rel=1e-6, abs=1e-9)
        if group.std() == 0:
            assert grpo[i, 0].item() == 0.0 and rloo[i, 0].item() == 0.0


def test_advantages_are_masked_to_the_response():
    """Outcome advantages are broadcast over real response tokens only; padded tokens get exactly 0."""
    token_rewards = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    index = np.array(["a", "a"], dtype=object)
    for adv, _ in (
        compute_grpo_outcome_advantage(token_rewards.clone(), mask, index),
        compute_rloo_outcome_advantage(token_rewards.clone(), mask, index),
    ):
        assert adv[0, 2].item() == 0.0
        assert adv[0, 0].item() == adv[0, 1].item() > 0
        assert torch.all(adv[1] < 0)


# ---- Dr. GRPO's length bias ---------------------------------------------------------------------------


def _per_token_grad(lengths, advantages, loss_agg_mode, scale=None):
    """On-policy (ratio 1, no clipping) gradient of the policy loss w.r.t. each real token's log-prob."""
    logp = [-1.0] * sum(lengths)
    batch = (lengths, advantages, logp, [0.0] * sum(lengths))
    _loss, grad = _loss_and_grad(batch, (0, False, 0), "vanilla", loss_agg_mode, scale)
    out, start = [], 0
    for length in lengths:
        out.append(grad[start : start + length])
        start += length
    return out


@given(short=st.integers(1, 8), extra=st.integers(1, 24), adv=st.floats(0.1, 2.0))
@settings(max_examples=40, deadline=None)
def test_grpo_aggregation_weights_long_responses_less_per_token(short, extra, adv):
    """GRPO's seq-mean-token-mean (1/|o_i| inside the mean) gives each token of a response of length L a
    gradient of magnitude A / (B * L): a longer correct response gets a smaller per-token push than a
    shorter one with the same advantage (and a longer wrong one a smaller per-token penalty), the length
    bias Dr. GRPO (arXiv:2503.20783 sec. 3.1) identifies."""
    long = short + extra
    for sign in (1.0, -1.0):
        g_short, g_long = _per_token_grad([short, long], [sign * adv, sign * adv], "seq-mean-token-mean")
        torch.testing.assert_close(g_short, torch.full_like(g_short, -sign * adv / (2 * short)))
        torch.testing.assert_close(g_long, torch.full_like(g_long, -sign * adv / (2 * long)))
        assert g_long.abs().max() < g_short.abs().min()


@given(short=st.integers(1, 8), extra=st.integers(1, 24), adv=st.floats(0.1, 2.0))
@settings(max_examples=40, deadline=None)
def test_dr_grpo_aggregation_gives_every_token_the_same_weight(short, extra, adv):
    """Dr. GRPO's seq-mean-token-sum-norm with a constant normaliser C gives every token a gradient of
    A / (B * C), independent of its response's length: the length bias is gone."""
    long = short + extra
    g_short, g_long = _per_token_grad([short, long], [adv, adv], "seq-mean-token-sum-norm", CONSTANT_SCALE)
    expected = -adv / (2 * CONSTANT_SCALE)
    torch.testing.assert_close(g_short, torch.full_like(g_short, expected))
    torch.testing.assert_close(g_long, torch.full_like(g_long, expected))


def test_agg_loss_excludes_fully_padded_rows_from_the_sequence_count():
    """A row with no real token is not a sequence: seq-mean modes divide by the number of rows that have
    at least one real token (verl's seq_mask), so appending such rows changes nothing."""
    loss_mat = torch.tensor([[1.0, 2.0], [3.0, 0.0], [9.0, 9.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    assert agg_loss(loss_mat, mask, "seq-mean-token-mean").item() == pytest.approx((1.5 + 3.0) / 2)
    assert agg_loss(loss_mat, mask, "seq-mean-token-sum").item() == pytest.approx((3.0 + 3.0) / 2)
    assert agg_loss(loss_mat, mask, "token-mean").item() == pytest.approx(6.0 / 3)
