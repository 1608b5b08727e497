"""Shared fixtures for the verifier tests."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from rlvr_verifiers.code import CodeConfig, CodeVerifier
from rlvr_verifiers.sandbox import SandboxConfig


@pytest.fixture(scope="module")
def verifier():
    """A `code` verifier with its own 2-worker sandbox in a fresh world-readable work dir (the job uid
    must reach it), closed after the module."""
    work_dir = tempfile.mkdtemp(prefix="rlvr-code-test-", dir="/tmp")
    os.chmod(work_dir, 0o755)
    v = CodeVerifier(CodeConfig(timeout_per_test_s=3.0), SandboxConfig(workers=2, work_dir=work_dir))
    yield v
    v.close()
    shutil.rmtree(work_dir, ignore_errors=True)
