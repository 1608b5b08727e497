"""The CPU platform's agent-loop manager: verl's own AgentLoopWorker, held in the trainer's process.

Generation through it is exercised by every CPU training run (tests/launch/test_train_e2e.py); this
module checks where the worker lives: the demo's composed recipe builds a real verl AgentLoopWorker in
this process, on the manager's own loop thread, and starts no Ray actor for it.
"""

from __future__ import annotations

import threading

import pytest

RAY_NUM_CPUS = 2


@pytest.mark.slow  # a private local Ray head: ~25 s
def test_the_cpu_recipe_builds_verls_agent_loop_worker_in_this_process_and_no_actor(
    private_ray, tiny_model_dir
):
    import ray
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from rlvr_cluster.in_process_agent_loop import InProcessAgentLoopManager
    from rlvr_launch import compose

    cfg = compose.compose(
        [f"actor_rollout_ref.model.path={tiny_model_dir}", "actor_rollout_ref.rollout.agent.num_workers=2"]
    )
    assert cfg.actor_rollout_ref.rollout.agent.agent_loop_manager_class == (
        "rlvr_cluster.in_process_agent_loop.InProcessAgentLoopManager"
    )
    manager = InProcessAgentLoopManager.create(config=cfg, llm_client=None)
    assert len(manager.agent_loop_workers) == 2
    for handle in manager.agent_loop_workers:
        assert type(handle.worker) is AgentLoopWorker  # verl's own class, not a copy
        assert handle.worker.tokenizer is not None
    loop_thread = manager._event_loop.thread
    assert loop_thread.is_alive() and loop_thread is not threading.current_thread()
    # verl names its worker actors agent_loop_worker_<i>_<hex>
    assert ray.util.list_named_actors(all_namespaces=True) == [], "no agent-loop worker actor was started"
