"""The verl plugin registers rlvr's backends in a fresh process, exactly as a Ray worker gets them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rlvr_cluster.verl_private import TIMINGS_KEPT

PROBE = r"""
import json, torch.distributed as dist
import verl  # loads the verl.plugins entry points, as in every Ray worker
from verl.plugin.platform import get_platform
from verl.plugin.platform.platform_manager import PlatformRegistry
from verl.workers.rollout.replica import RolloutReplicaRegistry
from verl.workers.rollout.base import get_rollout_class
from verl.workers.engine.fsdp.transformer_impl import CPUOffloadPolicy
from verl.utils.device import get_device_name, get_device_id, get_nccl_backend
from codetiming import Timer
from verl.utils.profiler import simple_timer
for _ in range(3000):  # verl times each request so; codetiming would keep all 3000
    with simple_timer("probe_request", {}):
        pass
try:
    device_id = str(get_device_id())
except Exception as e:  # verl's own cuda platform on a machine without CUDA
    device_id = type(e).__name__
print(json.dumps({
    "registered_platforms": list(PlatformRegistry.registered_names()),
    "platform": get_platform().device_name,
    "device_name": get_device_name(),
    "device_id": device_id,
    "backend": get_nccl_backend(),
    "hf_replica": RolloutReplicaRegistry.get("hf").__qualname__,
    "hf_adapter": get_rollout_class("hf", "async").__qualname__,
    "dedupe_installed": bool(getattr(dist.init_process_group, "_rlvr_dedupe", False)),
    "ref_offload_pins": CPUOffloadPolicy(pin_memory=True).pin_memory,
    "timings_kept": len(Timer.timers._timings["probe_request"]),
}))
"""


def _probe(extra_env: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_")}
    env.update(extra_env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_cpu_platform_and_hf_rollout_are_registered_in_a_fresh_process():
    info = _probe({"VERL_PLATFORM": "cpu"})
    assert "cpu" in info["registered_platforms"]
    assert info["platform"] == "cpu"
    assert info["device_name"] == "cpu"
    # verl moves tensors with .to(get_device_id()): an int would mean cuda:<int>.
    assert info["device_id"] == "cpu"
    assert info["backend"] == "gloo"
    assert info["hf_replica"] == "HFReplica"
    assert info["hf_adapter"] == "HFRolloutAdapter"
    assert info["dedupe_installed"] is True
    assert info["ref_offload_pins"] is False
    assert info["timings_kept"] == TIMINGS_KEPT  # verl_private item 14: bounded in every process


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_cpu_platform_is_never_auto_detected():
    """Without VERL_PLATFORM=cpu a machine keeps verl's own platform and no torch wrapper is installed."""
    info = _probe({})
    assert info["platform"] != "cpu"
    assert info["dedupe_installed"] is False
    # The backends are still registered (harmless), so one recipe can name them anywhere.
    assert "cpu" in info["registered_platforms"]
    assert info["hf_replica"] == "HFReplica"
    assert info["timings_kept"] == TIMINGS_KEPT  # on every platform: the growth is verl's, not the CPU's
