"""Multi-node Ray clusters on loopback, for real: what a GPU cluster's layout does to rlvr and verl.

(a) A heterogeneous cluster: a head from the project's full install (verl, torch) and a verifier node
    started from a SEPARATE virtualenv holding only what the verifier image installs (rlvr --no-deps +
    its verifier dependencies: no torch, no verl), advertising `rlvr_verifier` and no CPUs. `rlvr train`
    joins it: every pool actor must run on the verifier node, nothing of verl may, and the run finishes.
    Before the node joins, `rlvr submit` to the same head must refuse at once (no node carries the pool's
    resource), without submitting anything.
(b) FSDP across two Ray nodes, each declaring one logical GPU (`trainer.nnodes=2
    trainer.n_gpus_per_node=1`): verl places its workers and rollout servers on both, FSDP2 shards over
    two ranks through gloo on loopback; the run must match a one-node run of the same two steps (same
    world size, data order and seed): identical held-out score before training, the rollout's and the
    sharded actor's log-probs equal at every step in both runs (deterministic), entropy and reward within
    sampling noise (sampling is not bit-reproducible across runs).

Heads and nodes have their own ports, temp dirs and token (tests/launch/loopback_ray.py) and are stopped
by pid. Every run is the installed `rlvr` console script in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
import slim_verifier_env
from loopback_ray import nodes, remove_tree, start_head, start_node, state_api

pytestmark = pytest.mark.slow

RLVR = str(Path(sys.executable).with_name("rlvr"))
# Two small steps of the CPU demo: 16 prompts x 4 responses (the tiny model's mini-batch is 16 prompts).
SMALL_STEPS = [
    "experiment=cpu_demo",
    "trainer.total_training_steps=2",
    "data.train_batch_size=16",
    "actor_rollout_ref.rollout.n=4",
    "trainer.save_freq=-1",
]
VERIFIER_SLOTS = 3


def _train(
    env: dict, run_dir: Path, overrides: list[str], timeout: float = 900
) -> subprocess.CompletedProcess:
    started = time.monotonic()
    # rlvr train ignores an exported RAY_ADDRESS outside a Ray job; --address joins the loopback cluster.
    join = ["--address", env["RAY_ADDRESS"]] if env.get("RAY_ADDRESS") else []
    out = subprocess.run(
        [RLVR, "train", "--run-dir", str(run_dir), *join, *overrides],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    print(f"rlvr train {' '.join(overrides)}: {time.monotonic() - started:.0f} s, rc {out.returncode}")
    return out


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def _joining_env(head, home: Path) -> dict:
    env = head.client_env(home=home)
    env.update(
        {
            "RAY_ADDRESS": head.gcs_address,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(head.token_path),
        }
    )
    return env


@pytest.fixture(scope="module")
def slim_env(rlvr_cache, tmp_path_factory):
    return slim_verifier_env.build(Path(rlvr_cache), tmp_path_factory.mktemp("slim"))


@pytest.fixture(scope="module")
def bare_head(tiny_model_dir):
    """A head of the full install with one logical GPU and CPUs, and no verifier resource."""
    root = Path(tempfile.mkdtemp(prefix="rlvr-hc-", dir="/tmp"))
    head = start_head(root, num_cpus=8, num_gpus=1)
    try:
        yield head
    finally:
        head.stop()
        remove_tree(root)


def test_submit_refuses_a_cluster_without_verifier_nodes_before_anything_starts(bare_head, tmp_path):
    started = time.monotonic()
    out = subprocess.run(
        [
            RLVR,
            "submit",
            "--address",
            bare_head.dashboard_url,
            "--run-dir",
            str(tmp_path / "run"),
            *SMALL_STEPS,
        ],
        env=bare_head.client_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    message = out.stderr.strip().splitlines()[-1]
    assert "no node of this Ray cluster carries the verifier pool's resource 'rlvr_verifier'" in message
    assert "rlvr.verifier_placement=any_cpu" in message and "--num-cpus 0" in message
    assert "Traceback" not in out.stderr
    request = urllib.request.Request(
        f"{bare_head.dashboard_url}/api/jobs/", headers={"Authorization": f"Bearer {bare_head.token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.loads(response.read()) == [], "nothing may be submitted"
    print(f"refused in {time.monotonic() - started:.1f} s: {message}")


def test_heterogeneous_cluster_keeps_verl_off_the_slim_verifier_node(bare_head, slim_env, tmp_path):
    node_root = Path(tempfile.mkdtemp(prefix="rlvr-vn-", dir="/tmp"))
    node = start_node(
        bare_head,
        node_root,
        ray_bin=slim_env.ray,
        num_cpus=0,
        resources={"rlvr_verifier": VERIFIER_SLOTS},
        env=slim_env.env(),
    )
    try:
        verifier_ids = [n["node_id"] for n in nodes(bare_head) if n["resources_total"].get("rlvr_verifier")]
        assert len(verifier_ids) == 1
        verifier_id = verifier_ids[0]
        run_dir = tmp_path / "run"
        out = _train(
            _joining_env(bare_head, tmp_path / "home"),
            run_dir,
            # Every answer goes to the actors (none decided in the caller), so the pool really works there.
            # cpu_demo fixes 1 actor for a laptop; without it the pool is sized from the cluster.
            [
                *SMALL_STEPS,
                "+reward.reward_kwargs.rlvr.pool.quick_in_caller=false",
                "~reward.reward_kwargs.rlvr.pool.num_actors",
            ],
        )
        assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
        trained = [r for r in _rows(run_dir) if int(r.get("training/global_step", 0)) > 0]
        assert [int(r["training/global_step"]) for r in trained] == [1, 2]
        assert all("critic/score/mean" in r for r in trained)
        # The pool was sized from the cluster's resource (the pool's own default would be 2).
        assert f"verifier pool: {VERIFIER_SLOTS} actors on resource 'rlvr_verifier'" in out.stdout

        actors = state_api(bare_head, "actors")
        pool = [a for a in actors if a["class_name"] == "VerifierActor"]
        assert len(pool) == VERIFIER_SLOTS, [(a["class_name"], a["state"]) for a in pool]
        assert {a["node_id"] for a in pool} == {verifier_id}, "a pool actor ran off the verifier node"
        others = [a for a in actors if a["class_name"] != "VerifierActor"]
        assert others, "verl's actors are missing from the state API"
        on_verifier = [a["class_name"] for a in others if a["node_id"] == verifier_id]
        assert not on_verifier, f"verl placed {on_verifier} on the slim verifier node"
        tasks = state_api(bare_head, "tasks")
        stray = {
            t["func_or_class_name"]
            for t in tasks
            if t.get("node_id") == verifier_id and not t["func_or_class_name"].startswith("VerifierActor")
        }
        assert not stray, f"tasks of verl ran on the verifier node: {stray}"
        scored = [t for t in tasks if t["func_or_class_name"].startswith("VerifierActor.verify")]
        assert scored and {t["node_id"] for t in scored} == {verifier_id}, "the pool never scored there"
        print(
            f"{len(pool)} pool actors and {len(scored)} scoring calls on the slim node; "
            f"{len(others)} verl/rlvr actors elsewhere"
        )
    finally:
        node.stop()
        remove_tree(node_root)


# ---- (b) FSDP across two nodes -----------------------------------------------------------------------

# A gentler step than the demo's (16 prompts a step at 5e-4 can knock the tiny model off its warm start in
# two steps, in either layout, which would drown the comparison in noise).
FSDP_STEPS = [
    *SMALL_STEPS,
    "trainer.test_freq=2",
    "trainer.val_before_train=true",
    "actor_rollout_ref.actor.optim.lr=1e-4",
    # The actor recomputes the old log-probs (the demo takes them from the rollout): the rollout/actor
    # gap verl then logs, and the entropy of that pass, are what this comparison reads.
    "algorithm.rollout_correction.bypass_mode=false",
]


def _val_key(rows: list[dict]) -> str:
    keys = sorted({k for r in rows for k in r if k.startswith("val-core/")})
    assert keys, f"no validation metric in {sorted({k for r in rows for k in r})}"
    return keys[0]


def test_fsdp_across_two_nodes_matches_one_node(tiny_model_dir, tmp_path):
    # One node, two logical GPUs: the same FSDP world size (2 ranks) and rollout replicas as below.
    one_dir = tmp_path / "one-node"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["HOME"] = str(tmp_path / "home")
    one = _train(
        env,
        one_dir,
        [*FSDP_STEPS, "trainer.nnodes=1", "trainer.n_gpus_per_node=2", "rlvr.local_ray.num_gpus=2"],
    )
    assert one.returncode == 0, one.stdout[-4000:] + one.stderr[-4000:]

    root = Path(tempfile.mkdtemp(prefix="rlvr-2n-", dir="/tmp"))
    head = start_head(root, num_cpus=6, num_gpus=1, resources={"rlvr_verifier": 2})
    node = None
    try:
        node = start_node(head, root / "n", num_cpus=6, num_gpus=1)
        two_dir = tmp_path / "two-nodes"
        two = _train(
            _joining_env(head, tmp_path / "home2"),
            two_dir,
            [*FSDP_STEPS, "trainer.nnodes=2", "trainer.n_gpus_per_node=1"],
        )
        assert two.returncode == 0, two.stdout[-4000:] + two.stderr[-4000:]
        node_ids = {n["node_id"] for n in nodes(head)}
        assert len(node_ids) == 2
        actors = state_api(head, "actors")
        by_class: dict[str, set[str]] = {}
        for actor in actors:
            by_class.setdefault(actor["class_name"], set()).add(actor["node_id"])
        print({k: len(v) for k, v in by_class.items()})
        # verl's FSDP workers (one per logical GPU) and the rollout servers of their replicas: on both nodes.
        workers = set().union(*(v for k, v in by_class.items() if k.endswith("WorkerDict")))
        assert workers == node_ids, by_class
        assert by_class.get("HFServer") == node_ids, by_class
    finally:
        if node is not None:
            node.stop()
        head.stop()
        remove_tree(root)

    rows_one, rows_two = _rows(one_dir), _rows(two_dir)
    key = _val_key(rows_one)

    def at(rows, step, name):
        values = [
            r[name]
            for r in rows
            if int(r.get("training/global_step", r.get("step", -1))) == step and name in r
        ]
        assert values, f"no {name} at step {step}"
        return values[-1]

    # Before any update: the same model, prompts and greedy decoding give the same held-out score.
    assert at(rows_one, 0, key) == at(rows_two, 0, key)
    for step in (1, 2):
        # Deterministic within each run: the FSDP actor, sharded over the two nodes, recomputes the exact
        # log-probs the rollout servers (one per node, fed the weights gathered across nodes after each
        # update) sampled with. A broken cross-node shard, all-reduce or weight sync shows up here.
        for rows, where in ((rows_one, "one node"), (rows_two, "two nodes")):
            diff = at(rows, step, "training/rollout_probs_diff_max")
            print(f"step {step} {where}: rollout vs FSDP actor log-prob max diff {diff:.2e}")
            assert diff < 1e-4, (where, step, diff)
        # Sampling is not bit-reproducible across runs (the rollout batches requests as they arrive), so
        # these compare within sampling noise: a run on broken weights is far outside it.
        a, b = at(rows_one, step, "actor/entropy"), at(rows_two, step, "actor/entropy")
        print(f"step {step} actor/entropy: one node {a:.4f}, two nodes {b:.4f}")
        assert abs(a - b) <= 0.1 * abs(a), (step, a, b)
        a, b = at(rows_one, step, "critic/score/mean"), at(rows_two, step, "critic/score/mean")
        print(f"step {step} critic/score/mean: one node {a:.4f}, two nodes {b:.4f}")
        assert abs(a - b) <= 0.25, (step, a, b)  # 64 samples a step: ~3 standard deviations of the difference
    print(f"held-out {key}: one node {at(rows_one, 2, key)}, two nodes {at(rows_two, 2, key)} after 2 steps")
