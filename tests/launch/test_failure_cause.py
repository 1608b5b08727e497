"""A failed run's summary line names the root cause (issue 10, item 2): an error that killed a Ray actor
while it was created (the run's real problem) comes first, and the secondary error that reached the
driver afterwards (a caller of the dead actor failing differently) second. Real Ray, real actor."""

from __future__ import annotations

import shutil
import tempfile

import pytest

from rlvr_launch.runs.train import _root_cause, actor_failures


@pytest.mark.slow
def test_an_actor_creation_error_is_named_before_the_error_that_reached_the_driver():
    import ray

    if ray.is_initialized():
        pytest.skip("another test left Ray initialised in this process")
    temp_dir = tempfile.mkdtemp(prefix="rlvr-fc-", dir="/tmp")
    ray.init(num_cpus=1, include_dashboard=False, _temp_dir=temp_dir, log_to_driver=False)
    try:

        @ray.remote(num_cpus=0)
        class RewardWorker:
            def __init__(self):
                raise ValueError("overlong buffer 4096 must be below max_resp_len=4")

            def score(self):
                return 1.0

        worker = RewardWorker.remote()
        try:
            ray.get(worker.score.remote())
        except ray.exceptions.RayActorError:
            pass
        try:  # what verl's trainer then raises, far from the cause
            raise ValueError("Received an empty list as keys.")
        except ValueError as secondary:
            summary = _root_cause(secondary, temp_dir)
    finally:
        ray.shutdown()
    try:
        assert actor_failures(temp_dir) == [
            "ValueError: overlong buffer 4096 must be below max_resp_len=4 (in RewardWorker.__init__, a Ray actor)"
        ]
        first, then = summary.splitlines()
        assert first == actor_failures(temp_dir)[0]
        assert then.strip() == "then: ValueError: Received an empty list as keys."
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_without_an_actor_failure_the_driver_error_is_the_cause(tmp_path):
    assert actor_failures(None) == [] and actor_failures(tmp_path) == []
    assert _root_cause(KeyError("x"), str(tmp_path)) == "KeyError: 'x'"
