"""Every built-in verifier answers any response up to the size limit within a fixed CPU budget.

The threat: a degenerate policy emits 20-256 KB of one pattern (a tag repeated and never closed, a run of
backticks, a code fence followed by spaces, brackets nested thousands deep, long gaps between answers),
and a parser that rescans or retries from every position spends seconds to minutes of CPU on it (in the
trainer's process for the quick path). Here every registered built-in verifier and rubric gets

- the KNOWN pathological shapes, each at MAX_RESPONSE_CHARS (256 Ki characters), and
- property-based mixes (hypothesis, derandomized: the same examples on every run) of pathological
  fragments repeated, nested or separated by long gaps, up to MAX_RESPONSE_CHARS,

and the CPU time of the thread that calls `verify` (time.thread_time: verification is synchronous on the
caller's thread; process time would also count threads an earlier test left running in this process, e.g.
a timed-out oracle, and wall clock would measure the shared machine's load) must stay within CPU_BUDGET_S
per response. A response one character
over the limit is `response_too_large`, not parsed. The `code` verifier's sandbox (a separate process,
bounded by its own limits) is not counted: what is measured is the trusted side's extraction and checks.

A runaway case is stopped by a CPU-time timer (ITIMER_PROF) at GUARD_S, so a regression fails in about a
second instead of hanging the suite.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import tempfile
import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rlvr_verifiers import registry
from rlvr_verifiers.base import MAX_RESPONSE_CHARS, RESPONSE_TOO_LARGE, STATUSES, Item
from rlvr_verifiers.rubrics import BUILTIN_RUBRICS

CPU_BUDGET_S = 0.25  # per response, up to MAX_RESPONSE_CHARS (the limit the docs state)
GUARD_S = 4 * CPU_BUDGET_S
N = MAX_RESPONSE_CHARS

# One valid ground truth per built-in verifier (a new built-in must add one here).
GROUND_TRUTH = {
    "math": "42",
    "countdown": {"target": 24, "numbers": [1, 2, 3, 4]},
    "tool_call": {
        "tools": [{"name": "f", "parameters": {"type": "object"}}],
        "expected": {"name": "f", "arguments": {}},
    },
    "format": None,
    "helpfulness": None,
    "code": {"inputs": ["1\n"], "outputs": ["1\n"]},
    # an IFEval row's size (1-3 instructions), with the checks that scan the whole answer
    "ifeval": {
        "instruction_id_list": [
            "keywords:existence",
            "length_constraints:number_words",
            "detectable_format:number_bullet_lists",
        ],
        "kwargs": [{"keywords": ["apple"]}, {"num_words": 100, "relation": "at least"}, {"num_bullets": 3}],
    },
    "reasoning_gym": {
        "dataset": "chain_sum",
        "entry": {"question": "What is 3 + 4?", "answer": "7", "metadata": {}},
    },
    **{rubric: "42" for rubric in BUILTIN_RUBRICS},  # routed to math
}
VERIFIERS = sorted({*registry.BUILTIN, *BUILTIN_RUBRICS})


def _fill(motif: str, size: int = N) -> str:
    return (motif * (size // len(motif) + 1))[:size]


def _gap(a: str, filler: str, b: str, size: int = N) -> str:
    return a + _fill(filler, size - len(a) - len(b)) + b


# The shapes the red team measured (and their neighbours), each exactly MAX_RESPONSE_CHARS long.
KNOWN = {
    "answer_never_closed": _fill("<answer>"),
    "tool_call_never_closed": _fill("<tool_call>"),
    "think_never_closed": _fill("<think>"),
    "think_closes_repeated": _fill("</think>"),
    "backtick_run": _fill("`"),
    "fence_then_spaces": _gap("```", " ", ""),
    "fence_then_tabs_and_spaces": _gap("```", " \t", ""),
    "fence_lang_then_spaces": _gap("```python", " ", ""),
    "fences_never_closed": _fill("```python\n"),
    "nested_lists": _fill("["),
    "nested_objects": _fill('{"a":'),
    "nested_numbers": _fill("[1,"),
    "python_tag_nested": _gap("<|python_tag|>", "[", ""),
    "mistral_then_spaces": _gap("[TOOL_CALLS]", " ", ""),
    "mistral_args_repeated": _fill("[TOOL_CALLS]f[ARGS]"),
    "gap_between_boxes": _gap("\\boxed{1}", " ", "\\boxed{2}"),
    "boxed_never_closed": _fill("\\boxed{"),
    "boxed_nested": _gap("", "\\boxed{", "1" + "}" * 64),
    "braces_nested": _fill("{"),
    "dollar_run": _fill("$"),
    "expression_line": _fill("1+"),
    "expression_lines": _fill("1 + 2 * 3\n"),
    "lt_then_spaces": _fill("<" + " " * 63),
    "mixed_tags": _fill("<answer><tool_call>```[{<think>\\boxed{"),
    "words": _fill("the answer is "),
    "distinct_words": " ".join(str(i) for i in range(N // 5))[:N],
}

FRAGMENTS = [
    "<answer>",
    "</answer>",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "```",
    "```python\n",
    "```json",
    "`",
    " ",
    "\n",
    "\t",
    "[",
    "]",
    "{",
    "}",
    '{"name": "f", "arguments": ',
    '"',
    ":",
    ",",
    "\\boxed{",
    "\\boxed{1}",
    "$",
    "\\(",
    "\\)",
    "\\frac{",
    "\\sqrt",
    "1",
    "+",
    "=",
    "(",
    ")",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<|python_tag|>",
    "<",
    ">",
    "/",
    "\\",
    "a",
    "The answer is ",
]


class _OverGuard(Exception):
    pass


@contextlib.contextmanager
def _cpu_guard(limit_s: float):
    """Raise _OverGuard in this (main) thread once the process has spent `limit_s` more CPU seconds."""

    def expire(signum, frame):
        raise _OverGuard

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, limit_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def cpu_cost(verifier, name: str, response: str) -> tuple[float, str]:
    """(CPU seconds this thread spent, status) for one response; GUARD_S+ when the guard fired.

    The cyclic garbage collector is paused during the call: a collection's cost is set by everything earlier
    tests left alive in this process (measured: 0.30 s of a 0.01 s check after the real-outputs corpus), not
    by the verifier's work on this response. Nor is one forced before each call: in a worker that has imported
    torch and verl (as a test worker has) one forced collection takes 0.4 s (measured), and the generated
    sweep makes 400 calls."""
    extra = {"routed_verifier": "math"} if name in BUILTIN_RUBRICS else {}
    item = Item(response, GROUND_TRUTH[name], extra)
    gc.disable()
    began = time.thread_time()
    try:
        with _cpu_guard(GUARD_S):
            verdict = verifier.verify(item)
    except _OverGuard:
        return time.thread_time() - began, f"stopped at the {GUARD_S:g} CPU s guard"
    finally:
        gc.enable()
    spent = time.thread_time() - began
    assert verdict.status in STATUSES
    return spent, verdict.status


@pytest.fixture(scope="module")
def verifiers():
    """Every built-in verifier and rubric; `code` with its own sandbox (as in conftest), warmed up."""
    from rlvr_verifiers.code import CodeConfig, CodeVerifier
    from rlvr_verifiers.sandbox import SandboxConfig

    work_dir = tempfile.mkdtemp(prefix="rlvr-bounded-test-", dir="/tmp")
    os.chmod(work_dir, 0o755)
    code = CodeVerifier(CodeConfig(timeout_per_test_s=3.0), SandboxConfig(workers=1, work_dir=work_dir))
    out = {name: registry.get(name) for name in VERIFIERS}
    out["code"] = code
    for name, v in out.items():  # imports, compiled patterns, the sandbox's start: not per-response costs
        v.verify(Item("warm up", GROUND_TRUTH[name], {"routed_verifier": "math"}))
    yield out
    code.close()
    shutil.rmtree(work_dir, ignore_errors=True)


def test_every_built_in_verifier_has_a_ground_truth_here():
    assert set(VERIFIERS) <= set(GROUND_TRUTH), "add a ground truth for the new verifier to GROUND_TRUTH"


@pytest.mark.parametrize("case", sorted(KNOWN))
@pytest.mark.parametrize("name", VERIFIERS)
def test_known_pathological_response_is_answered_within_the_cpu_budget(verifiers, name, case):
    response = KNOWN[case]
    assert len(response) == MAX_RESPONSE_CHARS
    spent, status = cpu_cost(verifiers[name], name, response)
    assert spent <= CPU_BUDGET_S, f"{name} on {case} ({len(response)} chars): {spent:.3f} CPU s, {status}"


@pytest.mark.parametrize("name", VERIFIERS)
def test_one_character_over_the_limit_is_response_too_large_and_not_parsed(verifiers, name):
    spent, status = cpu_cost(verifiers[name], name, KNOWN["fence_then_spaces"] + " ")
    assert status == RESPONSE_TOO_LARGE
    assert spent <= CPU_BUDGET_S


@st.composite
def pathological(draw):
    """A response of up to MAX_RESPONSE_CHARS: a motif of fragments repeated, nested, or with long gaps."""
    motif = "".join(draw(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6)))
    size = draw(st.sampled_from([4 << 10, 64 << 10, N]))
    shape = draw(st.sampled_from(["repeat", "gap", "nest", "two_motifs"]))
    if shape == "repeat":
        return _fill(motif, size)
    if shape == "gap":
        filler = draw(st.sampled_from([" ", "\n", "a", "`", "[", "{", "<", "\\boxed{"]))
        return _gap(motif, filler, motif, size)
    if shape == "nest":
        closer = draw(st.sampled_from(["]", "}", "</answer>", "</tool_call>", "```", ")"]))
        half = _fill(motif, size // 2)
        return half + _fill(closer, size - len(half))
    other = "".join(draw(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6)))
    return _fill(motif + " " * draw(st.integers(0, 200)) + other, size)


@pytest.mark.slow  # ~27 s per verifier (40 responses of up to 256 Ki characters): 4.5 of the fast set's minutes;
# the known pathological responses above stay in the fast set, CI runs both
@pytest.mark.parametrize("name", VERIFIERS)
def test_generated_pathological_responses_are_answered_within_the_cpu_budget(verifiers, name):
    @settings(
        derandomize=True,  # the same examples on every run: CI is deterministic
        database=None,
        max_examples=40,
        deadline=None,  # wall time is not the measure; CPU time is asserted below
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        phases=[Phase.explicit, Phase.generate],  # no shrinking: each try can cost the 1 s guard
    )
    @given(response=pathological())
    def check(response):
        assert len(response) <= MAX_RESPONSE_CHARS
        spent, status = cpu_cost(verifiers[name], name, response)
        assert spent <= CPU_BUDGET_S, f"{name}: {spent:.3f} CPU s, {status}, on {response[:80]!r}..."

    check()


# The scanners return exactly what the regular expressions they replaced returned (on short texts, where
# the old patterns are fast): same blocks, same order, so no verdict changed.
OLD_FINDALL = {
    "tool_call": r"<tool_call>(.*?)</tool_call>",
    "answer": r"(?i)<answer>(.*?)</answer>",
    "code_fence": r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)```",
    "json_fence": r"```(?:json|JSON)?\s*\n?(.*?)```",
}
SCANNER_ALPHABET = ["<tool_call>", "</tool_call>", "<answer>", "</ANSWER>", "```", "`", "json", "py", " ", "\t",
                    "\n", "x", "\u2028", "\u00a0"]  # fmt: skip


@settings(derandomize=True, database=None, max_examples=400, deadline=None)
@given(text=st.lists(st.sampled_from(SCANNER_ALPHABET), max_size=30).map("".join))
def test_scanners_return_what_the_replaced_patterns_returned(text):
    import re

    from rlvr_verifiers import code, scan, tool_call

    def old(key):
        return re.compile(OLD_FINDALL[key], re.DOTALL).findall(text)

    assert scan.tagged_blocks(text, "<tool_call>", "</tool_call>") == old("tool_call")
    assert scan.tagged_blocks(text, "<answer>", "</answer>", ignore_case=True) == old("answer")
    assert code._fenced_blocks(text) == old("code_fence")
    assert tool_call._fenced_blocks(text) == old("json_fence")
