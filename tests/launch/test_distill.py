"""Distillation (issue 14): the embedded teacher/student pair, the `distill` pipeline, `rlvr submit --pipeline`.

Fast: the student is a different, smaller model with the teacher's exact tokenizer, built
deterministically and cached digest-keyed; `embedded://student` resolves to it; `rlvr submit --pipeline`
refuses a bad pipeline or stage override on the submitting machine, before any cluster is contacted.
Slow (one run, shared by its asserts): `rlvr submit --pipeline distill --follow` on a real loopback Ray
head (token auth on, tests/launch/loopback_ray.py) runs the whole pipeline as a Ray job; the run dir then
holds the teacher's verified traces, a student SFT'd on them that is the SMALL model and loads and
generates, and `rlvr pipeline distill --status` (run locally on the same folder) says every stage is
done; the same job resubmitted with the same --run-dir skips all five stages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from loopback_ray import remove_tree, start_head

RLVR = str(Path(sys.executable).with_name("rlvr"))


def _weights(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


def test_student_is_a_smaller_model_with_the_teachers_tokenizer(rlvr_cache, tiny_model_dir, tmp_path):
    from rlvr_launch.runs import embedded_model as embedded

    student = embedded.ensure_student_model(rlvr_cache, log=lambda _m: None)
    teacher_info = json.loads((tiny_model_dir / "rlvr_build.json").read_text())
    student_info = json.loads((student / "rlvr_build.json").read_text())
    assert student != tiny_model_dir
    assert student_info["parameters"] * 4 < teacher_info["parameters"], (student_info, teacher_info)
    config = json.loads((student / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"]) == (64, 1)
    # Distillation reads the teacher's token ids as the student's: the tokenizers must be the same bytes.
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (student / name).read_bytes() == (tiny_model_dir / name).read_bytes(), name
    assert student_info["warm_start_steps"] == 0  # it knows nothing of the task before its pipeline
    # Deterministic: a second build elsewhere has the same weights; the teacher's spec is untouched.
    again = tmp_path / "again"
    embedded.build_model(embedded.STUDENT_SPEC, again, log=lambda _m: None)
    first, second = _weights(student), _weights(again)
    assert first.keys() == second.keys() and all((first[k] == second[k]).all() for k in first)
    assert tiny_model_dir.name.endswith(embedded.TinySpec().digest())
    assert embedded.STUDENT_SPEC.digest() != embedded.TinySpec().digest()


def test_embedded_student_resolves_as_a_pipeline_input(rlvr_cache):
    from rlvr_launch.pipelines import pipeline
    from rlvr_launch.runs import embedded_model as embedded

    assert pipeline._resolve_path("embedded://student") == str(embedded.ensure_student_model(rlvr_cache))
    spec = pipeline.load_spec("distill")
    sft = next(s for s in spec["stages"] if s["kind"] == "sft")
    teachers = {s["inputs"]["model"] for s in spec["stages"] if s["kind"] in ("sample",)}
    assert sft["inputs"]["model"] == "embedded://student" and teachers == {"embedded://tiny"}


def _rlvr(*args: str, env: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([RLVR, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _bare_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["HOME"] = tempfile.mkdtemp(prefix="rlvr-home-")
    return env


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--pipeline", "no_such_pipeline"], "unknown pipeline 'no_such_pipeline'; pick one of"),
        (["--pipeline", "distill", "nosuchstage:x=1"], "write STAGE:key=value with STAGE one of"),
        (["--pipeline", "distill", "--prepare-data"], "--prepare-data is for a single recipe"),
    ],
)
def test_submit_pipeline_refuses_bad_input_before_contacting_the_cluster(args, says):
    # 127.0.0.1:9 has nobody listening: had rlvr tried to connect first, the error would say so instead.
    out = _rlvr("submit", "--address", "http://127.0.0.1:9", *args, env=_bare_env(), timeout=120)
    assert out.returncode != 0
    assert says in out.stderr, out.stderr[-2000:]
    assert "Traceback" not in out.stderr


def _status(run_dir: Path, env: dict) -> dict[str, str]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlvr_launch.cli",
            "pipeline",
            "distill",
            "--status",
            "--run-dir",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()[1:] if line[:4].strip().isdigit()]
    return {row[1]: row[3] for row in rows}


@pytest.mark.slow
def test_submit_pipeline_runs_distill_as_a_ray_job_and_a_resubmission_continues_it(tiny_model_dir, tmp_path):
    import pandas as pd
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = Path(tempfile.mkdtemp(prefix="rlvr-dh-", dir="/tmp"))  # short: Ray's socket paths
    head = start_head(root, num_cpus=4, num_gpus=1, resources={"rlvr_verifier": 2})
    try:
        env = head.client_env()
        run_dir = tmp_path / "run"
        submit = ["submit", "--pipeline", "distill", "--address", head.dashboard_url, "--follow"]
        out = _rlvr(*submit, "--run-dir", str(run_dir), env=env)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        assert "SUCCEEDED" in out.stderr
        assert "pipeline: distill" in out.stdout  # the job's metadata, printed at submission

        # Every stage done, as the local --status reads the folder the job wrote.
        assert _status(run_dir, env) == dict.fromkeys(
            ["teacher_eval", "sample", "sft", "merge", "eval"], "done"
        )
        stages = run_dir / "stages"
        teacher_eval = json.loads((stages / "00-teacher_eval/eval.json").read_text())
        build = json.loads((tiny_model_dir / "rlvr_build.json").read_text())
        # The teacher evaluated in the job is the embedded tiny model: its greedy pass@1 is the build's own.
        assert teacher_eval["pass@1"] == pytest.approx(build["warm_start_held_out_accuracy"])
        traces = pd.read_parquet(stages / "01-sample/data/train.parquet")
        assert len(traces) > 0 and set(traces["verdict"]) == {"ok"}
        assert set(traces["source_model"]) == {str(tiny_model_dir)}
        for messages, prompt_id in zip(traces["messages"], traces["prompt_id"], strict=True):
            assert messages[-1]["role"] == "assistant" and isinstance(prompt_id, int | float)

        # The SFT'd model is the small student (not the teacher), and it loads and generates.
        student = stages / "03-merge/model"
        config = json.loads((student / "config.json").read_text())
        assert (config["hidden_size"], config["num_hidden_layers"]) == (64, 1)
        sft = json.loads((stages / "02-sft/manifest.json").read_text())
        assert "student" in sft["inputs"]["model"]["path"]
        tokenizer = AutoTokenizer.from_pretrained(student)
        model = AutoModelForCausalLM.from_pretrained(student, dtype=torch.float32)
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": "2+3="}],
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
        new = model.generate(**ids, max_new_tokens=4, do_sample=False)[0, ids["input_ids"].shape[1] :]
        assert len(new) > 0
        final = json.loads((stages / "04-eval/eval.json").read_text())
        assert final["model"] == str(student) and final["prompts"] == 200

        # Resubmitted with the same run dir: the job continues the pipeline there, which is finished.
        again = _rlvr(*submit, "--run-dir", str(run_dir), env=env)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert again.stdout.count("unchanged and done, skipped") == 5, again.stdout[-3000:]
    finally:
        head.stop()
        remove_tree(root)
