"""The `math` verifier's fast exact path: canonical polynomials over Q in pi, e, i, variables and square roots,
with an operation budget per answer pair.
"""

from __future__ import annotations

import math as _pymath
import threading
from fractions import Fraction
from typing import Any

from rlvr_verifiers.math_bounds import (
    MAX_BITS,
    MAX_DEPTH,
    MAX_EXPONENT,
    MAX_FACTORIAL,
    MAX_OPS,
    MAX_SQRT_RADICAND,
    MAX_TERMS,
    NotAlgebraic,
    TooComplex,
)

# A term key: (i_power in {0,1}, radicand (square-free positive int), ((symbol, exponent), ...) sorted)
# where symbols include "pi" and "e". Values: dict key -> nonzero Fraction.
Key = tuple[int, int, tuple[tuple[str, int], ...]]


ONE_KEY: Key = (0, 1, ())


def _const(q: Fraction) -> dict[Key, Fraction]:
    return {ONE_KEY: q} if q else {}


def _add(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        s = out.get(k, 0) + v
        if s:
            out[k] = s
        else:
            out.pop(k, None)
    return out


def _check_size(q: Fraction) -> None:
    if q.numerator.bit_length() + q.denominator.bit_length() > MAX_BITS:
        raise TooComplex(f"a number exceeds {MAX_BITS} bits")


def _mul_keys(k1: Key, k2: Key) -> tuple[Fraction, Key]:
    coef = Fraction(1)
    i = k1[0] + k2[0]
    if i >= 2:
        i -= 2
        coef = -coef
    g = _pymath.gcd(k1[1], k2[1])
    rad = (k1[1] // g) * (k2[1] // g)
    coef *= g
    syms = dict(k1[2])
    for s, e in k2[2]:
        syms[s] = syms.get(s, 0) + e
        if abs(syms[s]) > MAX_EXPONENT:
            raise TooComplex("exponent too large")
    return coef, (i, rad, tuple(sorted((s, e) for s, e in syms.items() if e)))


_BUDGET = threading.local()


def _spend(cost: int) -> None:
    left = getattr(_BUDGET, "left", MAX_OPS) - cost
    _BUDGET.left = left
    if left < 0:
        raise TooComplex(f"more than {MAX_OPS} operations")


def _mul(a: dict, b: dict) -> dict:
    if len(a) * len(b) > MAX_TERMS * 4:
        raise TooComplex("too many terms")
    _spend(
        len(a)
        * len(b)
        * (1 + max((v.numerator.bit_length() for v in (*a.values(), *b.values())), default=0) // 4096)
    )
    out: dict[Key, Fraction] = {}
    for k1, v1 in a.items():
        for k2, v2 in b.items():
            c, k = _mul_keys(k1, k2)
            v = c * v1 * v2
            _check_size(v)
            s = out.get(k, 0) + v
            if s:
                out[k] = s
            else:
                out.pop(k, None)
    if len(out) > MAX_TERMS:
        raise TooComplex("too many terms")
    return out


def _inverse(a: dict) -> dict:
    if not a:
        raise ZeroDivisionError
    if len(a) == 2 and ONE_KEY in a:
        # p + q*sqrt(r) or p + q*i: multiply by the conjugate, whose product with it is rational.
        ((other, q),) = [(k, v) for k, v in a.items() if k != ONE_KEY]
        if not other[2] and (other[0] == 0) != (other[1] == 1):
            conjugate = {ONE_KEY: a[ONE_KEY], other: -q}
            norm = _as_rational(_mul(a, conjugate))
            if norm:
                return {k: v / norm for k, v in conjugate.items()}
    if len(a) != 1:
        raise NotAlgebraic("division by a sum")
    ((k, v),) = a.items()
    i, rad, syms = k
    coef = 1 / v
    if i:
        coef = -coef  # 1/i = -i
    coef /= rad  # 1/sqrt(r) = sqrt(r)/r
    return {(i, rad, tuple((s, -e) for s, e in syms)): coef}


def _squarefree_split(n: int) -> tuple[int, int]:
    """n = outer^2 * inner with inner square-free (n <= MAX_SQRT_RADICAND)."""
    if n > MAX_SQRT_RADICAND:
        raise NotAlgebraic("radicand too large to factor quickly")
    outer, inner = 1, 1
    p = 2
    while p * p * p <= n and p <= 10**4:
        while n % (p * p) == 0:
            n //= p * p
            outer *= p
        if n % p == 0:
            n //= p
            inner *= p
        p += 1
    # What remains has at most two prime factors (all > 10^4): it is a prime, p*q, or p^2.
    r = _pymath.isqrt(n)
    if r * r == n:
        outer *= r
    else:
        inner *= n
    return outer, inner


def _sqrt_rational(q: Fraction) -> dict:
    i = 0
    if q < 0:
        i, q = 1, -q
    if q == 0:
        return {}
    # sqrt(p/d) = sqrt(p*d)/d
    o, inner = _squarefree_split(q.numerator * q.denominator)
    return {(i, inner, ()): Fraction(o, q.denominator)}


def _as_rational(a: dict) -> Fraction | None:
    if not a:
        return Fraction(0)
    if len(a) == 1 and ONE_KEY in a:
        return a[ONE_KEY]
    return None


def _int_root(q: Fraction, n: int) -> Fraction | None:
    if q < 0 and n % 2 == 0:
        return None
    sign = -1 if q < 0 else 1
    q = abs(q)
    out = []
    for part in (q.numerator, q.denominator):
        r = round(part ** (1.0 / n)) if part.bit_length() < 1000 else None
        if r is None:
            return None
        for cand in (r - 1, r, r + 1):
            if cand >= 0 and cand**n == part:
                out.append(cand)
                break
        else:
            return None
    return sign * Fraction(out[0], out[1])


def _pow(base: dict, exp: dict) -> dict:
    e = _as_rational(exp)
    if e is None:
        raise NotAlgebraic("symbolic exponent")
    if e.denominator == 1:
        n = e.numerator
        if abs(n) > MAX_EXPONENT:
            raise TooComplex(f"exponent {n} exceeds {MAX_EXPONENT}")
        b = _as_rational(base)
        if b is not None:
            if b == 0 and n < 0:
                raise ZeroDivisionError
            if (
                b not in (0, 1, -1)
                and abs(n) * max(1, abs(b.numerator).bit_length() + b.denominator.bit_length()) > MAX_BITS
            ):
                raise TooComplex("power result too large")
            return _const(b**n)
        if n < 0:
            base, n = _inverse(base), -n
        result = _const(Fraction(1))
        sq = base
        while n:
            if n & 1:
                result = _mul(result, sq)
            n >>= 1
            if n:
                sq = _mul(sq, sq)
        return result
    b = _as_rational(base)
    if b is None:
        raise NotAlgebraic("fractional power of a non-rational")
    if e.denominator == 2:
        return _pow(_sqrt_rational(b), _const(Fraction(e.numerator)))
    if abs(e.denominator) <= 64:
        root = _int_root(b, e.denominator)
        if root is not None:
            return _pow(_const(root), _const(Fraction(e.numerator)))
    raise NotAlgebraic("irrational root")


def _factorial(n: Fraction) -> Fraction:
    if n.denominator != 1 or n < 0:
        raise NotAlgebraic("factorial of a non-natural number")
    if n > MAX_FACTORIAL:
        raise TooComplex(f"factorial above {MAX_FACTORIAL}")
    return Fraction(_pymath.factorial(int(n)))


def algebra(node: list[Any]) -> dict:
    """Evaluate an expression tree in the canonical algebra (raises NotAlgebraic / TooComplex)."""
    op = node[0]
    if op == "num":
        return _const(Fraction(node[1]))
    if op == "var":
        name = node[1]
        if name == "i":
            return {(1, 1, ()): Fraction(1)}
        return {(0, 1, ((name, 1),)): Fraction(1)}
    if op == "pi":
        return {(0, 1, (("pi", 1),)): Fraction(1)}
    if op == "add":
        return _add(algebra(node[1]), algebra(node[2]))
    if op == "neg":
        return {k: -v for k, v in algebra(node[1]).items()}
    if op == "mul":
        return _mul(algebra(node[1]), algebra(node[2]))
    if op in ("div", "frac"):
        return _mul(algebra(node[1]), _inverse(algebra(node[2])))
    if op == "pow":
        return _pow(algebra(node[1]), algebra(node[2]))
    if op == "sqrt":
        b = _as_rational(algebra(node[1]))
        if b is None:
            raise NotAlgebraic("square root of a non-rational")
        return _sqrt_rational(b)
    if op == "root":
        n = _as_rational(algebra(node[1]))
        if n is None or n.denominator != 1 or n <= 0:
            raise NotAlgebraic("symbolic root index")
        return _pow(algebra(node[2]), _const(Fraction(1, int(n))))
    if op == "fact":
        n = _as_rational(algebra(node[1]))
        if n is None:
            raise NotAlgebraic("factorial of a symbol")
        return _const(_factorial(n))
    if op == "binom":
        n, k = _as_rational(algebra(node[1])), _as_rational(algebra(node[2]))
        if n is None or k is None or n.denominator != 1 or k.denominator != 1 or n < 0 or k < 0:
            raise NotAlgebraic("binomial of symbols")
        if n > MAX_FACTORIAL:
            raise TooComplex("binomial too large")
        return _const(Fraction(_pymath.comb(int(n), int(k))))
    if op == "abs":
        inner = algebra(node[1])
        q = _as_rational(inner)
        if q is None:
            raise NotAlgebraic("absolute value of a non-rational")
        return _const(abs(q))
    raise NotAlgebraic(op)


def precheck(node: list[Any], depth: int = 0) -> None:
    """Reject trees sympy must never see: huge literal exponents / factorials, deep nesting."""
    if depth > MAX_DEPTH:
        raise TooComplex("nesting too deep")
    op = node[0]
    if op == "pow":
        try:
            e = _as_rational(algebra(node[2]))
        except NotAlgebraic:
            e = None
        if e is not None and abs(e) > MAX_EXPONENT:
            raise TooComplex(f"exponent {e} exceeds {MAX_EXPONENT}")
        if e is None and node[2][0] == "pow":
            raise TooComplex("symbolic tower of exponents")
    if op == "fact":
        try:
            n = _as_rational(algebra(node[1]))
        except NotAlgebraic:
            n = None
        if n is not None and n > MAX_FACTORIAL:
            raise TooComplex("factorial too large")
    for child in node[1:]:
        if isinstance(child, list):
            precheck(child, depth + 1)
