"""Jobs against their neighbours: what one job can learn from, or do to, the jobs that ran before it or
beside it in the same batch. Each test runs a real hostile job next to an honest one in real sandbox workers;
the hostile job gains nothing and the honest neighbour keeps its result (no mocks).

Like test_sandbox_threats.py, these expect a root Linux >= 6.12 host (CI's machine class) and start the
sandbox with every layer required, so a weaker host fails at start-up with the sandbox's own message.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import tempfile
import textwrap
import time

import pytest

from rlvr_verifiers import sandbox_worker
from rlvr_verifiers.base import OK, Item
from rlvr_verifiers.code import CodeConfig, CodeVerifier
from rlvr_verifiers.sandbox import Job, Sandbox, SandboxConfig

MEMORY_MB = 256
DISK_LIMIT = 32 << 20


@pytest.fixture(scope="module")
def work_dir():
    path = tempfile.mkdtemp(prefix="rlvr-neighbours-test-", dir="/tmp")
    os.chmod(path, 0o755)
    yield path
    sandbox_worker._remove_tree(path)


@pytest.fixture(scope="module")
def sandbox(work_dir):
    config = SandboxConfig(
        workers=2, timeout_s=10.0, memory_mb=MEMORY_MB, disk_limit_bytes=DISK_LIMIT, work_dir=work_dir
    )
    with Sandbox(config) as box:
        yield box


def honest_job() -> Job:
    return Job("import sys\nprint(sum(map(int, sys.stdin.read().split())))", stdin=b"40 2\n")


def assert_honest(result) -> None:
    assert result.ok and result.stdout == b"42\n", result


def fenced(code: str) -> str:
    return "```python\n" + textwrap.dedent(code).strip() + "\n```"


# ---------------------------------------------------------------------------------------------------
# memory: a later job reads what an earlier job of the same worker left in memory

# The honest solution knows a salt (the "problem"); the answer is a hash of salt and input, so nobody who
# lacks the salt can compute it. The scanner lacks it and hunts for the answer, or the salt, in its memory.
SCAN = r"""
import re
def scan(pattern):
    found = []
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
        for line in maps:
            addr, perms = line.split()[:2]
            if not perms.startswith("r") or "[vvar" in line or "[vsyscall" in line:
                continue
            lo, hi = (int(x, 16) for x in addr.split("-"))
            try:
                mem.seek(lo)
                found += re.findall(pattern, mem.read(hi - lo))
            except (OSError, OverflowError, ValueError):
                continue
    return found
def count_split(head, tail):
    # occurrences of head + tail, without ever holding the needle in one piece
    n = 0
    for blob in scan(re.escape(head) + rb"[\s\S]{" + str(len(tail)).encode() + rb"}"):
        n += blob[len(head):] == tail
    return n
"""


def _answer(salt: str, x: int) -> int:
    return int(hashlib.sha256(f"{salt}:{x}".encode()).hexdigest(), 16) % (9 * 10**19) + 10**19


def _honest_sources(salt: str) -> tuple[str, str]:
    answer = 'int(hashlib.sha256(f"{SALT}:{x}".encode()).hexdigest(), 16) % (9 * 10**19) + 10**19'
    # a solution of a realistic size (a few KB: a docstring, helpers), as models write them
    doc = '"""' + "Reads x and prints the keyed digest of x as a 20-digit number. " * 40 + '"""\n'
    stdio = f'{doc}import hashlib\nSALT = "{salt}"\nx = int(input())\nprint({answer})'
    call = f'{doc}import hashlib\nSALT = "{salt}"\ndef solve(x):\n    return {answer}'
    return stdio, call


@pytest.fixture
def one_worker_verifier(work_dir):
    """A code verifier whose sandbox has ONE worker: every job of a batch runs on it, in batch order."""
    v = CodeVerifier(
        CodeConfig(timeout_per_test_s=10.0), SandboxConfig(workers=1, memory_mb=512, work_dir=work_dir)
    )
    yield v
    v.close()


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_a_later_job_cannot_read_an_earlier_jobs_output_from_memory(one_worker_verifier):
    salt = secrets.token_hex(16)
    x = secrets.randbelow(10**6)
    stdio_tests = {"inputs": [f"{x}\n"], "outputs": [f"{_answer(salt, x)}\n"]}
    call_tests = {"inputs": [[x]], "outputs": [_answer(salt, x)], "fn_name": "solve"}
    honest_stdio, honest_call = _honest_sources(salt)
    # The scanners print / return the most frequent 20-digit number in their memory: a sibling's stdout
    # or its result line, left in the heap of the process they were forked from.
    stdio_scanner = SCAN + textwrap.dedent(
        r"""
        from collections import Counter
        found = Counter(scan(rb"(?<![0-9])[1-9][0-9]{19}(?![0-9])"))
        print(found.most_common(1)[0][0].decode() if found else 0)
        """
    )
    call_scanner = SCAN + textwrap.dedent(
        r"""
        from collections import Counter
        def solve(x):
            found = Counter(scan(rb"(?<![0-9])[1-9][0-9]{19}(?![0-9])"))
            return int(found.most_common(1)[0][0]) if found else 0
        """
    )
    items = [
        Item(fenced(honest_stdio), stdio_tests),
        Item(fenced(honest_call), call_tests),
        Item(fenced(stdio_scanner), stdio_tests),
        Item(fenced(call_scanner), call_tests),
    ]
    verdicts = one_worker_verifier.verify_batch(items)
    assert [v.status for v in verdicts[:2]] == [OK, OK], verdicts  # the honest neighbours keep their score
    for verdict in verdicts[2:]:
        assert verdict.score == 0.0 and verdict.status != OK, verdicts
        assert "SyntaxError" not in verdict.detail and "raised" not in verdict.detail, verdict  # it ran
    # and, directly: after honest runs on this worker, a scanner finds no answer anywhere in its memory
    box = one_worker_verifier.sandbox
    box.run(honest_stdio, stdin=f"{x}\n", timeout_s=10)
    box.submit(Job(honest_call, mode="call", fn_name="solve", call_args=[[x]])).result()
    answer = str(_answer(salt, x))
    hunt = box.run(SCAN + f"print(count_split(b'{answer[:10]}', b'{answer[10:]}'))", timeout_s=10)
    assert hunt.exit_code == 0 and hunt.stdout == b"0\n", hunt


def test_a_later_job_cannot_read_an_earlier_jobs_source_from_memory(one_worker_verifier):
    salt = secrets.token_hex(16)
    x = secrets.randbelow(10**6)
    stdio_tests = {"inputs": [f"{x}\n"], "outputs": [f"{_answer(salt, x)}\n"]}
    honest_stdio, _ = _honest_sources(salt)
    # The scanner looks for a sibling's program text (its salt) and runs the same formula with it.
    scanner = SCAN + textwrap.dedent(
        r"""
        import hashlib
        salts = scan(rb'SALT = "([0-9a-f]{32})"')
        x = int(input())
        salt = salts[0].decode() if salts else "none"
        print(int(hashlib.sha256(f"{salt}:{x}".encode()).hexdigest(), 16) % (9 * 10**19) + 10**19)
        """
    )
    verdicts = one_worker_verifier.verify_batch(
        [Item(fenced(honest_stdio), stdio_tests), Item(fenced(scanner), stdio_tests)]
    )
    assert verdicts[0].status == OK, verdicts
    assert verdicts[1].score == 0.0 and verdicts[1].detail.endswith("wrong output"), verdicts
    box = one_worker_verifier.sandbox
    box.run(honest_stdio, stdin=f"{x}\n", timeout_s=10)
    hunt = box.run(SCAN + f"print(count_split(b'{salt[:16]}', b'{salt[16:]}'))", timeout_s=10)
    assert hunt.exit_code == 0 and hunt.stdout == b"0\n", hunt


# ---------------------------------------------------------------------------------------------------
# cleanup: a job cannot kill its worker or leave files on the host


def test_a_job_with_1500_nested_directories_cannot_kill_its_worker(sandbox):
    restarts = sandbox.stats()["worker_restarts"]
    pids = sorted(sandbox.worker_pids())
    deep = "import os\nfor _ in range(1500):\n    os.mkdir('d')\n    os.chdir('d')\nprint('deep')"
    results = sandbox.run_batch([Job(deep), honest_job(), Job(deep), honest_job()])
    for result in results[::2]:
        assert result.ok and result.stdout == b"deep\n" and result.sandbox_error is None, result
    for result in results[1::2]:
        assert_honest(result)
    assert sandbox.stats()["worker_restarts"] == restarts and sorted(sandbox.worker_pids()) == pids


def test_host_job_dirs_of_any_depth_are_removed_without_recursion(tmp_path):
    # The removal used where there is no mount namespace (job dirs on the host): deeper than the
    # recursion limit, longer than PATH_MAX, with read-only dirs and symlinks that must not be followed.
    keep = tmp_path / "outside"
    keep.mkdir()
    (keep / "precious").write_text("x")
    root = tmp_path / "job"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for i in range(1500):
        os.mkdir("d", dir_fd=fd)
        with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as f:
            f.write(str(i))
        os.symlink(str(keep), "link", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        if i % 100 == 0:
            os.chmod(fd, 0o500)
        os.close(fd)
        fd = child
    os.close(fd)
    sandbox_worker._remove_tree(str(root))
    assert not root.exists()
    assert (keep / "precious").read_text() == "x"


def test_no_rlvr_sandbox_dirs_are_left_in_the_work_dir_even_when_workers_are_killed():
    work_dir = tempfile.mkdtemp(prefix="rlvr-leftovers-test-", dir="/tmp")
    os.chmod(work_dir, 0o755)
    try:
        box = Sandbox(SandboxConfig(workers=2, work_dir=work_dir))
        with box:
            assert [r.ok for r in box.run_batch([honest_job(), honest_job()])] == [True, True]
            assert os.listdir(work_dir) == []  # nothing on the host while jobs run
            for pid in box.worker_pids():  # as Ray does at shutdown
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
        assert os.listdir(work_dir) == []
    finally:
        sandbox_worker._remove_tree(work_dir)


# ---------------------------------------------------------------------------------------------------
# limits that count the whole job: memfd, tmpfs, forked children, deleted files, CPU share

MEMFD_BOMB = f"""
import os
chunk = b"x" * (16 << 20)
held = []
for _ in range({(MEMORY_MB * 3 // 2) // 16}):  # 1.5x the job's memory, outside its address space
    fd = os.memfd_create("hoard")  # one memfd per 16 MiB: each stays under RLIMIT_FSIZE
    os.write(fd, chunk)
    held.append(fd)
print("hoarded")
"""

FORKED_MEMORY = f"""
import os, time
kids = []
for _ in range(3):  # each child alone stays under RLIMIT_AS; together they hold 2.25x the limit
    pid = os.fork()
    if pid == 0:
        block = bytearray({MEMORY_MB * 3 // 4} << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
ok = all(os.waitpid(pid, 0)[1] == 0 for pid in kids)
print("all children held their memory" if ok else "a child died")
"""


def test_memory_in_memfds_counts_against_the_job(sandbox):
    bomb, honest = sandbox.run_batch([Job(MEMFD_BOMB, timeout_s=30), honest_job()])
    assert b"hoarded" not in bomb.stdout and bomb.killed_reason == "memory_limit", bomb
    assert_honest(honest)


def test_memory_of_forked_children_counts_together(sandbox):
    bomb, honest = sandbox.run_batch([Job(FORKED_MEMORY, timeout_s=30), honest_job()])
    assert b"all children held their memory" not in bomb.stdout, bomb
    assert bomb.killed_reason == "memory_limit" or b"a child died" in bomb.stdout, bomb
    assert_honest(honest)


def test_deleted_but_open_files_count_against_the_disk_quota(sandbox):
    hoarder = f"""
    import os
    held, written = [], 0
    try:
        while written < {2 * DISK_LIMIT}:  # twice the quota, each file deleted while held open
            f = open(f"f{{len(held)}}", "wb")
            os.unlink(f.name)
            f.write(b"x" * (4 << 20))
            f.flush()
            held.append(f)
            written += 4 << 20
        print("hoarded", written)
    except OSError as e:
        print("stopped", e.errno, written)
    """
    bomb, honest = sandbox.run_batch([Job(textwrap.dedent(hoarder)), honest_job()])
    words = bomb.stdout.split()
    # The job dir is a tmpfs of the quota's size: a hard bound that answers ENOSPC (or, if the job keeps
    # going, kills it as disk_quota).
    assert bomb.killed_reason == "disk_quota" or words[:2] == [b"stopped", b"28"], bomb
    assert b"hoarded" not in bomb.stdout and (not words[2:] or int(words[2]) <= DISK_LIMIT), bomb
    assert_honest(honest)


HONEST_CPU = "n = 0\nfor i in range({loops}):\n    n += i * i\nprint(n % 7)"


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_a_job_with_63_setsid_children_cannot_starve_its_neighbour(sandbox):
    # The honest neighbour's work is calibrated on this machine first (its wall time alone); next to the
    # spinner it must finish within 3x that plus 2 s. Without a per-job CPU share it gets ~1/64 of a core.
    loops = 2_000_000
    alone = sandbox.run(HONEST_CPU.format(loops=loops), timeout_s=60)
    assert alone.ok, alone
    bound = 3 * alone.wall_s + 2.0
    spinner = textwrap.dedent(
        """
        import os, time
        for _ in range(63):
            try:
                if os.fork() == 0:
                    os.setsid()
                    while True:
                        pass
            except OSError:
                break
        time.sleep(30)
        """
    )
    spin = sandbox.submit(Job(spinner, timeout_s=bound + 3.0))
    time.sleep(0.5)  # the spinners are running when the neighbour starts
    neighbour = sandbox.submit(Job(HONEST_CPU.format(loops=loops), timeout_s=bound)).result()
    assert neighbour.ok and not neighbour.timed_out, (neighbour, bound, alone.wall_s)
    assert neighbour.stdout == alone.stdout
    assert spin.result().timed_out


# ---------------------------------------------------------------------------------------------------
# a job's leftovers: nothing a job leaves in the kernel reaches the next job on the same worker
# (one worker, so the honest job of the batch runs right after the hostile one, on the same worker)

PARKED_MB = MEMORY_MB * 9 // 16  # parked by the hostile job; the next job then needs as much again


@pytest.fixture(scope="module")
def one_worker(work_dir):
    config = SandboxConfig(
        workers=1, timeout_s=10.0, memory_mb=MEMORY_MB, disk_limit_bytes=DISK_LIMIT, work_dir=work_dir
    )
    with Sandbox(config) as box:
        yield box


PARK_FDS_IN_FLIGHT = f"""
import os, socket
a, b = socket.socketpair()
held = []
for _ in range({PARKED_MB // 16}):
    fd = os.memfd_create("parked")
    os.write(fd, b"x" * (16 << 20))
    held.append(fd)
try:
    # the memfds and the receiving socket itself in flight in its own queue: a cycle that outlives the
    # job's processes until the kernel's unix GC runs (and stays charged to the job cgroup meanwhile)
    socket.send_fds(a, [b"x"], held + [b.fileno()])
    print("parked")
except OSError as e:
    print("refused", e.errno)
"""

NEEDS_FULL_BUDGET = f"""
block = bytearray({PARKED_MB} << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
print("allocated")
"""


def test_job_cannot_pass_fds_to_outlive_itself(one_worker):
    hostile, honest = one_worker.run_batch([Job(PARK_FDS_IN_FLIGHT, timeout_s=30), honest_job()])
    assert b"parked" not in hostile.stdout and b"refused 1" in hostile.stdout, hostile  # EPERM: seccomp
    assert_honest(honest)


def test_next_job_gets_full_memory_budget(one_worker):
    """Right after a job that tried to park memory in flight, the next jobs can use their whole budget."""
    jobs = [Job(PARK_FDS_IN_FLIGHT, timeout_s=30)]
    jobs += [Job(NEEDS_FULL_BUDGET, timeout_s=30), Job(NEEDS_FULL_BUDGET, timeout_s=30), honest_job()]
    hostile, *later = one_worker.run_batch(jobs)
    assert b"parked" not in hostile.stdout, hostile
    for result in later[:2]:
        assert result.ok and result.stdout == b"allocated\n" and result.killed_reason is None, result
    assert_honest(later[2])


def test_job_cannot_leave_an_abstract_socket_name_for_the_next_job(one_worker):
    token = secrets.token_hex(8)
    squatter = f"""
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\\0rlvr-token-{token}")
    a, b = socket.socketpair()
    try:
        socket.send_fds(a, [b"x"], [s.fileno(), b.fileno()])  # park the bound socket in flight
        print("parked")
    except OSError as e:
        print("refused", e.errno)
    """
    reader = "print(open('/proc/net/unix').read())"
    hostile, later, honest = one_worker.run_batch([Job(textwrap.dedent(squatter)), Job(reader), honest_job()])
    assert b"parked" not in hostile.stdout, hostile
    assert later.ok and token.encode() not in later.stdout, later
    assert_honest(honest)


def test_job_dir_is_not_executable(one_worker):
    runner = """
    import os, shutil, sys
    shutil.copy(os.path.realpath(sys.executable), "prog")  # any binary the job writes into its dir
    os.chmod("prog", 0o755)
    try:
        os.execv("./prog", ["prog", "-c", "print('ran a job-written binary')"])
    except OSError as e:
        print("exec refused", e.errno)
    """
    hostile, honest = one_worker.run_batch([Job(textwrap.dedent(runner), timeout_s=30), honest_job()])
    assert b"ran a job-written binary" not in hostile.stdout, hostile
    assert b"exec refused 13" in hostile.stdout, hostile  # EACCES: noexec mount and Landlock
    assert_honest(honest)


def test_job_cannot_lower_its_oom_score_adj(one_worker):
    """The job's oom_score_adj is 1000 (the cgroup's OOM killer takes it, never the zygote); without
    CAP_SYS_RESOURCE the kernel would let its owner lower it to 0, so two layers refuse the write: the
    jobs' /proc is read-only (EROFS, checked first) and Landlock allows writes only in the job dir."""
    lowerer = """
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("0")
        print("lowered")
    except OSError as e:
        print("refused", e.errno)
    print("adj", open("/proc/self/oom_score_adj").read().strip())
    """
    hostile, honest = one_worker.run_batch([Job(textwrap.dedent(lowerer)), honest_job()])
    assert hostile.stdout == b"refused 30\nadj 1000\n", hostile  # 30: EROFS
    assert_honest(honest)


MOUNT_API = ("fsopen", "fspick", "open_tree", "move_mount", "fsconfig", "fsmount", "mount_setattr")


def test_mount_api_syscalls_denied(one_worker):
    """The new mount API is refused by seccomp inside the job (EPERM), as the old mount() is."""
    caller = f"""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for name, nr in {[(n, sandbox_worker.NR[n]) for n in MOUNT_API]!r}:
        r = libc.syscall(nr, b"tmpfs", 0, 0, 0, 0)
        print(name, r, ctypes.get_errno())
    """
    hostile, honest = one_worker.run_batch([Job(textwrap.dedent(caller)), honest_job()])
    lines = hostile.stdout.decode().split("\n")[:-1]
    assert lines == [f"{name} -1 1" for name in MOUNT_API], hostile
    assert_honest(honest)


def test_the_seccomp_filter_itself_denies_the_mount_api_to_root():
    """The layer alone: root with CAP_SYS_ADMIN (this test process) can fsopen("tmpfs"); under the job's
    seccomp filter the same call, and every other mount-API syscall, is EPERM."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def fsopen_errno(apply_filter: bool) -> list[int]:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                if apply_filter:
                    buf, n = sandbox_worker.build_seccomp_filter(os.getppid())
                    sandbox_worker._SECCOMP["buf"] = ctypes.create_string_buffer(buf, len(buf))
                    sandbox_worker._SECCOMP["prog"] = sandbox_worker._SockFprog(
                        n, ctypes.addressof(sandbox_worker._SECCOMP["buf"])
                    )
                    sandbox_worker._prctl(sandbox_worker.PR_SET_NO_NEW_PRIVS, 1)
                    sandbox_worker._seccomp_apply()
                out = []
                for name in MOUNT_API:
                    r = libc.syscall(sandbox_worker.NR[name], b"tmpfs", 0, 0, 0, 0)
                    out.append(0 if r >= 0 else ctypes.get_errno())
                os.write(write_fd, json.dumps(out).encode())
            finally:
                os._exit(0)
        os.close(write_fd)
        data = os.read(read_fd, 4096)
        os.close(read_fd)
        os.waitpid(pid, 0)
        return json.loads(data)

    if os.geteuid() != 0:
        pytest.skip("needs root (CAP_SYS_ADMIN) to show fsopen works without the filter")
    assert fsopen_errno(False)[0] == 0  # fsopen("tmpfs") as root without the filter: a new fs context
    assert fsopen_errno(True) == [1] * len(MOUNT_API)  # EPERM for each under the filter
