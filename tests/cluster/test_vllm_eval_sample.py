"""`rlvr eval` / `rlvr sample` with `--rollout vllm`: verl's own vLLM server (a standalone replica on a
private Ray, vLLM's CPU build, fp32) generates what the hf rollout server generates, leaves nothing
running, and what `rlvr sample` keeps is exactly what `rlvr score` accepts, on either rollout.

One `rlvr eval` process on the first 100 of the 200 held-out sums of `addition`, greedy and K=2 sampled
on one server; then the same greedy eval on the
hf path in this process. Both are fp32 with argmax decoding over the same chat-template ids, so each
prompt must get the same text and verdict, not only the same pass@1. Afterwards no process of that run
is alive (each carries a marker in its environment: Ray's head, its workers, vLLM's engine core), its Ray
temp dir is gone, and /dev/shm holds no new segment that nobody has open.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from vllm_cpu_support import require_vllm_cpu

from rlvr_cluster import shm
from rlvr_launch.pipelines import evaluate, sample

# vLLM engines and the real model take GBs and make /dev/shm segments others check: one at a time (conftest)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm_or_real_model")]

MARKER = "RLVR_TEST_VLLM_EVAL_RUN"
PROMPTS = 100  # the first 100 held-out sums


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in environ:
            found.append(int(entry))
    return found


def _greedy(path: Path) -> list[tuple[int, str, str]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [(x["prompt_id"], x["response"], x["verdict"]["status"]) for x in lines if x["mode"] == "greedy"]


def test_vllm_eval_gives_the_hf_paths_greedy_texts_and_verdicts_and_leaves_nothing_running(
    tiny_model_dir, tmp_path, request
):
    require_vllm_cpu()
    ray_root = Path(tempfile.mkdtemp(prefix="rlvr-tve-", dir="/tmp"))  # short: Ray's socket paths
    request.addfinalizer(lambda: shutil.rmtree(ray_root, ignore_errors=True))
    marker = f"{MARKER}={uuid.uuid4().hex}"
    env = {**os.environ, "RLVR_RAY_TMPDIR_ROOT": str(ray_root), MARKER: marker.partition("=")[2]}
    segments_before = shm.present_segments()
    out, responses = tmp_path / "vllm.json", tmp_path / "vllm.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "rlvr_launch.cli",
        "eval",
        str(tiny_model_dir),
        "--task",
        "addition",
        "--limit",
        str(PROMPTS),
    ]
    cmd += ["--rollout", "vllm", "--k", "2", "--out", str(out), "--responses", str(responses), "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "generating with verl's vLLM rollout server" in done.stderr
    report = json.loads(done.stdout)  # stdout is the report alone: vLLM's and Ray's lines go elsewhere

    # nothing of that run is left: processes, Ray's temp dir, shared memory nobody holds
    assert _processes_with(marker) == []
    assert list(ray_root.iterdir()) == []
    assert (shm.present_segments() - segments_before) - shm.segments_in_use() == set()

    assert report == json.loads(out.read_text())
    assert report["prompts"] == 100 and report["generation"]["rollout"] == "vllm"
    assert [run["responses"] for run in report["generation"]["runs"]] == [100, 200]
    assert sum(sum(c.values()) for c in report["sampled"]["statuses"].values()) == 200

    hf_responses = tmp_path / "hf.jsonl"
    hf = evaluate.evaluate(
        str(tiny_model_dir), "addition", limit=PROMPTS, rollout="hf", responses_path=hf_responses
    )
    assert hf["generation"]["rollout"] == "hf"
    vllm_greedy, hf_greedy = _greedy(responses), _greedy(hf_responses)
    assert len(vllm_greedy) == 100
    assert vllm_greedy == hf_greedy  # prompt by prompt: the same text, the same verdict
    assert report["pass@1"] == hf["pass@1"]
    assert 0 < report["pass@1"] < 1  # the comparison covers right and wrong answers


@pytest.mark.parametrize("rollout", ["hf", "vllm"])
def test_sample_keeps_exactly_what_rlvr_score_accepts(tiny_model_dir, tmp_path, rollout):
    """The same responses through `rlvr score` (the verifier pool on a private Ray): its `ok` lines are
    exactly the responses `rlvr sample` kept (no dedup, no filters)."""
    if rollout == "vllm":
        require_vllm_cpu()
    import pandas as pd
    import ray

    out = tmp_path / "out"
    report = sample.sample(str(tiny_model_dir), "addition", 4, out, limit=20, dedup=False, rollout=rollout)
    assert report["generation"]["rollout"] == rollout
    assert not ray.is_initialized()  # the vLLM path stopped the Ray it started in this process
    scored = tmp_path / "scored.jsonl"
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "score", "--verifier", "math"]
    cmd += ["--input", str(out / "responses.jsonl"), "--output", str(scored), "--num-actors", "2"]
    subprocess.run(cmd, check=True, timeout=300)
    lines = [json.loads(line) for line in (out / "responses.jsonl").read_text().splitlines()]
    verdicts = [json.loads(line) for line in scored.read_text().splitlines()]
    by_score = {
        (x["prompt_id"], x["sample_index"])
        for x, v in zip(lines, verdicts, strict=True)
        if v["status"] == "ok"
    }
    frame = pd.read_parquet(out / "train.parquet")
    kept = set(zip(frame.prompt_id, frame.sample_index, strict=True))
    assert len(lines) == 80 and by_score == kept and kept
    assert [v["status"] for v in verdicts] == [x["verdict"]["status"] for x in lines]


def test_a_vllm_server_that_cannot_start_is_a_clear_error_and_its_ray_is_gone(tiny_model_dir, request):
    """A private Ray without the logical GPU verl's standalone replica asks for (rlvr.local_ray.num_gpus=0,
    and no GPU visible: an empty CUDA_VISIBLE_DEVICES hides a machine's GPUs from Ray's detection, so the
    case holds on any machine): verl refuses to place it, and rlvr says so in one error, then stops Ray."""
    require_vllm_cpu()
    ray_root = Path(tempfile.mkdtemp(prefix="rlvr-tvf-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(ray_root, ignore_errors=True))
    env = {**os.environ, "RLVR_RAY_TMPDIR_ROOT": str(ray_root), "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "eval", str(tiny_model_dir), "rlvr.local_ray.num_gpus=0"]
    cmd += ["--task", "addition", "--rollout", "vllm", "--limit", "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-3000:]
    assert (
        "rlvr eval: error: verl's vLLM server failed to start: ValueError: Total available GPUs 0"
        in done.stderr
    )
    assert "--rollout hf generates without vLLM" in done.stderr and "Traceback" not in done.stderr
    assert list(ray_root.iterdir()) == []  # the private Ray's temp dir went with it


def test_the_thinking_budget_sweep_on_vllm_gives_the_hf_paths_table(tiny_model_dir, tmp_path):
    """`rlvr eval --thinking-budget` with `--rollout vllm`: rlvr's thinking_budget agent loop calls verl's
    vLLM server handle as it calls the hf server; greedy, fp32, so every row (a budget of 0: all hits, the
    early-stop phrase then the answer; 2: some hits; 32: none; non-thinking) is the hf path's."""
    require_vllm_cpu()
    budgets = [0, 2, 32]
    rows = {}
    for rollout in ("hf", "vllm"):
        report = evaluate.budget_sweep(str(tiny_model_dir), "addition", budgets, limit=8, rollout=rollout)
        assert report["rollout"] == rollout
        rows[rollout] = (report["thinking"], report["non_thinking"])
    assert rows["vllm"] == rows["hf"]
    hit_rates = [r["budget_hit_rate"] for r in rows["vllm"][0]]
    assert hit_rates[0] == 1.0 and hit_rates[-1] == 0.0  # the budget was enforced, and lifted
