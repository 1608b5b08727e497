"""`hf` rollout backend for verl: token-in / token-out generation with Hugging Face models on CPU.

verl 0.9.1 generates only through async rollout servers (vLLM, SGLang, TRT-LLM), none of which runs
on a CPU-only machine. This backend plays the same three roles with plain PyTorch:

- `HFServer`: a Ray actor per replica that holds the model and serves `generate(prompt_ids,
  sampling_params, request_id) -> TokenOutput` with per-token log-probs. Concurrent requests (the
  agent loop sends one per sample) are gathered into batches and decoded together with a KV cache.
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
from verl.workers.config import HFModelConfig, RolloutConfig
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

logger = logging.getLogger(__name__)

BACKEND_NAME = "hf"
SERVER_NAME_PREFIX = "hf_"
# How long the server waits for more concurrent requests before decoding a batch.
_BATCH_GATHER_S = 0.005


def _server_name(replica_rank: int, node_rank: int, name_suffix: str = "") -> str:
    return f"{SERVER_NAME_PREFIX}server_{replica_rank}_{node_rank}{name_suffix}"


def _field(config: Any, key: str) -> Any:
    """A field of a dataclass config or of a DictConfig (verl passes either), None when absent."""
    if hasattr(config, "get") and not hasattr(config, "__dataclass_fields__"):
        return config.get(key)
    return getattr(config, key, None)


def _eos_ids(model, tokenizer) -> set[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), getattr(model, "config", None), tokenizer):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if value is None:
            continue
        ids.update(value if isinstance(value, (list, tuple)) else [value])
    return ids


def _sample(logits: torch.Tensor, temperature: float, top_p: float, top_k: int, generator) -> torch.Tensor:
    """Next token per row. `logits` are already divided by the temperature (when > 0)."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    if top_k is not None and top_k > 0 and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and 0 < top_p < 1:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        remove = cumulative - sorted_logits.softmax(-1) > top_p
        sorted_logits = sorted_logits.masked_fill(remove, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


class HFServer:
    """Generation server of one replica (a Ray actor). Loads the model from the actor's model path."""

    def __init__(self, config: RolloutConfig, model_config: HFModelConfig, replica_rank: int, node_rank: int):
        from transformers import AutoModelForCausalLM

        self.config = config
        self.model_config = model_config
        self.replica_rank = replica_rank
        self.global_steps: int | None = None
        path = os.path.expanduser(_field(model_config, "local_path") or _field(model_config, "path"))
        torch.set_num_threads(max(1, int(os.environ.get("RLVR_ROLLOUT_THREADS", "1"))))
        self.model = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.float32, attn_implementation="eager"
        )
        self.model.eval()
        self.eos_ids = _eos_ids(self.model, _field(model_config, "tokenizer"))
        self.pad_id = self.model.config.pad_token_id
        if self.pad_id is None:
            self.pad_id = next(iter(self.eos_ids), 0)
        self.generator = torch.Generator().manual_seed(int(getattr(config, "seed", 0) or 0) + replica_rank)
        self._pending: list[tuple[list[int], dict, asyncio.Future]] = []
        self._batcher: asyncio.Task | None = None
        self._weights_version = 0

    # --- token-in / token-out generation ---------------------------------------------------------

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
        **_kwargs: Any,
    ) -> TokenOutput:
        if image_data or video_data:
            raise ValueError("the hf rollout backend serves text-only models")
        prompt_ids = list(prompt_ids)
        budget = self.config.prompt_length + self.config.response_length - len(prompt_ids)
        max_tokens = sampling_params.get("max_tokens", sampling_params.get("max_new_tokens"))
        if max_tokens is None:
            max_tokens = min(self.config.response_length, budget)
        max_tokens = max(1, min(int(max_tokens), self.config.response_length))
        params = {
            "temperature": float(sampling_params.get("temperature", 1.0)),
            "top_p": float(sampling_params.get("top_p", 1.0)),
            "top_k": int(sampling_params.get("top_k", -1) or -1),
            "max_tokens": max_tokens,
            "logprobs": bool(sampling_params.get("logprobs", False)),
        }
        future = asyncio.get_running_loop().create_future()
        self._pending.append((prompt_ids, params, future))
        if self._batcher is None or self._batcher.done():
            self._batcher = asyncio.create_task(self._drain())
        token_ids, log_probs = await future
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs if params["logprobs"] else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(_BATCH_GATHER_S)
            batch, self._pending = self._pending, []
            groups: dict[tuple, list[tuple[list[int], dict, asyncio.Future]]] = {}
            for request in batch:
                key = tuple(sorted(request[1].items()))
                groups.setdefault(key, []).append(request)
            for requests in groups.values():
                params = requests[0][1]
                try:
                    results = await asyncio.to_thread(self._decode, [r[0] for r in requests], params)
                except Exception as e:  # every waiting request learns why, none hangs
                    for _, _, fut in requests:
                        if not fut.done():
                            fut.set_exception(e)
                    continue
                for (_, _, fut), result in zip(requests, results, strict=True):
                    if not fut.done():
                        fut.set_result(result)

    @torch.no_grad()
    def _decode(self, prompts: list[list[int]], params: dict) -> list[tuple[list[int], list[float]]]:
        batch = len(prompts)
        width = max(len(p) for p in prompts)
        input_ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((batch, width), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding keeps every row's last token aligned
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            attention_mask[row, width - len(prompt) :] = 1
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=True
        )
        past = out.past_key_values
        logits = out.logits[:, -1, :].float()
        next_position = position_ids[:, -1:] + 1
        temperature = params["temperature"]
        finished = torch.zeros(batch, dtype=torch.bool)
        tokens: list[list[int]] = [[] for _ in range(batch)]
        log_probs: list[list[float]] = [[] for _ in range(batch)]
        eos = torch.tensor(sorted(self.eos_ids), dtype=torch.long) if self.eos_ids else None
        for _ in range(params["max_tokens"]):
            # Log-probs of the sampling distribution (logits / temperature), as verl's actor computes them.
            scaled = logits / temperature if temperature > 0 else logits
            logp = torch.log_softmax(scaled, dim=-1)
            next_tokens = _sample(scaled, temperature, params["top_p"], params["top_k"], self.generator)
            chosen = logp.gather(-1, next_tokens[:, None]).squeeze(-1)
            for row in range(batch):
                if not finished[row]:
                    tokens[row].append(int(next_tokens[row]))
                    log_probs[row].append(float(chosen[row]))
            if eos is not None:
                finished |= torch.isin(next_tokens, eos)
            if bool(finished.all()):
                break
            attention_mask = torch.cat([attention_mask, torch.ones((batch, 1), dtype=torch.long)], dim=-1)
            out = self.model(
                input_ids=next_tokens[:, None],
                attention_mask=attention_mask,
                position_ids=next_position,
                past_key_values=past,
                use_cache=True,
            )
            past = out.past_key_values
            logits = out.logits[:, -1, :].float()
            next_position = next_position + 1
        return list(zip(tokens, log_probs, strict=True))

    # --- weights ----------------------------------------------------------------------------------

    def load_weights(self, named_tensors: list[tuple[str, torch.Tensor]]) -> int:
        """Replace the model's weights with the actor's. Returns the number of tensors loaded."""
        state = self.model.state_dict()
        unknown = [name for name, _ in named_tensors if name not in state]
        if unknown:
            raise KeyError(f"weights the rollout model does not have: {unknown[:5]} (of {len(unknown)})")
        with torch.no_grad():
            for name, tensor in named_tensors:
                state[name].copy_(tensor.to(dtype=state[name].dtype))
        self._weights_version += 1
        return len(named_tensors)

    def weights_version(self) -> int:
        return self._weights_version

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    # --- lifecycle hooks verl calls on every backend; nothing to free on CPU --------------------------

    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def wait_for_requests_to_drain(self) -> None:
        while self._pending or (self._batcher is not None and not self._batcher.done()):
            await asyncio.sleep(0.01)

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict:
        return {"aborted_count": 0, "request_ids": []}

    async def abort_request(self, request_id: str, reset_prefix_cache: bool = True) -> dict:
        return {"aborted": False, "request_id": request_id}

    async def resume_generation(self) -> None:
        return None

    async def resume_engine_generation(self) -> None:
        return None

    async def open_submission_gate(self) -> None:
        return None

    async def start_profile(self, **_kwargs) -> None:
        return None

    async def stop_profile(self) -> None:
        return None


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
                config=self.config,
                model_config=self.model_config,
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
