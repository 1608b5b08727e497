"""Shared fixtures: one private rlvr cache per test session (the embedded model is built once), a
private Ray per module; the time limit of slow tests (pytest-timeout, configured in pyproject.toml); and,
under CI, no skip passes silently: every skipped test or module fails the run with its reason, and
hypothesis runs derandomised with no example database."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# verl runs and Ray clusters: a hang fails after this long instead of holding CI to its 90 minutes. A slow
# test with its own @pytest.mark.timeout keeps it; fast tests get pyproject.toml's default.
SLOW_TEST_TIMEOUT_S = 900


def under_ci() -> bool:
    """CI is set to something that means yes (CI systems set CI=true; `.ci/run` exports it)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


# Under CI hypothesis draws the same examples every run and keeps no .hypothesis/ database: a red CI is
# reproducible from its log, never from examples an earlier run happened to save on that machine.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if under_ci():
    hypothesis_settings.load_profile("ci")


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (path, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _fail_skip_under_ci(report, what: str):
    """A skip under CI becomes a failure naming the skipped test or module and the skip's reason: a test
    that CI does not run proves nothing, and a skip is easy to miss in a summary line."""
    if report.skipped and not hasattr(report, "wasxfail") and under_ci():
        reason = _skip_reason(report)
        report.outcome = "failed"
        report.longrepr = f"{what} {report.nodeid} was skipped under CI (every skip fails CI): {reason}"
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    return _fail_skip_under_ci((yield), "test")


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    # A module-level skip (pytest.skip(allow_module_level=True), importorskip at import) removes every test
    # in it; under CI it is a collection error, which stops the run before any test with this message.
    return _fail_skip_under_ci((yield), "module")


# Fixtures that are one expensive run asserted on by tests in several files: their tests form one xdist
# work unit, so the run happens once (on one worker) instead of once per worker that meets it.
SHARED_RUN_FIXTURES = ("default_experiment_run",)


def _work_unit(item) -> str:
    """The xdist work unit of an item: the tests that must run on one worker, one after the other.

    - an explicit `pytest.mark.xdist_group(name)` (a module's pytestmark or a parameter's marks): the
      tests that start vLLM or load the real model take GBs each and create /dev/shm segments that the
      others check for leaks, so they declare "vllm_or_real_model" and run one at a time;
    - a test of a shared run (SHARED_RUN_FIXTURES): that fixture's name;
    - a test that uses a module- or class-scoped fixture (a private Ray, a killed-and-resumed run, the
      two-node cluster): its module, so the fixture is built once, as in a serial run;
    - any other test: itself."""
    marker = item.get_closest_marker("xdist_group")
    if marker:
        return f"group:{marker.args[0]}"
    fixture_defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    for name in SHARED_RUN_FIXTURES:
        if name in fixture_defs:
            return f"group:{name}"
    for name in item.fixturenames:
        defs = fixture_defs.get(name)
        if defs and defs[-1].scope in ("module", "class", "package"):
            return f"module:{item.nodeid.split('::')[0]}"
    return item.nodeid


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT_S))
    # Under xdist (pyproject's addopts: two workers, units in the order given here): the longest units
    # first (seconds from DURATIONS_FILE), so that a long one never starts at the end while the other
    # worker idles. The sort is stable: every worker computes the same order, as xdist requires.
    recorded = json.loads(DURATIONS_FILE.read_text()) if DURATIONS_FILE.exists() else {}
    unit = {item.nodeid: _work_unit(item) for item in items}
    unit_seconds: dict[str, float] = {}
    for item in items:
        guess = UNRECORDED_SLOW_S if item.get_closest_marker("slow") else UNRECORDED_FAST_S
        unit_seconds[unit[item.nodeid]] = unit_seconds.get(unit[item.nodeid], 0.0) + recorded.get(
            item.nodeid, guess
        )
    items.sort(key=lambda item: -unit_seconds[unit[item.nodeid]])
    units_file = getattr(config, "workerinput", {}).get(UNITS_FILE_KEY)
    if units_file:  # an xdist worker: hand the controller's scheduler the units (each worker writes the same)
        tmp = Path(f"{units_file}.{os.getpid()}")
        tmp.write_text(json.dumps(unit))
        tmp.replace(units_file)


# xdist's own `--dist loadgroup` reads xdist_group markers by rewriting each item's node id, which pytest 9
# no longer takes (Node.nodeid comes from `_id`; xdist 3.8 sets `_nodeid`): its groups were silently
# split across workers (CI ran the shared default-experiment run twice). So the units are rlvr's own:
# each worker writes {node id: unit} at collection (above), and the controller's scheduler, xdist's
# LoadScopeScheduling with the unit as the scope, reads it. tests/test_xdist_units.py checks it works.
UNITS_FILE_KEY = "rlvr_units_file"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    config = node.config
    if not hasattr(config, "_rlvr_units_file"):
        handle, path = tempfile.mkstemp(prefix="rlvr-xdist-units-", suffix=".json")
        os.close(handle)
        config._rlvr_units_file = path
        config.add_cleanup(lambda: Path(path).unlink(missing_ok=True))
    node.workerinput[UNITS_FILE_KEY] = config._rlvr_units_file


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        """xdist's scope scheduling, the scope of a test being its rlvr work unit (_work_unit)."""

        units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:
                self.units = json.loads(Path(config._rlvr_units_file).read_text())
            return self.units.get(nodeid, nodeid)

    return UnitScheduling(config, log)


# The seconds each test took (setup + call + teardown) in a whole run, by node id: what orders the xdist
# units. Refresh it after a change of the suite's shape: `python -m pytest --record-durations
# tests/durations.json`. A test it does not list counts as UNRECORDED_*_S.
DURATIONS_FILE = Path(__file__).with_name("durations.json")
UNRECORDED_SLOW_S = 30.0
UNRECORDED_FAST_S = 0.1


def pytest_addoption(parser):
    parser.addoption(
        "--record-durations",
        metavar="PATH",
        help="write each test's seconds (setup + call + teardown) as JSON to PATH: tests/durations.json orders xdist's units",
    )


_durations: dict[str, float] = {}


def pytest_runtest_logreport(report):
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session):
    path = session.config.getoption("--record-durations")
    if path and not os.environ.get("PYTEST_XDIST_WORKER"):  # the controller has every worker's reports
        Path(path).write_text(
            json.dumps({k: round(v, 2) for k, v in sorted(_durations.items())}, indent=0) + "\n"
        )


@pytest.fixture(scope="session")
def rlvr_cache(tmp_path_factory) -> Path:
    """A cache dir for the session; exported so `rlvr` subprocesses share the one build. Under xdist the
    workers share one too (the folder above their basetemps; builds serialise on file locks)."""
    if os.environ.get("RLVR_TEST_CACHE_DIR"):
        path = Path(os.environ["RLVR_TEST_CACHE_DIR"])
    elif os.environ.get("PYTEST_XDIST_WORKER"):
        path = tmp_path_factory.getbasetemp().parent / "rlvr-cache"
        path.mkdir(exist_ok=True)
    else:
        path = tmp_path_factory.mktemp("rlvr-cache")
    os.environ["RLVR_CACHE_DIR"] = str(path)
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(rlvr_cache) -> Path:
    from rlvr_launch.runs.embedded_model import ensure_tiny_model

    return ensure_tiny_model(rlvr_cache, log=lambda _m: None)


@pytest.fixture(scope="session")
def smollm2_model_dir(rlvr_cache) -> Path:
    """SmolLM2-135M-Instruct converted from its package once per session (model=smollm2_135m_instruct)."""
    from rlvr_launch.runs.real_models import SMOLLM2_135M_INSTRUCT, ensure_model

    return ensure_model(rlvr_cache, SMOLLM2_135M_INSTRUCT.name, log=lambda _m: None)


@pytest.fixture(scope="session")
def default_experiment_run(tiny_model_dir, tmp_path_factory):
    """One run of the default experiment (`rlvr train`, cpu_demo: GRPO on the tiny model and addition),
    lengthened to the learning test's 40 steps with validation every 5: shared by the tests that assert on
    it (test_learning.py's learning and test_algo_recipes.py's grpo metrics), so CI trains it once.
    Returns (run_dir, the finished process)."""
    import shutil
    import subprocess
    import sys
    import tempfile

    from learning_run import STEPS, VAL_EVERY, end_processes_under

    run_dir = tmp_path_factory.mktemp("default-experiment") / "run"
    ray_root = tempfile.mkdtemp(prefix="rlvr-learn-", dir="/tmp")
    cmd = [
        sys.executable, "-m", "rlvr_launch.cli", "train",
        f"trainer.total_training_steps={STEPS}", "trainer.val_before_train=true", f"trainer.test_freq={VAL_EVERY}",
        "trainer.save_freq=-1", "--run-dir", str(run_dir),
    ]  # fmt: skip
    env = dict(os.environ, WANDB_MODE="disabled", RLVR_RAY_TMPDIR_ROOT=ray_root)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=840, env=env)
    finally:
        end_processes_under(ray_root)
        shutil.rmtree(ray_root, ignore_errors=True)
    return run_dir, out


@pytest.fixture(scope="module")
def private_ray(request):
    """A Ray for this test module's process only: a new local head (never one already running on the
    machine, nor RAY_ADDRESS's), its own temp dir, no dashboard, free ports Ray picks, and the
    verifier pool's custom resource. A module sets RAY_NUM_CPUS / RAY_VERIFIER_SLOTS to size it, and
    RAY_EXTRA_PYTHONPATH for modules its workers must import (Ray workers inherit the env at init)."""
    import tempfile

    import ray

    if ray.is_initialized():
        # Never skip: a leaked Ray would silently remove every test of the module from the run.
        pytest.fail(
            "a previous test left Ray initialised in this process: it must ray.shutdown() what it starts"
        )
    old_path = os.environ.get("PYTHONPATH")
    extra = getattr(request.module, "RAY_EXTRA_PYTHONPATH", None)
    if extra:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(extra), old_path) if p)
    ray.init(
        address="local",
        num_cpus=getattr(request.module, "RAY_NUM_CPUS", 2),
        resources={"rlvr_verifier": getattr(request.module, "RAY_VERIFIER_SLOTS", 8)},
        include_dashboard=False,
        _temp_dir=tempfile.mkdtemp(prefix="rlvr-test-ray-", dir="/tmp"),
        log_to_driver=False,
    )
    try:
        yield ray
    finally:
        ray.shutdown()
        if extra:
            if old_path is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old_path
