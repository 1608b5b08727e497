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

    from rlvr_cluster.in_process_agent_loop import InProcessAgentLoopManager, ReusingAgentLoopWorker
    from rlvr_launch.recipes import compose

    cfg = compose.compose(
        [f"actor_rollout_ref.model.path={tiny_model_dir}", "actor_rollout_ref.rollout.agent.num_workers=2"]
    )
    assert cfg.actor_rollout_ref.rollout.agent.agent_loop_manager_class == (
        "rlvr_cluster.in_process_agent_loop.InProcessAgentLoopManager"
    )
    manager = InProcessAgentLoopManager.create(config=cfg, llm_client=None)
    assert len(manager.agent_loop_workers) == 2
    for handle in manager.agent_loop_workers:
        # verl's own worker; the subclass only reuses stateless agent loops (tested below)
        assert type(handle.worker) is ReusingAgentLoopWorker and isinstance(handle.worker, AgentLoopWorker)
        assert handle.worker.tokenizer is not None
    loop_thread = manager._event_loop.thread
    assert loop_thread.is_alive() and loop_thread is not threading.current_thread()
    # verl names its worker actors agent_loop_worker_<i>_<hex>
    assert ray.util.list_named_actors(all_namespaces=True) == [], "no agent-loop worker actor was started"


class _ServerClient:
    """What verl's LLM client does for a single replica: forward the request to the (in-process) server
    and stamp the weight version on the reply, as LLMServerClient.generate does."""

    def __init__(self, server):
        self.server = server

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_kwargs):
        output = await self.server.generate(prompt_ids, sampling_params, request_id)
        steps = output.extra_fields.get("global_steps")
        output.extra_fields.setdefault("min_global_steps", steps)
        output.extra_fields.setdefault("max_global_steps", steps)
        return output


def _addition_batch(count: int):
    import numpy as np
    from verl.protocol import DataProto

    from rlvr_launch.runs.embedded_model import ADDITION, TinySpec, addition_pairs, addition_prompt

    train, _ = addition_pairs(TinySpec())
    rows = train[:count]
    column = lambda values: np.array(values, dtype=object)  # noqa: E731 - verl's non-tensor columns
    return DataProto.from_dict(
        non_tensors={
            "raw_prompt": column([[{"role": "user", "content": addition_prompt(a, b)}] for a, b in rows]),
            "data_source": column([ADDITION] * count),
            "ability": column(["math"] * count),
            "reward_model": column([{"style": "rule", "ground_truth": str(a + b)} for a, b in rows]),
            "extra_info": column([{"split": "train", "index": i, "verifier": "math"} for i in range(count)]),
            "uid": column([f"u{i}" for i in range(count)]),
        },
        meta_info={"validate": True, "global_steps": 0},  # validation: greedy, so both paths can be compared
    )


@pytest.mark.slow  # a private local Ray head and 2 x 24 greedy generations on the tiny model: ~30 s
def test_one_reused_agent_loop_and_the_in_process_reward_give_verls_batch_with_every_sample_scored(
    private_ray, tiny_model_dir
):
    """The CPU platform's worker builds the single-turn loop once and scores in this process (no reward
    actor: reward.num_workers=0); its batch must be the one verl's own worker builds, sample for sample:
    same tokens, masks, log-probs, scores and reward columns, every sample scored."""
    import ray
    import torch
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

    from rlvr_cluster.hf_server import HFServer, ServerSettings
    from rlvr_cluster.in_process_agent_loop import (
        UNREAD_AGENT_LOOP_COLUMNS,
        InProcessAgentLoopManager,
        ReusingAgentLoopWorker,
    )
    from rlvr_launch.recipes import compose

    cfg = compose.compose([f"actor_rollout_ref.model.path={tiny_model_dir}"])
    assert cfg.reward.num_workers == 0
    rollout = cfg.actor_rollout_ref.rollout
    client = _ServerClient(
        HFServer(
            ServerSettings(str(tiny_model_dir), int(rollout.prompt_length), int(rollout.response_length))
        )
    )
    manager = InProcessAgentLoopManager.create(config=cfg, llm_client=client, reward_loop_worker_handles=[])
    (reward_handle,) = manager.reward_loop_worker_handles
    assert type(reward_handle.worker).__name__ == "RewardLoopWorker"  # verl's own, held here
    assert ray.util.list_named_actors(all_namespaces=True) == [], "no reward-loop or agent-loop actor"

    count = 24
    ours = manager.generate_sequences(_addition_batch(count))
    (worker,) = manager.agent_loop_workers
    assert type(worker.worker) is ReusingAgentLoopWorker
    assert [type(loop) for loop in worker.worker._reused_loops.values()] == [SingleTurnAgentLoop]

    verls_worker = manager._event_loop.call(AgentLoopWorker, cfg, client, None, [reward_handle])
    theirs = manager._event_loop.submit(verls_worker.generate_sequences(_addition_batch(count))).result()

    assert sorted(ours.batch.keys()) == sorted(theirs.batch.keys())
    assert "rm_scores" in ours.batch.keys()
    for key in theirs.batch.keys():
        mine, verls = ours.batch[key], theirs.batch[key]
        if mine.is_floating_point() and key != "rm_scores":
            # rollout log-probs: the server decodes the requests that arrived together as one padded batch,
            # so the grouping (timing, under load) moves them in the last float bits (CI: equal to 5
            # printed digits, not bit-equal); another sample's log-probs would differ by far more.
            assert mine.shape == verls.shape and torch.allclose(mine, verls, rtol=0, atol=1e-5), (
                key,
                (mine - verls).abs().max(),
            )
        else:
            assert torch.equal(mine, verls), key
    # the manager drops only the columns verl's legacy trainer never reads (verl_private detail 10)
    assert set(theirs.non_tensor_batch) - set(ours.non_tensor_batch) == UNREAD_AGENT_LOOP_COLUMNS
    assert set(ours.non_tensor_batch) <= set(theirs.non_tensor_batch)
    for key in set(ours.non_tensor_batch) - {"rlvr_latency_ms"}:  # a measured time, the rest is data
        assert list(ours.non_tensor_batch[key]) == list(theirs.non_tensor_batch[key]), key
    assert all(latency >= 0 for latency in ours.non_tensor_batch["rlvr_latency_ms"])
    for key in ("acc", "rlvr_status", "rlvr_verifier", "__num_turns__"):
        assert key in ours.non_tensor_batch, key
    assert ours.meta_info["reward_extra_keys"] == theirs.meta_info["reward_extra_keys"]
    # every sample scored by the math verifier: a verdict, not a missing or failed score
    statuses = list(ours.non_tensor_batch["rlvr_status"])
    assert len(statuses) == count and set(statuses) <= {"ok", "wrong", "parse_error", "ambiguous_answer"}
    scores = ours.batch["rm_scores"].sum(-1).tolist()
    assert scores == [float(a) for a in ours.non_tensor_batch["acc"]]
    assert 0 < sum(scores) < count  # the warm-started model gets some right, not all: real verdicts
