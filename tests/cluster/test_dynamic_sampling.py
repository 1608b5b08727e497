"""rlvr's bounded DAPO dynamic sampling (rlvr_cluster/dynamic_sampling.py) against verl 0.9.1's sampler.

The budget accounting is pure logic; the override is exercised on verl's real ReplayBuffer with its
classification cache pre-filled (the state verl keeps between polls), so no TransferQueue server is
needed. The private-detail check fails with a message naming the changed assumption if verl moves.
"""

from collections import Counter

import pytest

# No importorskip: TransferQueue is in the `train` extra (verl's v1 trainer); without it these tests fail.
import transfer_queue  # noqa: F401

from rlvr_cluster import dynamic_sampling as ds


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_verl_sampler_still_has_the_overridden_shape():
    ds.check_verl_contract()


def test_verl_sampler_keeps_its_classification_cache_per_partition():
    sampler = _sampler([])
    cache = sampler._dapo_classification_cache
    assert isinstance(cache, dict) and cache["train"] == {}, (
        "verl's ReplayBuffer._dapo_classification_cache changed shape; port rlvr_cluster.dynamic_sampling"
    )


def test_budget_counts_refills_after_the_first_batch():
    budget = ds.RefillBudget(max_num_gen_batches=3, train_batch_size=4)
    assert budget.limit == 8  # two extra batches of 4 prompts; the trainer's own batch is not a refill
    budget.record_refill(7)
    assert not budget.exhausted
    budget.record_refill(1)
    assert budget.exhausted
    budget.reset()
    assert not budget.exhausted and budget.refill_prompts == 0


def test_nonpositive_budget_means_unbounded_like_verl():
    budget = ds.RefillBudget(max_num_gen_batches=0, train_batch_size=4)
    budget.record_refill(10**6)
    assert budget.limit is None and not budget.exhausted


def _sampler(refills: list, max_num_gen_batches: int = 2):
    cls = ds.DynamicSamplingReplayBuffer
    return cls(
        trainer_mode="sync",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={
            "filter_groups_metric": "reward",
            "max_num_gen_batches": max_num_gen_batches,
            "max_inflight_gen_batches": 1,
            "train_batch_size": 2,
        },
        refill_fn=refills.append,
    )


def _finish_groups(sampler, rewards_by_uid: dict):
    # The state verl's sampler keeps after classifying finished groups: uid -> shared reward or None.
    sampler.finished_keys["train"] = set(rewards_by_uid)
    sampler._dapo_classification_cache["train"] = dict(rewards_by_uid)


def test_zero_variance_groups_are_evicted_while_the_budget_lasts():
    refills: list = []
    sampler = _sampler(refills)
    sampler.refill_fn(1)  # goes through the counting wrapper to the trainer's refill
    assert refills == [1] and sampler.refill_budget.refill_prompts == 1
    _finish_groups(sampler, {"a": 1.0, "b": None, "c": 0.0})
    filtered, counts = sampler._dapo_filtered_keys("train")
    assert filtered == {"a", "c"}
    assert counts == Counter({1.0: 1, 0.0: 1})
    assert sampler.refill_budget.metrics()[ds.ZERO_VARIANCE_SHARE] == pytest.approx(2 / 3)


def test_after_the_budget_zero_variance_groups_are_admitted_and_counted():
    refills: list = []
    sampler = _sampler(refills, max_num_gen_batches=2)  # one extra batch = 2 refill prompts
    sampler.refill_fn(2)
    assert sampler.refill_budget.exhausted
    _finish_groups(sampler, {"a": 1.0, "b": None, "c": 0.0})
    filtered, counts = sampler._dapo_filtered_keys("train")
    assert filtered == set() and counts == Counter()
    assert sampler.refill_budget.batch_unfilled
    metrics = sampler.refill_budget.metrics()
    assert metrics[ds.BUDGET_EXHAUSTED] == 1.0
    assert metrics[ds.ADMITTED_ZERO_VARIANCE] == 2.0
    assert metrics[ds.REFILL_PROMPTS] == 2.0


def test_a_spent_budget_without_zero_variance_groups_is_not_reported_as_unfilled():
    sampler = _sampler([], max_num_gen_batches=1)  # no refills allowed at all
    assert sampler.refill_budget.exhausted
    _finish_groups(sampler, {"a": None, "b": None})
    assert sampler._dapo_filtered_keys("train") == (set(), Counter())
    assert sampler.refill_budget.metrics()[ds.BUDGET_EXHAUSTED] == 0.0


def test_validation_is_never_filtered():
    sampler = _sampler([])
    sampler.refill_fn(5)
    _finish_groups(sampler, {"a": 1.0})
    sampler.finished_keys["val"] = {"a"}
    assert sampler._dapo_filtered_keys("val") == (set(), Counter())


def test_async_modes_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="trainer_mode=sync"):
        ds.DynamicSamplingReplayBuffer(
            trainer_mode="colocate_async",
            trainer_config={},
            max_off_policy_threshold=None,
            max_off_policy_strategy="drop",
            sampler_kwargs={},
            refill_fn=print,
        )


def test_missing_filter_settings_name_the_recipe():
    with pytest.raises(ValueError, match="sampler_kwargs lacks"):
        ds.DynamicSamplingReplayBuffer(
            trainer_mode="sync",
            trainer_config={},
            max_off_policy_threshold=None,
            max_off_policy_strategy="drop",
            sampler_kwargs={"max_num_gen_batches": 3},
            refill_fn=print,
        )
