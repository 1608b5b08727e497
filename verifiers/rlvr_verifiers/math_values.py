"""Values for the `math` verifier: an answer as a scalar, a collection (set, list, tuple, interval, matrix), a
union, a relation or text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rlvr_verifiers.math_bounds import ParseFailure, TooComplex
from rlvr_verifiers.math_normalize import _LIST_WORD_RE, _label_of
from rlvr_verifiers.math_parse import _CLOSE, _OPEN, _REL, _Parser, tokenize


@dataclass
class Scalar:
    tree: list[Any]
    label: str | None = None


@dataclass
class Collection:
    kind: str  # "set" (unordered, deduplicated), "list" (unordered bare list), "seq" (ordered), "pm" (a \pm pair)
    items: list[Any]
    brackets: str = ""  # for seq: opening+closing bracket, e.g. "(]"


@dataclass
class Union:
    parts: list[Any]


@dataclass
class Relation:
    chain: list[Any] = field(default_factory=list)  # [expr, op, expr, op, expr ...] with < / <= only


@dataclass
class Text:
    text: str


def _split_top(tokens: list[tuple[str, str]], sep: set[str]) -> list[list[tuple[str, str]]]:
    parts, cur, depth = [], [], 0
    for tok in tokens:
        if tok[1] in _OPEN:
            depth += 1
        elif tok[1] in _CLOSE:
            depth -= 1
        if depth == 0 and tok[1] in sep:
            parts.append(cur)
            cur = []
        else:
            cur.append(tok)
    parts.append(cur)
    return parts


def _outer_group_closes_at_end(tokens: list[tuple[str, str]]) -> bool:
    depth = 0
    for k, tok in enumerate(tokens):
        if tok[1] in _OPEN:
            depth += 1
        elif tok[1] in _CLOSE:
            depth -= 1
            if depth == 0:
                return k == len(tokens) - 1
    return False


def _detok(tokens: list[tuple[str, str]]) -> str:
    return " ".join(v for _, v in tokens)


def parse_value(text: str, depth: int = 0) -> Any:
    if depth > 8:
        raise TooComplex("collections nested too deep")
    text = text.strip()
    wrapped = _WRAPPED_MATRIX_RE.fullmatch(text)  # \left[\begin{array}...\end{array}\right]
    if wrapped:
        text = wrapped.group(1)
    n_matrices = len(_MATRIX_LITERAL_RE.findall(text))
    if n_matrices > MAX_MATRIX_LITERALS:
        raise TooComplex(f"more than {MAX_MATRIX_LITERALS} matrices in one answer")
    if n_matrices > 1 or re.match(r"[^\\]*[\d)}]\s*\\begin\{", text):
        arithmetic = _matrix_arithmetic(text, depth)
        if arithmetic is not None:
            return arithmetic
    m = _MATRIX_RE.fullmatch(text)
    if m:
        rows = [r for r in re.split(r"\\\\", m.group(2)) if r.strip()]
        if not rows:
            raise ParseFailure("empty matrix")
        cells = [Collection("seq", [parse_value(c, depth + 1) for c in row.split("&")], "[]") for row in rows]
        return Collection("seq", cells, "M")
    if ";" in text and "," in text and "=" in text:
        groups = _labelled_groups(text, depth)
        if groups is not None:
            return groups
    # Lists written with words or semicolons: "6 and 8", "19, 46, and 82", "x = 5 or x = 6", "-12; -11".
    text = _LIST_WORD_RE.sub(", ", text)
    if ";" in text and "," not in text:
        text = text.replace(";", ",")
    if _WORD_RE.search(text):
        raise ParseFailure("contains a word")
    tokens = tokenize(text)
    if not tokens:
        raise ParseFailure("empty")
    return _value(tokens, depth)


_WRAPPED_MATRIX_RE = re.compile(r"[\[(]\s*(\\begin\{([pbvB]?matrix|array)\}.*\\end\{\2\})\s*[\])]", re.DOTALL)


_MATRIX_RE = re.compile(r"\\begin\{([pbvB]?matrix|array)\}(?:\{[^{}]*\})?(.*)\\end\{\1\}", re.DOTALL)


# Three or more plain letters in a row (not a \command) make the answer text, not a product of variables.
_WORD_RE = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{3,}")


_MATRIX_LITERAL_RE = re.compile(
    r"\\begin\{([pbvB]?matrix)\}((?:(?!\\begin\{|\\end\{).)*)\\end\{\1\}", re.DOTALL
)


_MATRIX_OP_RE = re.compile(r"\s*(?:(\+|-)|(\\cdot|\\times)|())\s*")


MAX_MATRIX_CELLS = 100  # per matrix of an arithmetic answer (10x10)


MAX_MATRIX_LITERALS = 4  # matrices in one arithmetic answer: the evaluated cells stay small trees


def _labelled_groups(text: str, depth: int) -> Collection | None:
    """`p=5,q=2;p=7,q=2`: solution groups, each naming the same unknowns in the same order, are the list
    of tuples `(5,2),(7,2)` (the order inside a group is the order of its labels)."""
    parts = text.split(";")
    if len(parts) < 2:
        return None
    tuples, names = [], None
    for part in parts:
        try:
            group = parse_value(part, depth + 1)
        except ParseFailure:
            return None
        if not (isinstance(group, Collection) and group.kind == "list" and len(group.items) >= 2):
            return None
        if not all(isinstance(x, Scalar) and x.label for x in group.items):
            return None
        labels = [x.label for x in group.items]
        if len(set(labels)) != len(labels) or (names is not None and labels != names):
            return None
        names = labels
        tuples.append(Collection("seq", [Scalar(x.tree) for x in group.items], "()"))
    return Collection("list", tuples)


def _matrix_cells(body: str, depth: int) -> list[list[list[Any]]]:
    rows = [r for r in re.split(r"\\\\", body) if r.strip()]
    cells = [[_parse_tokens(tokenize(c)) for c in row.split("&")] for row in rows]
    if not cells or len({len(r) for r in cells}) != 1 or len(cells) * len(cells[0]) > MAX_MATRIX_CELLS:
        raise ParseFailure("ragged or empty matrix")
    return cells


def _matrix_arithmetic(text: str, depth: int) -> Collection | None:
    """Matrix arithmetic written as the answer, evaluated exactly cell by cell: `A + B`, `A - B`, `AB`,
    `A \\cdot B`, `2A` (a number in front). Shapes must agree; anything else in the text -> None (the
    text is then read as before, and a sum of matrices never equals a matrix by accident)."""
    pos, terms, sign = 0, [], "+"
    while pos < len(text):
        m = re.compile(r"\s*([^\\]*?)\s*(?=\\begin\{)").match(text, pos)
        if not m:
            return None
        coef = None
        if m.group(1):
            if not re.fullmatch(r"-?\d+(?:\.\d+)?|-?\\frac\{\d+\}\{\d+\}", m.group(1)):
                return None
            coef = _parse_tokens(tokenize(m.group(1)))
        factors = []
        pos = m.end()
        while True:
            lit = _MATRIX_LITERAL_RE.match(text, pos)
            if not lit:
                return None
            factors.append(_matrix_cells(lit.group(2), depth))
            pos = lit.end()
            op = _MATRIX_OP_RE.match(text, pos)
            if pos >= len(text.rstrip()) or op is None:
                break
            if op.group(1):  # + or -: the next term
                break
            pos = op.end()  # \cdot, \times or juxtaposition: the next factor
        product = factors[0]
        for f in factors[1:]:
            if len(product[0]) != len(f):
                return None  # shapes do not agree: not a product
            product = [
                [
                    _sum_nodes([["mul", product[r][k], f[k][c]] for k in range(len(f))])
                    for c in range(len(f[0]))
                ]
                for r in range(len(product))
            ]
        if coef is not None:
            product = [[["mul", coef, x] for x in row] for row in product]
        if sign == "-":
            product = [[["neg", x] for x in row] for row in product]
        terms.append(product)
        rest = text[pos:].strip()
        if not rest:
            break
        if rest[0] not in "+-":
            return None
        sign = rest[0]
        pos = text.index(rest[0], pos) + 1
    if len(terms) == 1 and len(factors) == 1 and coef is None:
        return None  # one plain matrix: the ordinary reading
    shape = (len(terms[0]), len(terms[0][0]))
    if any((len(t), len(t[0])) != shape for t in terms):
        return None
    total = [[_sum_nodes([t[r][c] for t in terms]) for c in range(shape[1])] for r in range(shape[0])]
    return Collection("seq", [Collection("seq", [Scalar(x) for x in row], "[]") for row in total], "M")


def _sum_nodes(nodes: list[list[Any]]) -> list[Any]:
    out = nodes[0]
    for n in nodes[1:]:
        out = ["add", out, n]
    return out


def _value(tokens: list[tuple[str, str]], depth: int) -> Any:
    if not tokens:
        raise ParseFailure("empty item")
    vals = [v for _, v in tokens]
    if vals in (["\\emptyset"], ["\\{", "\\}"], ["{", "}"]):
        return Collection("set", [])
    unions = _split_top(tokens, {"\\cup"})
    if len(unions) > 1:
        return Union([_value(p, depth + 1) for p in unions])
    if vals[0] == "\\{" and vals[-1] == "\\}" and _outer_group_closes_at_end(tokens):
        inner = tokens[1:-1]
        items = [_value(p, depth + 1) for p in _split_top(inner, {","})] if inner else []
        return Collection("set", _flatten_pm(items))
    if vals[0] == "{" and vals[-1] == "}" and _outer_group_closes_at_end(tokens):
        if len(_split_top(tokens[1:-1], {","})) > 1:  # {2, 3, 5}: plain braces only group (LaTeX hides them)
            return _value(tokens[1:-1], depth + 1)
    if vals[0] in ("(", "[") and vals[-1] in (")", "]") and _outer_group_closes_at_end(tokens):
        parts = _split_top(tokens[1:-1], {","})
        if len(parts) > 1:
            return Collection("seq", [_value(p, depth + 1) for p in parts], vals[0] + vals[-1])
    parts = _split_top(tokens, {","})
    if len(parts) > 1:
        return Collection("list", _flatten_pm([_value(p, depth + 1) for p in parts]))
    if not tokens:
        raise ParseFailure("empty item")
    # A labelled item inside a collection: x = 1, a_{37} = 19, f(x) = 2 (a chain keeps its last part).
    eq_parts = _split_top(tokens, {"="})
    if len(eq_parts) > 1 and all(eq_parts) and not any(v in _REL for v in vals):
        label = _label_of(_detok_tex(eq_parts[0]))
        if label is not None:
            value = _value(eq_parts[-1], depth + 1)
            if isinstance(value, Scalar):
                value.label = label
            return value
    pm = _split_top(tokens, {"\\pm", "\\mp"})
    if len(pm) == 1 and ("\\pm" in vals or "\\mp" in vals):
        return _nested_pm(tokens)
    if len(pm) == 2:  # a \pm b: the unordered pair {a + b, a - b}
        if len(_split_top(pm[1], {"+", "-"})) > 1:
            raise ParseFailure("ambiguous \\pm with a sum after it")
        a = _parse_tokens(pm[0]) if pm[0] else ["num", "0", "int"]
        b = _parse_tokens(pm[1])
        return Collection("pm", [Scalar(["add", a, b]), Scalar(["add", a, ["neg", b]])])
    if len(pm) > 2:
        raise ParseFailure("more than one \\pm")
    rel_parts = _split_top(tokens, set(_REL) | {"="})
    if len(rel_parts) > 1:
        ops = [_REL.get(v, v) for v in vals if v in _REL or v == "="]
        exprs = [_parse_tokens(p) for p in rel_parts]
        if ">" in ops or ">=" in ops:
            if "<" in ops or "<=" in ops:
                raise ParseFailure("mixed relation directions")
            exprs.reverse()
            ops = [{">": "<", ">=": "<="}[o] for o in reversed(ops)]
        chain: list[Any] = []
        for k, e in enumerate(exprs):
            if k:
                chain.append(ops[k - 1])
            chain.append(e)
        return Relation(chain)
    return Scalar(_parse_tokens(tokens))


def _flatten_pm(items: list[Any]) -> list[Any]:
    """`\\{1 \\pm \\sqrt5, -2\\}` is the three values 1+sqrt5, 1-sqrt5, -2."""
    out: list[Any] = []
    for it in items:
        out.extend(it.items if isinstance(it, Collection) and it.kind == "pm" else [it])
    return out


def _detok_tex(tokens: list[tuple[str, str]]) -> str:
    return "".join(v + (" " if v.startswith("\\") else "") for _, v in tokens)


def _nested_pm(tokens: list[tuple[str, str]]) -> Collection:
    """`\\frac{-1 \\pm \\sqrt{13}}{4}`: one \\pm inside a group is the unordered pair of its + and -
    readings, when no further sum follows it inside that group (else it is ambiguous)."""
    idx = [k for k, (_, v) in enumerate(tokens) if v in ("\\pm", "\\mp")]
    if len(idx) != 1:
        raise ParseFailure("more than one \\pm")
    depth = 0
    for _, v in tokens[idx[0] + 1 :]:
        if v in _OPEN:
            depth += 1
        elif v in _CLOSE:
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and v in ("+", "-"):
            raise ParseFailure("ambiguous \\pm with a sum after it")
    plus = tokens[: idx[0]] + [("op", "+")] + tokens[idx[0] + 1 :]
    minus = tokens[: idx[0]] + [("op", "-")] + tokens[idx[0] + 1 :]
    return Collection("pm", [Scalar(_parse_tokens(plus)), Scalar(_parse_tokens(minus))])


def _parse_tokens(tokens: list[tuple[str, str]]) -> list[Any]:
    parser = _Parser(list(tokens))
    node = parser.expr()
    if parser.peek() is not None:
        raise ParseFailure(f"unexpected {parser.peek()[1]!r}")
    return node
