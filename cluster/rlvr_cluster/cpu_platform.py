"""A `cpu` platform for verl, registered through verl's own PlatformRegistry.

Selected with VERL_PLATFORM=cpu (rlvr sets it for every Ray worker of a CPU recipe). verl 0.9.1 ships
nvidia/huawei/amd platforms only; this one lets the real trainer run on a machine without an
accelerator, for debugging and CI. On a GPU machine nothing here is selected.

Why each choice (measured on verl 0.9.1, see shared/design/verl-on-cpu.md):
- current_device() returns the string "cpu": verl calls tensor.to(get_device_id()), and an int would
  mean cuda:<int>.
- the collective backend is gloo; verl builds "cpu:gloo,<device>:<backend>", which on CPU repeats the
  device type, so `verl_private.install_cpu_workarounds` de-duplicates it.
- Ray has no CPU accelerator resource, so the platform asks Ray for logical GPUs (rlvr declares them
  when it starts a local Ray): verl's resource-pool check counts only GPU/NPU.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

PLATFORM_NAME = "cpu"


def _no_op(*_args, **_kwargs) -> None:
    return None


def _zero(*_args, **_kwargs) -> int:
    return 0


def _mem_get_info(*_args, **_kwargs) -> tuple[int, int]:
    """(free, total) bytes of host memory, the CPU analogue of cudaMemGetInfo."""
    pages = os.sysconf("SC_PHYS_PAGES")
    avail = os.sysconf("SC_AVPHYS_PAGES")
    page = os.sysconf("SC_PAGE_SIZE")
    return avail * page, pages * page


class _Stream:
    """Stand-in for a device stream: CPU work is synchronous."""

    def __init__(self, *_args, **_kwargs) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait_stream(self, _other) -> None:
        pass

    def wait_event(self, _event) -> None:
        pass

    def record_event(self, _event=None):
        return _Event()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False


class _Event:
    def __init__(self, *_args, **_kwargs) -> None:
        pass

    def record(self, _stream=None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait(self, _stream=None) -> None:
        pass

    def query(self) -> bool:
        return True


# The `torch.<device>` namespace verl calls through get_torch_device(). torch.cpu lacks the memory
# and RNG helpers verl uses, so they are provided here with CPU meanings.
CPU_DEVICE_MODULE = SimpleNamespace(
    is_available=lambda: True,
    device_count=lambda: 1,
    current_device=lambda: PLATFORM_NAME,
    set_device=_no_op,
    synchronize=_no_op,
    empty_cache=_no_op,
    ipc_collect=_no_op,
    set_per_process_memory_fraction=_no_op,
    memory_allocated=_zero,
    max_memory_allocated=_zero,
    memory_reserved=_zero,
    max_memory_reserved=_zero,
    reset_peak_memory_stats=_no_op,
    mem_get_info=_mem_get_info,
    get_rng_state=lambda *a, **k: torch.get_rng_state(),
    set_rng_state=lambda state, *a, **k: torch.set_rng_state(state),
    manual_seed=torch.manual_seed,
    manual_seed_all=torch.manual_seed,
    get_device_name=lambda *a, **k: "cpu",
    current_stream=lambda *a, **k: _Stream(),
    stream=lambda *a, **k: _Stream(),
    Stream=_Stream,
    Event=_Event,
)


@PlatformRegistry.register(platform=PLATFORM_NAME)
class PlatformCPU(PlatformBase):
    """verl platform for CPU-only machines (debugging, CI): gloo collectives, HF rollout."""

    @property
    def device_name(self) -> str:
        return PLATFORM_NAME

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self):
        return CPU_DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: a GPU machine must keep verl's own platform. Only VERL_PLATFORM=cpu
        # selects this one.
        return False

    def current_device(self):
        return PLATFORM_NAME

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets CUDA_VISIBLE_DEVICES for the logical GPUs it hands out; nothing reads it on CPU.
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_gpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
