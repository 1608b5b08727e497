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
