"""Equivalence for the `math` verifier: `check` compares an extracted answer with a reference (exact path first,
the symbolic worker only when the exact path cannot decide).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from rlvr_verifiers.base import (
    OK,
    TIMEOUT,
    WRONG,
    Verdict,
)
from rlvr_verifiers.math_bounds import (
    MAX_ANSWER_CHARS,
    MAX_OPS,
    SYMBOLIC_TIMEOUT_S,
    NeedsSymbolic,
    NotAlgebraic,
    ParseFailure,
    TooComplex,
)
from rlvr_verifiers.math_exact import _BUDGET, _add, _as_rational, algebra, precheck
from rlvr_verifiers.math_normalize import (
    _BASE_RE,
    _CHOICE_RE,
    _CHOICE_RESPONSE_RE,
    _THOUSANDS_WHOLE_RE,
    Normalized,
    normalize,
)
from rlvr_verifiers.math_parse import parse_expr
from rlvr_verifiers.math_text import _unwrap_text
from rlvr_verifiers.math_values import Collection, Relation, Scalar, Text, Union, parse_value


@dataclass
class _Ctx:
    deadline: float
    symbolic_timeout_s: float
    used_symbolic: bool = False
    allow_symbolic: bool = True  # False: raise NeedsSymbolic instead of asking sympy
    timed_out: bool = False
    too_complex: str = ""


def _scalar_equal(a: list[Any], b: list[Any], ctx: _Ctx) -> bool:
    inf_a, inf_b = _inf_sign(a), _inf_sign(b)
    if inf_a or inf_b:
        return inf_a == inf_b
    try:
        return algebra(a) == algebra(b)
    except NotAlgebraic:
        pass
    except ZeroDivisionError:
        return False
    precheck(a)
    precheck(b)
    if not ctx.allow_symbolic:
        raise NeedsSymbolic
    from rlvr_verifiers import _symbolic

    ctx.used_symbolic = True
    left = min(ctx.symbolic_timeout_s, ctx.deadline - time.monotonic())
    if left <= 0:
        ctx.timed_out = True
        return False
    result = _symbolic.pool().equal(_jsonable(a), _jsonable(b), left)
    if result is None:
        ctx.timed_out = True
        return False
    return result


def _jsonable(node: Any) -> Any:
    if isinstance(node, list):
        return [_jsonable(c) for c in node]
    return node


def _inf_sign(node: list[Any]) -> int:
    if node[0] == "inf":
        return 1
    if node[0] == "neg" and node[1][0] == "inf":
        return -1
    return 0


def values_equal(a: Any, b: Any, ctx: _Ctx) -> bool:
    if isinstance(a, Scalar) and isinstance(b, Scalar):
        if a.label and b.label and a.label != b.label:
            # `x + y = 5` vs `y = 5 - x`: different labels, possibly the same equation.
            ra, rb = _label_relation(a), _label_relation(b)
            return ra is not None and rb is not None and _equations_equivalent(ra, rb)
        return _scalar_equal(a.tree, b.tree, ctx)
    if isinstance(a, Text) or isinstance(b, Text):
        return isinstance(a, Text) and isinstance(b, Text) and a.text == b.text
    if isinstance(a, Scalar) and a.label and isinstance(b, Relation):
        a = _label_relation(a) or a
    if isinstance(b, Scalar) and b.label and isinstance(a, Relation):
        b = _label_relation(b) or b
    if isinstance(a, Relation) and isinstance(b, Relation):
        if len(a.chain) == len(b.chain) and all(
            (x == y) if isinstance(x, str) or isinstance(y, str) else _scalar_equal(x, y, ctx)
            for x, y in zip(a.chain, b.chain, strict=True)
        ):
            return True
        return _equations_equivalent(a, b)
    if isinstance(b, Relation) and isinstance(a, Collection):
        # The reference states an inequality, the response its interval: the same set. Not the other way
        # round: a reference in interval notation asks for the interval.
        b = _relation_interval(b) or _abs_relation_set(b) or b
    if isinstance(b, Relation) and isinstance(a, Union):
        b = _abs_relation_set(b) or b
    a, b = _finite_union(a), _finite_union(b)
    if isinstance(a, Union) and isinstance(b, Union):
        return _unordered_equal(a.parts, b.parts, ctx)
    if isinstance(a, Collection) and isinstance(b, Collection):
        unordered = {"set", "list", "pm"}
        if a.kind == "seq" or b.kind == "seq":
            if a.kind != b.kind or a.brackets != b.brackets or len(a.items) != len(b.items):
                return False
            return all(values_equal(x, y, ctx) for x, y in zip(a.items, b.items, strict=True))
        if a.kind in unordered and b.kind in unordered:
            ai = _dedupe(a.items, ctx) if a.kind == "set" else a.items
            bi = _dedupe(b.items, ctx) if b.kind == "set" else b.items
            if a.kind == "list" and _all_tuples(ai) and _all_tuples(bi) and len(ai) > len(bi):
                # A list of solution tuples that names one twice is the same solution set, when the
                # reference names none twice (numbers stay a multiset: roots with multiplicity).
                deduped_b = _dedupe(bi, ctx)
                if len(deduped_b) == len(bi):
                    ai = _dedupe(ai, ctx)
            return _unordered_equal(ai, bi, ctx)
    return False


def _label_relation(s: Scalar) -> Relation | None:
    """`y = 2x+3` as the equation it is (None when the label is not an expression, e.g. `(p,q)`)."""
    try:
        return Relation([parse_expr(s.label or ""), "=", s.tree])
    except (ParseFailure, TooComplex, IndexError, ValueError):
        return None


def _equations_equivalent(a: Relation, b: Relation) -> bool:
    """Single relations with the same solution set because one is a constant multiple of the other,
    decided exactly: `2x+4y-3=0` == `y=-x/2+3/4` (any nonzero factor for = and !=), `x<1` == `-x>-1`
    (a positive factor for < and <=; `x<1` != `x>1`). Only polynomial sides over the exact algebra; what
    it cannot represent is not equal (never asks sympy)."""
    if len(a.chain) != 3 or len(b.chain) != 3 or a.chain[1] != b.chain[1]:
        return False
    try:
        da = _add(algebra(a.chain[0]), {k: -v for k, v in algebra(a.chain[2]).items()})
        db = _add(algebra(b.chain[0]), {k: -v for k, v in algebra(b.chain[2]).items()})
    except (NotAlgebraic, ZeroDivisionError):
        return False
    if not da or not db:
        return not da and not db
    key = next(iter(da))
    if key not in db:
        return False
    c = db[key] / da[key]
    if a.chain[1] in ("<", "<=") and c <= 0:
        return False
    return len(da) == len(db) and all(db.get(k) == c * v for k, v in da.items())


def _free_vars(node: list[Any], out: set[str]) -> set[str]:
    if node[0] == "var" and node[1] not in ("e", "i"):
        out.add(node[1])
    for child in node[1:]:
        if isinstance(child, list):
            _free_vars(child, out)
    return out


def _relation_interval(r: Relation) -> Collection | None:
    """A one-variable inequality as the interval it describes: `-2 <= x < 7` -> [-2, 7), `x > 3` ->
    (3, \\infty), `k <= 2` -> (-\\infty, 2]. None when it is not of that form."""
    c = r.chain
    if any(isinstance(op, str) and op not in ("<", "<=") for op in c[1::2]):
        return None
    neg_inf, inf = ["neg", ["inf"]], ["inf"]

    def is_var(node: list[Any]) -> bool:  # a variable, or a function application f(x) (parsed f*x)
        if node[0] == "mul":
            return is_var(node[1]) and is_var(node[2])
        return node[0] == "var" and node[1] not in ("e", "i")

    if len(c) == 5 and is_var(c[2]) and not (_free_vars(c[0], set()) | _free_vars(c[4], set())):
        lo, hi, br = c[0], c[4], ("(" if c[1] == "<" else "[") + (")" if c[3] == "<" else "]")
    elif len(c) == 3 and is_var(c[0]) and not _free_vars(c[2], set()):
        lo, hi, br = neg_inf, c[2], "(" + (")" if c[1] == "<" else "]")
    elif len(c) == 3 and is_var(c[2]) and not _free_vars(c[0], set()):
        lo, hi, br = c[0], inf, ("(" if c[1] == "<" else "[") + ")"
    else:
        return None
    return Collection("seq", [Scalar(lo), Scalar(hi)], br)


def _finite_union(v: Any) -> Any:
    """`\\{2,6\\} \\cup \\{5,9\\}` (or `{2,6} \\cup {5,9}`, braces that only group): a union of finite sets is
    the set of their elements. A union with an interval, or anything else, stays as it is."""
    if not isinstance(v, Union):
        return v
    items: list[Any] = []
    for part in v.parts:
        if isinstance(part, Collection) and part.kind in ("set", "list"):
            items.extend(part.items)
        else:
            return v
    return Collection("set", items)


def _all_tuples(items: list[Any]) -> bool:
    return all(isinstance(x, Collection) and x.kind == "seq" and x.brackets == "()" for x in items)


def _abs_relation_set(r: Relation) -> Any:
    """`lo <= |z| <= hi` (constants 0 < lo < hi) as the set it describes, `[-hi, -lo] \\cup [lo, hi]`
    (ends open where the relation is strict); `|z| < hi` / `|z| <= hi` as `(-hi, hi)` / `[-hi, hi]`.
    None for any other shape (decided exactly: the ends must be rational)."""
    c = r.chain
    if any(isinstance(op, str) and op not in ("<", "<=") for op in c[1::2]):
        return None
    try:
        if len(c) == 5 and c[2][0] == "abs" and c[2][1][0] == "var":
            lo, hi = _as_rational(algebra(c[0])), _as_rational(algebra(c[4]))
            if lo is None or hi is None or not 0 < lo < hi:
                return None
            lo_open, hi_open = c[1] == "<", c[3] == "<"
            left = Collection(
                "seq",
                [Scalar(["neg", c[4]]), Scalar(["neg", c[0]])],
                ("(" if hi_open else "[") + (")" if lo_open else "]"),
            )
            right = Collection(
                "seq", [Scalar(c[0]), Scalar(c[4])], ("(" if lo_open else "[") + (")" if hi_open else "]")
            )
            return Union([left, right])
        if len(c) == 3 and c[0][0] == "abs" and c[0][1][0] == "var":
            hi = _as_rational(algebra(c[2]))
            if hi is None or hi <= 0:
                return None
            br = "()" if c[1] == "<" else "[]"
            return Collection("seq", [Scalar(["neg", c[2]]), Scalar(c[2])], br)
    except (NotAlgebraic, ZeroDivisionError, TooComplex):
        return None
    return None


def _dedupe(items: list[Any], ctx: _Ctx) -> list[Any]:
    out: list[Any] = []
    for it in items:
        if not any(values_equal(it, o, ctx) for o in out):
            out.append(it)
    return out


def _unordered_equal(a: list[Any], b: list[Any], ctx: _Ctx) -> bool:
    if len(a) != len(b):
        return False
    remaining = list(b)
    for x in a:
        for k, y in enumerate(remaining):
            if values_equal(x, y, ctx):
                del remaining[k]
                break
        else:
            return False
    return True


def _text_key(s: str) -> str:
    s = _unwrap_text(s).lower()
    s = re.sub(r"\\(?:text|mathrm)", "", s)
    s = re.sub(r"[{}\s]+", " ", s).strip(" .,:;")
    return s


@dataclass
class Answer:
    norm: Normalized
    value: Any = None
    error: str = ""


def _prepare(raw: str) -> Answer:
    norm = normalize(raw)
    if len(norm.text) > MAX_ANSWER_CHARS:
        return Answer(norm, None, "too_complex")
    try:
        value = parse_value(norm.text)
        if norm.label and isinstance(value, Scalar):
            value.label = norm.label
        return Answer(norm, value)
    except ParseFailure:
        return Answer(norm, Text(_text_key(norm.text)))
    except TooComplex as exc:
        return Answer(norm, None, f"too_complex: {exc}")
    except RecursionError:
        return Answer(norm, None, "too_complex: recursion")
    except (IndexError, KeyError, ValueError, ZeroDivisionError, TypeError):
        # A parser corner case: the answer is not math this parser understands; compare it as text.
        return Answer(norm, Text(_text_key(norm.text)))


def _choice(s: str) -> str | None:
    m = _CHOICE_RE.match(s.strip())
    return (m.group(1) or m.group(2)) if m else None


def _decimal_comma_equal(a: str, b: str) -> bool:
    """`1,22` (a decimal comma: one comma, not a thousands group) against `1.22` written with a point."""
    for x, y in ((a, b), (b, a)):
        if (
            re.fullmatch(r"-?\d+,\d+", x)
            and not _THOUSANDS_WHOLE_RE.match(x)
            and re.fullmatch(r"-?\d+\.\d+", y)
        ):
            return Fraction(x.replace(",", ".")) == Fraction(y)
    return False


# A machine float's rendering of a rational value with no finite decimal: a decimal of 14-17
# significant digits (what a double prints) that is the value correctly rounded or truncated at its
# last digit (`0.0833333333333333` for 1/12). Shorter decimals are approximations and are never paid
# (`0.6666667`), nor is any decimal of an irrational value (`3.14159265358979` is not pi).
FLOAT_RENDERING_DIGITS = (14, 17)


_LONG_DECIMAL_RE = re.compile(r"[-+]?(\d*)\.(\d+)")


def _float_rendering_equal(text: str, ref: Any) -> bool:
    """`text` (a bare decimal) is a double's rendering of the rational reference (see
    FLOAT_RENDERING_DIGITS): the reference has no finite decimal, and the text is the reference rounded
    half-up or truncated at the text's last digit, no other digit string."""
    m = _LONG_DECIMAL_RE.fullmatch(text.strip())
    if not m or not isinstance(ref, Scalar) or ref.label:
        return False
    digits = (m.group(1) + m.group(2)).lstrip("0")
    if not FLOAT_RENDERING_DIGITS[0] <= len(digits) <= FLOAT_RENDERING_DIGITS[1]:
        return False
    try:
        exact = _as_rational(algebra(ref.tree))
    except (NotAlgebraic, ZeroDivisionError, TooComplex):
        return False
    den = exact.denominator if exact is not None else 0
    while den and den % 2 == 0:
        den //= 2
    while den and den % 5 == 0:
        den //= 5
    if den <= 1:
        return False  # irrational, or a finite decimal (then only that decimal is equal)
    got, scale = Fraction(text.strip()), 10 ** len(m.group(2))
    scaled = exact * scale
    truncated = Fraction(int(scaled), scale)  # int() truncates toward zero, for either sign
    away = truncated + (Fraction(1, scale) if exact > 0 else Fraction(-1, scale))
    rounded = away if abs(exact - truncated) * 2 >= Fraction(1, scale) else truncated
    return got in (truncated, rounded)


def check(
    response_answer: str, reference: str, timeout_s: float = SYMBOLIC_TIMEOUT_S, allow_symbolic: bool = True
) -> Verdict:
    """Compare an extracted answer with a reference answer (both raw strings).

    `allow_symbolic=False`: raise NeedsSymbolic where the symbolic path would be asked; every verdict it
    does return is the one the full check returns (the same steps in the same order, minus sympy)."""
    ref = _prepare(reference)
    if not ref.norm.text:
        from rlvr_verifiers.base import INVALID_INPUT

        return Verdict(0.0, INVALID_INPUT, "empty reference answer")
    resp_norm = normalize(response_answer)
    truth = ref.norm.text.strip().lower()
    if truth in ("true", "false", "yes", "no"):
        # A truth value is compared as a word (case-insensitive), never read as a product of variables.
        got = re.sub(r"[^a-z]", "", _unwrap_text(resp_norm.text).lower())
        if got == truth:
            return Verdict(1.0, OK, f"truth value {truth}")
        return Verdict(0.0, WRONG, f"{resp_norm.text[:40]!r} != {truth}")
    letter = _choice(_unwrap_text(ref.norm.text))
    if letter is not None:
        text = _unwrap_text(resp_norm.text).strip()
        m = _CHOICE_RESPONSE_RE.match(text)
        got = (m.group(1) or m.group(2)) if m else None
        if got and letter.islower() and m.group(1):
            got = None  # a reference `(b)` asks for the parenthesised lower-case option
        other = r"(?<![A-Za-z])[A-J](?![A-Za-z])" if got and got.isupper() else r"\([a-j]\)"
        if got and re.search(other, text[m.end() :]):
            return Verdict(0.0, WRONG, f"more than one choice named: {text[:40]!r}")  # a hedge like "A or B"
        if got == letter:
            return Verdict(1.0, OK, f"choice {letter}")
        return Verdict(0.0, WRONG, f"choice {got or resp_norm.text[:40]!r} != {letter}")
    if ref.norm.unit and resp_norm.unit and ref.norm.unit != resp_norm.unit:
        return Verdict(0.0, WRONG, f"unit {resp_norm.unit!r} != {ref.norm.unit!r}")
    if _decimal_comma_equal(resp_norm.text, ref.norm.text):
        return Verdict(1.0, OK, "decimal comma")
    base = _BASE_RE.match(ref.norm.text.replace(" ", ""))
    if base and base.group(2) != "10":
        # A numeral in the base the problem asks for: `10001` (no subscript) or with the same subscript.
        got = _BASE_RE.match(resp_norm.text.replace(" ", ""))
        digits = got.group(1) if got and got.group(2) == base.group(2) else resp_norm.text.replace(" ", "")
        if digits.lower() == base.group(1).lower() and not resp_norm.label:
            return Verdict(1.0, OK, f"numeral in base {base.group(2)}")
    if resp_norm.text == ref.norm.text and (
        not (ref.norm.label and resp_norm.label) or ref.norm.label == resp_norm.label
    ):
        return Verdict(1.0, OK, "identical")
    resp = _prepare(response_answer)
    for side in (ref, resp):
        if side.error:
            return Verdict(0.0, TIMEOUT, f"not evaluated: {side.error}")
    ctx = _Ctx(time.monotonic() + timeout_s, timeout_s, allow_symbolic=allow_symbolic)
    _BUDGET.left = MAX_OPS
    try:
        equal = values_equal(resp.value, ref.value, ctx)
    except TooComplex as exc:
        return Verdict(0.0, TIMEOUT, f"not evaluated: too_complex: {exc}")
    except RecursionError:
        return Verdict(0.0, TIMEOUT, "not evaluated: too_complex: recursion")
    if not equal and _float_rendering_equal(resp.norm.text, ref.value):
        return Verdict(1.0, OK, "a double's rendering of the rational value")
    metrics = {"symbolic": float(ctx.used_symbolic)}
    if equal:
        return Verdict(1.0, OK, "symbolic" if ctx.used_symbolic else "exact", metrics)
    if ctx.timed_out:
        return Verdict(0.0, TIMEOUT, f"symbolic check exceeded {timeout_s}s", metrics)
    return Verdict(0.0, WRONG, f"{resp.norm.text[:60]!r} != {ref.norm.text[:60]!r}", metrics)
