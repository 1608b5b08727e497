"""DAPO dynamic sampling with a budget: a batch that cannot be filled degrades, it never hangs or aborts.

DAPO (arXiv:2503.14476 sec. 3.2) drops prompt groups whose responses all got the same reward (all
right or all wrong: zero advantage, no gradient) and samples more prompts until the batch is full.
verl 0.9.1 implements the filter in the v1 trainer's replay buffer
(verl/trainer/ppo/v1/replay_buffer.py, `ReplayBuffer.sample`): every evicted group earns two refill
prompts, and the loop runs until enough informative groups exist. It ignores
`algorithm.filter_groups.max_num_gen_batches` (trainer_base.py `_resolve_filter_groups_metric` logs
that it is ignored), and its dataloader wraps around, so on a task the policy always (or never)
solves the loop generates forever: no error, no step, no metric.

`DynamicSamplingReplayBuffer` is the same sampler with the DAPO budget restored. Within one step it
counts the prompts dispatched as refills; once they reach (max_num_gen_batches - 1) x train_batch_size
(the first batch is the trainer's own), it stops evicting: the zero-variance groups that finish from
then on are admitted (their GRPO advantage is 0, so they add no gradient, only dilute the token
normaliser), the step proceeds, a warning is logged and the step's metrics say so:

    training/filter_groups/budget_exhausted               1 when the budget ran out with zero-variance
                                                          groups still in the batch, else 0
    training/filter_groups/admitted_zero_variance_groups   zero-variance groups let through
    training/filter_groups/refill_prompts                  prompts generated as refills this step
    training/filter_groups/zero_variance_share             share of the step's finished groups whose
                                                          responses all got the same metric value

(verl's own training/filter_groups/evicted_samples counts the groups filtered out.)

Selected by recipes/algo/dapo.yaml through verl's hook for custom samplers,
`trainer.v1.sampler.custom_sampler.{path,name}`; a custom sampler receives no filter settings from
verl, so the recipe passes them in `trainer.v1.sampler.sampler_kwargs`.

Private details: the override of `ReplayBuffer._dapo_filtered_keys` (signature
`(partition_id) -> (set[str], Counter)`) and a read of its per-partition classification cache
`_dapo_classification_cache` (uid -> shared value or None) are where rlvr depends on the sampler's internals;
tests/cluster/test_dynamic_sampling.py fails clearly if verl changes it. Only the sync trainer mode
is covered (the async modes refill exactly what they evict and are bounded by their warm-up window).
"""

from __future__ import annotations

import inspect
import logging
from collections import Counter
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

METRIC_PREFIX = "training/filter_groups"
BUDGET_EXHAUSTED = f"{METRIC_PREFIX}/budget_exhausted"
ADMITTED_ZERO_VARIANCE = f"{METRIC_PREFIX}/admitted_zero_variance_groups"
REFILL_PROMPTS = f"{METRIC_PREFIX}/refill_prompts"
ZERO_VARIANCE_SHARE = f"{METRIC_PREFIX}/zero_variance_share"


@dataclass
class RefillBudget:
    """Per-step accounting of DAPO refills against the budget (pure logic, no verl)."""

    max_num_gen_batches: int = field(
        metadata={
            "help": "generation batches allowed per step, the trainer's first included; <= 0: unbounded"
        }
    )
    train_batch_size: int = field(metadata={"help": "prompts per training batch"})
    refill_prompts: int = field(default=0, metadata={"help": "prompts dispatched as refills this step"})
    admitted_uids: set = field(default_factory=set, metadata={"help": "zero-variance groups let through"})
    seen_uids: set = field(default_factory=set, metadata={"help": "finished groups classified this step"})
    zero_variance_uids: set = field(
        default_factory=set, metadata={"help": "of those, the zero-variance ones"}
    )

    def __post_init__(self) -> None:
        if self.train_batch_size <= 0:
            raise ValueError(f"train_batch_size must be positive, got {self.train_batch_size}")

    @property
    def limit(self) -> int | None:
        """Refill prompts allowed per step (None: unbounded, verl's meaning of max_num_gen_batches <= 0)."""
        if self.max_num_gen_batches <= 0:
            return None
        return (self.max_num_gen_batches - 1) * self.train_batch_size

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.refill_prompts >= self.limit

    def reset(self) -> None:
        self.refill_prompts = 0
        self.admitted_uids = set()
        self.seen_uids = set()
        self.zero_variance_uids = set()

    def classify(self, seen: set, zero_variance: set) -> None:
        self.seen_uids |= set(seen)
        self.zero_variance_uids |= set(zero_variance)

    def record_refill(self, num_prompts: int) -> None:
        self.refill_prompts += int(num_prompts)

    def admit(self, uids: set) -> None:
        self.admitted_uids |= set(uids)

    @property
    def batch_unfilled(self) -> bool:
        """The budget ran out and zero-variance groups had to be let into the batch."""
        return self.exhausted and bool(self.admitted_uids)

    def metrics(self) -> dict[str, float]:
        return {
            BUDGET_EXHAUSTED: float(self.batch_unfilled),
            ADMITTED_ZERO_VARIANCE: float(len(self.admitted_uids)),
            REFILL_PROMPTS: float(self.refill_prompts),
            ZERO_VARIANCE_SHARE: len(self.zero_variance_uids) / len(self.seen_uids)
            if self.seen_uids
            else 0.0,
        }


def _replay_buffer_base():
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    return ReplayBuffer


def check_verl_contract() -> None:
    """Raise if verl's sync ReplayBuffer no longer has the shape this module overrides."""
    base = _replay_buffer_base()
    method = getattr(base, "_dapo_filtered_keys", None)
    if method is None:
        raise RuntimeError(
            "verl.trainer.ppo.v1.replay_buffer.ReplayBuffer._dapo_filtered_keys is gone: "
            "rlvr_cluster.dynamic_sampling must be ported to this verl version (rlvr pins verl==0.9.1)"
        )
    params = list(inspect.signature(method).parameters)
    if params != ["self", "partition_id"]:
        raise RuntimeError(
            f"ReplayBuffer._dapo_filtered_keys now takes {params}; rlvr expects (self, partition_id)"
        )
    init_params = inspect.signature(base.__init__).parameters
    for name in (
        "refill_fn",
        "filter_groups_metric",
        "train_batch_size",
        "gen_batch_size",
        "max_inflight_gen_batches",
    ):
        if name not in init_params:
            raise RuntimeError(
                f"ReplayBuffer.__init__ lost its {name!r} argument; port rlvr_cluster.dynamic_sampling"
            )


def _build_class():
    base = _replay_buffer_base()

    class DynamicSamplingReplayBuffer(base):
        """verl's sync ReplayBuffer with DAPO filtering bounded by max_num_gen_batches (see module doc)."""

        def __init__(
            self,
            trainer_mode,
            trainer_config,
            max_off_policy_threshold,
            max_off_policy_strategy,
            sampler_kwargs,
            refill_fn=None,
            **kwargs,
        ):
            if trainer_mode != "sync":
                raise ValueError(
                    f"rlvr's DynamicSamplingReplayBuffer supports trainer.v1.trainer_mode=sync, got {trainer_mode!r}; "
                    "unset trainer.v1.sampler.custom_sampler to use verl's async sampler"
                )
            settings = dict(sampler_kwargs or {})
            missing = [
                k for k in ("filter_groups_metric", "train_batch_size") if settings.get(k) in (None, "")
            ]
            if missing:
                raise ValueError(
                    f"trainer.v1.sampler.sampler_kwargs lacks {missing}: recipes/algo/dapo.yaml passes them "
                    "from algorithm.filter_groups and data.train_batch_size"
                )
            train_batch_size = int(settings["train_batch_size"])
            self.refill_budget = RefillBudget(
                max_num_gen_batches=int(settings.get("max_num_gen_batches", 0) or 0),
                train_batch_size=train_batch_size,
            )
            if self.refill_budget.limit is None:
                logger.warning(
                    "algorithm.filter_groups.max_num_gen_batches <= 0: dynamic sampling is unbounded and a batch "
                    "that cannot be filled will keep generating; set it > 0 (DAPO's recipe uses 10)"
                )
            original_refill = refill_fn

            def counted_refill(num_prompts: int):
                self.refill_budget.record_refill(num_prompts)
                return original_refill(num_prompts)

            super().__init__(
                trainer_mode=trainer_mode,
                trainer_config=trainer_config,
                max_off_policy_threshold=max_off_policy_threshold,
                max_off_policy_strategy=max_off_policy_strategy,
                sampler_kwargs=sampler_kwargs,
                refill_fn=counted_refill if original_refill is not None else None,
                filter_groups_metric=str(settings["filter_groups_metric"]),
                train_batch_size=train_batch_size,
                # verl forces data.gen_batch_size=1 whenever filter_groups.enable (trainer_base._init_dataloader)
                gen_batch_size=1,
                max_inflight_gen_batches=int(settings.get("max_inflight_gen_batches", 1) or 1),
                **kwargs,
            )

        def _dapo_filtered_keys(self, partition_id):
            filtered, counts = super()._dapo_filtered_keys(partition_id)
            if partition_id != "val":
                # verl's cache now holds every finished group of this poll: uid -> shared value or None
                self.refill_budget.classify(set(self._dapo_classification_cache[partition_id]), filtered)
            if partition_id == "val" or not self.refill_budget.exhausted:
                return filtered, counts
            # Budget spent: stop evicting; everything classified zero-variance from now on is admitted.
            self.refill_budget.admit(filtered)
            return set(), Counter()

        def sample(self, global_steps, partition_id, batch_size):
            if partition_id == "val":
                return super().sample(
                    global_steps=global_steps, partition_id=partition_id, batch_size=batch_size
                )
            self.refill_budget.reset()
            batch, metrics = super().sample(
                global_steps=global_steps, partition_id=partition_id, batch_size=batch_size
            )
            metrics = dict(metrics)
            metrics.update(self.refill_budget.metrics())
            if self.refill_budget.batch_unfilled:
                logger.warning(
                    "dynamic sampling (DAPO) could not fill step %s's batch with informative groups within "
                    "max_num_gen_batches=%s (%s refill prompts): admitted %s zero-variance groups. The task may be "
                    "too easy or too hard for the policy; see `rlvr diagnose`.",
                    global_steps,
                    self.refill_budget.max_num_gen_batches,
                    self.refill_budget.refill_prompts,
                    len(self.refill_budget.admitted_uids),
                )
            return batch, metrics

    return DynamicSamplingReplayBuffer


def __getattr__(name: str):
    # verl's loader does getattr(module, "DynamicSamplingReplayBuffer"); build the subclass lazily so that
    # importing this module never imports verl (or TransferQueue) by itself.
    if name == "DynamicSamplingReplayBuffer":
        cls = _build_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
