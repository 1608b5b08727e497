"""`rlvr ls` lists the pipelines and the verifiers too (issue 27): each with its purpose, alone by group name
(singular or plural), and an unknown group is one line naming the groups."""

from __future__ import annotations

import subprocess
import sys

from rlvr_launch.recipes import compose
from rlvr_verifiers import registry


def _ls(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "ls", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _purposes(stdout: str) -> dict[str, str]:
    rows: dict[str, str] = {}
    name = ""
    for line in stdout.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name, _, purpose = line.strip().partition(" ")
            rows[name] = purpose.strip()
        elif line.startswith("   ") and name:  # a purpose wrapped under its name
            rows[name] += " " + line.strip()
        else:
            name = ""
    return rows


def test_ls_pipelines_lists_every_shipped_spec_with_its_purpose():
    out = _ls("pipelines")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("pipelines (rlvr pipeline NAME):")
    rows = _purposes(out.stdout)
    assert sorted(rows) == compose.group_entries("pipeline") and "r1" in rows and "distill" in rows
    assert rows["r1_zero"].startswith("Pipeline `r1_zero`: DeepSeek-R1-Zero in miniature")
    assert _ls("pipeline").stdout == out.stdout


def test_ls_verifiers_lists_every_registered_verifier_and_rubric():
    out = _ls("verifiers")
    assert out.returncode == 0, out.stderr
    rows = _purposes(out.stdout)
    # What a fresh process registers (the built-in verifiers and rubrics): this test process may hold test
    # verifiers that earlier tests registered (tests/verifiers/pool_test_verifiers.py), which `rlvr ls` never sees.
    fresh = subprocess.run(
        [sys.executable, "-c", "from rlvr_verifiers import registry; print(' '.join(registry.names()))"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert fresh.returncode == 0, fresh.stderr
    assert sorted(rows) == fresh.stdout.split()
    assert set(registry.BUILTIN) <= set(rows)
    assert (
        rows["math"] == "The `math` verifier: is the response's final answer equal to the reference answer?"
    )
    assert rows["r1_zero"] == "rubric: 1 x routed + 0.5 x format"


def test_ls_without_a_group_ends_with_pipelines_and_verifiers_and_an_unknown_group_is_named():
    out = _ls()
    assert out.returncode == 0 and "pipelines (rlvr pipeline NAME):" in out.stdout
    assert "verifiers (rlvr score --verifier NAME" in out.stdout
    bad = _ls("pipelinez")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == (
        "rlvr ls: error: unknown group 'pipelinez'; groups: experiment, algo, model, task, platform, "
        "rollout, pipeline, verifier"
    )
