"""`hf` rollout backend for verl: token-in / token-out generation with Hugging Face models on CPU.

verl 0.9.1 generates only through async rollout servers (vLLM, SGLang, TRT-LLM), none of which runs
on a CPU-only machine. This backend plays the same three roles with plain PyTorch:

- `HFServer` (rlvr_cluster/hf_server.py, which does not import verl): a Ray actor per replica that
  holds the model and serves `generate(prompt_ids, sampling_params, request_id)` with per-token
  log-probs. Concurrent requests (the agent loop sends one per sample) are gathered into batches and
  decoded together with a KV cache.
- `HFReplica`: the `RolloutReplica` that verl's LLM server manager launches (registered as "hf").
- `HFRolloutAdapter`: the `BaseRollout` inside each FSDP worker; after every update it pushes the
  actor's full weights to its replica's server (the vLLM adapter does the same over CUDA IPC).

It is meant for debugging and CI on small models, not for throughput: on a GPU the same recipe uses
`rollout.name=vllm` unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Generator
from typing import Any

import ray
import torch
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica

from rlvr_cluster.hf_server import HFServer, ServerSettings, settings_from

__all__ = ["HFReplica", "HFRolloutAdapter", "HFServer", "ServerSettings"]

logger = logging.getLogger(__name__)

BACKEND_NAME = "hf"
SERVER_NAME_PREFIX = "hf_"


def _server_name(replica_rank: int, node_rank: int, name_suffix: str = "") -> str:
    return f"{SERVER_NAME_PREFIX}server_{replica_rank}_{node_rank}{name_suffix}"


class HFReplica(RolloutReplica):
    """One `HFServer` per replica node, placed on the node of the FSDP workers it serves."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.server_class = ray.remote(HFServer)

    def rollout_worker_use_gpu(self) -> bool:
        return False

    async def launch_servers(self):
        if not self.workers:
            raise RuntimeError("the hf rollout runs in hybrid mode only (rollout colocated with the actor)")
        node_ids = await asyncio.gather(
            *[
                w.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id())
                for w in self.workers
            ]
        )
        for node_rank in range(self.nnodes):
            node_id = node_ids[node_rank * self.gpus_per_replica_node]
            server = self.server_class.options(
                scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                    node_id=node_id, soft=False
                ),
                name=_server_name(self.replica_rank, node_rank, self.name_suffix),
                max_concurrency=self.max_concurrency,
                num_cpus=0,
            ).remote(
                # Plain values, not verl's config objects: the server process never imports verl.
                settings=settings_from(self.config, self.model_config),
                replica_rank=self.replica_rank,
                node_rank=node_rank,
            )
            self.servers.append(server)
        await asyncio.gather(*[server.weights_version.remote() for server in self.servers])
        self._server_handle = self.servers[0]
        self._server_address = f"{BACKEND_NAME}://{_server_name(self.replica_rank, 0, self.name_suffix)}"


class HFRolloutAdapter(BaseRollout):
    """Inside each FSDP worker: pushes the actor's weights to this rank's replica server."""

    def __init__(self, config, model_config, device_mesh, replica_rank: int = -1, **_kwargs):
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        local_world_size = int(os.environ.get("RAY_LOCAL_WORLD_SIZE", "1"))
        world = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        rollout_rank = rank % world
        self.node_rank = rollout_rank // local_world_size
        self._has_server = rollout_rank == 0
        self._server = None

    def _server_handle(self):
        if self._server is None:
            self._server = ray.get_actor(_server_name(self.replica_rank, self.node_rank))
        return self._server

    async def resume(self, tags: list[str]):
        return None

    async def release(self):
        return None

    @torch.no_grad()
    async def update_weights(
        self,
        weights: Generator[tuple[str, torch.Tensor], None, None],
        global_steps: int | None = None,
        wire_format: str = "named_tensors",
        peft_config: Any = None,
        **_kwargs,
    ):
        if wire_format != "named_tensors":
            raise ValueError(f"the hf rollout accepts full named tensors only, not {wire_format!r}")
        if peft_config is not None:
            raise ValueError("the hf rollout does not serve LoRA adapters; merge them (lora.merge=True)")
        start = time.time()
        # Every rank consumes the generator: gathering a sharded parameter is a collective.
        named = []
        for name, tensor in weights:
            full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
            named.append((name, full.detach().to("cpu", copy=True)))
        if not self._has_server:
            return
        server = self._server_handle()
        await server.load_weights.remote(named)
        if global_steps is not None:
            await server.set_global_steps.remote(global_steps)
        logger.info("hf rollout: %d tensors synced in %.2fs", len(named), time.time() - start)
