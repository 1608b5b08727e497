"""The contract every verifier keeps: a plain batch function from responses to verdicts.

A verdict is either a score or an explicit failure status; nothing is dropped silently. `score` is what
the trainer is paid; `metrics` are logged next to it and never paid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The only statuses a verdict may carry (also the `status` field of `rlvr score` output lines).
OK = "ok"  # verified correct (score may be < 1 with partial credit)
WRONG = "wrong"  # parsed and checked, not correct
PARSE_ERROR = "parse_error"  # no answer could be extracted from the response
TIMEOUT = "timeout"  # the check ran out of its time bound
SANDBOX_ERROR = "sandbox_error"  # the sandbox failed (not the program under test)
INVALID_INPUT = "invalid_input"  # the item itself is malformed (missing or bad ground truth)
AMBIGUOUS_ANSWER = "ambiguous_answer"  # the answer names several candidate values and no final one: not paid
RESPONSE_TOO_LARGE = "response_too_large"  # the response exceeds MAX_RESPONSE_CHARS: not read at all
STATUSES = (
    OK,
    WRONG,
    PARSE_ERROR,
    TIMEOUT,
    SANDBOX_ERROR,
    INVALID_INPUT,
    AMBIGUOUS_ANSWER,
    RESPONSE_TOO_LARGE,
)

# The per-response size limit. Every built-in verifier reads a response of up to this many characters
# within a fixed CPU budget (extraction and parsing are linear or capped, tests/verifiers/
# test_bounded_parsing.py); a longer one is never parsed: status `response_too_large`, score 0, counted
# like every status. 256 Ki characters is about 64k tokens, above any `max_response_length` in use.
MAX_RESPONSE_CHARS = 256 * 1024


def too_large(response: object) -> Verdict | None:
    """The `response_too_large` verdict for a string longer than MAX_RESPONSE_CHARS, else None."""
    if isinstance(response, str) and len(response) > MAX_RESPONSE_CHARS:
        return Verdict(
            0.0,
            RESPONSE_TOO_LARGE,
            f"response of {len(response)} characters exceeds the {MAX_RESPONSE_CHARS}-character limit "
            "(rlvr_verifiers.base.MAX_RESPONSE_CHARS); lower max_response_length",
        )
    return None


@dataclass(frozen=True)
class Verdict:
    score: float
    status: str
    detail: str = ""
    metrics: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}; expected one of {STATUSES}")

    def to_json(self) -> dict[str, Any]:
        return {"score": float(self.score), "status": self.status, "detail": self.detail}


@dataclass(frozen=True)
class Item:
    """One response to verify. `ground_truth` is verifier-specific (see each verifier's module doc)."""

    response: str
    ground_truth: Any
    extra: dict[str, Any] = field(default_factory=dict)
