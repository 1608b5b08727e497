"""A mixed run end to end (issue 34; slow): `rlvr train experiment=cpu_mix` (the mixture of addition and
generated ifeval rows built by the prepare step, no data command for them) plus a third domain, a
reasoning-gym task (its dataset is the user's choice, so its one `rlvr data reasoning_gym` command comes
first), trains two steps with verl's real trainer on CPU, and every step's metrics row carries the
per-domain figures of all three domains, which the picture draws. The one run is also reasoning-gym's
end-to-end training test: its rows are scored by reasoning-gym's own scorer inside a real run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from rlvr_verifiers.base import STATUSES

pytestmark = pytest.mark.slow
DOMAINS = ("addition", "ifeval", "reasoning_gym")

SMALL = [
    "data.train_batch_size=8",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "trainer.total_training_steps=2",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
]


def test_cpu_mix_trains_with_per_domain_figures_at_every_step(tmp_path, rlvr_cache):
    run_dir = tmp_path / "run"
    ray_root = tempfile.mkdtemp(prefix="rlvr-mix-", dir="/tmp")  # short: Ray's socket paths
    env = {**os.environ, "RLVR_RAY_TMPDIR_ROOT": ray_root, "RLVR_DATA_DIR": str(tmp_path / "data")}
    gym = subprocess.run(
        [sys.executable, "-m", "rlvr_launch.cli", "data", "reasoning_gym", "--out", str(tmp_path / "data" / "reasoning_gym"),
         "--source", "gym:chain_sum,max_terms=2", "--limit", "200"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert gym.returncode == 0, gym.stdout[-3000:] + gym.stderr[-3000:]
    cmd = [
        sys.executable,
        "-m",
        "rlvr_launch.cli",
        "train",
        "experiment=cpu_mix",
        "+rlvr.mix.reasoning_gym=1",
        *SMALL,
        "--run-dir",
        str(run_dir),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=720, env=env)
    finally:
        shutil.rmtree(ray_root, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rlvr.mix: built" in proc.stdout + proc.stderr  # built by the prepare step, no data command
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["training/global_step"] for r in rows] == [1, 2]
    for row in rows:
        counts = {d: row[f"rlvr/domain/{d}/count"] for d in DOMAINS}
        assert sum(counts.values()) == 8 * 4, row  # every response of the step, in one domain or the other
        for domain, count in counts.items():
            for status in STATUSES[1:]:  # each failure status counted (0 where none happened)
                assert row[f"rlvr/domain/{domain}/{status}"] >= 0
            if count:
                assert 0.0 <= row[f"rlvr/domain/{domain}/pass_rate"] <= 1.0
                assert row[f"rlvr/domain/{domain}/response_chars_mean"] >= 0
                assert f"rlvr/domain/{domain}/reward_mean" in row
        # the per-domain counts agree with the per-verifier ones (addition: math, ifeval: ifeval)
        assert counts["addition"] == row.get("rlvr/math/count", 0.0)
        assert counts["ifeval"] == row.get("rlvr/ifeval/count", 0.0)
        assert counts["reasoning_gym"] == row.get("rlvr/reasoning_gym/count", 0.0)
    # reasoning-gym's rows were sampled and scored by its own scorer (a verdict, not a failure status)
    assert sum(r["rlvr/domain/reasoning_gym/count"] for r in rows) > 0
    assert (
        sum(
            r["rlvr/domain/reasoning_gym/invalid_input"] + r["rlvr/domain/reasoning_gym/sandbox_error"]
            for r in rows
        )
        == 0
    )
    assert (run_dir / "reward_curve.png").stat().st_size > 0
