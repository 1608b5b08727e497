"""Chaos on a two-node loopback cluster (issue 35, item 3): the second node dies at a random point of a
step, the way a machine or a pod goes away: every process of that node SIGKILLed at once (its raylet, its
agents, the FSDP rank and whatever else verl placed there).

The run (`rlvr train --address`, two FSDP ranks, one per node, a checkpoint every step) fails over to its
restart policy; a replacement node joins (what Kubernetes does for a RayCluster's worker pod, or an
autoscaler), and the restarted attempt resumes from the newest checkpoint across the head and the new
node. It ends with every step exactly once, every sample scored, the restart's cause naming the lost
process or node, and no process of either node left once the cluster is stopped. Real Ray nodes on
loopback, slow.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import chaos_run as chaos
import pytest
from loopback_ray import (
    _processes_mentioning,
    joining_env,
    nodes,
    remove_tree,
    start_head,
    start_node,
    state_api,
    sweep,
)

from rlvr_launch.runs.restart import PEER_LOST, RESTARTABLE

pytestmark = pytest.mark.slow

RLVR = str(Path(sys.executable).parent / "rlvr")
STEPS = 6
LOSS_REASONS = {
    RESTARTABLE[name]
    for name in (
        "ActorDiedError",
        "ActorUnavailableError",
        "WorkerCrashedError",
        "NodeDiedError",
        "LocalRayletDiedError",
    )
} | {PEER_LOST}


def test_a_lost_node_is_survived_by_a_restart_once_a_replacement_joins(tmp_path, tiny_model_dir):
    from rlvr_launch.runs.restart import attempt_records

    rng = random.Random(int(os.environ.get("RLVR_CHAOS_SEED", time.time())))
    root = Path(tempfile.mkdtemp(prefix="rlvr-nc-", dir="/tmp"))
    head = start_head(root, num_cpus=6, num_gpus=1, resources={"rlvr_verifier": 2})
    replacement = None
    proc = None
    try:
        lost = start_node(head, root / "n", num_cpus=6, num_gpus=1)
        run_dir = tmp_path / "run"
        cmd = [
            RLVR, "train", *chaos.SMALL, f"trainer.total_training_steps={STEPS}", "trainer.nnodes=2",
            "trainer.n_gpus_per_node=1", "rlvr.restart.max_restarts=1",
            "--address", head.gcs_address, "--run-dir", str(run_dir),
        ]  # fmt: skip
        proc = subprocess.Popen(
            cmd,
            env=joining_env(head, tmp_path / "home"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        chaos.wait_for_rows(proc, run_dir, attempt=1, rows=2)
        head_id = _head_node_id(head)
        on_the_node = {
            a["class_name"]
            for a in state_api(head, "actors")
            if a["state"] == "ALIVE" and a["node_id"] != head_id
        }
        assert any("WorkerDict" in name for name in on_the_node), (
            f"no FSDP rank on the second node: {on_the_node}"
        )
        chaos.into_the_step(run_dir, 1, rng)
        sweep(str(root / "n"))  # every process of the node at once
        lost.process.wait(timeout=30)
        replacement = start_node(head, root / "r", num_cpus=6, num_gpus=1)
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, out[-4000:]
        logged = chaos.logged_steps(run_dir, 1)
        assert max(logged) < STEPS, f"the node died after the last step: attempt 1 logged {sorted(logged)}"
        chaos.assert_complete(run_dir, STEPS)
        records = attempt_records(run_dir / "attempts")
        assert len(records) == 2, records
        assert records[0].get("status") == 1 and records[0].get("restartable"), records
        # Which report reaches the driver first depends on the moment: the survivor's collective, the dead
        # rank's actor, its node. Each is a loss of a process or a node, named as such.
        assert records[0]["reason"] in LOSS_REASONS, records
        assert records[1]["restart_of"].endswith(f"({records[0]['reason']})"), records
        assert "2 attempts, 1 restart" in out, out[-2000:]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        if replacement is not None:
            replacement.stop()
        head.stop()
        left = _processes_mentioning(str(root))
        remove_tree(root)
    assert left == [], f"processes of the cluster outlived it: {left}"


def _head_node_id(head) -> str:
    return next(n["node_id"] for n in nodes(head) if n.get("is_head_node"))
