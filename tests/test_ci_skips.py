"""Under CI every skip fails the run with its reason (tests/conftest.py): a test pytest skips, a skipif
marker, an importorskip inside a test and a whole module skipped at import. Outside CI they stay skips; an
expected failure (xfail) is neither. Each case runs in a child pytest with this suite's own conftest."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")

CASES = {
    "test_skips.py": """
import pytest

def test_runs():
    pass

def test_skips_itself():
    pytest.skip("no frobnicator on this machine")

@pytest.mark.skipif(True, reason="a marker said so")
def test_marked():
    pass

def test_importorskip():
    pytest.importorskip("no_such_module_rlvr")

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    assert False
""",
    "test_module_skip.py": """
import pytest
pytest.skip("the whole module needs a GPU", allow_module_level=True)

def test_never_collected():
    pass
""",
}


def _run(pytester, ci: str):
    pytester.makeconftest(CONFTEST.read_text())
    for name, text in CASES.items():
        pytester.makepyfile(**{name[:-3]: text})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CI", ci)
        return pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-rA", "--continue-on-collection-errors"
        )


def test_under_ci_every_skip_fails_naming_the_test_and_its_reason(pytester):
    result = _run(pytester, "true")
    # a skip in the call is a failed test, one at setup (a skipif marker) or at import an error
    result.assert_outcomes(passed=1, failed=2, errors=2, xfailed=1)
    out = result.stdout.str()
    for test, reason in [
        ("test_skips.py::test_skips_itself", "no frobnicator on this machine"),
        ("test_skips.py::test_marked", "a marker said so"),
        ("test_skips.py::test_importorskip", "could not import 'no_such_module_rlvr'"),
    ]:
        assert f"test {test} was skipped under CI (every skip fails CI): {reason}" in out, out
    assert (
        "module test_module_skip.py was skipped under CI (every skip fails CI): the whole module needs a GPU"
        in out
    ), out
    assert result.ret != 0


def test_outside_ci_a_skip_stays_a_skip(pytester):
    result = _run(pytester, "false")  # CI=false (or unset, empty, 0): not CI
    result.assert_outcomes(passed=1, skipped=4, xfailed=1)
    assert result.ret == 0
