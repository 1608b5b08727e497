"""Linear-time scanners for reading answers out of model responses (shared by the built-in verifiers).

A response is untrusted text of up to `base.MAX_RESPONSE_CHARS` characters, and a degenerate policy
writes exactly the shapes that make a backtracking regular expression or a retried parser super-linear:
a tag repeated thousands of times and never closed (`<answer><answer>...`), a run of backticks, a code
fence followed by thousands of spaces, brackets nested thousands deep. `(.*?)</tag>` rescans the rest of
the text from every opening tag (quadratic), and a JSON decoder restarted at every `[` is quadratic too
(and a RecursionError at depth ~1000). The scanners here are linear by construction:

- `tagged_blocks`: the contents of non-overlapping `OPEN ... CLOSE` blocks, exactly what
  `re.findall(OPEN (.*?) CLOSE, DOTALL)` returns, found with one left-to-right pass: after an opening tag
  the closing tag is searched once; when there is none, no later opening tag can be closed either, so
  the scan stops (the regex would search again from each of them).
- `first_json`: the first JSON object/list embedded in prose, decoded at no more than
  `MAX_JSON_ATTEMPTS` candidate offsets, and with at most `MAX_JSON_SCAN_CHARS` characters read by the
  failed attempts together; a nesting that exhausts the decoder's recursion is a failed attempt, never an
  exception.
- `loads`: `json.loads` whose RecursionError (nesting too deep) is a JSONDecodeError like any bad JSON.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

# first_json: at most this many decode attempts, and this many characters read by failed attempts.
MAX_JSON_ATTEMPTS = 32
MAX_JSON_SCAN_CHARS = 1 << 20

_DECODER = json.JSONDecoder()
# What may follow `{` or `[` (after whitespace) in JSON; other candidates are skipped without a decode.
_AFTER_BRACE = frozenset('"}')
_AFTER_BRACKET = frozenset('"{[]-0123456789tfn')
_WS = " \t\r\n"


@lru_cache(maxsize=64)
def _literal(tag: str, ignore_case: bool) -> re.Pattern[str]:
    return re.compile(re.escape(tag), re.IGNORECASE if ignore_case else 0)


def tagged_blocks(text: str, open_tag: str, close_tag: str, *, ignore_case: bool = False) -> list[str]:
    """Contents of the non-overlapping `open_tag ... close_tag` blocks, in order (linear time)."""
    opener, closer = _literal(open_tag, ignore_case), _literal(close_tag, ignore_case)
    out = []
    pos = 0
    while True:
        start = opener.search(text, pos)
        if start is None:
            return out
        end = closer.search(text, start.end())
        if end is None:
            return out  # no closing tag after this opening one, so none after any later one
        out.append(text[start.end() : end.start()])
        pos = end.end()


def loads(text: str) -> Any:
    """json.loads; a nesting too deep for the decoder raises JSONDecodeError, like any invalid JSON."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None


def raw_decode(text: str, pos: int) -> tuple[Any, int]:
    """JSONDecoder.raw_decode at `pos`; a nesting too deep raises JSONDecodeError."""
    try:
        return _DECODER.raw_decode(text, pos)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, pos) from None


def _plausible(text: str, pos: int) -> bool:
    """Whether the `{`/`[` at `pos` can start JSON (the next non-space character allows it)."""
    follow = _AFTER_BRACE if text[pos] == "{" else _AFTER_BRACKET
    k = pos + 1
    n = len(text)
    while k < n and text[k] in _WS:
        k += 1
        if k - pos > 64:  # a long run of spaces: let the decoder decide (it reads the run once)
            return True
    return k < n and text[k] in follow


_CANDIDATE = re.compile(r"[{\[]")


def first_json(
    text: str,
    accept: Any = None,
    *,
    max_attempts: int = MAX_JSON_ATTEMPTS,
    max_scan_chars: int = MAX_JSON_SCAN_CHARS,
) -> Any:
    """The first JSON object/list embedded in `text` for which `accept(value)` is true (default: any
    non-empty object or list), or None. Bounded: at most `max_attempts` decodes, and the failed ones read
    at most `max_scan_chars` characters together (a decode stops at its first error)."""
    accept = accept or (lambda v: isinstance(v, (dict, list)) and bool(v))
    attempts = scanned = 0
    for m in _CANDIDATE.finditer(text):
        pos = m.start()
        if not _plausible(text, pos):
            continue
        if attempts >= max_attempts or scanned >= max_scan_chars:
            return None
        attempts += 1
        try:
            value, end = raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            scanned += max(exc.pos - pos, 1)
            continue
        if accept(value):
            return value
        scanned += end - pos
    return None
