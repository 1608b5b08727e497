"""`rlvr submit`, `status`, `logs`, `stop` against a REAL Ray head on loopback with token auth ON.

The head (tests/launch/loopback_ray.py) has its own free ports, temp dir, HOME and token, declares one
logical GPU (verl's resource check counts GPUs; rlvr's cpu platform does the work) and the verifier
pool's custom resource, and is stopped by pid, never with a bare `ray stop`. Every command runs as the
installed `rlvr` console script in a subprocess with a private HOME, so the machine's own
~/.ray/auth_token is never read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from loopback_ray import _processes_mentioning, free_ports, remove_tree, start_head

RLVR = str(Path(sys.executable).with_name("rlvr"))
SECRET_NAME = "RLVR_TEST_SECRET"
SECRET_VALUE = "tok-3f9c2e71d8a54b0c-never-print-me"
TWO_STEPS = ["experiment=cpu_demo", "trainer.total_training_steps=2"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def head(tiny_model_dir):
    # The head (and so every job's driver) inherits RLVR_CACHE_DIR from the session's private cache
    # (tests/conftest.py), where the embedded model is already built.
    # A short root: Ray's unix socket paths must stay under 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="rlvr-rh-", dir="/tmp"))
    ray = start_head(root, num_cpus=8, num_gpus=1, resources={"rlvr_verifier": 4})
    try:
        yield ray
    finally:
        ray.stop()
        remove_tree(root)


def rlvr(head, *args: str, with_token: bool = True, extra_env: dict | None = None, timeout: float = 900):
    env = head.client_env(with_token=with_token) if head is not None else _bare_env()
    env.update(extra_env or {})
    return subprocess.run(
        [RLVR, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _bare_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["HOME"] = tempfile.mkdtemp(prefix="rlvr-home-")
    return env


def _job_id(stdout: str) -> str:
    for line in stdout.splitlines():
        if line.startswith("submitted job "):
            return line.split()[2]
    raise AssertionError(f"no job id in:\n{stdout}")


def _api(head, path: str):
    import urllib.request

    request = urllib.request.Request(
        head.dashboard_url + path, headers={"Authorization": f"Bearer {head.token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


# The default experiment (cpu_demo) without naming it: the job must still carry its composed name.
# Enough steps that an FSDP worker killed after the job's second step row dies mid-run (a step takes
# 0.3-3 s here), and a checkpoint every step for the restart to resume from.
JOB_STEPS = 6
RESTARTED_JOB = [f"trainer.total_training_steps={JOB_STEPS}", "trainer.save_freq=1"]


def _kill_a_job_worker_mid_run(head, run_dir: Path, follower: subprocess.Popen) -> str:
    """SIGKILL the job's FSDP worker (`ray::WorkerDict`, a worker of the head's raylet) within one step
    time of the job's second step row (issue 35: a restart inside a real Ray job)."""
    from rlvr_launch.runs.rundir import RunDir

    rows: dict = {}
    deadline = time.monotonic() + 600
    while len(rows) < 2:
        assert follower.poll() is None, (
            f"the job ended before its second step:\n{follower.stderr.read()[-3000:]}"
        )
        assert time.monotonic() < deadline, "the job never logged two steps"
        time.sleep(0.2)
        rows = RunDir.read_attempt(run_dir / "attempts" / "1.jsonl")
    time.sleep(float(rows[max(rows)].get("timing_s/step", 1.0)) * 0.5)
    for parent in _processes_mentioning(str(head.root)):
        for proc in parent.children(recursive=True):
            try:
                if proc.cmdline() and proc.cmdline()[0].startswith("ray::WorkerDict"):
                    proc.kill()
                    return f"ray::WorkerDict pid {proc.pid}"
            except psutil.Error:
                continue
    raise AssertionError("no ray::WorkerDict process under the head")


def test_submit_follow_trains_and_leaves_metrics_and_restarts_inside_the_job(head, tmp_path):
    run_dir = tmp_path / "run"
    started = time.monotonic()
    env = head.client_env()
    env[SECRET_NAME] = SECRET_VALUE
    follower = subprocess.Popen(
        [
            RLVR,
            "submit",
            "--address",
            head.dashboard_url,
            "--follow",
            "--run-dir",
            str(run_dir),
            "--secret-env",
            SECRET_NAME,
            "--env",
            "RLVR_TEST_PLAIN=visible",
            *RESTARTED_JOB,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # An FSDP worker dies mid-run: the job's driver restarts the attempt on the job's cluster (ray.shutdown,
    # then ray.init again) from the newest checkpoint, and the job succeeds.
    killed = _kill_a_job_worker_mid_run(head, run_dir, follower)
    stdout, stderr = follower.communicate(timeout=900)
    out = subprocess.CompletedProcess(follower.args, follower.returncode, stdout, stderr)
    elapsed = time.monotonic() - started
    print(f"rlvr submit --follow, {JOB_STEPS} CPU steps with one restart: {elapsed:.1f} s wall")
    assert out.returncode == 0, killed + "\n" + out.stdout[-3000:] + out.stderr[-3000:]
    assert "SUCCEEDED" in out.stderr
    job_id = _job_id(out.stdout)

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    trained = [r for r in rows if int(r.get("training/global_step", 0)) > 0]
    assert [int(r["training/global_step"]) for r in trained] == list(range(1, JOB_STEPS + 1)), rows
    assert all("critic/score/mean" in r for r in trained)
    assert (run_dir / "reward_curve.png").is_file()
    assert (run_dir / "config.yaml").is_file()
    from rlvr_launch.runs.restart import attempt_records

    records = attempt_records(run_dir / "attempts")
    assert len(records) == 2, (killed, records)
    assert "WorkerDict" in records[1]["restart_of"] and records[0]["restartable"], records
    assert records[1]["status"] == 0, records
    # the submitted overrides, stored so that a resume (another job, or rlvr train --run-dir) keeps them
    assert json.loads((run_dir / "recipe.json").read_text())["overrides"] == RESTARTED_JOB

    # The secret reached the job but is printed nowhere: not by submit, status, logs or the metadata.
    info = _api(head, f"/api/jobs/{job_id}")
    # named after the composed experiment, not "default", though no experiment= was given
    assert job_id.startswith("rlvr-cpu_demo-") and info["metadata"]["rlvr_experiment"] == "cpu_demo"
    assert info["runtime_env"]["env_vars"][SECRET_NAME] == SECRET_VALUE
    assert "working_dir" not in info["runtime_env"], "rlvr must not invent a working_dir"
    # rlvr's three packages and the jobspec, uploaded to the cluster (Ray names them by content hash)
    assert len(info["runtime_env"]["py_modules"]) == 4, info["runtime_env"]["py_modules"]
    assert SECRET_VALUE not in json.dumps(info["metadata"])
    status = rlvr(head, "status", job_id, "--address", head.dashboard_url)
    listing = rlvr(head, "status", "--address", head.dashboard_url)
    logs = rlvr(head, "logs", job_id, "--address", head.dashboard_url)
    assert status.returncode == listing.returncode == logs.returncode == 0
    assert "SUCCEEDED" in status.stdout and SECRET_NAME in status.stdout and job_id in listing.stdout
    # the id Ray's dashboard lists as Job ID (the driver's) is shown beside ours, the submission id
    assert info["submission_id"] == job_id and info["job_id"]
    assert f"ray job id: {info['job_id']}" in status.stdout and info["job_id"] in listing.stdout
    for text in (out.stdout, out.stderr, status.stdout, listing.stdout, logs.stdout, logs.stderr):
        assert SECRET_VALUE not in text
    assert f"{SECRET_NAME}=<from your environment>" in out.stdout


def test_stop_ends_a_running_job_and_its_follower_says_stopped(head, tmp_path):
    started = time.monotonic()
    out = rlvr(
        head,
        "submit",
        "--address",
        head.dashboard_url,
        "--run-dir",
        str(tmp_path / "run"),
        "experiment=cpu_demo",
    )
    round_trip = time.monotonic() - started
    print(f"rlvr submit round trip (compose + validate + upload + submit): {round_trip:.1f} s")
    assert out.returncode == 0, out.stderr[-3000:]
    job_id = _job_id(out.stdout)

    deadline = time.monotonic() + 120
    while _api(head, f"/api/jobs/{job_id}")["status"] != "RUNNING":
        assert time.monotonic() < deadline, "the job never started running"
        time.sleep(0.5)
    follower = subprocess.Popen(
        [RLVR, "logs", job_id, "--follow", "--address", head.dashboard_url],
        env=head.client_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)
    stop = rlvr(head, "stop", job_id, "--address", head.dashboard_url)
    assert stop.returncode == 0, stop.stderr
    assert "STOPPED" in stop.stdout
    _, follower_err = follower.communicate(timeout=120)
    assert follower.returncode == 3, follower_err
    assert "STOPPED" in follower_err
    status = rlvr(head, "status", job_id, "--address", head.dashboard_url)
    assert "status:     STOPPED" in status.stdout
    again = rlvr(head, "stop", job_id, "--address", head.dashboard_url)
    assert again.returncode == 0 and "already ended: STOPPED" in again.stdout


def test_a_failing_job_exits_nonzero_with_its_message_and_log_tail(head, tmp_path):
    # A recipe that composes here but cannot run there: on the "cluster" its data directory resolves
    # (${oc.env:RLVR_DATA_DIR}) to a place where nothing can be written, not even by root.
    # It also carries the user's own working_dir, which must arrive as theirs (verl PR #3673 lost it).
    user_code = tmp_path / "my_code"
    user_code.mkdir()
    (user_code / "my_marker.py").write_text("MARKER = 1\n")
    out = rlvr(
        head,
        "submit",
        "--address",
        head.dashboard_url,
        "--follow",
        "--run-dir",
        str(tmp_path / "run"),
        "--env",
        "RLVR_DATA_DIR=/proc/rlvr-data",
        "--working-dir",
        str(user_code),
        *TWO_STEPS,
    )
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert "FAILED: FileNotFoundError" in out.stderr and "/proc/rlvr-data" in out.stderr
    assert "--- last 40 lines of the job's log ---" not in out.stderr  # --follow already streamed the log
    job_id = _job_id(out.stdout)
    runtime_env = _api(head, f"/api/jobs/{job_id}")["runtime_env"]
    assert runtime_env["working_dir"].startswith("gcs://_ray_pkg_"), runtime_env
    assert len(runtime_env["py_modules"]) == 4
    assert f"working_dir: {user_code} (yours, unchanged)" in out.stdout
    follow_again = rlvr(head, "logs", job_id, "--follow", "--address", head.dashboard_url)
    assert follow_again.returncode == 1
    assert "--- last 40 lines of the job's log ---" in follow_again.stderr
    assert "/proc/rlvr-data" in follow_again.stderr
    status = rlvr(head, "status", job_id, "--address", head.dashboard_url)
    assert "status:     FAILED" in status.stdout and "why:        FileNotFoundError" in status.stdout
    print("what the user sees of a failed job:\n" + follow_again.stderr[-1500:])


def test_wrong_token_is_refused_with_403_and_how_to_get_the_right_one(head, tmp_path):
    wrong = tmp_path / "wrong_token"
    wrong.write_text("0" * 64)
    out = rlvr(head, "status", "--address", head.dashboard_url, "--auth-token-file", str(wrong))
    assert out.returncode == 2
    assert "403" in out.stderr and "rejected the auth token" in out.stderr and str(wrong) in out.stderr
    assert "ray get-auth-token" in out.stderr
    assert "0" * 64 not in out.stderr + out.stdout
    assert "disable" not in out.stderr.lower()


def test_missing_token_says_where_rlvr_looked(head):
    out = rlvr(head, "status", "--address", head.dashboard_url, with_token=False)
    assert out.returncode == 2
    assert "requires an auth token and none was found" in out.stderr
    for place in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "~/.ray/auth_token", "--auth-token-file"):
        assert place in out.stderr
    assert "disable" not in out.stderr.lower()
    assert head.token not in out.stderr + out.stdout


def test_token_from_the_environment_works(head):
    out = rlvr(
        head,
        "status",
        "--address",
        head.dashboard_url,
        with_token=False,
        extra_env={"RAY_AUTH_TOKEN": head.token},
    )
    assert out.returncode == 0, out.stderr
    assert head.token not in out.stdout + out.stderr


def test_unknown_job_is_a_clear_error(head):
    out = rlvr(head, "logs", "rlvr-no-such-job", "--address", head.dashboard_url)
    assert out.returncode == 2 and "no job 'rlvr-no-such-job'" in out.stderr


def test_submit_to_a_dead_address_says_it_cannot_reach_it():
    port = free_ports(1)[0]
    out = rlvr(None, "submit", "--address", f"http://127.0.0.1:{port}", *TWO_STEPS)
    assert out.returncode == 2
    assert f"cannot reach a Ray dashboard at http://127.0.0.1:{port}" in out.stderr
    assert "Traceback" not in out.stderr


def test_plain_ray_job_submit_with_the_shared_runtime_env_finds_the_checkouts_recipes(head):
    """The documented `ray job submit` path (no rlvr on the client side): working_dir = the checkout,
    cluster/runtime_env.yaml for the code and env. An unknown experiment fails fast, listing the
    experiments of the shipped recipes: proof the job composed against them."""
    root = Path(__file__).resolve().parents[2]
    env = head.client_env()
    env["RAY_AUTH_MODE"] = "token"
    out = subprocess.run(
        [
            str(Path(sys.executable).with_name("ray")),
            "job",
            "submit",
            "--address",
            head.dashboard_url,
            "--working-dir",
            ".",
            "--runtime-env",
            "cluster/runtime_env.yaml",
            "--",
            "python",
            "-m",
            "rlvr_launch.jobs.driver",
            "--job-id",
            "plain-submit",
            "experiment=no_such_experiment",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode != 0
    assert "unknown experiment 'no_such_experiment'" in out.stdout + out.stderr
    assert "cpu_demo" in out.stdout + out.stderr


def _plain_submit(head, cwd: Path, *submit_args: str, job_args: list[str]) -> subprocess.CompletedProcess:
    env = head.client_env()
    env["RAY_AUTH_MODE"] = "token"
    return subprocess.run(
        [
            str(Path(sys.executable).with_name("ray")),
            "job",
            "submit",
            "--address",
            head.dashboard_url,
            *submit_args,
            "--",
            "python",
            "-m",
            "rlvr_launch.jobs.driver",
            *job_args,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_plain_ray_job_submit_with_the_shared_runtime_env_and_no_working_dir_finds_the_shipped_recipes(head):
    """`--runtime-env cluster/runtime_env.yaml` alone: rlvr's code runs from Ray's package cache, away from
    any recipes/ (it used to fail "no recipes found"); the recipes shipped beside it are the ones used."""
    root = Path(__file__).resolve().parents[2]
    out = _plain_submit(
        head,
        root,
        "--runtime-env",
        "cluster/runtime_env.yaml",
        job_args=["--job-id", "plain-no-working-dir", "experiment=no_such_experiment"],
    )
    text = out.stdout + out.stderr
    assert "no recipes found" not in text
    assert "unknown experiment 'no_such_experiment'" in text and "cpu_demo" in text
    recipes_line = next(line for line in text.splitlines() if "rlvr job: recipes from" in line)
    assert "_ray_pkg_" in recipes_line, recipes_line  # the shipped copy, not this checkout's
    assert out.returncode != 0


def test_plain_ray_job_submit_against_the_image_needs_no_runtime_env(head, tmp_path):
    """The image form: rlvr installed on the cluster (here: the head's editable install), no runtime_env,
    submitted from a directory that is not a checkout."""
    out = _plain_submit(head, tmp_path, job_args=["--job-id", "plain-image", "experiment=no_such_experiment"])
    text = out.stdout + out.stderr
    assert "unknown experiment 'no_such_experiment'" in text and "gsm8k_grpo" in text
    root = Path(__file__).resolve().parents[2]
    assert f"rlvr job: recipes from {root / 'recipes'}" in text
