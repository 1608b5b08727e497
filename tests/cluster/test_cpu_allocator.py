"""The CPU platform's worker allocator (rlvr_cluster/env.py, `rlvr.cpu_allocator`, glibc's by default):
jemalloc preloaded where it is installed when asked for, glibc's malloc said out loud where it is not, a
user's own preload kept, a bad value refused at composition with the fix; `glibc_reuse`: glibc's malloc
that hands a freed block out again instead of the kernel's fresh pages, also off the main thread. That the workers of a real run have it mapped is asserted by
tests/launch/test_chaos.py on the run's own processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from rlvr_cluster.env import (
    GLIBC_REUSE_ENV,
    JEMALLOC_CANDIDATES,
    JEMALLOC_INSTALL,
    allocator_preload,
    cpu_allocator_env,
    find_jemalloc,
)


def _cfg(device: str = "cpu", choice: str | None = "jemalloc"):
    rlvr = {} if choice is None else {"cpu_allocator": choice}
    return OmegaConf.create({"trainer": {"device": device}, "rlvr": rlvr})


def test_jemalloc_is_preloaded_from_the_first_place_it_is_found(tmp_path):
    first, second = tmp_path / "a" / "libjemalloc.so.2", tmp_path / "b" / "libjemalloc.so.2"
    second.parent.mkdir()
    second.write_bytes(b"")
    env, note = allocator_preload("jemalloc", {}, (str(first), str(second)))
    assert env == {"LD_PRELOAD": str(second)}
    assert note == f"CPU workers use {second}"


def test_missing_jemalloc_falls_back_to_glibc_and_says_how_to_install_it(tmp_path):
    env, note = allocator_preload("jemalloc", {}, (str(tmp_path / "libjemalloc.so.2"),))
    assert env == {}
    assert JEMALLOC_INSTALL in note and "glibc" in note and "rlvr.cpu_allocator=jemalloc" in note


def test_system_keeps_glibc_silently_and_a_gpu_platform_gets_nothing():
    assert allocator_preload("system", {}) == ({}, "")
    assert cpu_allocator_env(_cfg(device="cuda"), {}) == ({}, "")
    # A run directory's config from before the key existed: the default, glibc's.
    assert cpu_allocator_env(_cfg(choice=None), {"LD_PRELOAD": "/opt/libmine.so"}) == ({}, "")


def test_a_users_own_preload_is_kept_after_ours_and_ours_is_not_repeated(tmp_path):
    lib = tmp_path / "libtcmalloc.so.4"
    lib.write_bytes(b"")
    env, _ = allocator_preload(str(lib), {"LD_PRELOAD": "/opt/libmine.so:" + str(lib)})
    assert env == {"LD_PRELOAD": f"{lib} /opt/libmine.so"}


def test_a_library_path_that_does_not_exist_is_an_error_naming_the_choices(tmp_path):
    with pytest.raises(ValueError, match=r"no such file on this machine.*jemalloc, system"):
        allocator_preload(str(tmp_path / "libtcmalloc.so.4"), {})


@pytest.mark.parametrize("value", ["tcmalloc", "libjemalloc.so.2", "/usr/lib/jemalloc"])
def test_a_bad_cpu_allocator_value_is_refused_at_composition(value):
    from rlvr_launch.errors import UserError
    from rlvr_launch.recipes import recipe_checks

    with pytest.raises(
        UserError,
        match=r"rlvr\.cpu_allocator=.*use one of glibc_reuse, jemalloc, system, or the absolute path",
    ):
        recipe_checks._check_cpu_allocator(_cfg(choice=value))


def test_a_process_started_with_the_env_runs_on_the_preloaded_allocator():
    """A real process: with jemalloc installed it is mapped; without, the process runs on glibc's."""
    env, _ = allocator_preload("jemalloc", {})
    maps = subprocess.run(
        [sys.executable, "-c", "import sys; sys.stdout.write(open('/proc/self/maps').read())"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    mapped = "libjemalloc" in maps.stdout
    assert mapped == (find_jemalloc() is not None), (env, find_jemalloc(), JEMALLOC_CANDIDATES)
    assert "cannot be preloaded" not in maps.stderr


# In a thread that is not the main one (Ray runs an actor's calls there), allocate a 96 MiB block, write
# every page, free it; ROUNDS times. Prints the minor page faults of the rounds after the first.
_CHURN = r"""
import ctypes, resource, threading
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size, rounds, out = 96 << 20, 4, []
def work():
    for i in range(rounds):
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        block = libc.malloc(size)
        ctypes.memset(block, 1, size)
        libc.free(block)
        if i:
            out.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
thread = threading.Thread(target=work)
thread.start()
thread.join()
print(sum(out))
"""


def _faults_after_the_first_round(env: dict[str, str]) -> int:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "LD_PRELOAD"}
    out = subprocess.run(
        [sys.executable, "-c", _CHURN], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip())


def test_glibc_reuse_hands_a_freed_block_out_again_instead_of_fresh_pages_off_the_main_thread():
    env, note = allocator_preload("glibc_reuse", {"LD_PRELOAD": "/opt/libmine.so"})
    # Nothing preloaded: a user's preload stays theirs.
    assert env == GLIBC_REUSE_ENV and "LD_PRELOAD" not in env
    assert note.startswith("CPU workers use glibc's malloc, keeping freed memory")
    assert "MALLOC_ARENA_MAX=1" in note
    assert cpu_allocator_env(_cfg(choice="glibc_reuse"))[0] == GLIBC_REUSE_ENV
    assert cpu_allocator_env(_cfg(device="cuda", choice="glibc_reuse")) == ({}, "")
    # glibc's defaults: every round maps the block afresh and the kernel zeroes all 24,576 pages again.
    pages = 3 * (96 << 20) // 4096
    assert _faults_after_the_first_round({}) >= 0.9 * pages
    # reuse: the rounds after the first write pages the process already has.
    assert _faults_after_the_first_round(env) < 0.01 * pages
