"""Shared fixtures: one private rlvr cache per test session (the embedded model is built once)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def rlvr_cache(tmp_path_factory) -> Path:
    """A cache dir for the session; exported so `rlvr` subprocesses share the one build."""
    path = Path(os.environ.get("RLVR_TEST_CACHE_DIR") or tmp_path_factory.mktemp("rlvr-cache"))
    os.environ["RLVR_CACHE_DIR"] = str(path)
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(rlvr_cache) -> Path:
    from rlvr_launch.embedded import ensure_tiny_model

    return ensure_tiny_model(rlvr_cache, log=lambda _m: None)


@pytest.fixture(scope="module")
def private_ray(request):
    """A Ray for this test module's process only: its own temp dir, no dashboard, random ports, and the
    verifier pool's custom resource. A module sets RAY_NUM_CPUS / RAY_VERIFIER_SLOTS to size it, and
    RAY_EXTRA_PYTHONPATH for modules its workers must import (Ray workers inherit the env at init)."""
    import tempfile

    import ray

    if ray.is_initialized():
        pytest.skip("another test left Ray initialised in this process")
    old_path = os.environ.get("PYTHONPATH")
    extra = getattr(request.module, "RAY_EXTRA_PYTHONPATH", None)
    if extra:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(extra), old_path) if p)
    ray.init(
        num_cpus=getattr(request.module, "RAY_NUM_CPUS", 2),
        resources={"rlvr_verifier": getattr(request.module, "RAY_VERIFIER_SLOTS", 8)},
        include_dashboard=False,
        _temp_dir=tempfile.mkdtemp(prefix="rlvr-test-ray-", dir="/tmp"),
        log_to_driver=False,
    )
    try:
        yield ray
    finally:
        ray.shutdown()
        if extra:
            if old_path is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old_path
