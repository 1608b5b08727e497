"""The sandbox's contract beyond single threats: the layer report, failing closed, accepting weaker
isolation only when told to (and then saying so on every result), config validation, and the seccomp
tables checked against the kernel's syscall numbers (shipped: syscall_numbers.json)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
import tempfile
from dataclasses import fields
from pathlib import Path

import pytest

from rlvr_verifiers import sandbox_worker
from rlvr_verifiers.sandbox import LAYERS, Job, Sandbox, SandboxConfig, SandboxUnavailable


@pytest.fixture(scope="module")
def work_dir():
    path = tempfile.mkdtemp(prefix="rlvr-sandbox-test-", dir="/tmp")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_isolation_report_names_every_layer_and_all_hold_on_this_host_class(work_dir):
    with Sandbox(SandboxConfig(workers=1, work_dir=work_dir)) as box:
        report = box.isolation_report()
    assert list(report["layers"]) == list(LAYERS)
    for name, state in report["layers"].items():
        assert isinstance(state["active"], bool) and state["detail"], name
    # CI's machine class (root, Linux 6.18, Landlock ABI 7): nothing is missing, nothing is weaker
    assert report["missing"] == [] and report["weaker_isolation"] is False
    assert report["landlock_abi"] >= 6
    assert os.path.realpath(report["python"]) == report["python"]


def test_a_missing_required_layer_refuses_to_start(work_dir):
    box = Sandbox(SandboxConfig(workers=1, work_dir=work_dir, job_uid_base=None))  # no dedicated uid
    with pytest.raises(SandboxUnavailable) as error:
        box.start()
    message = str(error.value)
    assert "uid" in message and "require" in message and "allow_weaker_isolation" in message
    assert box.worker_pids() == []  # nothing left running after refusing


def test_a_refused_sandbox_runs_nothing(work_dir):
    box = Sandbox(SandboxConfig(workers=1, work_dir=work_dir, job_uid_base=None))
    with pytest.raises(SandboxUnavailable):
        box.start()
    with pytest.raises(RuntimeError, match="closed"):
        box.run("print(1)")


@pytest.mark.parametrize("how", ["require", "allow_weaker_isolation"])
def test_weaker_isolation_runs_only_when_accepted_and_is_reported_on_every_result(work_dir, caplog, how):
    if how == "require":
        config = SandboxConfig(
            workers=1, work_dir=work_dir, job_uid_base=None, require=tuple(n for n in LAYERS if n != "uid")
        )
    else:
        config = SandboxConfig(workers=1, work_dir=work_dir, job_uid_base=None, allow_weaker_isolation=True)
    caplog.set_level(logging.WARNING, logger="rlvr_verifiers.sandbox")
    with Sandbox(config) as box:
        report = box.isolation_report()
        assert report["missing"] == ["uid"] and report["weaker_isolation"] is True
        caplog.clear()
        results = box.run_batch([Job("import os; print(os.getuid())"), Job("print(2)")])
    assert all(r.weaker_isolation == ("uid",) for r in results)
    assert results[0].stdout == b"0\n"  # really no uid switch: the report told the truth
    assert any("WEAKER" in r.getMessage() and "uid" in r.getMessage() for r in caplog.records)


def test_config_rejects_unknown_layers_and_nonsense():
    with pytest.raises(ValueError, match="unknown layers"):
        SandboxConfig(require=("landlock",))
    with pytest.raises(ValueError, match="workers"):
        SandboxConfig(workers=0)
    with pytest.raises(ValueError, match="timeout"):
        SandboxConfig(timeout_s=0)
    with pytest.raises(ValueError, match="mode"):
        Job("print(1)", mode="eval")
    with pytest.raises(ValueError, match="fn_name"):
        Job("print(1)", mode="call")


def test_every_config_field_has_help():
    for f in fields(SandboxConfig):
        assert f.metadata.get("help"), f.name


def test_config_from_env(monkeypatch):
    monkeypatch.setenv("RLVR_SANDBOX_REQUIRE", "seccomp, rlimits")
    monkeypatch.setenv("RLVR_SANDBOX_ALLOW_WEAKER_ISOLATION", "1")
    monkeypatch.setenv("RLVR_SANDBOX_WORKERS", "3")
    config = SandboxConfig.from_env(timeout_s=2.0)
    assert config.require == ("seccomp", "rlimits") and config.allow_weaker_isolation
    assert config.workers == 3 and config.timeout_s == 2.0


def test_a_pyenv_shim_interpreter_is_refused(tmp_path):
    shim = tmp_path / "python3"
    shim.write_text('#!/usr/bin/env bash\nexec "$(pyenv root)/versions/3.11.7/bin/python3" "$@"\n')
    shim.chmod(0o755)
    with pytest.raises(SandboxUnavailable, match="shim"):
        Sandbox(SandboxConfig(workers=1, python=str(shim))).start()


def test_workers_start_with_an_empty_environment(work_dir, monkeypatch):
    monkeypatch.setenv("RLVR_FAKE_SECRET", "do-not-leak")
    with Sandbox(SandboxConfig(workers=1, work_dir=work_dir)) as box:
        (pid,) = box.worker_pids()
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    assert environ == b""


def test_closed_sandbox_answers_jobs_with_an_explicit_error(work_dir):
    box = Sandbox(SandboxConfig(workers=1, work_dir=work_dir))
    box.start()
    box.close()
    with pytest.raises(RuntimeError, match="closed"):
        box.submit(Job("print(1)"))


# The kernel's syscall numbers, shipped with the tests (no kernel headers needed on the test machine):
# syscall_numbers.json says which headers they were extracted from.
SYSCALL_NUMBERS = json.loads(Path(__file__).with_name("syscall_numbers.json").read_text())


@pytest.mark.parametrize(("table", "arch"), [("_NR_X86_64", "x86_64"), ("_NR_AARCH64", "aarch64")])
def test_seccomp_syscall_numbers_match_the_kernel_headers(table, arch):
    expected = SYSCALL_NUMBERS[arch]
    ours = getattr(sandbox_worker, table)
    assert ours, table
    wrong = {name: (nr, expected.get(name)) for name, nr in ours.items() if expected.get(name) != nr}
    assert wrong == {}


def test_seccomp_filter_jumps_stay_inside_the_program():
    program, count = sandbox_worker.build_seccomp_filter(4242)
    assert len(program) == 8 * count and count < 4096
    instructions = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    for pc, (code, jt, jf, _k) in enumerate(instructions):
        if code & 0x07 == 0x05 and code != 0x05:  # conditional jump
            assert pc + 1 + max(jt, jf) < count, pc
    assert instructions[-1] == (0x06, 0, 0, 0x7FFF0000)  # default: allow
    # the worker pid is baked in (kill of the worker denied)
    assert any(code == 0x15 and k == 4242 for code, _, _, k in instructions)


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_sandboxes_on_one_host_never_share_a_uid_so_one_sweep_spares_the_other(work_dir):
    # Two verifier actors on one node each own a sandbox: a uid-wide sweep in one must not touch the
    # other's jobs.
    with (
        Sandbox(SandboxConfig(workers=2, work_dir=work_dir)) as a,
        Sandbox(SandboxConfig(workers=2, work_dir=work_dir)) as b,
    ):
        assert len(set(a.job_uids()) | set(b.job_uids())) == 4
        steady = a.submit(Job("import time; time.sleep(1); print('survived')", timeout_s=10))
        daemon = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(30)\nprint('x')"
        swept = b.run_batch([Job(daemon), Job(daemon)])
        assert all(r.leftovers_killed >= 1 for r in swept)  # b really swept its uids
        result = steady.result()
    assert result.ok and result.stdout == b"survived\n", result


NAMESPACE_LAYERS = ("mount_ns", "net_ns", "pid_ns", "ipc_ns", "cgroup")


def test_without_namespaces_and_cgroups_the_report_names_them_and_the_host_dir_path_still_holds(work_dir):
    # What a non-root pod gets: the namespace and cgroup layers are missing, the report says why, and
    # `require` decides (here: accepted explicitly). Jobs still start from the clean zygote, job dirs
    # on the host are polled for their quota and removed iteratively, and nothing is left afterwards.
    require = tuple(n for n in LAYERS if n not in NAMESPACE_LAYERS)
    with pytest.raises(SandboxUnavailable, match="mount_ns"):
        Sandbox(SandboxConfig(workers=1, work_dir=work_dir, namespaces=False, cgroups=False)).start()
    config = SandboxConfig(
        workers=1,
        work_dir=work_dir,
        namespaces=False,
        cgroups=False,
        require=require,
        disk_limit_bytes=16 << 20,
    )
    with Sandbox(config) as box:
        report = box.isolation_report()
        assert report["missing"] == list(NAMESPACE_LAYERS), report["missing"]
        assert all("disabled by SandboxConfig" in report["layers"][n]["detail"] for n in NAMESPACE_LAYERS)
        assert "polled" in report["layers"]["disk_quota"]["detail"]
        deep = "import os\nfor _ in range(1500):\n    os.mkdir('d')\n    os.chdir('d')\nprint('deep')"
        fill = "while True:\n    open(f'f{__import__(\"random\").random()}', 'wb').write(b'x' * (4 << 20))"
        secret = "print('kept-out-' + 'of-later-jobs-' + str(6 * 7))"
        hunt = (
            "import re\nfound = 0\n"
            "with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb', 0) as mem:\n"
            "    for line in maps:\n"
            "        addr, perms = line.split()[:2]\n"
            "        if not perms.startswith('r') or '[vvar' in line or '[vsyscall' in line:\n"
            "            continue\n"
            "        lo, hi = (int(x, 16) for x in addr.split('-'))\n"
            "        try:\n"
            "            mem.seek(lo); found += re.findall(b'kept-out-of-later-jobs-4(.)', mem.read(hi - lo)).count(b'2')\n"
            "        except (OSError, OverflowError, ValueError):\n"
            "            pass\n"
            "print(found)"
        )
        results = box.run_batch([Job(deep), Job(fill), Job(secret), Job(hunt), Job("print(6 * 7)")])
        assert results[0].ok and results[0].stdout == b"deep\n", results[0]
        assert results[1].killed_reason == "disk_quota", results[1]
        assert results[2].stdout == b"kept-out-of-later-jobs-42\n"
        assert results[3].ok and results[3].stdout == b"0\n", results[3]  # the zygote holds no job's data
        assert results[4].ok and results[4].stdout == b"42\n"
        assert box.stats()["worker_restarts"] == 0
    assert [n for n in os.listdir(work_dir) if n.startswith("rlvr-sandbox-")] == []
