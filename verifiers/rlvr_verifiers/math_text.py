"""Low-level LaTeX text scanning shared by extraction and normalisation: brace groups, math delimiters,
`\\text{}` unwrapping, control-escape repair, unit words. No regex here backtracks: every scan is linear.
"""

from __future__ import annotations

import re


class Unclosed(Exception):
    pass


def _braced(text: str, start: int, limit: int | None = None) -> tuple[str, int]:
    """Content of the brace group opening at text[start] == '{' and the index after it (closing before
    `limit` when given)."""
    depth = 0
    i = start
    n = len(text) if limit is None else min(limit, len(text))
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
        i += 1
    raise Unclosed


def _strip_math_delims(s: str) -> str:
    s = s.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\[", "\\]"), ("\\(", "\\)")):
        if s.startswith(left) and s.endswith(right) and len(s) >= len(left) + len(right):
            s = s[len(left) : len(s) - len(right)].strip()
    return s


_UNIT_WORDS = (
    "cm|mm|km|meters?|metres?|centimeters?|millimeters?|kilometers?|inch|inches|in|ft|feet|foot|"
    "yards?|yd|miles?|mi|sq|square|units?|degrees?|deg|radians?|rad|dollars?|cents?|euros?|pounds?|"
    "lbs?|kg|grams?|kilograms?|seconds?|sec|minutes?|min|hours?|hrs?|days?|weeks?|months?|"
    "years?|liters?|litres?|ml|mph|km/h|gallons?|ounces?|oz|people|students|ways|times|"
    "percent|percentage|pct|points?|cups?|pages?|books?|marbles?|cookies|apples|tiles|yuan|rupees?|usd|"
    "mg|cm3|ml|kwh|kw|watts?|volts?|amps?|joules?|newtons?|hz|kph|m/s|km/s|cents?|tons?|tonnes?"
)


# A unit word at the start of the words after a value in prose ("125 miles long").
_UNIT_WORD_RE = re.compile(r"(?:(?:square|sq|cubic)\s+)?(?:" + _UNIT_WORDS + r")\b", re.IGNORECASE)


_TEXT_CMD_RE = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|textsf|mbox|mathrm|mathbf|mathit|mathsf|mathnormal|textup|operatorname|boldsymbol|bm)\s*\{"
)


def _unwrap_text(s: str) -> str:
    while True:
        m = _TEXT_CMD_RE.search(s)
        if not m:
            return s
        try:
            inner, end = _braced(s, m.end() - 1)
        except Unclosed:
            return s
        s = s[: m.start()] + inner + s[end:]


# A TeX command written in a non-raw string literal ("\frac" in Python source) arrives with its first
# two characters turned into a control character: form feed + "rac". No answer holds a form feed,
# backspace, bell or vertical tab otherwise, so they are read back as the backslash-letter they were.
_CONTROL_ESCAPES = {"\x0c": "\\f", "\x08": "\\b", "\x07": "\\a", "\x0b": "\\v"}


def _restore_control_escapes(s: str) -> str:
    # Not tab or carriage return: those are whitespace a response may hold (`\t` + "ext{13}" stays text).
    if not re.search(r"[\x07\x08\x0b\x0c]", s):
        return s
    for ch, tex in _CONTROL_ESCAPES.items():
        s = s.replace(ch, tex)
    return s
