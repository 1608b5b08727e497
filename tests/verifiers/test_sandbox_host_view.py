"""What a job can learn about the host: files it may not read (their sizes, names created later), the host's
sockets, its processes, and its abstract socket names. Each probe runs in real sandbox workers next to an
honest job in the same batch, which keeps its result; none may learn anything (no mocks).

Like test_sandbox_threats.py, these expect a root Linux >= 6.12 host (CI's machine class).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
import textwrap
import time

import pytest

from rlvr_verifiers.sandbox import Job, Sandbox, SandboxConfig


@pytest.fixture(scope="module")
def sandbox():
    work_dir = tempfile.mkdtemp(prefix="rlvr-host-view-test-", dir="/tmp")
    os.chmod(work_dir, 0o755)
    with Sandbox(SandboxConfig(workers=2, timeout_s=10.0, work_dir=work_dir)) as box:
        yield box
    shutil.rmtree(work_dir, ignore_errors=True)


@pytest.fixture
def root_only_dir():
    """A root-only (0700) directory holding a file of a telling size, like the interpreter's own home."""
    path = tempfile.mkdtemp(prefix="rlvr-root-only-", dir="/tmp")
    os.chmod(path, 0o700)
    secret = os.path.join(path, "model.safetensors")
    with open(secret, "wb") as f:
        f.write(b"x" * 123457)
    yield path, secret
    shutil.rmtree(path, ignore_errors=True)


def honest_job() -> Job:
    return Job("print(sum(map(int, input().split())))", stdin=b"40 2\n")


def run_with_neighbour(box: Sandbox, source: str, timeout_s: float = 10.0):
    probe, honest = box.run_batch([Job(textwrap.dedent(source), timeout_s=timeout_s), honest_job()])
    assert honest.ok and honest.stdout == b"42\n", honest
    assert probe.exit_code == 0, probe.stderr[-2000:]
    return probe


def test_stat_of_files_in_root_only_host_dirs_fails(sandbox, root_only_dir):
    path, secret = root_only_dir
    probe = run_with_neighbour(
        sandbox,
        f"""
        import os
        for p in [{secret!r}, {path!r}, "/root/.bashrc", "/etc/passwd", "/etc/shadow", "/home"]:
            try:
                st = os.stat(p)
                print("STAT", p, st.st_size)
            except OSError as e:
                print("denied", p, e.errno)
        st = os.stat("/root")  # on the way to the interpreter: the job's own tmpfs dir, not the host's
        print("root", st.st_dev, st.st_ino)
        """,
    )
    assert b"STAT" not in probe.stdout and b"123457" not in probe.stdout, probe.stdout
    assert probe.stdout.count(b"denied") == 6
    host_root = os.stat("/root")
    assert probe.stdout.splitlines()[-1] != f"root {host_root.st_dev} {host_root.st_ino}".encode()


def test_inotify_on_a_root_only_host_dir_sees_nothing(sandbox, root_only_dir):
    path, _ = root_only_dir
    watcher = sandbox.submit(
        Job(
            textwrap.dedent(
                f"""
                import ctypes, os, select, struct
                libc = ctypes.CDLL(None, use_errno=True)
                fd = libc.inotify_init1(os.O_NONBLOCK)
                wd = libc.inotify_add_watch(fd, {path.encode()!r}, 0x100 | 0x200)  # IN_CREATE | IN_DELETE
                if wd < 0:
                    print("denied", ctypes.get_errno())
                else:
                    print("WATCHING", flush=True)
                    names = []
                    if select.select([fd], [], [], 3)[0]:
                        data = os.read(fd, 65536)
                        while data:
                            _, _, _, n = struct.unpack_from("iIII", data)
                            names.append(data[16:16 + n].rstrip(b"\\0").decode())
                            data = data[16 + n:]
                    print("SAW", names)
                """
            ),
            timeout_s=10,
        )
    )
    honest = sandbox.submit(honest_job())
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and not watcher.done():
        name = os.path.join(path, "checkpoint-" + secrets.token_hex(4))
        with open(name, "w") as f:
            f.write("x")
        time.sleep(0.2)
    result = watcher.result()
    assert honest.result().ok
    assert b"WATCHING" not in result.stdout and b"checkpoint" not in result.stdout, result.stdout
    assert result.stdout.startswith(b"denied"), result


@pytest.fixture
def host_listener():
    """A TCP service on loopback and a unix socket of the host, as Ray's would be."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    unix_path = os.path.join(tempfile.gettempdir(), f"rlvr-host-sock-{secrets.token_hex(4)}")
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(unix_path)
    unix.listen()
    yield tcp.getsockname()[1], unix_path
    tcp.close()
    unix.close()
    os.unlink(unix_path)


def test_proc_net_lists_no_host_socket(sandbox, host_listener):
    port, unix_path = host_listener
    probe = run_with_neighbour(
        sandbox,
        """
        import os
        for name in ["tcp", "tcp6", "udp", "unix"]:
            for path in [f"/proc/self/net/{name}", f"/proc/net/{name}"]:
                try:
                    print("READ", path, open(path).read().replace("\\n", " | "))
                except OSError as e:
                    print("denied", path, e.errno)
        """,
    )
    assert f":{port:04X} ".encode() not in probe.stdout, probe.stdout  # the host's listening port
    assert unix_path.encode() not in probe.stdout, probe.stdout
    assert b"rlvr-host-sock" not in probe.stdout


def test_probing_host_pids_with_signal_zero_tells_nothing(sandbox):
    # kill(pid, 0) answers EPERM for a process that exists but may not be signalled, ESRCH for none: a
    # job must get the same answer for the live host processes as for pids that do not exist.
    # Pid 1 is left out: inside the job's pid namespace it names the namespace's own init, not the host's
    # (a test run whose parent exited has the host's init as its parent).
    live = [pid for pid in (os.getpid(), os.getppid(), *sandbox.worker_pids()) if pid != 1]
    absent = 4_000_000 - secrets.randbelow(1000)  # above pid_max's default: surely not a process
    probe = run_with_neighbour(
        sandbox,
        f"""
        import os
        for pid in {live + [absent]!r}:
            try:
                os.kill(pid, 0)
                print(pid, "exists")
            except OSError as e:
                print(pid, "errno", e.errno)
        """,
    )
    answers = [line.split(maxsplit=1)[1] for line in probe.stdout.decode().splitlines()]
    assert len(answers) == len(live) + 1 and all(a == answers[-1] for a in answers), probe.stdout


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_a_job_cannot_squat_an_abstract_socket_name_of_the_host(sandbox):
    name = "\0rlvr-host-service-" + secrets.token_hex(6)
    squatter = sandbox.submit(
        Job(
            textwrap.dedent(
                f"""
                import socket, time
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.bind({name!r})
                s.listen()
                print("bound")
                time.sleep(3)
                """
            ),
            timeout_s=10,
        )
    )
    honest = sandbox.submit(honest_job())
    failures, attempts = [], 0
    while not squatter.done():  # the host keeps needing its name while the job runs
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(name)
        except OSError as e:
            failures.append(e.errno)
        finally:
            s.close()
        attempts += 1
        time.sleep(0.05)
    result = squatter.result()
    assert honest.result().ok
    assert result.stdout == b"bound\n", result  # the job did bind the name: in its own namespace
    assert attempts > 5 and failures == [], (attempts, failures)
