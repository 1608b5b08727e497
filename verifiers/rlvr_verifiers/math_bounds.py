"""The `math` verifier's complexity bounds and the exceptions its stages raise (see rlvr_verifiers/math.py)."""

from __future__ import annotations

from rlvr_verifiers.base import MAX_RESPONSE_CHARS  # noqa: F401  (math's size limit is the shared one)

MAX_ANSWER_CHARS = 2000


MAX_EXPONENT = 10_000


MAX_BITS = 100_000


MAX_FACTORIAL = 2_000


MAX_DEPTH = 150


MAX_OPS = 300_000  # budget of coefficient multiplications per answer pair in the exact path


MAX_TERMS = 2_000


MAX_SQRT_RADICAND = 10**12


SYMBOLIC_TIMEOUT_S = 3.0


# MathVerifier.quick decides in the caller's process only on inputs this short.
QUICK_MAX_RESPONSE_CHARS = 100_000


QUICK_MAX_ANSWER_CHARS = 200


# A response longer than the one limit every verifier shares is not read (`response_too_large`): every
# scan below is linear, the limit bounds the constant (rlvr_verifiers.base.MAX_RESPONSE_CHARS).


class ParseFailure(Exception):
    """The text is not math this parser understands (then it is compared as text)."""


class TooComplex(Exception):
    """The answer exceeds the complexity bound; it is not evaluated."""


class NeedsSymbolic(Exception):
    """The exact path cannot decide this pair and symbolic checks are off (`MathVerifier.quick`)."""


class NotAlgebraic(Exception):
    """The fast exact path cannot represent this value; the symbolic path must decide."""
