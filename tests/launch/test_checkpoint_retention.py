"""Checkpoint retention keeps a long or restarted run's directory bounded (issue 35, item 1).

verl's retention (trainer.max_actor_ckpt_to_keep) deletes an old checkpoint's actor/ but leaves its
global_step_N folder with data.pt, one per save_freq steps for ever; and it forgets the checkpoints of
earlier attempts, so a restarted run keeps every one of them. RunDir.prune_checkpoints removes both,
never at or above the tracker's step, and the resume point only falls back to a complete checkpoint."""

from __future__ import annotations

import json

from rlvr_launch.runs.rundir import RunDir


def _checkpoint(rd: RunDir, step: int, actor: bool = True) -> None:
    folder = rd.checkpoints / f"global_step_{step}"
    folder.mkdir(parents=True)
    (folder / "data.pt").write_bytes(b"dataloader")
    if actor:
        (folder / "actor").mkdir()
        (folder / "actor" / "model_world_size_1_rank_0.pt").write_bytes(b"w" * 1000)


def _steps(rd: RunDir) -> list[int]:
    return sorted(int(p.name.split("_")[-1]) for p in rd.checkpoints.glob("global_step_*"))


def test_emptied_folders_and_checkpoints_of_earlier_attempts_are_pruned_to_the_newest(tmp_path):
    rd = RunDir(tmp_path / "run")
    for step in (20, 40, 60):
        _checkpoint(rd, step, actor=False)  # emptied by verl's retention
    for step in (80, 100, 120, 140):
        _checkpoint(rd, step)  # 80, 100: an earlier attempt's, forgotten by verl's retention
    (rd.checkpoints / "latest_checkpointed_iteration.txt").write_text("140")
    removed = rd.prune_checkpoints(keep=2)
    assert _steps(rd) == [120, 140] and len(removed) == 5
    assert rd.prune_checkpoints(keep=2) == []


def test_nothing_at_or_above_the_tracker_is_touched_and_keep_none_only_removes_emptied_folders(tmp_path):
    rd = RunDir(tmp_path / "run")
    for step in (1, 2, 3):
        _checkpoint(rd, step)
    _checkpoint(rd, 4, actor=False)  # being saved now: data.pt written, tracker not yet moved
    _checkpoint(rd, 5, actor=False)
    (rd.checkpoints / "global_step_5" / "data.pt").unlink()  # the actor's files still to come
    (rd.checkpoints / "latest_checkpointed_iteration.txt").write_text("3")
    assert rd.prune_checkpoints(keep=1) and _steps(rd) == [3, 4, 5]
    _checkpoint(rd, 0, actor=False)
    rd.prune_checkpoints(keep=None)
    assert _steps(rd) == [3, 4, 5]


def test_the_resume_point_falls_back_only_to_a_complete_checkpoint(tmp_path):
    rd = RunDir(tmp_path / "run")
    _checkpoint(rd, 2, actor=False)  # emptied by retention: no weights to resume from
    _checkpoint(rd, 4)
    _checkpoint(rd, 6)
    (rd.checkpoints / "latest_checkpointed_iteration.txt").write_text("6")
    rd.attempts_dir.mkdir(parents=True)
    (rd.attempts_dir / "1.json").write_text(json.dumps({"resume_from": 0}))
    rows = [
        {"step": s, "data": {"training/global_step": s, "critic/score/mean": 0.5}} for s in (1, 2, 3, 4, 5)
    ]
    (rd.attempts_dir / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert rd.resume_point() == (4, 6)  # step 6 has no row: redo from 4, not from the emptied 2
    (rd.checkpoints / "global_step_4" / "actor").rename(rd.checkpoints / "gone")
    assert rd.resume_point() == (6, 6)  # no complete earlier one: keep the newest
