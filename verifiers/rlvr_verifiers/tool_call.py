"""The `tool_call` verifier: the response's tool call(s) must be valid for the tools and equal the expected.

Ground truth: `{"tools": [tool, ...], "expected": call | [call, ...]}` (or that object as a JSON string)
where a tool is an OpenAI-style definition, `{"type": "function", "function": {"name", "description",
"parameters": <JSON schema>}}` or the bare `{"name", "parameters"}`, and a call is
`{"name": str, "arguments": {...}}`. `"expected": []` means "no tool call is expected".

Parsing the response's answer region (`rlvr_verifiers.reasoning`: after the last `</think>`, so a call
written inside the reasoning is never paid; an unclosed reasoning block is `parse_error`), first form
that is present wins:
1. `<tool_call>{...}</tool_call>` blocks (Qwen / Hermes), one call per block;
2. `[TOOL_CALLS]` (Mistral): a JSON list/object after it, or `[TOOL_CALLS]name[ARGS]{...}` repeated;
3. `<|python_tag|>` (Llama 3.x): JSON objects after it, separated by `;` or newlines;
4. ```json (or bare ```) fenced blocks, each a call or a list of calls;
5. the whole response as JSON, else the first JSON object/list embedded in the text.
A call object may be `{"name", "arguments"}`, `{"name", "parameters"}` (Llama), or OpenAI's
`{"type": "function", "function": {"name", "arguments"}}`; `arguments` may be a JSON string.
No call found, or JSON that does not decode -> `parse_error` (unless `expected` is []).

Checking:
- every call must name a given tool (else `wrong`: unknown tool) and its arguments must validate
  against that tool's `parameters` JSON schema with `jsonschema` (else `wrong` with the first error);
- the calls must equal the expected calls as a multiset (order of parallel calls does not matter):
  same name, arguments equal as JSON values: objects compared key-order-insensitively, arrays in
  order, strings exactly; numbers by value, so `1 == 1.0` (JSON does not distinguish them, and the
  schema already decided whether an integer was required) but a boolean is never a number
  (`true != 1`) and `"1" != 1`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import jsonschema

from rlvr_verifiers import reasoning, scan
from rlvr_verifiers.base import INVALID_INPUT, OK, PARSE_ERROR, WRONG, Item, Verdict
from rlvr_verifiers.registry import Verifier, register

_MISTRAL_ARGS_RE = re.compile(r"\[TOOL_CALLS\]\s*([A-Za-z_][\w.\-]*)\s*\[ARGS\]")
_SPACES = re.compile(r"\s*")
MAX_CALLS = 64  # more tool calls than this in one response is parse_error (bounds the schema checks)


class _ParseError(Exception):
    pass


def _tool_defs(tools: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(tools, list) or not tools:
        raise ValueError("tool_call ground truth needs a non-empty 'tools' list")
    out = {}
    for tool in tools:
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise TypeError(f"tool definition without a name: {str(tool)[:80]}")
        schema = fn.get("parameters", {"type": "object"})
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"tool {fn['name']!r} has an invalid JSON schema: {exc.message}") from None
        out[fn["name"]] = schema
    return out


def _normalize_call(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise _ParseError(f"a tool call must be an object, got {type(obj).__name__}")
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str):
        raise _ParseError("tool call without a string 'name'")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = scan.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise _ParseError(f"arguments of {name!r} are not JSON: {exc.msg}") from None
    if not isinstance(args, dict):
        raise _ParseError(f"arguments of {name!r} must be an object")
    return {"name": name, "arguments": args}


def _calls_from_json(value: Any) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    return [_normalize_call(v) for v in items]


def _loads(text: str) -> Any:
    try:
        return scan.loads(text)
    except json.JSONDecodeError as exc:
        raise _ParseError(f"invalid JSON: {exc.msg} at {exc.pos}") from None


def _json_sequence(text: str) -> Iterable[Any]:
    """Consecutive JSON values separated by whitespace, ';' or ','."""
    pos = 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n;,":
            pos += 1
        if pos >= len(text):
            return
        try:
            value, pos = scan.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _ParseError(f"invalid JSON: {exc.msg}") from None
        yield value


def _fenced_blocks(text: str) -> list[str]:
    """Bodies of ```json (or bare ```) fenced blocks: what `re.findall(r"```(?:json|JSON)?\\s*\\n?(.*?)```",
    text, re.DOTALL)` returns, in one linear pass (that pattern rescans the rest of the text from every
    run of backticks, and backtracks over every split of a run of spaces after the fence)."""
    out = []
    pos = 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            return out
        body = start + 3
        if text.startswith(("json", "JSON"), body):
            body += 4
        body = _SPACES.match(text, body).end()  # one pass, never a backtrack
        end = text.find("```", body)
        if end < 0:
            return out  # no closing fence after this one, so none after any later one
        out.append(text[body:end])
        pos = end + 3


def _many(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(calls) > MAX_CALLS:
        raise _ParseError(f"more than {MAX_CALLS} tool calls in one response")
    return calls


def parse_calls(response: str) -> list[dict[str, Any]]:
    """Tool calls in a response (see the module doc); [] if it has none; _ParseError if malformed.
    Linear in the response's length (rlvr_verifiers.scan); at most MAX_CALLS calls."""
    blocks = scan.tagged_blocks(response, "<tool_call>", "</tool_call>")
    if blocks:
        _many(blocks)
        return _many([call for block in blocks for call in _calls_from_json(_loads(block.strip()))])
    if "[TOOL_CALLS]" in response:
        calls = []
        for m in _MISTRAL_ARGS_RE.finditer(response):
            _many(calls)
            try:
                args, _ = scan.raw_decode(response, m.end())
            except json.JSONDecodeError as exc:
                raise _ParseError(f"invalid JSON after [ARGS]: {exc.msg}") from None
            calls.append(_normalize_call({"name": m.group(1), "arguments": args}))
        if calls:
            return _many(calls)
        tail = response.split("[TOOL_CALLS]", 1)[1]
        return _many(_sequence_calls(tail.strip()))
    if "<|python_tag|>" in response:
        tail = response.split("<|python_tag|>", 1)[1].split("<|eom_id|>")[0].split("<|eot_id|>")[0]
        return _many(_sequence_calls(tail.strip()))
    fences = _fenced_blocks(response)
    if fences:
        _many(fences)
        return _many([c for f in fences if f.strip() for c in _calls_from_json(_loads(f.strip()))])
    stripped = response.strip()
    if stripped[:1] in ("{", "["):
        return _many(_calls_from_json(_loads(stripped)))
    value = scan.first_json(response)
    return _many(_calls_from_json(value)) if value is not None else []


def _sequence_calls(text: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for value in _json_sequence(text):
        calls.extend(_calls_from_json(value))
        _many(calls)
    return calls


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: numbers by value (1 == 1.0), bools never numbers, dicts unordered."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _calls_equal(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> bool:
    if len(got) != len(expected):
        return False
    remaining = list(expected)
    for call in got:
        for k, exp in enumerate(remaining):
            if call["name"] == exp["name"] and json_equal(call["arguments"], exp["arguments"]):
                del remaining[k]
                break
        else:
            return False
    return True


def parse_ground_truth(gt: Any) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    if isinstance(gt, str):
        try:
            gt = json.loads(gt)
        except json.JSONDecodeError as exc:
            raise ValueError(f"tool_call ground truth is not JSON: {exc.msg}") from None
    if not isinstance(gt, dict) or "tools" not in gt or "expected" not in gt:
        raise TypeError('tool_call ground truth must be {"tools": [...], "expected": call or [calls]}')
    tools = _tool_defs(gt["tools"])
    try:
        expected = _calls_from_json(gt["expected"]) if gt["expected"] != [] else []
    except _ParseError as exc:
        raise ValueError(f"expected call is malformed: {exc}") from None
    for call in expected:
        if call["name"] not in tools:
            raise ValueError(f"expected call names {call['name']!r}, which is not among the tools")
    return tools, expected


@register("tool_call")
class ToolCallVerifier(Verifier):
    name = "tool_call"

    def verify(self, item: Item) -> Verdict:
        try:
            tools, expected = parse_ground_truth(item.ground_truth)
        except (TypeError, ValueError) as exc:
            return Verdict(0.0, INVALID_INPUT, str(exc))
        if not isinstance(item.response, str):
            return Verdict(0.0, INVALID_INPUT, "response must be a string")
        region = reasoning.answer_region(item)  # never read inside the reasoning block (reasoning.py)
        if isinstance(region, Verdict):
            return region
        try:
            calls = parse_calls(region)
        except _ParseError as exc:
            return Verdict(0.0, PARSE_ERROR, str(exc))
        try:
            return self._check(calls, tools, expected)
        except RecursionError:  # arguments nested deeper than the checks recurse
            return Verdict(0.0, PARSE_ERROR, "tool call arguments nested too deeply")

    def _check(
        self, calls: list[dict[str, Any]], tools: dict[str, dict[str, Any]], expected: list[dict[str, Any]]
    ) -> Verdict:
        metrics = {"calls": float(len(calls))}
        if not calls:
            if not expected:
                return Verdict(1.0, OK, "no call, none expected", metrics)
            return Verdict(0.0, PARSE_ERROR, "no tool call found", metrics)
        for call in calls:
            if call["name"] not in tools:
                return Verdict(0.0, WRONG, f"unknown tool {call['name']!r}", metrics)
            schema = tools[call["name"]]
            validator = jsonschema.validators.validator_for(schema)(schema)
            error = jsonschema.exceptions.best_match(validator.iter_errors(call["arguments"]))
            if error is not None:
                where = "/".join(str(p) for p in error.absolute_path) or "arguments"
                return Verdict(
                    0.0, WRONG, f"{call['name']}: schema violation at {where}: {error.message}", metrics
                )
        if _calls_equal(calls, expected):
            return Verdict(1.0, OK, "calls match", metrics)
        return Verdict(0.0, WRONG, f"calls differ from expected: {json.dumps(calls)[:120]}", metrics)
