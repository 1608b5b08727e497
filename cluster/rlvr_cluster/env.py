"""Environment variables every Ray worker of a recipe needs, in one place.

Ray workers do not inherit the submitting shell, so these travel in the job's runtime_env (local
runs: ray.init's runtime_env; cluster runs: the submitted job's runtime_env). This module does not
import verl, so the CLI can use it before verl is loaded.
"""

from __future__ import annotations

from typing import Any

# Selects rlvr_cluster's `cpu` platform and lets verl reuse its FSDP engines, which verl registers
# for cuda/npu only (verl/workers/engine/base.py reads VERL_ENGINE_DEVICE).
CPU_ENV = {
    "VERL_PLATFORM": "cpu",
    "VERL_ENGINE_DEVICE": "cuda",
    # One intra-op thread per process: on a small machine several verl processes share the cores.
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

COMMON_ENV = {
    "TOKENIZERS_PARALLELISM": "false",
    # Plugins load through the verl.plugins entry point in every process that imports verl.
    "VERL_USE_EXTERNAL_PLUGINS": "auto",
}


def platform_name(cfg: Any) -> str:
    return "cpu" if str(cfg.trainer.device) == "cpu" else "gpu"


def worker_env(cfg: Any) -> dict[str, str]:
    """Env vars for every worker of this composed config (no secrets: those travel by reference)."""
    env = dict(COMMON_ENV)
    if platform_name(cfg) == "cpu":
        env.update(CPU_ENV)
        # Nothing can be downloaded on a CPU debugging box; fail fast instead of retrying a hub.
        env["HF_HUB_OFFLINE"] = "1"
    return env
