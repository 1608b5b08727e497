"""verl's agent-loop manager with its agent-loop workers inside the trainer's own process (CPU debug runs).

    actor_rollout_ref.rollout.agent.agent_loop_manager_class: rlvr_cluster.in_process_agent_loop.InProcessAgentLoopManager

verl's `AgentLoopManager` starts `rollout.agent.num_workers` `AgentLoopWorker` Ray actors and ships each
step's prompts to them and the generated batch back through Ray. On a GPU cluster those workers spread
the per-sample chat templating, tokenising and reward streaming over nodes. On a laptop with one worker
it is one more process that imports verl, torch and transformers (~0.5 GiB resident) and two Ray
transfers of a batch whose ~20 per-sample non-tensor columns are pickled object by object.

`InProcessAgentLoopManager` is verl's own manager and verl's own `AgentLoopWorker` (same code: the agent
loops, the `hf` or vLLM servers behind the load balancer, the reward-loop workers streaming scores, the
same `_postprocess` output); only where the worker lives changes: its methods run on one event loop in
a daemon thread of the trainer's process (verl's TaskRunner), which idles while the batch is generated.
The batch goes to the worker and back by reference. The v1 trainer (`trainer.use_v1`, DAPO's dynamic
sampling) keeps verl's TransferQueue manager, to which this class hands over unchanged.

How it plugs in (recorded in rlvr_cluster/verl_private.py, item 8, and pinned by a test): verl's manager
builds its workers as `self.agent_loop_workers_class.options(...).remote(config, llm_client,
teacher_client, reward_loop_worker_handles)` (the hook verl's own TransferQueue subclass uses) and awaits
`worker.generate_sequences.remote(chunk)` for each chunk; `_LocalWorkerClass` answers both calls.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopManager, AgentLoopWorker
from verl.utils.ray_utils import auto_await

__all__ = ["InProcessAgentLoopManager"]


class _EventLoopThread:
    """One asyncio loop that lives as long as the manager, in a daemon thread: verl's worker keeps
    loop-bound state (its tokenizer executor calls, Ray awaits) across steps, while the trainer's
    `auto_await` runs each manager call on a fresh, short-lived loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="rlvr-agent-loop", daemon=True)
        self.thread.start()

    def submit(self, coro) -> Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn, *args, **kwargs) -> Any:
        """Run a plain function on the loop's thread and wait for its result."""

        async def run():
            return fn(*args, **kwargs)

        return self.submit(run()).result()


class _LocalMethod:
    def __init__(self, loop: _EventLoopThread, method):
        self._loop, self._method = loop, method

    def remote(self, *args, **kwargs):
        """Like an actor method's `.remote`: something the caller awaits (in its own running loop)."""
        return asyncio.wrap_future(self._loop.submit(self._method(*args, **kwargs)))


class _LocalWorker:
    """An `AgentLoopWorker` held in this process, called like its Ray actor handle."""

    def __init__(self, loop: _EventLoopThread, worker: AgentLoopWorker):
        self.worker = worker
        self.generate_sequences = _LocalMethod(loop, worker.generate_sequences)


class _LocalWorkerClass:
    """Stands in for `ray.remote(AgentLoopWorker)`: `.options(...)` is ignored (no placement in-process),
    `.remote(...)` builds the worker on the manager's loop thread."""

    def __init__(self, loop: _EventLoopThread, worker_class: type = AgentLoopWorker):
        self._loop, self._worker_class = loop, worker_class

    def options(self, **_ray_options) -> _LocalWorkerClass:
        return self

    def remote(self, *args, **kwargs) -> _LocalWorker:
        return _LocalWorker(self._loop, self._loop.call(self._worker_class, *args, **kwargs))


def _uses_v1_trainer(config) -> bool:
    trainer = config.get("trainer", {}) if hasattr(config, "get") else {}
    return bool(trainer.get("use_v1", False))


class InProcessAgentLoopManager(AgentLoopManager):
    """verl's `AgentLoopManager`, its workers running in this process (see the module doc)."""

    def __init__(self, config, *args, **kwargs):
        self._event_loop = _EventLoopThread()
        self.agent_loop_workers_class = _LocalWorkerClass(self._event_loop)
        super().__init__(config, *args, **kwargs)

    @classmethod
    @auto_await
    async def create(cls, *args, **kwargs):
        config = kwargs["config"] if "config" in kwargs else args[0]
        if _uses_v1_trainer(config):
            from verl.trainer.ppo.v1 import AgentLoopManagerTQ

            return await AgentLoopManagerTQ.create(*args, **kwargs)
        return await super().create(*args, **kwargs)
