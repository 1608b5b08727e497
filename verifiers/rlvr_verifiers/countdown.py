"""The `countdown` verifier: an arithmetic expression over the given numbers must hit the target.

Ground truth: `{"target": int, "numbers": [int, ...]}` or that object as a JSON string; optional
`"use_all": true` requires every given number to be used exactly once (default: each AT MOST once).
`item.extra["use_all"]` overrides it.

Which expression is checked (only in the answer region, `rlvr_verifiers.reasoning`: after the last
`</think>`; an unclosed reasoning block is `parse_error`)
- The content of the LAST `<answer>...</answer>` block when the response has one;
- else the last non-empty line that looks like an arithmetic expression (digits, spaces, `+ - * / ( )`,
  `×` `÷`, optionally `$...$`, and optionally a trailing `= N` which is dropped: the VALUE of the
  left-hand side is what counts, never the number the model claims after `=`);
- else `parse_error`.

How it is checked (never `eval`): the text is parsed with `ast.parse(mode="eval")` and the tree is
walked with a whitelist: integer literals (no floats, no bools), binary `+ - * /`, and parentheses
(implicit in the tree). Anything else (calls, names, attributes, `**`, unary minus, `//`, `%`,
strings, comprehensions, ...) is `wrong` with the construct named, so `__import__('os')` or `9**9**9`
are rejected before anything is computed. Size bounds before parsing: 200 characters, 64 tree nodes,
depth 32. Arithmetic is exact (Python fractions): `(1/3)*3` hits 1; division by zero is `wrong`.
Each number literal must come from the given multiset (a number not given, or used more times than
given, is `wrong`).
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from fractions import Fraction
from typing import Any

from rlvr_verifiers import reasoning, scan
from rlvr_verifiers.base import INVALID_INPUT, OK, PARSE_ERROR, WRONG, Item, Verdict
from rlvr_verifiers.registry import Verifier, register

MAX_CHARS = 200
MAX_NODES = 64
MAX_DEPTH = 32

_EXPR_LINE_RE = re.compile(r"^[\d\s+\-*/()×÷.]+(?:=\s*-?\d+(?:\.\d+)?)?$")


class _Rejected(Exception):
    pass


def parse_ground_truth(gt: Any) -> tuple[int, list[int], bool]:
    if isinstance(gt, str):
        try:
            gt = json.loads(gt)
        except json.JSONDecodeError as exc:
            raise ValueError(f"countdown ground truth is not JSON: {exc.msg}") from None
    if not isinstance(gt, dict):
        raise TypeError('countdown ground truth must be {"target": int, "numbers": [int, ...]}')
    target, numbers = gt.get("target"), gt.get("numbers")
    if not isinstance(target, int) or isinstance(target, bool):
        raise TypeError(f"countdown target must be an int, got {target!r}")
    if (
        not isinstance(numbers, list)
        or not numbers
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers)
    ):
        raise TypeError(f"countdown numbers must be a non-empty list of ints, got {numbers!r}")
    return target, numbers, bool(gt.get("use_all", False))


def extract_expression(response: str) -> str | None:
    blocks = scan.tagged_blocks(response, "<answer>", "</answer>", ignore_case=True)  # linear time
    if blocks:
        text = blocks[-1].strip()
    else:
        text = None
        for line in reversed(response.strip().splitlines()):
            line = line.strip().strip("$").strip().rstrip(".")
            if line and _EXPR_LINE_RE.match(line) and re.search(r"\d", line):
                text = line
                break
        if text is None:
            return None
    text = text.strip().strip("$").strip().replace("×", "*").replace("÷", "/").replace("\\times", "*")
    if "=" in text:
        text = text.split("=", 1)[0].strip()
    return text or None


def _evaluate(node: ast.AST, used: list[int], depth: int = 0) -> Fraction:
    if depth > MAX_DEPTH:
        raise _Rejected(f"expression nested deeper than {MAX_DEPTH}")
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, used, depth + 1)
    if isinstance(node, ast.Constant):
        if type(node.value) is not int:
            raise _Rejected(f"only integer literals are allowed, got {node.value!r}")
        used.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        left = _evaluate(node.left, used, depth + 1)
        right = _evaluate(node.right, used, depth + 1)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if right == 0:
            raise _Rejected("division by zero")
        return left / right
    what = type(node.op).__name__ if isinstance(node, (ast.BinOp, ast.UnaryOp)) else type(node).__name__
    raise _Rejected(f"{what} is not allowed (only integers, + - * / and parentheses)")


def check(expression: str, target: int, numbers: list[int], use_all: bool = False) -> Verdict:
    if len(expression) > MAX_CHARS:
        return Verdict(0.0, WRONG, f"expression longer than {MAX_CHARS} characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError):
        return Verdict(0.0, PARSE_ERROR, f"not an arithmetic expression: {expression[:60]!r}")
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        return Verdict(0.0, WRONG, f"expression has more than {MAX_NODES} nodes")
    used: list[int] = []
    try:
        value = _evaluate(tree, used)
    except _Rejected as exc:
        return Verdict(0.0, WRONG, str(exc))
    extra = Counter(used) - Counter(numbers)
    if extra:
        return Verdict(
            0.0, WRONG, f"uses numbers not given (or more often than given): {sorted(extra.elements())}"
        )
    if use_all and Counter(used) != Counter(numbers):
        return Verdict(0.0, WRONG, "must use every given number exactly once")
    if value != target:
        return Verdict(0.0, WRONG, f"evaluates to {value}, target {target}")
    return Verdict(1.0, OK, f"{expression} = {target}")


@register("countdown")
class CountdownVerifier(Verifier):
    name = "countdown"

    def verify(self, item: Item) -> Verdict:
        try:
            target, numbers, use_all = parse_ground_truth(item.ground_truth)
        except (TypeError, ValueError) as exc:
            return Verdict(0.0, INVALID_INPUT, str(exc))
        if not isinstance(item.response, str):
            return Verdict(0.0, INVALID_INPUT, "response must be a string")
        if item.extra and "use_all" in item.extra:
            use_all = bool(item.extra["use_all"])
        region = reasoning.answer_region(item)  # never read inside the reasoning block (reasoning.py)
        if isinstance(region, Verdict):
            return region
        expression = extract_expression(region)
        if expression is None:
            return Verdict(0.0, PARSE_ERROR, "no expression found (expected <answer>...</answer>)")
        return check(expression, target, numbers, use_all)
