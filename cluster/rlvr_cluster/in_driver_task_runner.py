"""verl's TaskRunner run in the `rlvr train` process itself, through verl's `run_ppo` hook (CPU debug runs).

    rlvr.task_runner: driver        (recipes/platform/cpu.yaml; `actor` is verl's own Ray actor)

verl's entry point `run_ppo(config, task_runner_class)` starts `task_runner_class` as a Ray actor and
waits for its `run(config)`: the TaskRunner (the trainer's controller: dataloader, step loop, advantages,
metrics, the in-process agent loop) then lives in its own process, while the driver that called
`run_ppo` has already imported verl, torch and transformers to do so and idles. On a laptop that is two
~0.5-0.6 GiB processes where one does the work. `InDriverTaskRunner` is what `run_ppo` gets as its
`task_runner_class` (the hook verl documents "for recipe to change TaskRunner"): it answers
`.remote()` and `runner.run.remote(config)` by running verl's own TaskRunner class body in this process
and handing `ray.get` a finished object reference. Everything verl's TaskRunner does is unchanged; only
its process is, and the worker group class it hands the trainer: verl's, with the actor phases' payload
slimmed (rlvr_cluster/slim_payload.py). How the stand-in fits `run_ppo` and where a Ray actor class keeps
its body are recorded in rlvr_cluster/verl_private.py (item 12) and pinned by
tests/cluster/test_verl_private_details.py.
"""

from __future__ import annotations

from typing import Any

from rlvr_cluster import verl_private


class _InPlace:
    def __init__(self, method):
        self._method = method

    def remote(self, *args: Any, **kwargs: Any):
        """Run the method here and now; return what `ray.get` reads back (an object reference)."""
        import ray

        return ray.put(self._method(*args, **kwargs))


class _Runner:
    def __init__(self, runner):
        self.runner = runner
        self.run = _InPlace(runner.run)


def _with_slim_payload(body: type) -> type:
    """verl's TaskRunner body, handing its trainer the worker group class whose actor phases leave the
    trainer-only per-sample columns behind (rlvr_cluster/slim_payload.py); verl's TaskRunner picks that
    class in `add_actor_rollout_worker`, which returns it beside the worker class. The v1 trainer's
    TaskRunner has no such method (its batches live in TransferQueue) and runs unchanged."""
    if not callable(getattr(body, "add_actor_rollout_worker", None)):
        return body

    class TaskRunner(body):
        def add_actor_rollout_worker(self, config):
            from rlvr_cluster.slim_payload import slim_payload_worker_group

            worker_class, _group_class = super().add_actor_rollout_worker(config)
            return worker_class, slim_payload_worker_group(config)

    TaskRunner.__qualname__ = f"{body.__qualname__}+slim_payload"
    return TaskRunner


class InDriverTaskRunner:
    """Stands in for verl's `@ray.remote class TaskRunner` in `run_ppo(config, task_runner_class=...)`."""

    def __init__(self, actor_class):
        self.body = _with_slim_payload(verl_private.task_runner_body(actor_class))

    def options(self, **_ray_options: Any) -> InDriverTaskRunner:
        return self  # no placement: it runs here

    def remote(self) -> _Runner:
        return _Runner(self.body())
