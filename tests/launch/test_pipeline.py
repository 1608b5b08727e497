"""`rlvr pipeline`: stage keys, skipping, continuing an unfinished stage, re-running downstream, --status.

The runner's logic is exercised with a stage kind registered here (`counted`: appends to a log and
writes its output file, or fails on demand); the shipped specs are checked for structure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr_launch.errors import UserError
from rlvr_launch.pipelines import pipeline, stages
from rlvr_launch.recipes import compose

RUNS: list[str] = []


@stages.stage_kind("counted")
def _counted(stage: stages.Stage) -> dict:
    RUNS.append(stage.name)
    progress = stage.dir / "progress.txt"  # what a checkpoint is to a real stage: survives a failure
    previous = progress.read_text() if progress.exists() else ""
    progress.write_text(previous + "x")
    if stage.args.get("fail_once") and not previous:
        raise RuntimeError("failing the first attempt")
    upstream = Path(stage.inputs["src"]).read_text() if "src" in stage.inputs else ""
    out = stage.dir / "out.txt"
    out.write_text(upstream + f"{stage.name}({stage.args.get('value', 0)})")
    return {"outputs": {"file": str(out)}, "metrics": {"attempts": len(progress.read_text())}}


SPEC = """
# test pipeline
stages:
  - {name: a, kind: counted, args: {value: 1}}
  - {name: b, kind: counted, inputs: {src: a.file}, args: {fail_once: FAIL}}
  - {name: c, kind: counted, inputs: {src: b.file}}
"""


@pytest.fixture
def recipes(tmp_path, monkeypatch):
    root = tmp_path / "recipes"
    shutil.copytree(compose.recipes_dir(), root)
    monkeypatch.setenv("RLVR_RECIPES_DIR", str(root))
    RUNS.clear()

    def write(text: str, name: str = "t") -> str:
        (root / "pipeline" / f"{name}.yaml").write_text(text)
        return name

    return write


def _states(name: str, run_dir: Path, overrides=None) -> list[str]:
    return [row["state"] for row in pipeline.states(pipeline.load_spec(name, overrides), run_dir)]


def test_a_finished_pipeline_is_skipped_and_a_changed_stage_reruns_with_everything_downstream(
    recipes, tmp_path
):
    name = recipes(SPEC.replace("FAIL", "false"))
    run_dir = tmp_path / "run"
    assert _states(name, run_dir) == ["pending", "pending", "pending"]
    pipeline.execute(name, run_dir, log=lambda _m: None)
    assert RUNS == ["a", "b", "c"]
    final = run_dir / "stages" / "02-c" / "out.txt"
    assert final.read_text() == "a(1)b(0)c(0)"
    manifest = json.loads((run_dir / "stages" / "01-b" / "manifest.json").read_text())
    assert manifest["status"] == "done" and manifest["inputs"]["src"]["from"] == "a.file"
    a = json.loads((run_dir / "stages/00-a/manifest.json").read_text())
    assert manifest["inputs"]["src"]["key"] == f"{a['key']}@{a['finished']}"
    assert _states(name, run_dir) == ["done", "done", "done"]

    pipeline.execute(name, run_dir, log=lambda _m: None)
    assert RUNS == ["a", "b", "c"]  # nothing ran again

    # c's own config changes: only c reruns
    assert _states(name, run_dir, ["c:foo=1"]) == ["done", "done", "stale"]
    pipeline.execute(name, run_dir, ["c:foo=1"], log=lambda _m: None)
    assert RUNS == ["a", "b", "c", "c"]

    # a's config changes: a and everything downstream rerun, from scratch (old folders cleared)
    name = recipes(SPEC.replace("FAIL", "false").replace("value: 1", "value: 2"))
    assert _states(name, run_dir, ["c:foo=1"]) == ["stale", "stale", "stale"]
    pipeline.execute(name, run_dir, ["c:foo=1"], log=lambda _m: None)
    assert RUNS == ["a", "b", "c", "c", "a", "b", "c"]
    assert final.read_text() == "a(2)b(0)c(0)"
    assert (run_dir / "stages" / "00-a" / "progress.txt").read_text() == "x"


def test_stage_args_are_set_from_the_command_line_and_change_the_stage_key(recipes, tmp_path):
    name = recipes(SPEC.replace("FAIL", "false"))
    run_dir = tmp_path / "run"
    pipeline.execute(name, run_dir, log=lambda _m: None)
    spec = pipeline.load_spec(name, ["a:args.value=7", "b:args.extra={k: [1, 2]}"])
    assert spec["stages"][0]["args"] == {"value": 7}  # a YAML value, not the string "7"
    assert spec["stages"][1]["args"] == {"fail_once": False, "extra": {"k": [1, 2]}}
    assert spec["stages"][0]["overrides"] == []
    assert _states(name, run_dir, ["a:args.value=7"]) == ["stale", "stale", "stale"]
    pipeline.execute(name, run_dir, ["a:args.value=7"], log=lambda _m: None)
    assert (run_dir / "stages" / "02-c" / "out.txt").read_text() == "a(7)b(0)c(0)"


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_a_sample_stage_that_keeps_nothing_stops_the_pipeline_with_the_fix(rlvr_cache, monkeypatch, tmp_path):
    # The base model never writes a think block, so the think-format filter keeps none of its responses.
    monkeypatch.setenv("RLVR_DATA_DIR", str(tmp_path / "data"))
    args = {"task": "addition", "k": 2, "limit": 4, "max_tokens": 8, "format_filter": "think"}
    stage = stages.Stage("sample", "sample", tmp_path, {"model": "embedded://tiny_base"}, args)
    stage.inputs["model"] = pipeline._resolve_path("embedded://tiny_base")
    with pytest.raises(UserError, match=r"kept none of 8 responses .* train the model longer"):
        stages.run_sample(stage)


def test_a_failed_stage_continues_in_its_folder_and_status_tells_the_truth(recipes, tmp_path):
    name = recipes(SPEC.replace("FAIL", "true"))
    run_dir = tmp_path / "run"
    with pytest.raises(UserError, match="stage 01 b .* failing the first attempt"):
        pipeline.execute(name, run_dir, log=lambda _m: None)
    assert _states(name, run_dir) == ["done", "failed", "pending"]
    pipeline.execute(name, run_dir, log=lambda _m: None)
    assert RUNS == ["a", "b", "b", "c"]
    b = json.loads((run_dir / "stages" / "01-b" / "manifest.json").read_text())
    assert b["metrics"]["attempts"] == 2  # the second attempt saw the first one's progress
    assert _states(name, run_dir) == ["done", "done", "done"]


def test_a_stage_left_running_by_a_dead_process_is_interrupted_then_continued(recipes, tmp_path):
    name = recipes(SPEC.replace("FAIL", "false"))
    run_dir = tmp_path / "run"
    pipeline.execute(name, run_dir, log=lambda _m: None)
    path = run_dir / "stages" / "01-b"
    manifest = json.loads((path / "manifest.json").read_text())
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    manifest.update(status="running", pid=dead.pid)
    (path / "manifest.json").write_text(json.dumps(manifest))
    # c's manifest is from before: it will run again once b has finished again
    assert _states(name, run_dir) == ["done", "interrupted", "stale"]
    manifest["pid"] = os.getpid()
    (path / "manifest.json").write_text(json.dumps(manifest))
    assert _states(name, run_dir) == ["done", "running", "stale"]
    manifest["pid"] = dead.pid
    (path / "manifest.json").write_text(json.dumps(manifest))
    pipeline.execute(name, run_dir, log=lambda _m: None)
    assert RUNS == ["a", "b", "c", "b", "c"]
    assert (path / "progress.txt").read_text() == "xx"  # continued in place, not cleared


def test_bad_specs_and_overrides_are_refused_with_the_fix(recipes):
    with pytest.raises(UserError, match="unknown pipeline"):
        pipeline.load_spec("nope")
    name = recipes("stages:\n  - {name: a, kind: teleport}\n")
    with pytest.raises(UserError, match="unknown kind 'teleport'; known: .*counted"):
        pipeline.load_spec(name)
    name = recipes("stages:\n  - {name: a, kind: counted, inputs: {src: later.file}}\n")
    with pytest.raises(UserError, match="names no earlier stage"):
        pipeline.load_spec(name)
    name = recipes(SPEC.replace("FAIL", "false"))
    with pytest.raises(UserError, match="STAGE:key=value"):
        pipeline.load_spec(name, ["zz:foo=1"])


@pytest.mark.parametrize("name", ["r1", "r1_zero", "distill"])
def test_shipped_pipelines_load_and_say_how_to_run_them(name):
    spec = pipeline.load_spec(name)
    assert all(stage["kind"] in stages.STAGE_KINDS for stage in spec["stages"])
    text = (compose.recipes_dir() / "pipeline" / f"{name}.yaml").read_text()
    assert text.startswith("# Pipeline") and f"rlvr pipeline {name}" in text


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
@pytest.mark.parametrize("name,rubrics", [("r1", [None, "r1"]), ("r1_zero", ["r1_zero"])])
def test_rl_stages_of_the_r1_pipelines_compose_with_the_rubric_their_reward_needs(name, rubrics):
    """Each rl stage's overrides compose into a valid verl config (what `rlvr train` will run), and the
    recipe key selects the rubric: R1's reasoning RL is paid by correctness alone, its final RL and
    R1-Zero by a rubric the reward manager accepts."""
    from rlvr_verifiers.verl_bridge import BridgeConfig

    rl = [s for s in pipeline.load_spec(name)["stages"] if s["kind"] == "rl"]
    found = []
    for stage in rl:
        cfg = compose.compose(stage["overrides"])
        found.append(cfg.reward.reward_kwargs.rlvr.rubric)
        assert BridgeConfig.from_verl_config(cfg).rubric == found[-1]
    assert found == rubrics


def test_embedded_sft_assets_are_deterministic_and_the_long_cot_traces_verify(tmp_path):
    import pandas as pd

    from rlvr_launch.runs import embedded_model as embedded
    from rlvr_verifiers import reasoning, registry
    from rlvr_verifiers.base import Item

    first = pd.read_parquet(embedded.ensure_sft_data(tmp_path / "a", embedded.ADDITION_LONG_COT))
    second = pd.read_parquet(embedded.ensure_sft_data(tmp_path / "b", embedded.ADDITION_LONG_COT))
    train, _ = embedded.addition_pairs(embedded.TinySpec())
    one_digit = [i for i, (a, _) in enumerate(train) if a < embedded.LONG_COT_MAX_A]
    assert first.to_json() == second.to_json() and list(first["prompt_id"]) == one_digit
    assert 60 <= len(first) <= 100  # the worked sums of the one-digit training pairs, not all 800
    items, tags = [], reasoning.default_tags()
    for prompt_id, messages in zip(first["prompt_id"], first["messages"], strict=True):
        a, b = train[prompt_id]  # prompt_id is the row of the task's training file
        assert messages[0]["content"] == embedded.addition_prompt(a, b)
        answer = messages[1]["content"]
        assert (
            reasoning.split(answer, tags).state == reasoning.CLOSED
            and answer.split(" So ")[0].count("+1=") == b
        )
        items.append(Item(response=answer, ground_truth=str(a + b)))
    assert {v.status for v in registry.get("math").verify_batch(items)} == {"ok"}
    general = pd.read_parquet(embedded.ensure_sft_data(tmp_path / "a", embedded.GENERAL))
    assert len(general) == 64 and all(m[1]["role"] == "assistant" for m in general["messages"])
    # the embedded model's identity is untouched by these assets (the digest of _BUILD_VERSION 4)
    assert embedded.TinySpec().digest() == "6ad0fb5bd369"


def test_the_command_line_runs_and_reports_a_pipeline(recipes, tmp_path, capsys):
    from rlvr_launch import cli

    name = recipes(SPEC.replace("FAIL", "false"))
    run_dir = str(tmp_path / "run")
    assert cli.main(["pipeline", name, "--status", "--run-dir", run_dir]) == 0
    assert capsys.readouterr().out.count("pending") == 3
    assert cli.main(["pipeline", name, "c:foo=1", "--run-dir", run_dir]) == 0
    assert cli.main(["pipeline", name, "c:foo=1", "--status", "--run-dir", run_dir]) == 0
    out = capsys.readouterr().out
    assert out.count("counted done") == 6 and "attempts 1" in out and "02-c/out.txt" in out
    assert cli.main(["pipeline", name, "--status", "--run-dir", run_dir]) == 0  # without c's override
    assert "stale" in capsys.readouterr().out


def test_a_second_runner_on_the_same_run_dir_is_refused(recipes, tmp_path):
    import fcntl

    name = recipes(SPEC.replace("FAIL", "false"))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with open(run_dir / ".pipeline.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(UserError, match="in use by another"):
            pipeline.execute(name, run_dir, log=lambda _m: None)
    assert RUNS == []
    pipeline.execute(name, run_dir, log=lambda _m: None)  # free again once the holder lets go
    assert RUNS == ["a", "b", "c"]


def test_base_tiny_model_knows_the_text_but_not_the_chat_format_or_the_tags(rlvr_cache, tiny_model_dir):
    """embedded://tiny_base (R1-Zero's starting point): trained on plain `a+b=s` lines only."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr_launch.runs import embedded_model as embedded

    base = Path(pipeline._resolve_path("embedded://tiny_base"))
    assert base == embedded.ensure_base_model(rlvr_cache) and base != tiny_model_dir
    corpus = "".join(embedded.base_corpus(embedded.TinySpec()))
    assert not any(mark in corpus for mark in ("<|im_start|>", "<|im_end|>", "<think>", "</think>"))
    tokenizer = AutoTokenizer.from_pretrained(base)
    assert tokenizer.get_vocab() == AutoTokenizer.from_pretrained(tiny_model_dir).get_vocab()
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    train, held_out = embedded.addition_pairs(embedded.TinySpec())
    # prompts differ in length (one- and two-digit a): left padding, so every row's answer starts at once
    plain = tokenizer(
        [embedded.addition_prompt(a, b) for a, b in train],
        return_tensors="pt",
        padding=True,
        padding_side="left",
    )
    out = model.generate(**plain, max_new_tokens=4, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    texts = tokenizer.batch_decode(out[:, plain["input_ids"].shape[1] :])
    right = sum(t.split("\n")[0].strip() == str(a + b) for t, (a, b) in zip(texts, train, strict=True))
    assert (
        right / len(train) > 0.2
    )  # it has learned the text: plain-text sums come out right well above chance
    chat = tokenizer.apply_chat_template(
        [[{"role": "user", "content": embedded.addition_prompt(a, b)}] for a, b in held_out],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
        padding=True,
        padding_side="left",
    )
    out = model.generate(**chat, max_new_tokens=8, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    # in a chat turn it never closes the turn (it never saw <|im_end|>) and never opens a think block
    for text in tokenizer.batch_decode(out[:, chat["input_ids"].shape[1] :]):
        assert "<|im_end|>" not in text and "<think>" not in text, text


def test_sft_stage_gets_the_epochs_its_step_count_needs_and_refuses_a_set_below_one_batch(tmp_path):
    # verl's SFT loop ends after trainer.total_epochs even short of total_training_steps, and then saves
    # no checkpoint: 37 sampled rows in batches of 16 are 2 steps an epoch, so 10 steps need 5 epochs.
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "train.parquet"
    pq.write_table(pa.table({"messages": [str(i) for i in range(37)]}), data)
    base = ["data.train_batch_size=16", "trainer.total_training_steps=10"]
    assert stages._sft_epochs(base, data, "sft") == ["trainer.total_epochs=5"]
    assert (
        stages._sft_epochs([*base, "trainer.total_epochs=9"], data, "sft") == []
    )  # the user's choice stands
    with pytest.raises(
        UserError, match=r"37 training rows are fewer than one batch .* sft:data.train_batch_size=N"
    ):
        stages._sft_epochs([*base, "data.train_batch_size=64"], data, "sft")


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_eval_and_sample_stages_take_the_rollout_from_their_args(tiny_model_dir, tmp_path):
    """args.rollout (`STAGE:args.rollout=vllm` on the command line) reaches rlvr eval / sample as --rollout
    does; unset, the platform's own (hf on the cpu platform). The hf path runs here; vLLM's is the same
    call with rollout=vllm (tests/cluster/test_vllm_eval_sample.py runs it)."""
    lines: list[str] = []
    for rollout in (None, "hf"):
        args = {"task": "addition", "k": 1, "limit": 2, **({"rollout": rollout} if rollout else {})}
        folder = tmp_path / f"eval-{rollout}"
        folder.mkdir()
        stage = stages.Stage("eval", "eval", folder, {"model": str(tiny_model_dir)}, args, log=lines.append)
        stages.run_eval(stage)
        assert json.loads((folder / "eval.json").read_text())["generation"]["rollout"] == "hf"
    assert any("generating with rlvr's hf rollout server" in line for line in lines)  # on the stage's log
    folder = tmp_path / "sample"
    folder.mkdir()
    args = {"task": "addition", "k": 4, "limit": 8, "rollout": "hf", "dedup": False}
    stage = stages.Stage("sample", "sample", folder, {"model": str(tiny_model_dir)}, args, log=lines.append)
    assert stages.run_sample(stage)["metrics"]["kept"] > 0
    assert json.loads((folder / "data" / "stats.json").read_text())["generation"]["rollout"] == "hf"
