"""The `code` verifier's own (trusted-side) bounds against hostile solutions: output far beyond the expected
answer, and items that are slow on purpose. Each runs for real in the sandbox next to an honest item of the
same batch, which keeps its score."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
import time

import pytest

from rlvr_verifiers.base import OK, TIMEOUT, WRONG, Item
from rlvr_verifiers.code import CodeConfig, CodeVerifier, normalize_stdout, stdout_matches
from rlvr_verifiers.pool import PoolConfig
from rlvr_verifiers.sandbox import SandboxConfig

HONEST = Item(
    "```python\nprint(sum(map(int, input().split())))\n```", {"inputs": ["40 2\n"], "outputs": ["42\n"]}
)


def fenced(code: str) -> str:
    return "```python\n" + textwrap.dedent(code).strip() + "\n```"


@pytest.fixture(scope="module")
def work_dir():
    path = tempfile.mkdtemp(prefix="rlvr-code-bounds-", dir="/tmp")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def verifier(work_dir):
    v = CodeVerifier(
        CodeConfig(timeout_per_test_s=2.0, item_timeout_s=3.0), SandboxConfig(workers=2, work_dir=work_dir)
    )
    yield v
    v.close()


def test_a_correct_answer_padded_with_15_mib_of_whitespace_fails_with_the_cap_in_detail(verifier):
    padded = """
    import sys
    x = int(input())
    sys.stdout.write(str(x * 2) + " " * (15 << 20) + "\\n")
    """
    tests = {"inputs": ["21\n"], "outputs": ["42\n"]}
    for partial in (False, True):
        verdicts = verifier.verify_batch([Item(fenced(padded), tests, {"partial_credit": partial}), HONEST])
        assert verdicts[1].status == OK, verdicts
        assert verdicts[0].score == 0.0 and verdicts[0].status == WRONG, verdicts
        assert "stdout over its cap" in verdicts[0].detail, verdicts[0]
    # the cap follows the expected output: a long expected answer with a little extra whitespace passes
    long = {"inputs": ["5000\n"], "outputs": [" ".join(map(str, range(5000))) + "\n"]}
    spaced = "n = int(input())\nprint('  '.join(map(str, range(n))) + '   ')"
    assert verifier.verify_batch([Item(fenced(spaced), long), HONEST])[0].status == OK


def test_comparison_is_line_by_line_and_equals_the_whole_normalisation():
    cases = [
        ("1 2\n3\n", "1  2\r\n3   \n\n"),
        ("\n\n a\n\n b \n\n", "a\n\nb"),
        ("a\n\nb", "a\nb"),
        ("a\x0bb", "a\nb"),
        ("", "\n \n"),
        ("x", ""),
        ("1.0", "1"),
        ("a b\n", "a\nb\n"),
    ]
    for actual, expected in cases:
        want = normalize_stdout(actual) == normalize_stdout(expected)
        assert stdout_matches(actual.encode(), expected) is want, (actual, expected)


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_a_slow_call_based_item_is_bounded_by_the_item_budget_not_the_test_count(verifier):
    # 20 calls of 1.5 s each: every call is within the 2 s per-test limit, but the item would hold its
    # actor for 30 s (before: min(2 * 20 + 1, 60) = 41 s); the item budget stops it at 3 s.
    slow = """
    import time
    def solve(x):
        time.sleep(1.5)
        return x
    """
    tests = {"inputs": [[i] for i in range(20)], "outputs": list(range(20)), "fn_name": "solve"}
    began = time.monotonic()
    verdicts = verifier.verify_batch([Item(fenced(slow), tests), HONEST])
    took = time.monotonic() - began
    assert verdicts[1].status == OK, verdicts
    assert verdicts[0].status == TIMEOUT and verdicts[0].score == 0.0, verdicts
    assert took < 3.0 + 10.0, took  # the budget plus start-up slack; the old bound was 41 s


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_a_slow_stdio_item_is_bounded_by_the_item_budget(verifier):
    slow = "import time\ntime.sleep(1.2)\nprint(input())"
    tests = {"inputs": [f"{i}\n" for i in range(20)], "outputs": [f"{i}\n" for i in range(20)]}
    for partial in (False, True):
        began = time.monotonic()
        verdicts = verifier.verify_batch([Item(fenced(slow), tests, {"partial_credit": partial}), HONEST])
        took = time.monotonic() - began
        assert verdicts[1].status == OK, verdicts
        assert verdicts[0].detail and "time budget of 3s" in verdicts[0].detail, verdicts[0]
        assert verdicts[0].metrics["tests_passed"] < 20, verdicts[0]
        assert took < 3.0 + 2 * 2.0 + 10.0, took  # budget + the runs in flight + slack; serial was 24 s


def test_the_code_item_budget_stays_below_the_pools_item_timeout(monkeypatch):
    monkeypatch.delenv("RLVR_CODE_ITEM_TIMEOUT_S", raising=False)
    assert CodeConfig().item_timeout_s < PoolConfig().item_timeout_s
    for item_timeout in (6.0, 30.0, 90.0):
        env = PoolConfig(item_timeout_s=item_timeout).actor_env()
        monkeypatch.setenv("RLVR_CODE_ITEM_TIMEOUT_S", env["RLVR_CODE_ITEM_TIMEOUT_S"])
        assert CodeConfig().item_timeout_s < item_timeout  # what an actor's code verifier will use
    monkeypatch.setenv("RLVR_CODE_ITEM_TIMEOUT_S", "soon")
    with pytest.raises(ValueError, match="RLVR_CODE_ITEM_TIMEOUT_S"):
        CodeConfig()
