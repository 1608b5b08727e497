"""The README's local sections say what a new user needs (issue 10, items 3, 4, 11): a scoped teardown
of the local head (never a bare `ray stop` as the way to stop it), every file of a run directory, how to
train on a converted folder, and what `rlvr train` does with RAY_ADDRESS."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The README, and the guide its "Debugging locally" section moved to (docs/debugging-and-diagnosis.md).
README = "\n".join((ROOT / name).read_text() for name in ("README.md", "docs/debugging-and-diagnosis.md"))


def _section(title: str) -> str:
    start = README.index(title)
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_the_local_head_is_started_with_its_own_temp_dir_and_torn_down_by_it():
    debugging = _section("## Debugging locally")
    block = next(b for b in _bash_blocks(debugging) if "ray start --head" in b)
    temp_dir = re.search(r"ray start --head .*--temp-dir (\S+)", block).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert f"pkill -f {temp_dir}; rm -rf {temp_dir}" in commands
    assert "ray stop" not in commands, "a bare `ray stop` stops every Ray on the machine"
    assert "stops every Ray on the machine" in debugging


def test_every_file_a_run_directory_holds_is_documented():
    quickstart = _section("## Quickstart")
    for name in (
        "metrics.jsonl",
        "reward_curve.png",
        "config.yaml",
        "recipe.json",
        "checkpoints/",
        "attempts/N.jsonl",
        "derived_metrics.jsonl",
        ".lock",
    ):
        assert f"`{name}`" in quickstart, name


def test_training_on_a_converted_folder_is_shown():
    tasks = _section("## Tasks and data")
    block = next(b for b in _bash_blocks(tasks) if "--out ./data/countdown" in b)
    assert "data.train_files=./data/countdown/train.parquet" in block
    assert "data.val_files=./data/countdown/test.parquet" in block


def test_ray_address_and_job_outputs_are_documented():
    debugging = _section("## Debugging locally")
    assert "`RAY_ADDRESS` exported in the shell is ignored, and the first line says so" in debugging
    assert "~/rlvr-runs/" in debugging and "$RLVR_RUNS_DIR" in debugging
