"""Run directories: one step once in metrics.jsonl across resumed attempts; one writer at a time."""

from __future__ import annotations

import json

import pytest

from rlvr_launch.cli import UserError
from rlvr_launch.runs.rundir import REWARD_KEY, STEP_KEY, RunDir


def _log(path, steps, tag):
    with open(path, "w") as f:
        for step in steps:
            f.write(json.dumps({"step": step, "data": {REWARD_KEY: step / 10, "tag": tag}}) + "\n")


def test_a_resumed_attempt_replaces_the_steps_after_its_checkpoint(tmp_path):
    rd = RunDir(tmp_path)
    _log(rd.new_attempt(resume_from=0), [1, 2, 3, 4, 5], "first")  # killed after step 5
    log2 = rd.new_attempt(resume_from=3)  # latest checkpoint was step 3
    _log(log2, [4, 5, 6], "second")
    rows = rd.write_metrics()
    assert [r[STEP_KEY] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r["tag"] for r in rows] == ["first"] * 3 + ["second"] * 3
    on_disk = [json.loads(line) for line in rd.metrics_path.read_text().splitlines()]
    assert on_disk == rows


def test_steps_lost_with_a_rollback_do_not_survive_a_failed_resume(tmp_path):
    rd = RunDir(tmp_path)
    _log(rd.new_attempt(resume_from=0), [1, 2, 3, 4], "first")
    _log(rd.new_attempt(resume_from=2), [], "second")  # resumed at 2, died before logging
    assert [r[STEP_KEY] for r in rd.merged_metrics()] == [1, 2]


def test_validation_and_training_metrics_of_one_step_are_merged(tmp_path):
    rd = RunDir(tmp_path)
    path = rd.new_attempt(resume_from=0)
    path.write_text(
        json.dumps({"step": 0, "data": {"val-core/addition/reward/mean@1": 0.4}})
        + "\n"
        + json.dumps({"step": 1, "data": {REWARD_KEY: 0.3}})
        + "\n"
        + json.dumps({"step": 1, "data": {"val-core/addition/reward/mean@1": 0.5}})
        + "\n"
        + '{"step": 2, "data": {"critic/sc'  # cut short by a kill
    )
    rows = rd.merged_metrics()
    assert [r[STEP_KEY] for r in rows] == [0, 1]
    assert rows[1] == {STEP_KEY: 1, REWARD_KEY: 0.3, "val-core/addition/reward/mean@1": 0.5}
    assert rd.plot_reward_curve(rows).stat().st_size > 1000


def test_a_second_writer_is_refused_while_the_first_holds_the_directory(tmp_path):
    first = RunDir(tmp_path)
    first.acquire()
    try:
        with pytest.raises(UserError, match="in use by pid"):
            RunDir(tmp_path).acquire()
    finally:
        first.release()
    second = RunDir(tmp_path)
    second.acquire()
    second.release()
