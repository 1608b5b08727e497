"""The actor phases' payload without the per-sample columns only the trainer reads (CPU debug runs).

    rlvr.task_runner: driver        (recipes/platform/cpu.yaml; the worker group class comes with it)

verl's legacy trainer sends its whole batch to the FSDP worker for each actor phase (reference
log-probs, old log-probs, the update): `DataProto.to_tensordict()` wraps every per-sample non-tensor
column (the dataset's `data_source`, `reward_model`, `extra_info`, `uid`, the reward's extra
columns such as `acc` and `rlvr_status`, the agent loop's `__num_turns__`) in one `NonTensorData` per
sample, the worker group's dispatch chunks them, Ray rebuilds them object by object in the worker and
the engine moves them to the device one by one. The worker's code never reads them (the columns it does
read are in KEEP_PER_SAMPLE_COLUMNS; tests/cluster/test_slim_payload.py scans verl's worker-side modules
for the rest). On the CPU demo that was ~0.7 s of a ~3.4 s step for ~10 columns x 256 samples
(README, "The demo vs TRL").

`slim_payload_worker_group()` is the `ray_worker_group_cls` verl's TaskRunner hands its trainer (the
extension point verl's own recipes use to pick a worker group class): verl's `RayWorkerGroup` whose
actor-phase methods send the batch without those columns. The trainer's own batch keeps every column
(advantages, metrics, rollout dumps and the reward's counted failures read them there).
"""

from __future__ import annotations

import functools
from typing import Any

# Per-sample non-tensor columns verl's FSDP engine reads in the worker: images and other model inputs
# of multimodal rows; `uid` only with the prefix grouper (verl/trainer/ppo/prefix_grouper_utils.py).
KEEP_PER_SAMPLE_COLUMNS = frozenset({"multi_modal_inputs"})
PREFIX_GROUPER_COLUMNS = frozenset({"uid"})

# The worker-group methods of the actor phases that take the batch as their first argument (verl's
# trainer calls compute_log_prob for old log-probs, and for reference log-probs when the reference is in
# the actor; compute_ref_log_prob otherwise).
SLIMMED_METHODS = ("compute_log_prob", "compute_ref_log_prob", "update_actor")


def per_sample_columns(batch) -> list[str]:
    """The batch's per-sample non-tensor columns (one object per sample, a NonTensorStack)."""
    from tensordict.tensorclass import NonTensorStack

    return [key for key in batch.keys() if isinstance(batch.get(key), NonTensorStack)]


def slim(batch, keep: frozenset[str]):
    """A shallow copy of a TensorDict batch without its per-sample non-tensor columns outside `keep`;
    anything else (tensors, per-batch settings) passes unchanged."""
    from tensordict import TensorDictBase

    if not isinstance(batch, TensorDictBase):
        return batch
    drop = [key for key in per_sample_columns(batch) if key not in keep]
    return batch.exclude(*drop) if drop else batch


def _slimmed(method, keep: frozenset[str]):
    if getattr(method, "_rlvr_slim_payload", False):
        return method

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any):
        if "data" in kwargs:
            kwargs["data"] = slim(kwargs["data"], keep)
        elif args:
            args = (slim(args[0], keep), *args[1:])
        return method(*args, **kwargs)

    call._rlvr_slim_payload = True
    return call


def _slim_methods(group, keep: frozenset[str]) -> None:
    for name in SLIMMED_METHODS:
        method = getattr(group, name, None)
        if callable(method):
            setattr(group, name, _slimmed(method, keep))


def slim_payload_worker_group(config=None) -> type:
    """verl's RayWorkerGroup with slimmed actor phases; `config` (verl's) adds the columns its actor
    settings make the worker read."""
    from omegaconf import OmegaConf
    from verl.single_controller.ray import RayWorkerGroup

    keep = KEEP_PER_SAMPLE_COLUMNS
    if config is not None and OmegaConf.select(
        config, "actor_rollout_ref.actor.use_prefix_grouper", default=False
    ):
        keep = keep | PREFIX_GROUPER_COLUMNS

    class SlimPayloadWorkerGroup(RayWorkerGroup):
        keep_columns = keep

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            _slim_methods(self, self.keep_columns)

        def spawn(self, prefix_set):
            # verl rebinds each role's prefixed methods (actor_rollout_ref_update_actor -> update_actor)
            # after building the spawned groups, so they are slimmed after that.
            groups = super().spawn(prefix_set)
            for group in groups.values():
                _slim_methods(group, self.keep_columns)
            return groups

    return SlimPayloadWorkerGroup
