"""The `code` verifier: a Python solution runs against tests in the sandbox; the trusted side judges.

    from rlvr_verifiers import registry
    verdicts = registry.get("code").verify_batch([Item(response, ground_truth=tests), ...])

Solution: the last ```python (or ```py / ```python3) fenced block of the response, else the last untagged
fenced block, else the whole response when it has no fence at all, all read in the answer region only
(`rlvr_verifiers.reasoning`: text up to the last `</think>` is reasoning and is skipped; an unclosed
reasoning block is `parse_error`).  No code (empty, or only fences of other languages) is `parse_error`.

Tests (`Item.ground_truth`: a dict or its JSON string), compatible with APPS / TACO / LiveCodeBench:
- stdin/stdout: `{"inputs": [str, ...], "outputs": [str, ...]}`; an input or output may also be a list of
  lines.  Each test is a fresh run of the program (`python -c`-like, stdin = the input).  It passes when
  the program exits 0, is not killed, and its stdout equals the expected output after whitespace
  normalisation: both are split into lines, surrounding blank lines are dropped, and each line is
  compared as its whitespace-separated tokens (so trailing spaces, `\\r\\n` and runs of spaces do not
  matter; case, punctuation and number formatting do — `1.0` is not `1`).
- call-based: the same plus `"fn_name"`.  `inputs[i]` is the argument list of call i (APPS / TACO) or a
  string of newline-separated JSON arguments (LiveCodeBench, whose output is then a JSON string too).
  `fn_name` is a top-level function or a method of `class Solution`; `typing`'s names are predefined.
  All calls run in one process.  A call passes when its return value, JSON-encoded in the sandbox and
  decoded here, equals the expected value strictly: bool only equals bool (True is not 1), ints and
  floats compare numerically, NaN and infinities never match, tuples arrive as lists; and, as APPS
  does, a one-element expected list `[x]` also accepts `x`.

Why this cannot be gamed by the program (each has a test in tests/verifiers/test_code_reward_hacking.py):
expected outputs never enter the sandbox (only the solution and the inputs do); exit codes and stdout
markers never count as a pass on their own; in call mode the harness writes one JSON line per call,
tagged with a per-run random nonce, on a dedicated pipe (not stdout), and this trusted process decodes
it as plain JSON (no objects of the program, so no `__eq__` tricks), type-checks it, and requires
EXACTLY one result per test: a missing, duplicated, foreign-nonce or malformed line fails the item
(`detail` says "protocol violation").

Statuses: ok (all tests passed; with partial credit: at least one, score = fraction passed), wrong,
parse_error (no code), timeout (the first failing test ran out of time), sandbox_error (the sandbox, not
the program, failed), invalid_input (bad tests).  Partial credit is off by default (all-or-nothing);
turn it on with `CodeConfig(partial_credit=True)` or per item with `Item.extra["partial_credit"]`.
`Item.extra["timeout_s"]` overrides the per-test time limit.  In all-or-nothing mode the remaining
stdin/stdout tests of an item are cancelled once one fails.

Bounds on the trusted side: a test's stdout may be at most `output_cap_factor` x its expected output plus
`output_cap_slack_bytes` (a correct answer padded with megabytes of whitespace is killed, `wrong`, with the
cap in `detail`), and it is compared line by line, never normalised whole; a judged run's output is
dropped at once.  An item may use `item_timeout_s` of sandbox time in all (its tests together, or its one
call-mode run); the rest of its tests are then `timeout`.  That budget stays below the pool's per-item
timeout (the pool exports RLVR_CODE_ITEM_TIMEOUT_S to its actors), so one slow item never holds an actor
for minutes.

The sandbox (rlvr_verifiers.sandbox) starts on first use or on `warm_up()`; its configuration comes from
`SandboxConfig.from_env()` (RLVR_SANDBOX_* variables) unless `configure()` is called first.
`isolation_report()` returns the sandbox's layer report (the pool logs it when isolation is weaker).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import itertools
import json
import math
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from rlvr_verifiers import reasoning
from rlvr_verifiers.base import INVALID_INPUT, OK, PARSE_ERROR, SANDBOX_ERROR, TIMEOUT, WRONG, Item, Verdict
from rlvr_verifiers.registry import Verifier, register
from rlvr_verifiers.sandbox import Job, RunResult, Sandbox, SandboxConfig, SandboxUnavailable


def _default_item_timeout() -> float:
    value = os.environ.get("RLVR_CODE_ITEM_TIMEOUT_S")
    if not value:
        return 20.0
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"RLVR_CODE_ITEM_TIMEOUT_S must be a number of seconds, got {value!r}") from None


@dataclass
class CodeConfig:
    timeout_per_test_s: float = field(
        default=5.0,
        metadata={
            "help": "Wall-clock limit of one test, seconds (call mode: times the test count, within "
            "item_timeout_s)."
        },
    )
    item_timeout_s: float = field(
        default_factory=_default_item_timeout,
        metadata={
            "help": "Sandbox time one item may use, all its tests together (call mode: its one run); the "
            "rest of its tests then count as `timeout`. Keep it below the pool's item_timeout_s (the pool "
            "sets RLVR_CODE_ITEM_TIMEOUT_S in its actors to 2/3 of it). Default 20 s or that variable."
        },
    )
    output_cap_factor: float = field(
        default=2.0,
        metadata={
            "help": "A test's stdout may be at most this many times its expected output, plus "
            "output_cap_slack_bytes; more kills the run (the padding is never kept or compared)."
        },
    )
    output_cap_slack_bytes: int = field(
        default=64 << 10, metadata={"help": "Bytes of stdout allowed beyond output_cap_factor x expected."}
    )
    partial_credit: bool = field(
        default=False, metadata={"help": "Score = fraction of tests passed instead of all-or-nothing."}
    )
    max_source_bytes: int = field(
        default=256 << 10,
        metadata={"help": "A longer solution is `wrong` without running (bounds the sandbox)."},
    )
    max_tests: int = field(
        default=1000, metadata={"help": "Items with more tests are `invalid_input` (no silent truncation)."}
    )

    def __post_init__(self) -> None:
        if not (self.timeout_per_test_s > 0 and self.item_timeout_s > 0):
            raise ValueError("CodeConfig.timeout_per_test_s and item_timeout_s must be > 0")
        if self.output_cap_factor < 1 or self.output_cap_slack_bytes < 0:
            raise ValueError("CodeConfig.output_cap_factor must be >= 1 and output_cap_slack_bytes >= 0")

    def stdout_cap(self, expected: str) -> int:
        """The stdout a test may print, from its expected output (bytes)."""
        size = len(expected.encode("utf-8", "surrogateescape"))
        return int(size * self.output_cap_factor) + self.output_cap_slack_bytes


# --------------------------------------------------------------------------------------------------
# extraction

# Anchored runs with nothing after them: one pass each, never a backtrack.
_BLANKS = re.compile(r"[ \t]*")
_LANG = re.compile(r"[A-Za-z0-9_+.-]*")
_PYTHON_TAGS = {"python", "py", "python3", "py3"}


def extract_code(response: str) -> str | None:
    """The solution in a response (see the module docstring), or None when there is none."""
    region = reasoning.split(response, reasoning.default_tags()).answer
    return None if region is None else _extract(region)[0]


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, body) of each fenced block: what `re.findall(r"```[ \\t]*([A-Za-z0-9_+.-]*)[^\\n]*\\n(.*?)```",
    text, re.DOTALL)` returns, in one linear pass. (That pattern backtracks over every split of a run of
    spaces after a fence between `[ \\t]*` and `[^\\n]*`, and rescans the rest of the text from every run
    of backticks: seconds of CPU on 32 KB.)"""
    out = []
    pos = 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            return out
        lang = _BLANKS.match(text, start + 3).end()
        k = _LANG.match(text, lang).end()
        newline = text.find("\n", k)
        if newline < 0:
            return out  # no line break after this fence, so none after any later one
        end = text.find("```", newline + 1)
        if end < 0:
            return out  # no closing fence after this one, so none after any later one
        out.append((text[lang:k], text[newline + 1 : end]))
        pos = end + 3


def _extract(text: str) -> tuple[str | None, bool]:
    """(solution or None, whether it came from a fenced block) in an answer region."""
    blocks = _fenced_blocks(text)
    python = [body for tag, body in blocks if tag.lower() in _PYTHON_TAGS]
    untagged = [body for tag, body in blocks if not tag]
    fenced = True
    if python:
        code = python[-1]
    elif untagged:
        code = untagged[-1]
    elif "```" in text:
        return None, True  # fences of other languages, or an unclosed fence: no Python solution
    else:
        code, fenced = text, False
    return (code if code.strip() else None), fenced


# --------------------------------------------------------------------------------------------------
# tests


class InvalidTests(ValueError):
    """The tests dict is malformed (the message names the problem)."""


@dataclass
class Tests:
    stdin_inputs: list[str] | None = None  # stdin/stdout mode
    expected_stdout: list[str] | None = None
    fn_name: str | None = None  # call mode
    call_args: list[list[Any]] | None = None
    expected_values: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.stdin_inputs if self.fn_name is None else self.call_args)  # type: ignore[arg-type]


def _text(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return "\n".join(value) + ("\n" if value else "")
    raise InvalidTests(f"{what} must be a string or a list of strings, got {type(value).__name__}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _strict_loads(text: str | bytes) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def parse_tests(ground_truth: Any, max_tests: int = 1000) -> Tests:
    """Validate an APPS/TACO/LiveCodeBench tests dict (or its JSON string) into `Tests`."""
    if isinstance(ground_truth, str | bytes):
        try:
            ground_truth = _strict_loads(ground_truth)
        except ValueError as e:
            raise InvalidTests(f"tests are not valid JSON: {e}") from None
    if not isinstance(ground_truth, dict):
        raise InvalidTests(
            f'tests must be an object {{"inputs": [...], "outputs": [...]}}, got '
            f"{type(ground_truth).__name__}"
        )
    inputs, outputs = ground_truth.get("inputs"), ground_truth.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise InvalidTests('tests need "inputs" and "outputs" lists')
    if len(inputs) != len(outputs):
        raise InvalidTests(f"{len(inputs)} inputs but {len(outputs)} outputs")
    if not inputs:
        raise InvalidTests("tests are empty: nothing would be verified")
    if len(inputs) > max_tests:
        raise InvalidTests(f"{len(inputs)} tests exceed max_tests={max_tests}")
    fn_name = ground_truth.get("fn_name")
    if fn_name in (None, ""):
        return Tests(
            stdin_inputs=[_text(x, f"inputs[{i}]") for i, x in enumerate(inputs)],
            expected_stdout=[_text(x, f"outputs[{i}]") for i, x in enumerate(outputs)],
        )
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise InvalidTests(f"fn_name must be a Python identifier, got {fn_name!r}")
    args_list, expected = [], []
    for i, (args, out) in enumerate(zip(inputs, outputs, strict=True)):
        if isinstance(args, str):  # LiveCodeBench: newline-separated JSON arguments, JSON output
            try:
                args = [_strict_loads(line) for line in args.split("\n") if line.strip()]
                out = _strict_loads(out) if isinstance(out, str) else out
            except ValueError as e:
                raise InvalidTests(f"inputs[{i}]/outputs[{i}] are not JSON lines: {e}") from None
        elif not isinstance(args, list):
            raise InvalidTests(f"inputs[{i}] must be an argument list (or a string of JSON lines)")
        try:
            json.dumps([args, out], allow_nan=False)
        except (TypeError, ValueError) as e:
            raise InvalidTests(f"test {i} is not plain JSON: {e}") from None
        args_list.append(args)
        expected.append(out)
    return Tests(fn_name=fn_name, call_args=args_list, expected_values=expected)


# --------------------------------------------------------------------------------------------------
# judging (trusted side)


def normalize_stdout(text: str) -> list[list[str]]:
    """Lines as whitespace-separated tokens, surrounding blank lines dropped."""
    return [line.split() for line in text.strip().splitlines()]


# the line breaks of str.splitlines()
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _token_lines(text: str):
    """normalize_stdout(text), one line at a time: no list of the whole output is ever built."""
    pos, started, blanks = 0, False, 0
    ends = itertools.chain((m.span() for m in _LINE_BREAK.finditer(text)), [(len(text), len(text))])
    for start, end in ends:
        if start == end == len(text) and pos >= len(text):
            break
        tokens = text[pos:start].split()
        pos = end
        if not tokens:
            blanks += started  # leading blank lines are dropped, trailing ones never flushed
            continue
        started = True
        yield from ([] for _ in range(blanks))
        blanks = 0
        yield tokens


def stdout_matches(actual: bytes, expected: str) -> bool:
    """Whitespace-normalised equality (see normalize_stdout), compared line by line."""
    missing = object()
    pairs = itertools.zip_longest(
        _token_lines(actual.decode("utf-8", "replace")), _token_lines(expected), fillvalue=missing
    )
    return all(a == b for a, b in pairs)


def values_equal(got: Any, expected: Any) -> bool:
    """Strict equality of decoded JSON values (bool is not int; NaN/inf never equal)."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return isinstance(expected, bool) and isinstance(got, bool) and got == expected
    if isinstance(expected, int | float) and isinstance(got, int | float):
        if isinstance(got, float) and not math.isfinite(got):
            return False
        if isinstance(expected, float) and not math.isfinite(expected):
            return False
        return got == expected
    if isinstance(expected, str) or isinstance(got, str):
        return isinstance(expected, str) and isinstance(got, str) and got == expected
    if expected is None or got is None:
        return expected is None and got is None
    if isinstance(expected, list) and isinstance(got, list):
        return len(got) == len(expected) and all(
            values_equal(g, e) for g, e in zip(got, expected, strict=True)
        )
    if isinstance(expected, dict) and isinstance(got, dict):
        return got.keys() == expected.keys() and all(values_equal(got[k], expected[k]) for k in expected)
    return False


def call_matches(got: Any, expected: Any) -> bool:
    if values_equal(got, expected):
        return True
    # APPS stores a call's return value wrapped in a one-element list.
    return isinstance(expected, list) and len(expected) == 1 and values_equal(got, expected[0])


class ProtocolViolation(ValueError):
    """The harness output is not exactly one well-formed, nonce-tagged JSON line per test."""


def decode_harness_output(raw: bytes, nonce: str, n_tests: int) -> list[tuple[str, Any] | None]:
    """Per test: ("value", v) | ("error", exception type name) | None (no line: the run ended first).

    Raises ProtocolViolation on any line that is not `{"nonce", "test", "value"|"error"}` JSON with this
    run's nonce and a test index in range, or on a second line for the same test.
    """
    results: list[tuple[str, Any] | None] = [None] * n_tests
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for number, line in enumerate(lines):
        try:
            record = _strict_loads(line)
        except (ValueError, RecursionError) as e:
            raise ProtocolViolation(f"line {number} is not JSON ({type(e).__name__})") from None
        if not isinstance(record, dict):
            raise ProtocolViolation(f"line {number} is not an object")
        keys = set(record)
        if keys not in ({"nonce", "test", "value"}, {"nonce", "test", "error"}):
            raise ProtocolViolation(f"line {number} has keys {sorted(keys)}")
        if record["nonce"] != nonce:
            raise ProtocolViolation(f"line {number} carries a foreign nonce")
        index = record["test"]
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n_tests:
            raise ProtocolViolation(f"line {number} names test {index!r} of {n_tests}")
        if results[index] is not None:
            raise ProtocolViolation(f"a second result for test {index}")
        if "error" in record:
            if not isinstance(record["error"], str):
                raise ProtocolViolation(f"line {number} has a non-string error")
            results[index] = ("error", record["error"])
        else:
            results[index] = ("value", record["value"])
    return results


# Outcome of one test: (kind, detail) with kind in pass | fail | timeout | sandbox_error
_Outcome = tuple[str, str]


def _last_error_line(stderr: bytes) -> str:
    lines = [line for line in stderr.decode("utf-8", "replace").strip().splitlines() if line.strip()]
    return lines[-1][:120] if lines else ""


def judge_stdio(result: RunResult, expected: str) -> _Outcome:
    if result.sandbox_error:
        return "sandbox_error", result.sandbox_error
    if result.timed_out:
        return "timeout", "time limit exceeded"
    if result.killed_reason == "output_limit" and result.stdout_limit is not None:
        return (
            "fail",
            f"killed: stdout over its cap of {result.stdout_limit} bytes (from the expected output)",
        )
    if result.killed_reason:
        return "fail", f"killed ({result.killed_reason})"
    if result.exit_code != 0:
        how = f"exit code {result.exit_code}" if result.exit_code is not None else f"signal {result.signal}"
        error = _last_error_line(result.stderr)
        return "fail", f"{how}: {error}" if error else how
    if stdout_matches(result.stdout, expected):
        return "pass", ""
    return "fail", "wrong output"


def judge_call(result: RunResult, tests: Tests) -> list[_Outcome] | str:
    """Per-test outcomes, or a protocol-violation message (fails the whole item)."""
    n = len(tests)
    if result.sandbox_error:
        return [("sandbox_error", result.sandbox_error)] * n
    try:
        decoded = decode_harness_output(result.harness_output, result.nonce, n)
    except ProtocolViolation as e:
        return f"protocol violation: {e}"
    outcomes: list[_Outcome] = []
    expected_values = tests.expected_values or []
    for entry, expected in zip(decoded, expected_values, strict=True):
        if entry is None:
            if result.timed_out:
                outcomes.append(("timeout", "time limit exceeded"))
            elif result.killed_reason:
                outcomes.append(("fail", f"killed ({result.killed_reason})"))
            else:
                how = (
                    f"exit code {result.exit_code}"
                    if result.exit_code is not None
                    else f"signal {result.signal}"
                )
                outcomes.append(("fail", f"no result (the program ended: {how})"))
        elif entry[0] == "error":
            outcomes.append(("fail", f"raised {entry[1][:80]}"))
        elif call_matches(entry[1], expected):
            outcomes.append(("pass", ""))
        else:
            outcomes.append(("fail", "wrong return value"))
    return outcomes


def _verdict(outcomes: list[_Outcome | None], partial_credit: bool) -> Verdict:
    n = len(outcomes)
    known = [(i, o) for i, o in enumerate(outcomes) if o is not None]
    passed = sum(1 for _, o in known if o[0] == "pass")
    metrics = {"tests_passed": float(passed), "tests_total": float(n)}
    errors = [(i, o) for i, o in known if o[0] == "sandbox_error"]
    if errors:
        i, (_, detail) = errors[0]
        return Verdict(0.0, SANDBOX_ERROR, f"test {i}: {detail}"[:200], metrics)
    if passed == n:
        return Verdict(1.0, OK, f"{n}/{n} tests passed", metrics)
    first_fail = next(((i, o) for i, o in known if o[0] != "pass"), None)
    if first_fail is None:  # some tests never ran and none failed: cannot be judged
        return Verdict(0.0, SANDBOX_ERROR, f"{n - len(known)} of {n} tests did not run", metrics)
    i, (kind, detail) = first_fail
    detail = f"{passed}/{n} tests passed; test {i}: {detail}"[:200]
    if partial_credit and passed:
        return Verdict(passed / n, OK, detail, metrics)
    if kind == "parse":
        return Verdict(0.0, PARSE_ERROR, first_fail[1][1], metrics)
    return Verdict(0.0, TIMEOUT if kind == "timeout" else WRONG, detail, metrics)


_SYNTAX_ERROR = re.compile(r"^(exit code 1: |raised load: )(SyntaxError|IndentationError|TabError)\b")


def _unparsable(outcome: _Outcome, fenced: bool) -> _Outcome:
    """A whole-response fallback that does not even compile was prose, not code: parse_error."""
    if not fenced and outcome[0] == "fail" and _SYNTAX_ERROR.match(outcome[1]):
        return "parse", "no fenced code block, and the response is not valid Python"
    return outcome


# --------------------------------------------------------------------------------------------------
# the verifier


@register("code")
class CodeVerifier(Verifier):
    name = "code"

    def __init__(self, config: CodeConfig | None = None, sandbox_config: SandboxConfig | None = None) -> None:
        self.config = config or CodeConfig()
        self._sandbox_config = sandbox_config
        self._sandbox: Sandbox | None = None
        self._lock = threading.Lock()
        atexit.register(self.close)

    def configure(
        self, config: CodeConfig | None = None, sandbox_config: SandboxConfig | None = None
    ) -> None:
        """Replace the configuration; a running sandbox is closed and restarts on next use."""
        with self._lock:
            if config is not None:
                self.config = config
            if sandbox_config is not None:
                self._sandbox_config = sandbox_config
                if self._sandbox is not None:
                    self._sandbox.close()
                    self._sandbox = None

    @property
    def sandbox(self) -> Sandbox:
        with self._lock:
            if self._sandbox is None:
                sandbox = Sandbox(self._sandbox_config or SandboxConfig.from_env())
                sandbox.start()  # raises SandboxUnavailable when required isolation is missing
                self._sandbox = sandbox
            return self._sandbox

    def warm_up(self) -> None:
        """Start the sandbox workers now (while the calling process is still small)."""
        _ = self.sandbox

    def isolation_report(self) -> dict[str, Any]:
        return self.sandbox.isolation_report()

    def close(self) -> None:
        with self._lock:
            if self._sandbox is not None:
                self._sandbox.close()
                self._sandbox = None

    def verify(self, item: Item) -> Verdict:
        return self.verify_batch([item])[0]

    def verify_batch(self, items: list[Item]) -> list[Verdict]:
        verdicts: list[Verdict | None] = [None] * len(items)
        plans: list[tuple[int, Tests, str, float, bool, bool]] = []
        for index, item in enumerate(items):
            extra = item.extra or {}
            try:
                tests = parse_tests(item.ground_truth, self.config.max_tests)
                timeout = float(extra.get("timeout_s", self.config.timeout_per_test_s))
                if not timeout > 0:
                    raise InvalidTests(f"timeout_s must be > 0, got {timeout}")
            except (InvalidTests, TypeError, ValueError) as e:
                verdicts[index] = Verdict(0.0, INVALID_INPUT, str(e)[:200])
                continue
            region = reasoning.answer_region(item)  # never read inside the reasoning block (reasoning.py)
            if isinstance(region, Verdict):
                verdicts[index] = region
                continue
            source, fenced = _extract(region)
            if source is None:
                verdicts[index] = Verdict(0.0, PARSE_ERROR, "no Python code in the response")
                continue
            if len(source.encode("utf-8", "surrogateescape")) > self.config.max_source_bytes:
                verdicts[index] = Verdict(
                    0.0, WRONG, f"solution longer than {self.config.max_source_bytes} bytes"
                )
                continue
            partial = bool(extra.get("partial_credit", self.config.partial_credit))
            plans.append((index, tests, source, timeout, partial, fenced))
        if plans:
            try:
                judged = self._run(plans)
            except SandboxUnavailable as e:  # fail closed, but every item still gets an explicit status
                judged = {
                    plan[0]: Verdict(0.0, SANDBOX_ERROR, f"sandbox unavailable: {e}"[:200]) for plan in plans
                }
            for index, verdict in judged.items():
                verdicts[index] = verdict
        assert all(v is not None for v in verdicts)
        return verdicts  # type: ignore[return-value]

    def _run(self, plans: list[tuple[int, Tests, str, float, bool, bool]]) -> dict[int, Verdict]:
        sandbox = self.sandbox
        out: dict[int, Verdict] = {}
        # future -> (item index, test index or -1 for a call-mode run)
        owners: dict[concurrent.futures.Future[RunResult], tuple[int, int]] = {}
        per_item: dict[int, list[concurrent.futures.Future[RunResult]]] = {}
        outcomes: dict[int, list[_Outcome | None]] = {}
        info = {index: (tests, partial, fenced) for index, tests, _, _, partial, fenced in plans}
        # stdio items whose remaining tests are sent lazily: item -> (source, timeout, next test to send).
        # Without partial credit an item is all-or-nothing, so its tests go one after another and the next
        # one is sent only when the previous one passed: a wrong solution costs one run, as in a serial
        # loop, instead of every test already started in parallel (measured: ~10% of the pool's sandbox
        # CPU on bench/verifiers.py's mix went to runs whose item had already failed). Parallelism comes
        # from the other items of the batch; when there are too few to keep every sandbox worker busy
        # (a batch of one item), further tests are sent ahead speculatively.
        lazy: dict[int, list[Any]] = {}
        failed: set[int] = set()
        workers = max(1, int(getattr(sandbox.config, "workers", 1) or 1))
        # Sandbox time each item has used (the wall time of its finished runs): an item may use
        # item_timeout_s in all, so one slow item holds its actor for that long at most, never minutes.
        budget = self.config.item_timeout_s
        used: dict[int, float] = {}

        def send(index: int, t: int, source: str, stdin: str, timeout: float) -> None:
            expected = (info[index][0].expected_stdout or [])[t]
            job = Job(
                source,
                stdin=stdin.encode("utf-8", "surrogateescape"),
                timeout_s=max(0.05, min(timeout, budget - used[index])),
                stdout_limit_bytes=self.config.stdout_cap(expected),
            )
            future = sandbox.submit(job)
            owners[future] = (index, t)
            per_item[index].append(future)

        def exhaust(index: int) -> None:
            """The item used its whole budget: its tests not yet judged are timeouts; nothing more runs."""
            failed.add(index)
            lazy.pop(index, None)
            for other in per_item[index]:
                other.cancel()
            detail = f"the item used its time budget of {budget:g}s"
            outcomes[index] = [o if o is not None else ("timeout", detail) for o in outcomes[index]]

        def send_next(index: int) -> bool:
            state = lazy.get(index)
            if state is None or index in failed:
                return False
            source, timeout, t = state
            inputs = info[index][0].stdin_inputs or []
            if t >= len(inputs):
                del lazy[index]
                return False
            if used[index] >= budget:
                exhaust(index)
                return False
            state[2] = t + 1
            send(index, t, source, inputs[t], timeout)
            return True

        for index, tests, source, timeout, partial, _fenced in plans:
            outcomes[index] = [None] * len(tests)
            per_item[index] = []
            used[index] = 0.0
            if tests.fn_name is not None:  # one run for all calls, within the item's budget
                job = Job(
                    source,
                    timeout_s=min(timeout * len(tests) + 1.0, budget),
                    mode="call",
                    fn_name=tests.fn_name,
                    call_args=tests.call_args,
                )
                future = sandbox.submit(job)
                owners[future] = (index, -1)
                per_item[index].append(future)
            elif partial:  # every test counts: send them all at once
                for t, stdin in enumerate(tests.stdin_inputs or []):
                    send(index, t, source, stdin, timeout)
            else:
                lazy[index] = [source, timeout, 0]
                send_next(index)
        pending = set(owners)

        def top_up() -> None:
            """Speculate only while fewer runs are queued or running than the sandbox has workers."""
            for index in list(lazy):
                if len(pending) >= workers:
                    return
                while len(pending) < workers and send_next(index):
                    pending.add(per_item[index][-1])

        top_up()
        while pending:
            done, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                index, t = owners.pop(future)
                per_item[index].remove(future)  # judged results are not kept (a batch's outputs add up)
                tests, partial, fenced = info[index]
                if future.cancelled():
                    continue
                result = future.result()
                used[index] += result.wall_s
                if t < 0:
                    judged = judge_call(result, tests)
                    if isinstance(judged, str):
                        out[index] = Verdict(
                            0.0,
                            WRONG,
                            judged[:200],
                            {"protocol_violation": 1.0, "tests_total": float(len(tests))},
                        )
                        continue
                    outcomes[index] = [_unparsable(o, fenced) for o in judged]
                else:
                    outcome = _unparsable(judge_stdio(result, (tests.expected_stdout or [])[t]), fenced)
                    if outcome[0] == "timeout" and used[index] >= budget:
                        outcome = ("timeout", f"the item used its time budget of {budget:g}s")
                    outcomes[index][t] = outcome
                    del result
                    if outcome[0] != "pass" and not partial:
                        failed.add(index)
                        lazy.pop(index, None)
                        for other in per_item[index]:
                            other.cancel()  # all-or-nothing: the item already failed
                    elif used[index] >= budget and None in outcomes[index]:
                        exhaust(index)
                    elif send_next(index):
                        pending.add(per_item[index][-1])
            top_up()
        for index, item_outcomes in outcomes.items():
            if index not in out:
                out[index] = _verdict(item_outcomes, info[index][1])
        return out
