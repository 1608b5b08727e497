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
RESPONSE_TOO_LARGE = (
    "response_too_large"  # the response is over the verifier's size limit: not read, not paid
)
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
