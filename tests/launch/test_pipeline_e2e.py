"""`rlvr pipeline` end to end on CPU with the real stages (slow: verl's RL and SFT trainers, the merger)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from loopback_ray import sweep as _sweep

pytestmark = pytest.mark.slow


@pytest.fixture
def env(rlvr_cache, tmp_path):
    root = tempfile.mkdtemp(prefix="rlvr-p-", dir="/tmp")
    yield {**os.environ, "RLVR_RAY_TMPDIR_ROOT": root, "RLVR_DATA_DIR": str(tmp_path / "data")}
    _sweep(root)


def _cli(*args: str, env: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "pipeline", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def _states(name: str, run_dir: Path, env: dict, *overrides: str) -> dict[str, str]:
    out = _cli(name, *overrides, "--status", "--run-dir", str(run_dir), env=env)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()[1:] if line[:4].strip().isdigit()]
    return {row[1]: row[3] for row in rows}


def _loads_and_generates(model_dir: Path) -> str:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "2+3="}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    out = model.generate(**ids, max_new_tokens=4, do_sample=False)
    return tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)


def test_r1_zero_killed_in_rl_resumes_from_its_checkpoint_and_status_tells_the_truth(tmp_path, env):
    run_dir = tmp_path / "run"
    # Save every step so the kill lands after a checkpoint; own session so the whole group can be killed.
    override = "rl:trainer.save_freq=1"
    args = ["r1_zero", override, "--run-dir", str(run_dir)]
    assert _states("r1_zero", run_dir, env, override) == {
        "rl": "pending",
        "merge": "pending",
        "eval": "pending",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvr_launch.cli", "pipeline", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    marker = run_dir / "stages" / "00-rl" / "checkpoints" / "latest_checkpointed_iteration.txt"
    deadline = time.monotonic() + 480
    while time.monotonic() < deadline and proc.poll() is None:
        if marker.exists() and int(marker.read_text().strip() or 0) >= 1:
            break
        time.sleep(0.5)
    assert proc.poll() is None, "the pipeline ended before its first RL checkpoint"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _sweep(env["RLVR_RAY_TMPDIR_ROOT"])
    killed_at = int(marker.read_text().strip())
    assert 1 <= killed_at < 4
    assert _states("r1_zero", run_dir, env, override) == {
        "rl": "interrupted",
        "merge": "pending",
        "eval": "pending",
    }
    # without the override the stage's config differs from what ran: status says it would start over
    assert _states("r1_zero", run_dir, env)["rl"] == "stale"

    out = _cli(*args, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "did not finish (running); continuing it" in out.stdout
    assert (
        f"resuming from the checkpoint at step {killed_at}"
        in (run_dir / "stages/00-rl/stage.log").read_text()
    )
    assert _states("r1_zero", run_dir, env, override) == {"rl": "done", "merge": "done", "eval": "done"}
    rl = json.loads((run_dir / "stages/00-rl/manifest.json").read_text())
    assert rl["metrics"]["step"] == 4
    report = json.loads((run_dir / "stages/02-eval/eval.json").read_text())
    assert report["prompts"] == 20 and 0.0 <= report["pass@1"] <= 1.0
    assert _loads_and_generates(run_dir / "stages/01-merge/model") is not None

    again = _cli(*args, env=env)  # everything unchanged: nothing runs
    assert again.returncode == 0 and again.stdout.count("unchanged and done, skipped") == 3


def test_distill_samples_verified_traces_and_sft_trains_a_student_that_loads(tmp_path, env):
    run_dir = tmp_path / "run"
    out = _cli("distill", "--run-dir", str(run_dir), env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    states = _states("distill", run_dir, env)
    assert set(states.values()) == {"done"} and len(states) == 5
    sample = json.loads((run_dir / "stages/01-sample/manifest.json").read_text())
    assert 0 < sample["metrics"]["kept"] <= sample["metrics"]["verified"]  # dedup drops repeats
    sft = json.loads((run_dir / "stages/02-sft/manifest.json").read_text())
    assert sft["inputs"]["data"]["key"].startswith(sample["key"])
    student = run_dir / "stages/03-merge/model"
    assert isinstance(_loads_and_generates(student), str)
    report = json.loads((run_dir / "stages/04-eval/eval.json").read_text())
    assert report["model"] == str(student) and report["prompts"] == 20
