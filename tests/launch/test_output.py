"""What a user reads (issue 10, item 9): `rlvr submit --follow` prints what `rlvr train` prints (the
job's whole log stays with `rlvr logs`), `rlvr ls` never cuts a description mid-sentence, and a short
run's reward summary reads right."""

from __future__ import annotations

import io

import pytest

from rlvr_launch.jobs import job_control as jobs
from rlvr_launch.recipes import compose
from rlvr_launch.runs.train import reward_summary

# A job's log as Ray streams it: rlvr's lines among verl's and Ray's, in chunks cut anywhere.
JOB_LOG = (
    "2026-12-01 01:35:59,237\tWARNING authentication_token_setup.py:85 -- Token authentication is enabled\n"
    "[rlvr] train data: /data/addition/train.parquet (80 rows, prompts 9-9 tokens)\n"
    "2026-12-01 01:36:14,775\tINFO worker.py:2038 -- Connecting to existing Ray cluster\n"
    "[rlvr] training cpu_demo: 2 steps, run directory /root/rlvr-runs/job-1\n"
    "\x1b[36m(TaskRunner pid=19162)\x1b[0m {'actor_rollout_ref': {'actor': {'clip_ratio': 0.2,\n"
    "\x1b[36m(WorkerDict pid=20422)\x1b[0m UserWarning: torchtitan engine is not available\n"
    "[rlvr] step 1/2 | reward 0.412 | response length 2.6 | 4.1 s/step | ETA 0m04s\n"
    "Training Progress:  50%|#####     | 1/2 [00:04<00:04]\n"
    "[rlvr] step 2/2 | reward 0.455 | response length 2.5 | 4.0 s/step | ETA 0m00s\n"
    "rlvr job: done\n"
    "/root/rlvr-runs/job-1\n"
)
RLVR_LINES = [
    "[rlvr] train data: /data/addition/train.parquet (80 rows, prompts 9-9 tokens)",
    "[rlvr] training cpu_demo: 2 steps, run directory /root/rlvr-runs/job-1",
    "[rlvr] step 1/2 | reward 0.412 | response length 2.6 | 4.1 s/step | ETA 0m04s",
    "[rlvr] step 2/2 | reward 0.455 | response length 2.5 | 4.0 s/step | ETA 0m00s",
    "rlvr job: done",
    "/root/rlvr-runs/job-1",
]


@pytest.mark.parametrize("chunk", [1, 7, 64, len(JOB_LOG)])
def test_follow_shows_rlvrs_lines_whatever_the_chunking(chunk):
    out = io.StringIO()
    stream = jobs.RlvrLines(out)
    for i in range(0, len(JOB_LOG), chunk):
        stream.write(JOB_LOG[i : i + chunk])
    stream.close()
    assert out.getvalue().splitlines() == RLVR_LINES
    assert stream.hidden == 5


def test_reward_summary_of_short_runs_reads_right():
    assert reward_summary([(1, 0.3), (2, 0.35)]) == "reward: step 1 0.300 -> step 2 0.350 over 2 steps"
    assert "first 1 steps" not in reward_summary([(1, 0.3), (2, 0.35), (3, 0.4)])
    assert reward_summary([(5, 0.5)]) == "reward at step 5: 0.500 (one step)"
    rows = [(s, 0.1 * (s % 5)) for s in range(1, 61)]
    assert reward_summary(rows).startswith("mean reward: first 10 steps ")


@pytest.mark.parametrize(
    "group_name",
    [(group, name) for group in compose.GROUPS for name in compose.group_entries(group)],
    ids=lambda gn: f"{gn[0]}={gn[1]}",
)
def test_ls_descriptions_are_whole_sentences(group_name):
    text = compose.describe(*group_name)
    assert text, f"{group_name} has no description"
    assert text.count("(") == text.count(")"), f"cut inside parentheses: {text!r}"
    assert not text.endswith((",", ":", ";", " the", " and", " or", " by", " of")), (
        f"cut mid-sentence: {text!r}"
    )


def test_ray_address_outside_a_job_is_announced_and_inside_a_job_joined(monkeypatch, tmp_path):
    """Issue 10, item 4. Ray's job supervisor sets RAY_JOB_CONFIG_JSON_ENV_VAR for a job's entrypoint."""
    from pathlib import Path

    from rlvr_launch.runs import train

    monkeypatch.delenv("RLVR_RUNS_DIR", raising=False)
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert train.ray_plan_note() is None and train.runs_root() == Path("runs")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert train.ray_plan_note().startswith("RAY_ADDRESS=10.0.0.5:6379 is set in this shell and ignored")
    assert train.runs_root() == Path("runs")
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", "{}")
    assert train.ray_plan_note() == "inside a Ray job: joining its cluster at 10.0.0.5:6379"
    assert train.runs_root() == Path("~/rlvr-runs").expanduser(), "not the job's temporary working dir"
    monkeypatch.setenv("RLVR_RUNS_DIR", str(tmp_path))
    assert train.default_run_dir("cpu_demo").parent == tmp_path
