"""Multi-node Ray clusters on loopback, for real: what a GPU cluster's layout does to rlvr and verl.

(a) A heterogeneous cluster: a head from the project's full install (verl, torch) and a verifier node
    started from a SEPARATE virtualenv holding only what the verifier image installs (rlvr --no-deps +
    its verifier dependencies: no torch, no verl), advertising `rlvr_verifier` and no CPUs. `rlvr train`
    joins it: every pool actor must run on the verifier node, nothing of verl may, and the run finishes.
    Before the node joins, `rlvr submit` to the same head must refuse at once (no node carries the pool's
    resource), without submitting anything.
(b) FSDP across two Ray nodes, each declaring one logical GPU (`trainer.nnodes=2
    trainer.n_gpus_per_node=1`): verl places its workers and rollout servers on both, FSDP2 shards over
    two ranks through gloo on loopback. With greedy generation both layouts see the same batches, so the
    two-node run must train exactly as a one-node run of the same two steps (same world size, data order
    and seed): the same batches, `actor/pg_loss` and `actor/grad_norm` at every step and trained weights
    within fp32 round-off, and in each run the rollout's log-probs equal the sharded actor's. The
    negative control, a two-node run whose ranks skip the gradient reduction
    (negative_controls/skip_gradient_reduction.py), must fail that same comparison.

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
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace

import pytest
import slim_verifier_env
import torch
from loopback_ray import joining_env, nodes, remove_tree, start_head, start_node, state_api

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
            joining_env(bare_head, tmp_path / "home"),
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

NEGATIVE_CONTROLS = Path(__file__).with_name("negative_controls")
# Two steps in which every layout sees the same batch, so that the training itself compares number for
# number: greedy generation (top_k=1 at temperature 1: the server takes the most likely token, and the
# actor's log-probs stay those of the temperature-1 policy; temperature 0 would have verl's actor divide its
# logits by 0), one response per prompt with REINFORCE++'s batch-wide advantages (GRPO's group advantages
# of identical responses would all be 0, and rlvr refuses n=1 for it). The actor recomputes the old
# log-probs (not the demo's bypass), so verl logs the rollout/actor gap of each run. The final weights are
# saved (model only) for the comparison; no validation (the weights say more).
FSDP_STEPS = [
    "experiment=cpu_demo",
    "trainer.total_training_steps=2",
    "data.train_batch_size=16",
    "actor_rollout_ref.rollout.n=1",
    "actor_rollout_ref.rollout.top_k=1",
    "algorithm.adv_estimator=reinforce_plus_plus",
    "algorithm.rollout_correction.bypass_mode=false",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=2",
    "actor_rollout_ref.actor.checkpoint.save_contents=[model]",
]
STEPS = (1, 2)
COMPARED = ("actor/pg_loss", "actor/grad_norm")
# Largest difference two runs of the same two steps may show and still count as the same training. Measured
# (fp32 on CPU; notes/h33.md): every compared quantity of one node vs two nodes (3 pairs) and of one node
# vs one node (run to run) was exactly 0: the runs are bit-identical (both layouts run 2 ranks on the same
# micro-batches, gloo's sum of two ranks is one commutative fp32 addition, greedy decoding has no random
# draw). 1e-6 admits a few ulps (|weights| <= 1.5, grad norms 2-7) should a summation order ever change;
# the control without reduction sits 3-5 orders above it (grad_norm 0.35 at step 1, weights 2e-3, 99% of
# the parameters off by more than 1e-6). Do not loosen it to pass a run that stopped being bit-identical:
# Adam's first step moves every weight by about lr whatever the gradient's size, so noise in near-zero
# gradients shows as lr-sized weight differences. `actor/pg_loss` at step 1 is 0 in every run
# (REINFORCE++'s whitened advantages at ratio 1); step 1 is judged by its grad_norm.
TOLERANCE = {"actor/pg_loss": 1e-6, "actor/grad_norm": 1e-6, "weights": 1e-6}


@dataclass
class FsdpRun:
    """One finished run of FSDP_STEPS: its metrics, its batches and its trained weights (per rank shard)."""

    name: str
    run_dir: Path

    @cached_property
    def rows(self) -> list[dict]:
        return _rows(self.run_dir)

    def metric(self, step: int, name: str) -> float:
        values = [r[name] for r in self.rows if int(r.get("training/global_step", -1)) == step and name in r]
        assert values, f"{self.name}: no {name} at step {step}"
        return float(values[-1])

    def batch(self, step: int) -> list[tuple]:
        """The step's prompts, responses and scores, in batch order."""
        path = self.run_dir / "rollouts" / f"{step}.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        assert rows, f"{self.name}: no rollouts at step {step}"
        return [(r["input"], r["output"], r["score"]) for r in rows]

    @cached_property
    def weights(self) -> dict[tuple[int, str], torch.Tensor]:
        """Each rank's shard of every parameter after the last step (verl's FSDP2 checkpoint)."""
        actor = self.run_dir / "checkpoints" / f"global_step_{STEPS[-1]}" / "actor"
        shards = {}
        for rank in (0, 1):
            state = torch.load(actor / f"model_world_size_2_rank_{rank}.pt", weights_only=False)
            for name, tensor in state.items():
                shards[(rank, name)] = tensor.to_local() if hasattr(tensor, "to_local") else tensor
        return shards


def training_differences(a: FsdpRun, b: FsdpRun) -> dict[str, float]:
    """Max abs difference of each compared quantity: pg_loss and grad_norm per step, the trained weights."""
    diffs = {
        f"{name} step {step}": abs(a.metric(step, name) - b.metric(step, name))
        for step in STEPS
        for name in COMPARED
    }
    assert a.weights.keys() == b.weights.keys(), "the two checkpoints hold different parameters"
    diffs["weights"] = max(float((a.weights[k] - b.weights[k]).abs().max()) for k in a.weights)
    return diffs


def training_mismatches(a: FsdpRun, b: FsdpRun) -> list[str]:
    """What two runs of FSDP_STEPS did differently: a step's batch (compared exactly), or a compared
    quantity beyond TOLERANCE. Empty: the same training."""
    found = [f"step {step}: the batches differ" for step in STEPS if a.batch(step) != b.batch(step)]
    for what, diff in training_differences(a, b).items():
        limit = TOLERANCE[what.split(" ")[0]]
        if diff > limit:
            found.append(f"{what}: |{a.name} - {b.name}| = {diff:.3g} > {limit:g}")
    return found


@pytest.fixture(scope="module")
def fsdp_runs(tiny_model_dir, tmp_path_factory):
    """Three runs of FSDP_STEPS, each with 2 FSDP ranks: on one node (two logical GPUs), on two loopback
    Ray nodes (one each), and the negative control on the same two nodes, whose ranks skip the gradient
    reduction (negative_controls/skip_gradient_reduction.py). Where verl placed its actors is read while
    the cluster is up."""
    tmp = tmp_path_factory.mktemp("fsdp")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["HOME"] = str(tmp / "home")
    one = FsdpRun("one node", tmp / "one-node")
    out = _train(
        env,
        one.run_dir,
        [*FSDP_STEPS, "trainer.nnodes=1", "trainer.n_gpus_per_node=2", "rlvr.local_ray.num_gpus=2"],
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]

    marks = tmp / "skip-reduction-marks"
    marks.mkdir()
    # The control's module on the path of the workers and of the control's `rlvr train` (verl imports it
    # wherever it builds the model config, only in the run that names it).
    control_env = {
        "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(NEGATIVE_CONTROLS)) if p),
        "RLVR_SKIP_GRAD_REDUCTION_MARKS": str(marks),
    }
    root = Path(tempfile.mkdtemp(prefix="rlvr-2n-", dir="/tmp"))
    head = start_head(
        root,
        num_cpus=6,
        num_gpus=1,
        resources={"rlvr_verifier": 2},
        env=control_env,
    )
    node = None
    try:
        node = start_node(head, root / "n", num_cpus=6, num_gpus=1)
        node_ids = {n["node_id"] for n in nodes(head)}
        two = FsdpRun("two nodes", tmp / "two-nodes")
        out = _train(
            joining_env(head, tmp / "home2"),
            two.run_dir,
            [*FSDP_STEPS, "trainer.nnodes=2", "trainer.n_gpus_per_node=1"],
        )
        assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
        placed: dict[str, set[str]] = {}
        for actor in state_api(head, "actors"):
            placed.setdefault(actor["class_name"], set()).add(actor["node_id"])
        control = FsdpRun("no reduction", tmp / "no-reduction")
        # Its failure fails the control's test only (asserted there).
        out = _train(
            {**joining_env(head, tmp / "home3"), **control_env},
            control.run_dir,
            [
                *FSDP_STEPS,
                "trainer.nnodes=2",
                "trainer.n_gpus_per_node=1",
                "actor_rollout_ref.model.external_lib=skip_gradient_reduction",
            ],
        )
        control_out = out
    finally:
        if node is not None:
            node.stop()
        head.stop()
        remove_tree(root)
    skipped = [json.loads(p.read_text()) for p in sorted(marks.glob("*.json"))]
    yield SimpleNamespace(
        one=one,
        two=two,
        control=control,
        control_out=control_out,
        node_ids=node_ids,
        placed=placed,
        skipped_reduction=skipped,
    )


def test_fsdp_across_two_nodes_matches_one_node(fsdp_runs):
    one, two, node_ids, placed = fsdp_runs.one, fsdp_runs.two, fsdp_runs.node_ids, fsdp_runs.placed
    assert len(node_ids) == 2
    print({k: len(v) for k, v in placed.items()})
    # verl's FSDP workers (one per logical GPU) and the rollout servers of their replicas: on both nodes.
    workers = set().union(*(v for k, v in placed.items() if k.endswith("WorkerDict")))
    assert workers == node_ids, placed
    assert placed.get("HFServer") == node_ids, placed
    for step in STEPS:
        # Within each run: the FSDP actor, sharded over the two ranks, recomputes the log-probs the rollout
        # servers (fed the weights gathered across the ranks after each update) generated with.
        for run in (one, two):
            diff = run.metric(step, "training/rollout_probs_diff_max")
            print(f"step {step} {run.name}: rollout vs FSDP actor log-prob max diff {diff:.2e}")
            assert diff < 1e-4, (run.name, step, diff)
    # Across the layouts: the same batches, and the same losses, gradient norms and trained weights. A
    # gradient that is not reduced across the nodes changes the last two (test below).
    print(f"one node vs two nodes: {training_differences(one, two)}")
    assert training_mismatches(one, two) == []


def test_fsdp_check_rejects_two_ranks_that_do_not_reduce_gradients(fsdp_runs):
    one, control, out = fsdp_runs.one, fsdp_runs.control, fsdp_runs.control_out
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    # The control really ran without the reduction, on both ranks, one on each node.
    assert sorted(m["rank"] for m in fsdp_runs.skipped_reduction) == [0, 1], fsdp_runs.skipped_reduction
    assert {m["node_id"] for m in fsdp_runs.skipped_reduction} == fsdp_runs.node_ids
    # The same first batch (the same weights generated it): what differs is the training.
    assert control.batch(1) == one.batch(1)
    print(f"one node vs no reduction: {training_differences(one, control)}")
    mismatches = training_mismatches(one, control)
    print("\n".join(mismatches))
    assert any(m.startswith("actor/grad_norm step 1:") for m in mismatches), mismatches
    assert any(m.startswith("weights:") for m in mismatches), mismatches
