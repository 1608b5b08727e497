"""Every place where rlvr touches a private detail of verl 0.9.1 (or of torch on verl's behalf).

verl has public registries for platforms and rollout replicas, but a few things a CPU run needs have
no hook. They are collected here, each guarded, so that a verl upgrade breaks exactly one module and
tests/cluster/test_verl_private_details.py says which assumption changed. Nothing here edits verl's
files; nothing here runs unless the `cpu` platform is selected (except the rollout-adapter entry,
which only adds a key).

1. `verl.workers.rollout.base._ROLLOUT_REGISTRY` maps (name, mode) -> adapter class path; it has no
   register function. rlvr adds ("hf", "async").
2. verl builds the process-group backend string "cpu:gloo,<device>:<backend>"
   (verl/utils/distributed.py); with device "cpu" and backend "gloo" torch rejects the repeated device
   type. A wrapper around torch.distributed.init_process_group drops the duplicate.
3. verl's FSDP2 engine hard-codes CPUOffloadPolicy(pin_memory=True) for forward-only models (the
   reference policy); pinning needs an accelerator. On a machine without one, the policy class that
   verl imports is replaced by a subclass that never pins.
4. The `hf` rollout server replies with `rlvr_cluster.hf_server.GeneratedTokens`, not verl's pydantic
   `TokenOutput`, so that its process never imports verl. This relies on verl's LLM client and agent
   loops reading the reply by attribute only (no isinstance check, no model_dump) and on the two field
   lists being equal: `TOKEN_OUTPUT_READERS` are the functions checked.
"""

from __future__ import annotations

import functools
import logging

logger = logging.getLogger(__name__)

HF_ROLLOUT_KEY = ("hf", "async")
# Where verl reads a rollout server's reply (detail 4): module -> qualified names of the readers.
TOKEN_OUTPUT_READERS = {
    "verl.workers.rollout.llm_server": ("LLMServerClient.generate",),
    "verl.experimental.agent_loop.single_turn_agent_loop": ("SingleTurnAgentLoop.run",),
}
HF_ROLLOUT_ADAPTER = "rlvr_cluster.hf_rollout.HFRolloutAdapter"


def register_hf_rollout_adapter() -> None:
    from verl.workers.rollout import base as rollout_base

    registry = getattr(rollout_base, "_ROLLOUT_REGISTRY", None)
    if not isinstance(registry, dict):
        raise RuntimeError(
            "verl.workers.rollout.base._ROLLOUT_REGISTRY is gone or no longer a dict: the `hf` rollout "
            "cannot be registered with this verl version (rlvr pins verl==0.9.1)"
        )
    existing = registry.get(HF_ROLLOUT_KEY)
    if existing not in (None, HF_ROLLOUT_ADAPTER):
        raise RuntimeError(f"rollout {HF_ROLLOUT_KEY} is already registered to {existing}")
    registry[HF_ROLLOUT_KEY] = HF_ROLLOUT_ADAPTER


def dedupe_backend(backend: str | None) -> str | None:
    """'cpu:gloo,cpu:gloo' -> 'cpu:gloo' (first mapping of each device type wins)."""
    if not backend or "," not in backend:
        return backend
    seen: dict[str, str] = {}
    for part in backend.split(","):
        device = part.split(":", 1)[0] if ":" in part else part
        seen.setdefault(device, part)
    return ",".join(seen.values())


def _install_backend_dedupe() -> None:
    import torch.distributed as dist

    original = dist.init_process_group
    if getattr(original, "_rlvr_dedupe", False):
        return

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        if "backend" in kwargs:
            kwargs["backend"] = dedupe_backend(kwargs["backend"])
        elif args:
            args = (dedupe_backend(args[0]), *args[1:])
        return original(*args, **kwargs)

    init_process_group._rlvr_dedupe = True
    dist.init_process_group = init_process_group


def _install_unpinned_offload_policy() -> None:
    import sys

    import torch
    import torch.distributed.fsdp as torch_fsdp

    if torch.accelerator.is_available():
        return
    base = torch_fsdp.CPUOffloadPolicy
    if getattr(base, "_rlvr_unpinned", False):
        return

    class UnpinnedCPUOffloadPolicy(base):
        """CPUOffloadPolicy that never pins: pinned host memory needs an accelerator."""

        _rlvr_unpinned = True

        def __init__(self, pin_memory: bool = True):  # noqa: ARG002 - the request is overridden on purpose
            super().__init__(pin_memory=False)

    torch_fsdp.CPUOffloadPolicy = UnpinnedCPUOffloadPolicy
    # verl imports the name into these modules; replace it there too if they are already loaded.
    for module_name in ("verl.utils.fsdp_utils", "verl.workers.engine.fsdp.transformer_impl"):
        module = sys.modules.get(module_name)
        if module is not None and hasattr(module, "CPUOffloadPolicy"):
            module.CPUOffloadPolicy = UnpinnedCPUOffloadPolicy


def install_cpu_workarounds() -> None:
    """Called by the plugin in every process when the `cpu` platform is selected."""
    _install_backend_dedupe()
    _install_unpinned_offload_policy()
