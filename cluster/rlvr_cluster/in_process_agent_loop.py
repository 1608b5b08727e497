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

Three cuts on top, each measured on the CPU demo (README, "The demo vs TRL"), each checked against verl's
own worker on the same batch (tests/cluster/test_in_process_agent_loop.py):
- the worker (`ReusingAgentLoopWorker`) builds verl's stateless single-turn loop once, not per sample
  (verl_private.py, item 9);
- with `reward.num_workers: 0` each sample is scored by verl's `RewardLoopWorker` held here, a coroutine
  call instead of a Ray round trip, and no reward actor process;
- the generated batch loses the columns verl's legacy trainer never reads (UNREAD_AGENT_LOOP_COLUMNS,
  item 10), which verl would pack into every actor phase.

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

import hydra
from verl.experimental.agent_loop import agent_loop as verl_agent_loop
from verl.experimental.agent_loop.agent_loop import AgentLoopManager, AgentLoopWorker
from verl.utils.ray_utils import auto_await
from verl.utils.rollout_trace import rollout_trace_attr

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
        """Like an actor method's `.remote`: something the caller awaits (in its own running loop). A call
        from the manager's loop thread itself (the worker scoring a sample) is the coroutine, run in place."""
        if threading.current_thread() is self._loop.thread:
            return self._method(*args, **kwargs)
        return asyncio.wrap_future(self._loop.submit(self._method(*args, **kwargs)))


class _LocalWorker:
    """An `AgentLoopWorker` held in this process, called like its Ray actor handle."""

    def __init__(self, loop: _EventLoopThread, worker: AgentLoopWorker):
        self.worker = worker
        self.generate_sequences = _LocalMethod(loop, worker.generate_sequences)


# Agent loops whose instances keep no per-sample state (everything a run needs is in its arguments and
# locals), so one instance per worker serves every sample. verl builds a new one per sample.
REUSABLE_AGENT_LOOPS = frozenset({"verl.experimental.agent_loop.single_turn_agent_loop.SingleTurnAgentLoop"})


# Per-sample columns verl's AgentLoopWorker adds to every generated batch that verl's legacy trainer
# (RayPPOTrainer) never reads after generation (verl_private.py, detail 10, pinned by a test): agent-loop
# bookkeeping (empty for single-turn loops), the weight-version stamps, the chat messages and a dict copy
# of the reward columns (which stay, as columns). Each would be converted into 256 tensordict objects and
# pickled into the old-log-prob, reference and update phases of every step.
UNREAD_AGENT_LOOP_COLUMNS = frozenset(
    {
        "turn_scores",
        "tool_rewards",
        "extras",
        "min_global_steps",
        "max_global_steps",
        "global_steps",
        "raw_prompt",
        "reward_extra_info",
    }
)


class ReusingAgentLoopWorker(AgentLoopWorker):
    """verl's `AgentLoopWorker`, building each stateless agent loop (REUSABLE_AGENT_LOOPS) once instead of
    once per sample (`hydra.utils.instantiate` with the worker's tokenizer and config: ~17% of the trainer
    process's samples in a demo step). Any other agent loop runs exactly as in verl. The body follows
    verl's `_run_agent_loop` (verl_private.py, detail 9, pinned by a test)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._reused_loops: dict[str, Any] = {}

    def _reusable_loop(self, agent_name: str):
        loop = self._reused_loops.get(agent_name)
        if loop is None:
            loop = self._reused_loops[agent_name] = hydra.utils.instantiate(
                config=verl_agent_loop._agent_loop_registry[agent_name],
                trainer_config=verl_agent_loop.DictConfigWrap(config=self.config),
                server_manager=self.llm_client,
                tokenizer=self.tokenizer,
                processor=self.processor,
                hf_model_type=self.hf_model_type,
                dataset_cls=self.dataset_cls,
                data_config=verl_agent_loop.DictConfigWrap(self.config.data),
                tools=verl_agent_loop.ToolListWrap(self.tools),
            )
        return loop

    async def _run_agent_loop(
        self, sampling_params, trajectory, *, agent_name: str, trace: bool = True, **kwargs
    ):
        entry = verl_agent_loop._agent_loop_registry.get(agent_name)
        if entry is None or entry.get("_target_") not in REUSABLE_AGENT_LOOPS:
            return await super()._run_agent_loop(
                sampling_params, trajectory, agent_name=agent_name, trace=trace, **kwargs
            )
        with rollout_trace_attr(
            step=trajectory["step"],
            sample_index=trajectory["sample_index"],
            rollout_n=trajectory["rollout_n"],
            validate=trajectory["validate"],
            name="agent_loop",
            trace=trace,
        ):
            output = await self._reusable_loop(agent_name).run(sampling_params, **kwargs)
            return await self._agent_loop_postprocess(output, trajectory["validate"], **kwargs)


class _LocalRewardWorker:
    """verl's `RewardLoopWorker` held in this process, called like its Ray actor handle (`compute_score`)."""

    def __init__(self, loop: _EventLoopThread, worker):
        self.worker = worker
        self.compute_score = _LocalMethod(loop, worker.compute_score)


class _LocalWorkerClass:
    """Stands in for `ray.remote(AgentLoopWorker)`: `.options(...)` is ignored (no placement in-process),
    `.remote(...)` builds the worker on the manager's loop thread."""

    def __init__(self, loop: _EventLoopThread, worker_class: type = ReusingAgentLoopWorker):
        self._loop, self._worker_class = loop, worker_class

    def options(self, **_ray_options) -> _LocalWorkerClass:
        return self

    def remote(self, *args, **kwargs) -> _LocalWorker:
        return _LocalWorker(self._loop, self._loop.call(self._worker_class, *args, **kwargs))


def _uses_v1_trainer(config) -> bool:
    trainer = config.get("trainer", {}) if hasattr(config, "get") else {}
    return bool(trainer.get("use_v1", False))


def _reward_handles_arg(args: tuple, kwargs: dict) -> tuple[tuple, dict, Any]:
    """(args, kwargs, reward_loop_worker_handles) of verl's manager signature
    (config, llm_client, teacher_client=None, reward_loop_worker_handles=None)."""
    if "reward_loop_worker_handles" in kwargs:
        return args, kwargs, kwargs["reward_loop_worker_handles"]
    if len(args) >= 4:
        return args, kwargs, args[3]
    return args, kwargs, None


def _with_reward_handles(args: tuple, kwargs: dict, handles) -> tuple[tuple, dict]:
    if len(args) >= 4:
        return (*args[:3], handles, *args[4:]), kwargs
    return args, {**kwargs, "reward_loop_worker_handles": handles}


class InProcessAgentLoopManager(AgentLoopManager):
    """verl's `AgentLoopManager`, its workers running in this process (see the module doc).

    With `reward.num_workers: 0` (the CPU platform's setting) verl starts no reward-loop worker actor and
    hands the manager an empty list; the manager then builds verl's own `RewardLoopWorker` on its loop
    thread, and each sample's score is a coroutine call instead of a Ray round trip carrying a DataProto.
    """

    def __init__(self, config, *args, **kwargs):
        self._event_loop = _EventLoopThread()
        self.agent_loop_workers_class = _LocalWorkerClass(self._event_loop)
        args, kwargs, handles = _reward_handles_arg(args, kwargs)
        if handles is not None and len(handles) == 0:
            from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

            local = _LocalRewardWorker(
                self._event_loop, self._event_loop.call(RewardLoopWorker, config, None)
            )
            args, kwargs = _with_reward_handles(args, kwargs, [local])
        super().__init__(config, *args, **kwargs)

    @auto_await
    async def generate_sequences(self, prompts):
        """verl's generation, minus the per-sample columns the legacy trainer never reads afterwards
        (UNREAD_AGENT_LOOP_COLUMNS): each would be packed object by object into every actor phase."""
        output = await super().generate_sequences(prompts)
        for key in UNREAD_AGENT_LOOP_COLUMNS:
            output.non_tensor_batch.pop(key, None)
        return output

    @classmethod
    @auto_await
    async def create(cls, *args, **kwargs):
        config = kwargs["config"] if "config" in kwargs else args[0]
        if _uses_v1_trainer(config):
            from verl.trainer.ppo.v1 import AgentLoopManagerTQ

            args, kwargs, handles = _reward_handles_arg(args, kwargs)
            if handles is not None and len(handles) == 0:
                # The v1 trainer's TransferQueue workers are Ray actors: they need a reward-loop actor.
                args, kwargs = _with_reward_handles(args, kwargs, [_reward_loop_actor(config)])
            return await AgentLoopManagerTQ.create(*args, **kwargs)
        return await super().create(*args, **kwargs)


def _reward_loop_actor(config):
    """One verl `RewardLoopWorker` actor, as verl's RewardLoopManager starts them (for the v1 trainer)."""
    import ray
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    return ray.remote(RewardLoopWorker).options(name="reward_loop_worker_0").remote(config, None)
