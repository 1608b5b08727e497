"""A verl `Worker` whose actor-phase methods answer with the keys of the batch they received (for
tests/cluster/test_slim_payload.py: what crosses from the trainer to the worker through verl's real
RayWorkerGroup, colocation and spawn). Ray workers import this module by its file name (the test puts
this folder on PYTHONPATH)."""

from __future__ import annotations

from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register


class PayloadRecorder(Worker):
    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def compute_log_prob(self, data):
        return sorted(data.keys())

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def compute_ref_log_prob(self, data):
        return sorted(data.keys())

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def update_actor(self, data):
        return sorted(data.keys())

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def save_checkpoint(self, data):
        # not an actor phase: passes unchanged
        return sorted(data.keys())
