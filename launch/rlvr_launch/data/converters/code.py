"""Programming problems with tests -> the `code` verifier. Two real schemas are read:

APPS / TACO (codeparrot/apps, BAAI/TACO): `question`, `input_output` (JSON string
{"inputs": [...], "outputs": [...], "fn_name"?: str}), `starter_code`, `difficulty`, `solutions`.
LiveCodeBench (livecodebench/code_generation_lite): `question_content`, `public_test_cases` (JSON string:
[{"input", "output", "testtype": "stdin" | "functional"}]), `private_test_cases` (a JSON string, or
base64+zlib of a PICKLE in the hub copy), `metadata` (JSON string with `func_name`), `starter_code`.

Ground truth (code verifier): {"inputs": [...], "outputs": [...]} for stdin/stdout programs, plus
"fn_name" for call-based ones (APPS: argument lists; LiveCodeBench: newline-separated JSON arguments).
Private LiveCodeBench tests are used when they are plain JSON or zlib-compressed JSON; pickled ones
are NEVER unpickled (unpickling runs code from the dataset): they are skipped and counted as the note
`private_tests_pickled_ignored`, and the public tests remain.
Dropped: empty_question, no_tests, tests_not_json, inputs_outputs_mismatch, mixed_test_types,
functional_without_fn_name, unsupported_schema.
"""

from __future__ import annotations

import base64
import json
import zlib

from rlvr_launch.data.converters import Drop, text_field, verl_row

NAME = "code"
VERIFIER = "code"
HUB_ID = "codeparrot/apps"
HUB_CONFIG = None
SPLITS = {"train": "train", "test": "test"}
SCHEMA = (
    "APPS/TACO (question, input_output, starter_code) or LiveCodeBench (question_content, public_test_cases)"
)
NOTES = ("private_tests_pickled_ignored", "private_tests_undecodable_ignored")

STDIN_INSTRUCTION = (
    "Write a Python 3 program that reads the input from standard input and prints the answer to standard "
    "output. Return only the program, in one ```python code block."
)
CALL_INSTRUCTION = (
    "Complete the function `{fn_name}` (a top-level function or a method of `class Solution`, as in the "
    "starter code). Return only the code, in one ```python code block."
)


def _json(value, reason: str):
    if isinstance(value, dict | list):
        return value
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        raise Drop(reason) from None


def _apps_tests(row: dict) -> dict:
    raw = row.get("input_output")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raise Drop("no_tests")
    tests = _json(raw, "tests_not_json")
    if not isinstance(tests, dict):
        raise Drop("tests_not_json")
    inputs, outputs = tests.get("inputs") or [], tests.get("outputs") or []
    if not inputs:
        raise Drop("no_tests")
    if len(inputs) != len(outputs):
        raise Drop("inputs_outputs_mismatch")
    truth = {"inputs": inputs, "outputs": outputs}
    if tests.get("fn_name"):
        truth["fn_name"] = str(tests["fn_name"])
    return truth


def _decode_private(raw, note) -> list:
    if raw in (None, "", []):
        return []
    if isinstance(raw, list):
        return raw
    try:
        value = json.loads(raw)
        return value if isinstance(value, list) else []
    except ValueError:
        pass
    try:
        blob = zlib.decompress(base64.b64decode(raw))
    except (ValueError, zlib.error):
        note("private_tests_undecodable_ignored")
        return []
    if blob[:1] == b"\x80":  # a pickle protocol header: never unpickled
        note("private_tests_pickled_ignored")
        return []
    try:
        value = json.loads(blob)
    except ValueError:
        note("private_tests_undecodable_ignored")
        return []
    return value if isinstance(value, list) else []


def _lcb_tests(row: dict, note) -> dict:
    public = _json(row.get("public_test_cases") or "[]", "tests_not_json")
    private = _decode_private(row.get("private_test_cases"), note)
    cases = [c for c in list(public) + list(private) if isinstance(c, dict)]
    if not cases:
        raise Drop("no_tests")
    kinds = {str(c.get("testtype", "stdin")) for c in cases}
    if len(kinds) > 1:
        raise Drop("mixed_test_types")
    truth = {
        "inputs": [str(c.get("input", "")) for c in cases],
        "outputs": [str(c.get("output", "")) for c in cases],
    }
    if kinds == {"functional"}:
        metadata = row.get("metadata") or "{}"
        metadata = metadata if isinstance(metadata, dict) else _json(metadata, "tests_not_json")
        fn_name = metadata.get("func_name") if isinstance(metadata, dict) else None
        if not fn_name:
            raise Drop("functional_without_fn_name")
        truth["fn_name"] = str(fn_name)
    return truth


def convert(row: dict, split: str, index: int, note=lambda kind: None) -> dict:
    question = text_field(row, "question", "question_content", "problem")
    if not question:
        raise Drop("empty_question")
    if "input_output" in row:
        truth, source = _apps_tests(row), "apps"
    elif "public_test_cases" in row:
        truth, source = _lcb_tests(row, note), "livecodebench"
    else:
        raise Drop("unsupported_schema")
    starter = text_field(row, "starter_code")
    parts = [question.strip()]
    if starter:
        parts.append(f"Starter code:\n```python\n{starter.rstrip()}\n```")
    parts.append(
        CALL_INSTRUCTION.format(fn_name=truth["fn_name"]) if "fn_name" in truth else STDIN_INSTRUCTION
    )
    extra = {"schema": source, "num_tests": str(len(truth["inputs"]))}
    for key in ("difficulty", "problem_id", "question_id", "platform"):
        if row.get(key) not in (None, ""):
            extra[key] = str(row[key])
    return verl_row(
        data_source=NAME,
        prompt=[{"role": "user", "content": "\n\n".join(parts)}],
        ability="code",
        ground_truth=truth,
        split=split,
        index=index,
        verifier=VERIFIER,
        extra=extra,
    )
