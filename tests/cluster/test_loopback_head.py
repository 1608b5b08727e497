"""cluster/loopback-head.sh: the README's loopback head for debugging the cluster path, and its teardown,
which must stop exactly that head and everything it started (the client server, agents, idle workers, a
running job's driver), free its ports and remove its directory, and touch nothing else. Also the
README's token command, which must write the token without printing it.

Real processes throughout: a real `ray start` head with token authentication, a real job submitted to
it, and the process table read through psutil.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "cluster" / "loopback-head.sh"
BIN = Path(sys.executable).parent
START_TIMEOUT_S = 180


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(
        HOME=str(home),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        RAY_AUTH_MODE="token",
        RAY_USAGE_STATS_ENABLED="0",
        OMP_NUM_THREADS="1",
    )
    return env


def _session(sid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return found


def _tree(sid: int) -> list[psutil.Process]:
    """The head: its session and every descendant (a job's driver gets a session of its own)."""
    found = {p.pid: p for p in _session(sid)}
    for proc in list(found.values()):
        try:
            for child in proc.children(recursive=True):
                if child.status() != psutil.STATUS_ZOMBIE:
                    found.setdefault(child.pid, child)
        except psutil.Error:
            continue
    return list(found.values())


def _mentioning(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid != os.getpid() and any(marker in part for part in proc.info["cmdline"] or []):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
        except psutil.Error:
            continue
    return found


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def _kill(procs: list[psutil.Process]) -> None:
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass


def _run(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.slow  # ~9 s: the ray CLI imports Ray; kept out of the fast set
def test_the_token_command_writes_the_token_and_prints_nothing(tmp_path):
    """The README's form, `(umask 077; ray get-auth-token --generate >/dev/null)`: the token lands in
    ~/.ray/auth_token, readable by its owner only, and not on the terminal."""
    home = tmp_path / "home"
    home.mkdir()
    out = subprocess.run(
        ["bash", "-c", "(umask 077; ray get-auth-token --generate >/dev/null)"],
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    token_file = home / ".ray" / "auth_token"
    token = token_file.read_text()
    assert len(token) >= 32 and token.isalnum()
    assert token not in out.stdout and token not in out.stderr
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600


def test_stop_refuses_a_session_that_is_not_the_heads(tmp_path):
    """A stale session id (the head is gone, the id now another session's) is never signalled."""
    head_dir = tmp_path / "head"
    head_dir.mkdir()
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        (head_dir / "rlvr-head.sid").write_text(str(other.pid))
        out = _run(["stop", str(head_dir)], _env(tmp_path))
        assert out.returncode == 1
        assert "not touching it" in out.stderr and "command not found" not in out.stderr
        assert other.poll() is None, "stop signalled a session that was not its head's"
        assert head_dir.is_dir()
    finally:
        other.kill()
        other.wait()


def test_stop_ends_the_session_and_descendants_in_other_sessions_and_nothing_else(tmp_path):
    """The teardown's logic without Ray (the slow test below runs a real head): a session whose leader
    names DIR and ignores SIGTERM (as gcs_server does for a while), a child in that session, and a
    child in a session of its own (as Ray's job supervisor starts a job's driver). All end, the leader by
    SIGKILL after the grace period; a bystander session does not."""
    head_dir = tmp_path / "head"
    head_dir.mkdir()
    sid_file = head_dir / "rlvr-head.sid"
    # The leader outlives its children (the teardown may kill them first): after `wait` it becomes a sleep
    # that still ignores TERM (an ignored signal stays ignored across exec), so only SIGKILL ends it.
    fake_head = 'trap "" TERM; setsid sleep 3600 & sleep 3600 & echo $$ > "$1"; wait; exec sleep 3600'
    leader = subprocess.Popen(
        ["setsid", "bash", "-c", fake_head, str(head_dir / "gcs_server"), str(sid_file)]
    )
    bystander = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    try:
        deadline = time.monotonic() + 30

        # Wait for the whole set-up, not its first signs: the file exists before `echo` has written it,
        # and the background `setsid` is in the tree before it has made its own session.
        def ready() -> bool:
            try:
                procs = _tree(leader.pid)
                sids = {os.getsid(p.pid) for p in procs}
            except (psutil.Error, ProcessLookupError):
                return False
            return (
                sid_file.is_file()
                and bool(sid_file.read_text().strip())
                and len(procs) == 3
                and len(sids) == 2
            )

        while time.monotonic() < deadline and not ready():
            time.sleep(0.1)
        assert int(sid_file.read_text()) == leader.pid
        procs = _tree(leader.pid)
        assert len(procs) == 3 and len({os.getsid(p.pid) for p in procs}) == 2, [_cmdline(p) for p in procs]
        env = {**_env(tmp_path), "RLVR_HEAD_GRACE_S": "1"}
        out = _run(["stop", str(head_dir)], env)
        assert out.returncode == 0, out.stderr
        assert "still running after 1 s: SIGKILL" in out.stderr
        assert leader.wait(timeout=10) == -9
        assert [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
        assert not head_dir.exists()
        assert bystander.poll() is None
    finally:
        _kill(_tree(leader.pid))
        leader.kill()
        leader.wait()
        bystander.kill()
        bystander.wait()


def test_stop_without_a_started_head_says_so(tmp_path):
    out = _run(["stop", str(tmp_path / "never-started")], _env(tmp_path))
    assert out.returncode == 1
    assert "no head was started from" in out.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_stop_ends_every_process_of_the_head_frees_its_ports_and_nothing_else():
    # A short path: Ray's socket paths must stay under 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="rlvr-lh-", dir="/tmp"))
    home = root / "home"
    home.mkdir()
    head_dir = root / "head"
    env = _env(home)
    subprocess.run(
        ["bash", "-c", "(umask 077; ray get-auth-token --generate >/dev/null)"],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    gcs, dashboard, client, agent, agent_grpc, runtime_env, metrics, nm, om = _free_ports(9)
    bystander = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    sid = None
    try:
        start = _run(
            [
                "start",
                str(head_dir),
                "--port",
                str(gcs),
                "--dashboard-port",
                str(dashboard),
                "--ray-client-server-port",
                str(client),
                "--dashboard-agent-listen-port",
                str(agent),
                "--dashboard-agent-grpc-port",
                str(agent_grpc),
                "--runtime-env-agent-port",
                str(runtime_env),
                "--metrics-export-port",
                str(metrics),
                "--node-manager-port",
                str(nm),
                "--object-manager-port",
                str(om),
                "--num-cpus",
                "2",
                "--num-gpus",
                "1",
                "--resources",
                '{"rlvr_verifier": 2}',
                "--disable-usage-stats",
            ],
            env,
            timeout=START_TIMEOUT_S,
        )
        assert start.returncode == 0, start.stdout + start.stderr
        sid = int((head_dir / "rlvr-head.sid").read_text())

        again = _run(["start", str(head_dir)], env)
        assert again.returncode == 1 and "still running" in again.stderr

        # A job whose driver is still running at teardown: the job supervisor is a worker of the head,
        # the driver its child in a session of its own; neither names the head's directory.
        # A just-started head's dashboard agent may still refuse the job ("No available agent",
        # connection reset): retried, as `rlvr submit` does, for up to three minutes.
        submit_deadline = time.monotonic() + 180
        while True:
            job = subprocess.run(
                [
                    str(BIN / "ray"),
                    "job",
                    "submit",
                    "--address",
                    f"http://127.0.0.1:{dashboard}",
                    "--no-wait",
                    "--",
                    "python",
                    "-c",
                    "import time; print('rlvr-lh-driver', flush=True); time.sleep(600)",
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            if job.returncode == 0 or time.monotonic() > submit_deadline:
                break
            time.sleep(3)
        assert job.returncode == 0, job.stdout + job.stderr
        deadline = time.monotonic() + 240  # the driver starts after the job's runtime env: slow under load
        # The driver is in a session of its own: looked for among the head's descendants, not its session.
        while time.monotonic() < deadline and not any("rlvr-lh-driver" in _cmdline(p) for p in _tree(sid)):
            time.sleep(0.5)

        procs = _tree(sid)
        cmdlines = [_cmdline(p) for p in procs]
        for part in ("gcs_server", "raylet", "ray.util.client.server", "dashboard.py", "rlvr-lh-driver"):
            assert any(part in c for c in cmdlines), f"no {part} in the head's session: {cmdlines}"
        driver = next(p for p in procs if "rlvr-lh-driver" in _cmdline(p))
        assert os.getsid(driver.pid) != sid, "Ray's job supervisor gives the driver a session of its own"
        # What `pkill -f DIR` would have missed.
        assert sum(str(head_dir) not in c for c in cmdlines) >= 3, cmdlines
        for port in (gcs, dashboard, client):
            assert not _port_free(port), f"port {port} not in use while the head runs"

        stop = _run(["stop", str(head_dir)], env, timeout=120)
        assert stop.returncode == 0, stop.stdout + stop.stderr

        left = [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert left == [], [_cmdline(p) for p in left]
        assert _tree(sid) == []
        assert _mentioning(str(head_dir)) == []
        for port in (gcs, dashboard, client):
            assert _port_free(port), f"port {port} still held after stop"
        assert not head_dir.exists()
        assert bystander.poll() is None, "stop ended a process that was not the head's"
    finally:
        if sid is not None:
            _kill(_tree(sid))
        _kill(_mentioning(str(head_dir)))
        bystander.kill()
        bystander.wait()
        shutil.rmtree(root, ignore_errors=True)
