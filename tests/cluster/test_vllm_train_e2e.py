"""`rlvr train rollout=vllm` on CPU: verl's real vLLM server, weight sync and agent loop in a GRPO run.

The default experiment, shrunk to a few steps. After every update verl compares the log-probs the
rollout sampled with (vLLM) to the actor's own (FSDP) on the same tokens: with fp32 on both sides
they agree to ~1e-7 when the sync worked, and differ by orders of magnitude more when vLLM still
holds the weights it started with (dummy ones) or a previous step's. The 1 MB weight bucket (verl's
smallest) makes every sync of the 1.3 MB tiny model span two buckets.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from vllm_cpu_support import needs_vllm_cpu

from rlvr_cluster import shm

# vLLM engines and the real model take GBs and make /dev/shm segments others check: one at a time (conftest)
pytestmark = [pytest.mark.slow, needs_vllm_cpu, pytest.mark.xdist_group("vllm_or_real_model")]

SMALL = [
    "rollout=vllm",
    "data.train_batch_size=8",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=1",
    # The actor recomputes the old log-probs (the demo takes them from the rollout): verl then logs the
    # rollout/actor gap each step, the measure of the weight sync these tests check.
    "algorithm.rollout_correction.bypass_mode=false",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
]
# verl's training/rollout_probs_diff_max: largest |p_actor - p_rollout| over the step's tokens.
IN_SYNC = 1e-4


def _train(run_dir: Path, *overrides: str, env_extra: dict | None = None, timeout: int = 600):
    root = tempfile.mkdtemp(prefix="rlvr-t-", dir="/tmp")
    env = {**os.environ, "RLVR_RAY_TMPDIR_ROOT": root, **(env_extra or {})}
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "train", *SMALL, *overrides, "--run-dir", str(run_dir)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def _segments() -> set[Path]:
    return {p for p in shm.SHM_DIR.iterdir() if p.name.startswith(shm.SEGMENT_PREFIXES)}


def _leftovers(before: set[Path]) -> set[Path]:
    """Segments that appeared during the run and that no live process holds: what the run left."""
    return (_segments() - before) - shm.segments_in_use()


def test_three_steps_with_vllm_keep_rollout_and_actor_in_sync_and_leave_no_shared_memory(
    tmp_path, tiny_model_dir
):
    before = _segments()
    run_dir = tmp_path / "run"
    result = _train(run_dir, "trainer.total_training_steps=3")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "training/rollout_probs_diff_max" in r]
    assert [r["training/global_step"] for r in steps] == [1, 2, 3]
    for row in steps:
        assert row["training/rollout_probs_diff_valid"] == 1
        assert row["training/rollout_probs_diff_max"] < IN_SYNC, row
        assert math.isfinite(row["critic/score/mean"]) and row["response_length/mean"] >= 1
    config = (run_dir / "config.yaml").read_text()
    assert "worker_extension_cls: rlvr_cluster.vllm_cpu.CPUWorkerExtension" in config
    # vLLM's message queues lived in /dev/shm while it ran; the run removed them when it stopped.
    assert "shared-memory segments the run left in /dev/shm" in result.stdout
    assert not _leftovers(before)


def test_a_broken_weight_sync_fails_the_run_with_a_clear_error_instead_of_hanging(tmp_path, tiny_model_dir):
    # verl's own worker extension is the broken sync: on CPU its load fails inside vLLM and its
    # receiver never acknowledges, which used to leave the trainer waiting forever. verl's receiver then closes
    # its socket: the sender sees the disconnect and fails at once (the 20 s timeout is the bound behind it).
    before = _segments()
    start = time.monotonic()
    result = _train(
        tmp_path / "run",
        "trainer.total_training_steps=1",
        "actor_rollout_ref.rollout.engine_kwargs.vllm.worker_extension_cls="
        "verl.workers.rollout.vllm_rollout.utils.vLLMColocateWorkerExtension",
        # One attempt: a restart meets the same broken extension (two restarts made this test 3x longer);
        # the restart policy has its own tests (test_restart_policy.py, test_chaos.py).
        "rlvr.restart.max_restarts=0",
        env_extra={"RLVR_WEIGHT_SYNC_TIMEOUT_S": "20"},
    )
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "training failed: WeightSyncPeerLostError: weight sync to the vLLM rollout failed" in result.stdout
    assert "the rollout's side disconnected in the middle of the sync" in result.stdout
    # A hang would run into the subprocess timeout (600 s); start-up plus 20 s is far below it.
    assert time.monotonic() - start < 400
    assert not _leftovers(before)
