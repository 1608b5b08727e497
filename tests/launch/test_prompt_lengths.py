"""Prompt lengths are checked with the recipe's tokenizer before training (issue 10, item 3): a dataset
whose every prompt is over data.max_prompt_length (verl would filter them all and stop with
num_samples=0) is refused with the setting to change; a partial drop is counted; and every documented
task's prompts fit its recipe with the embedded tiny model's tokenizer, so each trains on CPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlvr_launch.cli import UserError
from rlvr_launch.data import convert as data
from rlvr_launch.recipes import compose
from rlvr_launch.runs import datacheck

FIXTURES = Path(__file__).parent / "fixtures" / "data"
SOURCES = {
    "countdown": FIXTURES / "countdown" / "countdown.jsonl",
    "gsm8k": FIXTURES / "gsm8k",
    "math": FIXTURES / "math",
    "code": FIXTURES / "code" / "apps.jsonl",
    "tool_use": FIXTURES / "tool_use" / "xlam.jsonl",
}


@pytest.fixture(scope="module")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    root = tmp_path_factory.mktemp("tasks")
    for name, source in SOURCES.items():
        data.prepare(name, root / name, str(source), test_size=0.2)
    return root


@pytest.mark.parametrize("task", sorted(SOURCES))
def test_every_documented_task_fits_its_prompt_limit_with_the_tiny_tokenizer(task, converted, tiny_tokenizer):
    limit = int(compose.compose([f"task={task}"], check=False).data.max_prompt_length)
    for split in ("train", "test"):
        lengths = datacheck.prompt_lengths(converted / task / f"{split}.parquet", tiny_tokenizer)
        assert max(lengths) <= limit, f"{task}/{split}: prompts up to {max(lengths)} tokens, limit {limit}"


def test_a_dataset_that_would_lose_every_row_is_refused_with_the_setting_to_change():
    with pytest.raises(UserError) as err:
        datacheck.check_prompt_lengths("train.parquet", [286, 293, 290], 256, True, "error")
    text = str(err.value)
    assert "all 3 prompts are longer than data.max_prompt_length=256" in text
    assert "num_samples=0" in text and "data.max_prompt_length=293" in text


def test_a_partial_drop_is_counted_and_truncation_error_is_refused():
    line = datacheck.check_prompt_lengths("train.parquet", [100, 300, 120, 400], 256, True, "error")
    assert line.startswith("2 of 4 prompts are longer") and "data.max_prompt_length=400" in line
    with pytest.raises(UserError, match="data.truncation=error"):
        datacheck.check_prompt_lengths("train.parquet", [100, 300], 256, False, "error")
    assert datacheck.check_prompt_lengths("train.parquet", [100, 200], 256, True, "error") is None


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_train_refuses_countdown_prompts_over_the_limit_before_ray_starts(converted, rlvr_cache, tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlvr_launch.cli",
            "train",
            "task=countdown",
            f"data.train_files={converted / 'countdown' / 'train.parquet'}",
            f"data.val_files={converted / 'countdown' / 'test.parquet'}",
            "data.max_prompt_length=256",
            "--run-dir",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "prompts are longer than data.max_prompt_length=256" in proc.stderr
    assert "Set data.max_prompt_length=288" in proc.stderr
    assert "Started a local Ray" not in proc.stdout + proc.stderr
    assert not run_dir.exists(), "nothing ran: no run directory is left behind"


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_train_refuses_a_training_set_smaller_than_one_batch(converted, rlvr_cache, tmp_path):
    """verl's training dataloader drops an incomplete batch: 3 rows with the demo's 32-prompt batch
    would train on nothing."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlvr_launch.cli",
            "train",
            "task=countdown",
            f"data.train_files={converted / 'countdown' / 'train.parquet'}",
            f"data.val_files={converted / 'countdown' / 'test.parquet'}",
            "--run-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "keeps 3 rows, fewer than data.train_batch_size=32" in proc.stderr
    assert "set data.train_batch_size=3" in proc.stderr
    assert "prompts 286-288 tokens" in proc.stdout  # measured with the tiny model's tokenizer, all kept
