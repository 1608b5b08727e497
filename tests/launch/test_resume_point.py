"""Where a killed run resumes: never at a checkpoint whose metrics row was lost (rundir.RunDir.resume_point)."""

import json

from rlvr_launch.runs.rundir import RunDir


def _run(tmp_path, checkpoints, logged, marker):
    rd = RunDir(tmp_path / "run")
    rd.checkpoints.mkdir(parents=True)
    for step in checkpoints:
        (rd.checkpoints / f"global_step_{step}").mkdir()
    (rd.checkpoints / "latest_checkpointed_iteration.txt").write_text(str(marker))
    rd.new_attempt(0).write_text("".join(json.dumps({"step": s, "data": {"x": s}}) + "\n" for s in logged))
    return rd


def test_a_checkpoint_with_its_metrics_row_is_resumed_from(tmp_path):
    assert _run(tmp_path, [1, 2, 3], [1, 2, 3], 3).resume_point() == (3, 3)


def test_a_checkpoint_killed_before_its_row_was_logged_is_redone_from_the_one_before(tmp_path):
    assert _run(tmp_path, [1, 2, 3], [1, 2], 3).resume_point() == (2, 3)


def test_without_an_earlier_checkpoint_the_newest_is_kept(tmp_path):
    assert _run(tmp_path, [3], [1, 2], 3).resume_point() == (3, 3)


def test_a_fresh_run_directory_starts_at_zero(tmp_path):
    assert RunDir(tmp_path / "fresh").resume_point() == (0, 0)
