"""Environment variables every Ray worker of a recipe needs, in one place.

Ray workers do not inherit the submitting shell, so these travel in the job's runtime_env (local
runs: ray.init's runtime_env; cluster runs: the submitted job's runtime_env). This module does not
import verl, so the CLI can use it before verl is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
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


# The CPU platform's worker processes (FSDP actor and reference, the hf rollout server, vLLM's engine) can
# run on another malloc than glibc's, or on glibc's told to reuse (`rlvr.cpu_allocator`; `system` by
# default, `glibc_reuse` in the SmolLM2 model recipe, where it was measured). Why jemalloc is offered:
# glibc hands each micro-batch's freed logits (~500 MB on SmolLM2) back to the kernel and faults them
# in again, and in the long-lived FSDP worker verl's update drifted to 1.6-1.8x plain torch; with
# jemalloc preloaded it ran 1.17x. Why it is not the default: jemalloc's own defaults fault the same
# pages (bench/alloc_churn.py), TRL ran 29% slower under it, and jemalloc without decay (no faults, the
# update at the floor) grew until Ray's memory monitor killed the run (bench/README, "rlvr vs TRL on
# SmolLM2").
# Where Debian/Ubuntu (`libjemalloc2`), Fedora/RHEL (`jemalloc`) and a source build put the library.
JEMALLOC_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
    "/usr/lib64/libjemalloc.so.2",
    "/usr/local/lib/libjemalloc.so.2",
)
JEMALLOC_INSTALL = "apt-get install libjemalloc2"
# glibc's own malloc told to keep what it frees for the next allocation: one arena (Ray runs an actor's
# calls off the main thread, and in a thread's own arena a block over 64 MiB is always a fresh mmap, freed
# back to the kernel at once), no mmap for large blocks (they come from the heap, where a freed block is
# handed out again), and the heap's free top never trimmed. The FSDP worker's update on SmolLM2 then faulted
# ~0 pages instead of 4.4-4.7 M (18 GB zeroed by the kernel, a quarter to a third of the update's time) and
# ran in 35-39 s instead of 51-59 s; the price is that the worker keeps its high-water mark resident
# between updates (bench/README, "rlvr vs TRL on SmolLM2").
GLIBC_REUSE_ENV = {
    "MALLOC_ARENA_MAX": "1",
    "MALLOC_MMAP_MAX_": "0",
    "MALLOC_TRIM_THRESHOLD_": str(2**62),
}
ALLOCATOR_CHOICES = ("glibc_reuse", "jemalloc", "system")  # or an absolute path to a malloc library


def find_jemalloc(candidates: tuple[str, ...] = JEMALLOC_CANDIDATES) -> str | None:
    return next((p for p in candidates if os.path.isfile(p)), None)


def cpu_allocator_env(cfg: Any, environ: Mapping[str, str] = os.environ) -> tuple[dict[str, str], str]:
    """LD_PRELOAD for this machine's CPU workers per `rlvr.cpu_allocator`, and one line saying what they use.

    Resolved where the workers start (a local run, or a cluster job's driver on the head node), never on a
    machine that only submits: a library path is only true on the machine that has it. Nothing on a GPU
    platform."""
    if platform_name(cfg) != "cpu":
        return {}, ""
    return allocator_preload(str(cfg.rlvr.get("cpu_allocator", "system")), environ)


def allocator_preload(
    choice: str, environ: Mapping[str, str] = os.environ, candidates: tuple[str, ...] = JEMALLOC_CANDIDATES
) -> tuple[dict[str, str], str]:
    """The env preloading `choice` (jemalloc | system | a library's path), or tuning glibc's malloc
    (glibc_reuse), and the line that says so.

    A preload the user already has is kept after ours. Raises ValueError for a path that is not a file
    (the message names the fix)."""
    if choice == "system":
        return {}, ""
    if choice == "glibc_reuse":
        tuned = " ".join(f"{k}={v}" for k, v in GLIBC_REUSE_ENV.items())
        note = f"CPU workers use glibc's malloc, keeping freed memory for reuse ({tuned})"
        return dict(GLIBC_REUSE_ENV), note
    if choice == "jemalloc":
        lib = find_jemalloc(candidates)
        if lib is None:
            return {}, (
                f"CPU workers use glibc's malloc: rlvr.cpu_allocator=jemalloc, but jemalloc is not installed "
                f"({JEMALLOC_INSTALL})"
            )
    else:
        lib = choice
        if not os.path.isfile(lib):
            raise ValueError(
                f"rlvr.cpu_allocator={choice!r}: no such file on this machine. Give the path of a malloc "
                f"library (e.g. {JEMALLOC_CANDIDATES[0]}), or one of {', '.join(ALLOCATOR_CHOICES)}"
            )
    present = environ.get("LD_PRELOAD", "").replace(":", " ").split()
    return {"LD_PRELOAD": " ".join([lib] + [p for p in present if p != lib])}, f"CPU workers use {lib}"
