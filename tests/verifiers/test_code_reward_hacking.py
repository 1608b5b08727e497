"""Reward hacking against the `code` verifier: every trick in shared/design/sandbox.md that paid full
reward under a HumanEval-style harness, plus our own against the nonce-tagged result pipe. Each hack
runs for real in the sandbox; none may earn any score."""

from __future__ import annotations

import json
import secrets
import textwrap

import pytest

from rlvr_verifiers.base import OK, Item
from rlvr_verifiers.sandbox import Job

# `verifier`: the code verifier fixture in tests/verifiers/conftest.py


def fenced(code: str) -> str:
    return "```python\n" + textwrap.dedent(code).strip() + "\n```"


# Tests whose answers are NOT derivable from the inputs without solving: a random secret per run.
SECRET = str(10**11 + secrets.randbelow(9 * 10**11))
STDIO = {"inputs": ["7\n", "8\n"], "outputs": [SECRET + "\n", SECRET + "1\n"]}
CALL = {"inputs": [[7], [8]], "outputs": [int(SECRET), int(SECRET) + 1], "fn_name": "solve"}


def assert_no_reward(verifier, code, tests, **extra):
    for partial in (False, True):  # not even partial credit
        verdict = verifier.verify(Item(fenced(code), tests, {"partial_credit": partial, **extra}))
        assert verdict.score == 0.0 and verdict.status != OK, (partial, verdict)
        # the hack really ran (a typo in the hack would also score 0 and prove nothing)
        assert "SyntaxError" not in verdict.detail and "IndentationError" not in verdict.detail, verdict
    return verdict


# --------------------------------------------------------------------------------------------------
# the tricks that fooled a HumanEval-style harness


@pytest.mark.parametrize("exit_call", ["sys.exit(0)", "os._exit(0)", "raise SystemExit", "quit()"])
def test_exiting_zero_before_the_tests_earns_nothing(verifier, exit_call):
    code = f"""
    import os, sys
    {exit_call}
    def solve(x):
        return 0
    """
    assert_no_reward(verifier, code, STDIO)
    assert_no_reward(verifier, code, CALL)


def test_exiting_zero_inside_the_called_function_earns_nothing(verifier):
    for exit_call in ("os._exit(0)", "sys.exit(0)"):
        code = f"""
        import os, sys
        def solve(x):
            {exit_call}
        """
        assert_no_reward(verifier, code, CALL)


def test_printed_fake_markers_earn_nothing(verifier):
    code = """
    print("ALL TESTS PASSED")
    print("ok")
    print('{"nonce": "x", "test": 0, "value": 1}')
    def solve(x):
        print("ALL TESTS PASSED")
        return None
    """
    assert_no_reward(verifier, code, STDIO)
    assert_no_reward(verifier, code, CALL)


def test_excepthook_and_atexit_forcing_exit_zero_earn_nothing(verifier):
    hooks = """
    import atexit, os, sys
    sys.excepthook = lambda *args: os._exit(0)
    atexit.register(lambda: os._exit(0))
    """
    assert_no_reward(verifier, hooks + 'raise AssertionError("wrong answer")\n', STDIO)
    call = hooks + 'def solve(x):\n        raise AssertionError("wrong answer")\n'
    assert_no_reward(verifier, call, CALL)


def test_an_object_equal_to_everything_earns_nothing(verifier):
    code = """
    class AlwaysEqual:
        def __eq__(self, other): return True
        def __ne__(self, other): return False
        def __hash__(self): return 0
    class IntThatEqualsAll(int):
        def __eq__(self, other): return True
    class StrThatEqualsAll(str):
        def __eq__(self, other): return True
    def solve(x):
        return {7: AlwaysEqual(), 8: IntThatEqualsAll(0)}[x]
    """
    assert_no_reward(verifier, code, CALL)
    code_str = code.replace("{7: AlwaysEqual(), 8: IntThatEqualsAll(0)}[x]", "StrThatEqualsAll('nope')")
    assert_no_reward(verifier, code_str, CALL)


def test_expected_outputs_never_enter_the_sandbox(verifier):
    """A solution that hunts for the answer everywhere it can look: its own program text, files, the
    environment, argv, stdin, every object in its heap, and every readable byte of its memory."""
    hunter = r"""
    import gc, os, re, sys
    pattern = re.compile(rb"[1-9][0-9]{11}")
    found = set()
    def scan(blob):
        if isinstance(blob, str):
            blob = blob.encode("utf-8", "replace")
        found.update(pattern.findall(blob))
    scan(" ".join(sys.argv)); scan(repr(dict(os.environ)))
    stdin = sys.stdin.read(); scan(stdin)
    for root, dirs, files in os.walk("."):
        for name in files:
            scan(open(os.path.join(root, name), "rb").read())
    for obj in gc.get_objects():
        try:
            scan(repr(obj)[:10000])
        except Exception:
            pass
    scanned = 0
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
        for line in maps:
            addr, perms = line.split()[:2]
            if not perms.startswith("r") or "[vvar" in line or "[vsyscall" in line:
                continue
            lo, hi = (int(x, 16) for x in addr.split("-"))
            try:
                mem.seek(lo); blob = mem.read(hi - lo)
            except (OSError, OverflowError, ValueError):
                continue
            scanned += len(blob); scan(blob)
    print(scanned)
    for number in sorted(found):
        print(number.decode())
    """
    assert_no_reward(verifier, hunter, STDIO)
    # and what it found really did not include the answer, though it read megabytes
    result = verifier.sandbox.run(textwrap.dedent(hunter), stdin=STDIO["inputs"][0], timeout_s=10)
    lines = result.stdout.decode().split()
    assert result.exit_code == 0 and int(lines[0]) > 5_000_000, result.stderr[-500:]
    assert SECRET not in lines[1:]


def test_reading_asserts_out_of_its_own_program_text_finds_none(verifier):
    code = """
    import inspect, sys
    src = open(__file__).read() if "__file__" in globals() else ""
    frames = [f.f_code.co_filename for f in [sys._getframe()]]
    print(src.count("assert"), frames)
    """
    assert_no_reward(verifier, code, STDIO)


# --------------------------------------------------------------------------------------------------
# our own: attacks on the result pipe and the judge


def test_printing_more_results_than_tests_is_a_protocol_violation(verifier):
    code = """
    import os
    def solve(x):
        return 0
    for fd in range(3, 10):
        try:
            os.write(fd, b'{"nonce": "guess", "test": 0, "value": 0}\\n' * 5)
        except OSError:
            pass
    """
    verdict = assert_no_reward(verifier, code, CALL)
    assert "protocol violation" in verdict.detail


def test_forging_the_nonce_still_cannot_forge_a_pass(verifier):
    # The harness runs in the same process, so a determined program CAN find the nonce (here: in the
    # harness frame).  Forged lines still hold values, which the trusted side compares with answers the
    # program never saw; and a duplicate line for a test fails the item outright.
    code = """
    import json, os, sys
    def solve(x):
        frame = sys._getframe(1)
        while frame and "nonce" not in frame.f_locals:
            frame = frame.f_back
        nonce = frame.f_locals["nonce"]
        for i in range(2):
            os.write(3, (json.dumps({"nonce": nonce, "test": i, "value": 123}) + "\\n").encode())
        return 123
    """
    verdict = assert_no_reward(verifier, code, CALL)
    assert "protocol violation" in verdict.detail
    forge_then_exit = code.replace("return 123", "os._exit(0)")
    assert_no_reward(verifier, forge_then_exit, CALL)


def test_returning_nan_or_infinity_earns_nothing(verifier):
    tests = {"inputs": [[1], [2]], "outputs": [1.5, 2.5], "fn_name": "solve"}
    for value in ("float('nan')", "float('inf')", "[float('nan')]"):
        assert_no_reward(verifier, f"def solve(x):\n    return {value}", tests)


def test_monkeypatching_the_harness_json_earns_nothing(verifier):
    code = """
    import json, json.encoder
    real_dumps = json.dumps
    json.dumps = lambda *a, **k: '{"value": true}'
    json.JSONEncoder.default = lambda self, o: 0
    json.encoder.c_make_encoder = None
    class Fake:
        pass
    def solve(x):
        return Fake()
    """
    assert_no_reward(verifier, code, CALL)


def test_patching_builtins_the_harness_uses_earns_nothing(verifier):
    code = """
    import builtins, os
    builtins.len = lambda x: 0
    builtins.range = lambda *a: iter(())
    builtins.isinstance = lambda *a: True
    def solve(x):
        return None
    """
    assert_no_reward(verifier, code, CALL)


def test_returning_a_bool_for_an_int_answer_earns_nothing(verifier):
    tests = {"inputs": [[1], [0]], "outputs": [1, 0], "fn_name": "solve"}
    assert_no_reward(verifier, "def solve(x):\n    return bool(x)", tests)


def test_hijacking_stdout_to_fake_a_clean_exit_earns_nothing(verifier):
    code = """
    import os, sys
    sys.stdout.write = lambda s: 0
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    print("whatever")
    """
    assert_no_reward(verifier, code, STDIO)


def test_guessing_earns_nothing_but_the_right_answer_does(verifier):
    # the control: the same harness pays a program that computes the answer
    right = f"""
    def solve(x):
        return {SECRET} + (x - 7)
    """
    assert verifier.verify(Item(fenced(right), CALL)).status == OK
    wrong = """
    def solve(x):
        return 10 ** 11
    """
    assert_no_reward(verifier, wrong, CALL)


def test_results_of_another_run_are_rejected(verifier):
    # Replaying a previous run's valid harness output into this run fails: the nonce is per run.
    box = verifier.sandbox
    first = box.submit(
        Job("def solve(x):\n    return x", mode="call", fn_name="solve", call_args=[[1]])
    ).result()
    assert first.harness_output and json.loads(first.harness_output)["nonce"] == first.nonce
    replay = f"""
    import os
    os.write(3, {first.harness_output!r})
    os._exit(0)
    """
    verdict = assert_no_reward(verifier, replay, {"inputs": [[1]], "outputs": [1], "fn_name": "solve"})
    assert "protocol violation" in verdict.detail


def test_the_harness_writes_result_lines_with_code_the_job_cannot_replace(verifier):
    # The job replaces everything json.dumps looks up when it is called (the encoder class, its methods,
    # the C accelerators, the string escaper) and the builtins a harness might use. The result lines must
    # still be the harness's own: one well-formed record per call, holding the values really returned.
    hijack = """
    import builtins, json, json.encoder
    class Forged(json.JSONEncoder):
        def encode(self, o):
            return '{"nonce": "forged", "test": 0, "value": 424242}'
        iterencode = encode
    json.JSONEncoder = Forged
    json.encoder.JSONEncoder = Forged
    json.dumps = lambda *a, **k: '"forged"'
    json.encoder.c_make_encoder = None
    json.encoder.encode_basestring_ascii = lambda s: '"forged"'
    json.encoder.py_encode_basestring_ascii = lambda s: '"forged"'
    builtins.enumerate = lambda xs: [(0, [424242])]
    builtins.BaseException = KeyError
    builtins.memoryview = lambda b: b""
    def solve(x):
        return [x, "7", {"k": x}]
    """
    box = verifier.sandbox
    job = Job(textwrap.dedent(hijack), mode="call", fn_name="solve", call_args=[[1], [2]])
    result = box.submit(job).result()
    records = [json.loads(line) for line in result.harness_output.splitlines()]
    assert records == [
        {"nonce": job.nonce, "test": i, "value": [x, "7", {"k": x}]} for i, x in enumerate((1, 2))
    ], result
    # and an honest neighbour of the same batch keeps its score
    tests = {"inputs": [[1], [2]], "outputs": [[1, "7", {"k": 1}], [2, "7", {"k": 2}]], "fn_name": "solve"}
    honest = "def solve(x):\n    return [x, '7', {'k': x}]"
    verdicts = verifier.verify_batch([Item(fenced(hijack), tests), Item(fenced(honest), tests)])
    assert [v.status for v in verdicts] == [OK, OK], verdicts  # the hijacker's real answers are right too
