"""The `code` verifier: solution extraction, APPS/TACO/LiveCodeBench test formats, judging rules, statuses,
partial credit, and pathological programs finishing within their bound (real sandbox, no mocks)."""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvr_verifiers import registry
from rlvr_verifiers.base import (
    INVALID_INPUT,
    MAX_RESPONSE_CHARS,
    OK,
    PARSE_ERROR,
    RESPONSE_TOO_LARGE,
    SANDBOX_ERROR,
    TIMEOUT,
    WRONG,
    Item,
)
from rlvr_verifiers.code import (
    CodeVerifier,
    InvalidTests,
    extract_code,
    normalize_stdout,
    parse_tests,
    values_equal,
)
from rlvr_verifiers.sandbox import SandboxConfig

# `verifier`: the code verifier fixture in tests/verifiers/conftest.py


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```\n"


ADD = "a, b = map(int, input().split())\nprint(a + b)"
ADD_TESTS = {"inputs": ["1 2\n", "10 20\n", "-5 5\n"], "outputs": ["3\n", "30\n", "0\n"]}


# --------------------------------------------------------------------------------------------------
# registry and extraction


def test_registered_as_code():
    v = registry.get("code")
    assert isinstance(v, CodeVerifier) and v.name == "code"
    assert "code" in registry.names()


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("```python\nprint(1)\n```", "print(1)\n"),
        ("```py\nprint(1)\n```", "print(1)\n"),
        ("first\n```python\nprint(1)\n```\nbetter:\n```python\nprint(2)\n```", "print(2)\n"),
        ("```python\nprint(1)\n```\n```text\nsample output\n```", "print(1)\n"),
        ("```\nprint(3)\n```", "print(3)\n"),
        ("print(4)", "print(4)"),
        ("<think>```python\nprint(0)\n```</think>\n```python\nprint(5)\n```", "print(5)\n"),
        ("```cpp\nint main(){}\n```", None),
        ("```python\nprint(1)", None),  # an unclosed fence: truncated response
        ("   \n", None),
        ("<think>```python\nprint(0)\n```</think> no code after thinking", " no code after thinking"),
    ],
)
def test_extraction_takes_the_last_python_block(response, expected):
    assert extract_code(response) == expected


# --------------------------------------------------------------------------------------------------
# test formats


@pytest.mark.parametrize(
    ("tests", "problem"),
    [
        ("not json", "not valid JSON"),
        ([1, 2], "must be an object"),
        ({"inputs": ["1"]}, '"inputs" and "outputs"'),
        ({"inputs": ["1", "2"], "outputs": ["1"]}, "2 inputs but 1 outputs"),
        ({"inputs": [], "outputs": []}, "empty"),
        ({"inputs": [1], "outputs": ["1"]}, "inputs[0] must be a string"),
        ({"inputs": [[1]], "outputs": [1], "fn_name": "not an identifier"}, "identifier"),
        ({"inputs": [5], "outputs": [1], "fn_name": "f"}, "argument list"),
        ('{"inputs": [[NaN]], "outputs": [1], "fn_name": "f"}', "not valid JSON"),
        ({"inputs": [[float("nan")]], "outputs": [1], "fn_name": "f"}, "not plain JSON"),
        ({"inputs": ["{bad"], "outputs": ["1"], "fn_name": "f"}, "not JSON lines"),
    ],
)
def test_malformed_tests_are_invalid_input(verifier, tests, problem):
    with pytest.raises(InvalidTests, match=re.escape(problem)):
        parse_tests(tests)
    verdict = verifier.verify(Item(fenced("print(1)"), tests))
    assert verdict.status == INVALID_INPUT and verdict.score == 0.0 and problem.split()[0] in verdict.detail


def test_too_many_tests_are_invalid_not_truncated():
    with pytest.raises(InvalidTests, match="max_tests"):
        parse_tests({"inputs": ["1"] * 5, "outputs": ["1"] * 5}, max_tests=4)


def test_tests_as_json_string_and_as_dict_agree(verifier):
    items = [Item(fenced(ADD), ADD_TESTS), Item(fenced(ADD), json.dumps(ADD_TESTS))]
    assert [v.status for v in verifier.verify_batch(items)] == [OK, OK]


def test_lists_of_lines_are_accepted_for_stdio():
    tests = parse_tests({"inputs": [["1 2", "3 4"]], "outputs": [["3", "7"]]})
    assert tests.stdin_inputs == ["1 2\n3 4\n"] and tests.expected_stdout == ["3\n7\n"]


def test_livecodebench_functional_format_is_decoded():
    tests = parse_tests({"inputs": ['[1, 2]\n"x"'], "outputs": ["[3]"], "fn_name": "f"})
    assert tests.call_args == [[[1, 2], "x"]] and tests.expected_values == [[3]]


# --------------------------------------------------------------------------------------------------
# judging


def test_correct_stdio_solution_passes(verifier):
    verdict = verifier.verify(Item(fenced(ADD), ADD_TESTS))
    assert (verdict.status, verdict.score) == (OK, 1.0)
    assert verdict.metrics == {"tests_passed": 3.0, "tests_total": 3.0}


def test_wrong_stdio_solution_fails_all_or_nothing(verifier):
    almost = "a, b = map(int, input().split())\nprint(a + b if a > 0 else 99)"
    verdict = verifier.verify(Item(fenced(almost), ADD_TESTS))
    assert (verdict.status, verdict.score) == (WRONG, 0.0)
    assert "wrong output" in verdict.detail


def test_whitespace_is_normalised_but_content_is_not():
    assert normalize_stdout("1  2 \r\n3\n\n") == normalize_stdout("1 2\n3")
    assert normalize_stdout("\n\n1\n") == [["1"]]
    assert normalize_stdout("1.0") != normalize_stdout("1")
    assert normalize_stdout("YES") != normalize_stdout("yes")
    assert normalize_stdout("1\n\n2") != normalize_stdout("1\n2")  # an inner blank line counts


def test_runtime_error_fails_even_with_the_right_output(verifier):
    code = "print(3)\nraise ValueError('late')"
    verdict = verifier.verify(Item(fenced(code), {"inputs": ["1 2\n"], "outputs": ["3\n"]}))
    assert verdict.status == WRONG and "ValueError" in verdict.detail


def test_program_that_raises_never_matches_an_empty_expected_output(verifier):
    # verl's sandbox path paid full reward here (a raising function, empty expected output)
    verdict = verifier.verify(Item(fenced("raise SystemExit('boom')"), {"inputs": [""], "outputs": [""]}))
    assert verdict.status == WRONG and verdict.score == 0.0
    call = verifier.verify(
        Item(fenced("def f():\n    raise ValueError"), {"inputs": [[]], "outputs": [None], "fn_name": "f"})
    )
    assert call.status == WRONG and "ValueError" in call.detail


def test_sys_exit_zero_after_correct_output_passes_like_python(verifier):
    code = "import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit(0)"
    assert verifier.verify(Item(fenced(code), ADD_TESTS)).status == OK


def test_fast_io_idioms_work(verifier):
    code = (
        "import sys, os\ndata = sys.stdin.buffer.read().split()\n"
        "os.write(1, (str(int(data[0]) + int(data[1])) + '\\n').encode())"
    )
    assert verifier.verify(Item(fenced(code), ADD_TESTS)).status == OK
    code2 = "a, b = map(int, open(0).read().split())\nsys_out = __import__('sys').stdout\nsys_out.write(f'{a+b}\\n')"
    assert verifier.verify(Item(fenced(code2), ADD_TESTS)).status == OK


def test_threading_main_idiom_waits_for_the_thread(verifier):
    code = (
        "import sys, threading\nsys.setrecursionlimit(10**6)\nthreading.stack_size(1 << 26)\n"
        "def main():\n    a, b = map(int, input().split())\n    print(a + b)\n"
        "threading.Thread(target=main).start()"
    )
    assert verifier.verify(Item(fenced(code), ADD_TESTS)).status == OK


@pytest.mark.timeout(60)
def test_timeout_status(verifier):
    start = time.monotonic()
    verdict = verifier.verify(Item(fenced("while True: pass"), ADD_TESTS, {"timeout_s": 0.5}))
    assert (verdict.status, verdict.score) == (TIMEOUT, 0.0)
    assert time.monotonic() - start < 0.5 + 4.0  # the first timeout ends the item: its later tests never run


def test_call_based_function_and_solution_class(verifier):
    tests = {"inputs": [[[1, 2, 3]], [[]]], "outputs": [6, 0], "fn_name": "total"}
    top = verifier.verify(Item(fenced("def total(xs):\n    return sum(xs)"), tests))
    method = verifier.verify(
        Item(
            fenced("class Solution:\n    def total(self, xs: List[int]) -> int:\n        return sum(xs)"),
            tests,
        )
    )
    assert top.status == OK and method.status == OK


def test_call_based_apps_wrapped_outputs_and_tuples(verifier):
    tests = {"inputs": [[2], [3]], "outputs": [[[2, 4]], [3, 9]], "fn_name": "pair"}
    verdict = verifier.verify(Item(fenced("def pair(x):\n    return (x, x * x)"), tests))
    assert verdict.status == OK, verdict


def test_call_based_livecodebench_format(verifier):
    tests = {"inputs": ["[1, 2, 3]\n2"], "outputs": ["[2, 4, 6]"], "fn_name": "scale"}
    code = "class Solution:\n    def scale(self, nums, k):\n        return [n * k for n in nums]"
    assert verifier.verify(Item(fenced(code), tests)).status == OK


def test_bool_is_not_int_and_values_are_strict():
    assert not values_equal(True, 1) and not values_equal(1, True) and not values_equal(0, False)
    assert values_equal(1, 1.0) and values_equal([1, "a", None], [1, "a", None])
    assert not values_equal(float("nan"), float("nan")) and not values_equal(float("inf"), float("inf"))
    assert not values_equal("1", 1) and not values_equal(None, 0) and not values_equal([], {})
    assert not values_equal({"a": 1}, {"a": 1, "b": 2}) and not values_equal([1], [1, 1])


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=6,
    )
)
def test_values_equal_agrees_with_json_roundtrip(value):
    decoded = json.loads(json.dumps(value))
    assert values_equal(decoded, value)


def test_bool_returned_for_int_expected_is_wrong(verifier):
    tests = {"inputs": [[1], [2]], "outputs": [1, 0], "fn_name": "is_one"}
    verdict = verifier.verify(Item(fenced("def is_one(x):\n    return x == 1"), tests))
    assert verdict.status == WRONG and "wrong return value" in verdict.detail


def test_partial_credit_is_off_by_default_and_on_per_item_or_config(verifier):
    half = "a, b = map(int, input().split())\nprint(a + b if a > 0 else 42)"
    default = verifier.verify(Item(fenced(half), ADD_TESTS))
    per_item = verifier.verify(Item(fenced(half), ADD_TESTS, {"partial_credit": True}))
    assert (default.status, default.score) == (WRONG, 0.0)
    assert per_item.status == OK and per_item.score == pytest.approx(2 / 3)
    assert per_item.metrics == {"tests_passed": 2.0, "tests_total": 3.0}
    calls = {"inputs": [[1], [2], [3], [4]], "outputs": [1, 4, 9, 0], "fn_name": "sq"}
    partial_calls = verifier.verify(
        Item(fenced("def sq(x):\n    return x * x"), calls, {"partial_credit": True})
    )
    assert partial_calls.score == pytest.approx(3 / 4)


def test_all_or_nothing_stops_running_tests_after_a_failure(verifier):
    tests = {"inputs": [str(i) for i in range(12)], "outputs": ["never"] * 12}
    before = verifier.sandbox.stats()
    verdict = verifier.verify(Item(fenced("import time\ntime.sleep(0.2)\nprint('x')"), tests))
    after = verifier.sandbox.stats()
    assert verdict.status == WRONG
    ran = after["jobs_started"] - before["jobs_started"]
    cancelled = after["jobs_cancelled"] - before["jobs_cancelled"]
    # Tests go one after another (more only while sandbox workers would idle), so a failing item runs at
    # most one wave of them; the rest are never sent, or cancelled before they start.
    assert ran <= verifier.sandbox.config.workers and ran + cancelled <= 12
    time.sleep(0.5)
    assert verifier.sandbox.stats()["jobs_started"] == after["jobs_started"]  # nothing left queued


def test_prose_without_code_is_a_parse_error(verifier):
    items = [
        Item("I think the answer is to add the numbers.", ADD_TESTS),
        Item("```cpp\nint main() { return 0; }\n```", ADD_TESTS),
        Item("", ADD_TESTS),
    ]
    assert [v.status for v in verifier.verify_batch(items)] == [PARSE_ERROR] * 3


def test_fenced_code_with_a_syntax_error_is_wrong_not_a_parse_error(verifier):
    verdict = verifier.verify(Item(fenced("print(("), ADD_TESTS))
    assert verdict.status == WRONG and "SyntaxError" in verdict.detail


def test_batch_mixes_every_status_in_order(verifier):
    items = [
        Item(fenced(ADD), ADD_TESTS),
        Item(fenced("print(0)"), ADD_TESTS),
        Item("nothing here", ADD_TESTS),
        Item(fenced(ADD), {"inputs": "x"}),
        Item(fenced("import time\ntime.sleep(5)"), ADD_TESTS, {"timeout_s": 0.3}),
        Item(fenced("def f(x):\n    return x"), {"inputs": [[1]], "outputs": [1], "fn_name": "f"}),
    ]
    statuses = [v.status for v in verifier.verify_batch(items)]
    assert statuses == [OK, WRONG, PARSE_ERROR, INVALID_INPUT, TIMEOUT, OK]


def test_oversized_solution_is_wrong_without_running(verifier):
    # over the source cap in UTF-8 bytes (two per character), under the response's limit in characters
    source = "x = 1  # " + "\u00e9" * (verifier.config.max_source_bytes // 2 + 1) + "\n"
    assert len(fenced(source)) <= MAX_RESPONSE_CHARS
    verdict = verifier.verify(Item(fenced(source), ADD_TESTS))
    assert verdict.status == WRONG and "longer than" in verdict.detail


def test_response_over_the_size_limit_is_counted_and_never_read(verifier):
    verdict = verifier.verify(Item(fenced("x = 1\n" * 100_000), ADD_TESTS))
    assert verdict.status == RESPONSE_TOO_LARGE and verdict.score == 0.0
    assert str(MAX_RESPONSE_CHARS) in verdict.detail


# --------------------------------------------------------------------------------------------------
# pathological programs finish within their bound


def test_megabytes_of_correct_output_pass(verifier):
    n = 160_000  # ~1 MB of output, compared line by line
    expected = "".join(f"{i}\n" for i in range(n))
    code = "import sys\nn = int(input())\nsys.stdout.write(''.join(f'{i}\\n' for i in range(n)))"
    verdict = verifier.verify(Item(fenced(code), {"inputs": [f"{n}\n"], "outputs": [expected]}))
    assert verdict.status == OK, verdict


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
@pytest.mark.parametrize(
    "code",
    [
        "print(2 ** 10 ** 7)",  # int -> str of 3 million digits: refused by CPython's digit limit
        "x = 2 ** (10 ** 10)",  # a huge exponent: memory limit or time limit
        "print(" + "(" * 5000 + "1" + ")" * 5000 + ")",  # deeply nested expression: parser limit
        "import sys\nsys.setrecursionlimit(10**8)\ndef f(n): return f(n + 1)\nf(0)",  # C stack overflow
        "print('x' * (1 << 30))",  # a gigabyte string
    ],
)
@pytest.mark.timeout(60)
def test_pathological_programs_end_within_their_bound(verifier, code):
    start = time.monotonic()
    verdict = verifier.verify(Item(fenced(code), {"inputs": [""], "outputs": ["1"]}, {"timeout_s": 2.0}))
    elapsed = time.monotonic() - start
    assert verdict.status in (WRONG, TIMEOUT) and verdict.score == 0.0
    # The bound: the 2 s per-test limit, plus the kill and a loaded machine's slack (the test's own clock).
    assert elapsed < 2.0 + 4.0, (elapsed, verdict)


def test_a_sandbox_that_refuses_to_start_gives_every_item_an_explicit_sandbox_error(tmp_path):
    # fail closed: no dedicated uid while every layer is required -> nothing runs, nothing is dropped
    refusing = CodeVerifier(sandbox_config=SandboxConfig(workers=1, job_uid_base=None))
    try:
        verdicts = refusing.verify_batch([Item(fenced(ADD), ADD_TESTS), Item(fenced(ADD), {"inputs": 1})])
    finally:
        refusing.close()
    assert [v.status for v in verdicts] == [SANDBOX_ERROR, INVALID_INPUT]
    assert "uid" in verdicts[0].detail
