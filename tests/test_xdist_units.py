"""The suite's xdist work units (tests/conftest.py) hold: a toy suite under this conftest, on two real
xdist workers, must build a shared session run once, a module-scoped fixture once, and keep a declared
group on one worker, while both workers get work. xdist's own `--dist loadgroup` failed exactly this
under pytest 9 (the shared default-experiment run was built twice in CI, on two workers)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")

TOY_FIXTURES = """

@pytest.fixture(scope="session")
def default_experiment_run():
    with open(os.environ["TOY_LOG"], "a") as f:
        f.write("built shared_run\\n")
    return "run"


@pytest.fixture
def where(request):
    yield
    with open(os.environ["TOY_LOG"], "a") as f:
        f.write(f"ran {request.node.nodeid} {os.environ['PYTEST_XDIST_WORKER']}\\n")
"""

TOYS = {
    "test_learning.py": """
def test_learning(default_experiment_run, where):
    assert default_experiment_run == "run"
""",
    "test_algos.py": """
import pytest

@pytest.mark.parametrize(
    "name", [pytest.param("grpo", marks=pytest.mark.xdist_group("default_experiment_run")), "rloo", "dapo"]
)
def test_algo(name, request, where):
    if name == "grpo":
        assert request.getfixturevalue("default_experiment_run") == "run"
""",
    "test_module_fixture.py": """
import os
import pytest

@pytest.fixture(scope="module")
def cluster():
    with open(os.environ["TOY_LOG"], "a") as f:
        f.write("built cluster\\n")
    return 1

def test_one(cluster, where): pass
def test_two(cluster, where): pass
def test_three(cluster, where): pass
""",
    "test_heavy_a.py": """
import pytest
pytestmark = pytest.mark.xdist_group("heavy")
def test_heavy_a1(where): pass
def test_heavy_a2(where): pass
""",
    "test_heavy_b.py": """
import pytest
pytestmark = pytest.mark.xdist_group("heavy")
def test_heavy_b(where): pass
""",
    "test_many.py": """
import pytest
import time

@pytest.mark.parametrize("i", range(12))
def test_many(i, where):
    time.sleep(0.1)
""",
}


def test_units_keep_shared_runs_module_fixtures_and_groups_on_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text() + TOY_FIXTURES)
    for name, text in TOYS.items():
        (tmp_path / name).write_text(text)
    log = tmp_path / "toy.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CI"))}
    env["TOY_LOG"] = str(log)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadscope",
         "--no-loadscope-reorder", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = log.read_text().splitlines()
    built = Counter(line for line in lines if line.startswith("built"))
    assert built == {"built shared_run": 1, "built cluster": 1}, lines
    worker = {line.split()[1]: line.split()[2] for line in lines if line.startswith("ran")}
    assert len(worker) == 22, worker

    def workers(*fragments: str) -> set[str]:
        return {w for nodeid, w in worker.items() if any(f in nodeid for f in fragments)}

    assert len(workers("test_learning", "test_algo[grpo]")) == 1, worker
    assert len(workers("test_module_fixture")) == 1, worker
    assert len(workers("test_heavy_")) == 1, worker
    assert set(worker.values()) == {"gw0", "gw1"}, worker
