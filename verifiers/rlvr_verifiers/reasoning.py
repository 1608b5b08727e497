"""The reasoning block and the answer region: the ONE rule every verifier applies before it reads an answer.

R1-style responses reason inside a block and answer after it: `<think> 4*3 = 12 ... </think> The answer is
12.` Accuracy verifiers (math, countdown, tool_call, code) read only the ANSWER REGION, so a guess written
inside the reasoning (a hedge, a boxed try, a tool call the model decided against) is never paid; the
`format` verifier scores the block itself.

The rule (OPEN/CLOSE: the task's tag pair, `<think>`/`</think>` by default):
1. The answer region is the text after the LAST closing tag (a closing tag without an opening one
   included: what precedes it is reasoning).
2. An opening tag after the last closing tag, or anywhere when there is no closing tag, opens a block that
   never closes: there is NO answer region (`parse_error`, detail "unclosed reasoning block"). A response
   cut by `max_response_length` inside its reasoning is never paid for what that reasoning says.
3. `think_prefilled` (the chat template put OPEN into the prompt: DeepSeek-R1 and its distilled models,
   Qwen3 in thinking mode): the response starts inside the block, so without a closing tag it has no
   answer region.
4. No tag at all (and not prefilled): the whole response is the answer region (unchanged behaviour).
5. Tags switched off (`reasoning_tags: off`): the whole response is always the answer region.

Matching, written against a policy that looks for a way to be paid for its reasoning:
- Tags match case-insensitively, with optional whitespace between their parts (`<THINK>`, `< think >`,
  `</ Think>` are tags): a variant spelling never turns a reasoning block into answer text. (Two word
  parts of a tag need some whitespace between them: `<start of thought>` does not match `<startofthought>`.)
- A closing tag ends the reasoning wherever it stands, inside a code block or a JSON string included, and
  nested or repeated blocks change nothing: only the LAST closing tag counts, and nothing before it is ever
  answer. A program or tool call that must contain a literal tag is cut at a closing one, and reads as a
  reopened, unclosed block with an opening one (a false reject, never a false accept); build such a
  string from parts.
- Text before an opening tag is not answer either (rule 1 cuts at the last closing tag).

Settings, per item (the reward bridge and `rlvr score` fill them in from the task's configuration):
- `item.extra["reasoning_tags"]` (else a dict ground truth's `"reasoning_tags"`): absent -> the default
  pair; `[OPEN, CLOSE]` or `"OPEN,CLOSE"` -> that pair; `"off"`, `false`, `null` or `[]` -> switched off.
- `item.extra["think_prefilled"]` (else a dict ground truth's `"think_prefilled"`): bool, default false;
  prefilled with the tags switched off is a contradiction (`invalid_input`).
A tag must hold at least one letter or digit and one other non-space character (a bare word like `think`
would match ordinary prose), and the two tags must not match each other.

Pure Python (no torch, no verl): verifier nodes run it on a slim image.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rlvr_verifiers.base import INVALID_INPUT, PARSE_ERROR, Item, Verdict, too_large

DEFAULT_TAGS: tuple[str, str] = ("<think>", "</think>")  # DeepSeek-R1, its distilled models, Qwen3
OFF = "off"
UNCLOSED = "unclosed reasoning block"  # the detail every verifier gives a response without an answer region

# Where a response stands (Regions.state).
NO_BLOCK = "no_block"  # no reasoning tag (or tags switched off): the whole response is the answer region
CLOSED = "closed"  # the answer region follows the last closing tag
UNCLOSED_STATE = "unclosed"  # a reasoning block never closes: no answer region

_OFF_STRINGS = ("off", "none", "false")
_MISSING = object()


@dataclass(frozen=True)
class Tags:
    """A validated tag pair with its tolerant patterns (see the module doc)."""

    open: str
    close: str
    open_re: re.Pattern[str]
    close_re: re.Pattern[str]


@dataclass(frozen=True)
class Regions:
    """A response split by the rule: `answer` is None exactly when `state` is "unclosed"."""

    state: str
    answer: str | None
    reasoning: str  # everything that is not answer region ("" when there is no block)


def _pattern(tag: str) -> re.Pattern[str]:
    parts = re.findall(r"\w+|[^\w\s]", tag)
    out = []
    for k, part in enumerate(parts):
        if k:
            both_words = parts[k - 1][-1:].isalnum() and part[:1].isalnum()
            out.append(r"\s+" if both_words else r"\s*")
        out.append(re.escape(part))
    return re.compile("".join(out), re.IGNORECASE)


@lru_cache(maxsize=64)
def make_tags(open_tag: str, close_tag: str) -> Tags:
    """A validated pair; ValueError naming the problem otherwise."""
    for what, tag in (("opening", open_tag), ("closing", close_tag)):
        if not isinstance(tag, str) or not tag.strip():
            raise ValueError(f"the {what} reasoning tag must be a non-empty string, got {tag!r}")
        if not re.search(r"[^\W_]", tag) or not re.search(r"[^\w\s]", tag):
            raise ValueError(
                f"the {what} reasoning tag {tag!r} needs a letter or digit and a delimiter like < > [ ] |: "
                "a bare word would match ordinary prose"
            )
    open_re, close_re = _pattern(open_tag), _pattern(close_tag)
    if open_re.search(close_tag) or close_re.search(open_tag):
        raise ValueError(
            f"the reasoning tags {open_tag!r} and {close_tag!r} match each other; use a distinct pair "
            "like <think>,</think>"
        )
    return Tags(open_tag, close_tag, open_re, close_re)


def default_tags() -> Tags:
    return make_tags(*DEFAULT_TAGS)


def parse_tags(value: Any) -> Tags | None:
    """`reasoning_tags` as configured -> Tags, or None when switched off (see the module doc)."""
    if value is _MISSING:
        return default_tags()
    if value is None or value is False or (isinstance(value, list | tuple) and not value):
        return None
    if isinstance(value, str):
        if value.strip().lower() in _OFF_STRINGS or not value.strip():
            return None
        pair = [p.strip() for p in value.split(",")]
        if len(pair) != 2:
            raise ValueError(
                f"reasoning tags {value!r} must be OPEN,CLOSE (e.g. '<think>,</think>') or 'off'"
            )
        return make_tags(pair[0], pair[1])
    if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return make_tags(value[0].strip(), value[1].strip())
    raise ValueError(f"reasoning tags must be [OPEN, CLOSE], 'OPEN,CLOSE' or 'off', got {value!r}")


def tags_setting(tags: Tags | None) -> list[str] | str:
    """The JSON-friendly `reasoning_tags` value that parses back to `tags`."""
    return OFF if tags is None else [tags.open, tags.close]


def _prefilled(value: Any) -> bool:
    if value is _MISSING or value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"think_prefilled must be true or false, got {value!r}")


def settings(tags_value: Any = _MISSING, prefilled_value: Any = _MISSING) -> tuple[Tags | None, bool]:
    """(tags or None, think_prefilled) from configured values; ValueError on a bad or contradictory pair."""
    tags = parse_tags(tags_value)
    prefilled = _prefilled(prefilled_value)
    if prefilled and tags is None:
        raise ValueError(
            "think_prefilled is set but reasoning tags are off: a prefilled reasoning block needs its tags "
            "(set reasoning_tags, e.g. <think>,</think>, or drop think_prefilled)"
        )
    return tags, prefilled


def item_settings(item: Item) -> tuple[Tags | None, bool]:
    """The item's settings: `item.extra`, else a dict ground truth, else the defaults."""
    extra = item.extra or {}
    gt = item.ground_truth if isinstance(item.ground_truth, dict) else {}
    tags_value = extra.get("reasoning_tags", gt.get("reasoning_tags", _MISSING))
    prefilled_value = extra.get("think_prefilled", gt.get("think_prefilled", _MISSING))
    return settings(tags_value, prefilled_value)


def split(response: str, tags: Tags | None, prefilled: bool = False) -> Regions:
    """The rule (module doc) applied to one response; `tags=None` means switched off."""
    if tags is None:
        return Regions(NO_BLOCK, response, "")
    last_close = None
    for last_close in tags.close_re.finditer(response):  # noqa: B007 - the last match is the one kept
        pass
    start = last_close.end() if last_close is not None else 0
    if tags.open_re.search(response, start) is not None:
        return Regions(UNCLOSED_STATE, None, response)  # a block opened after the last close never closes
    if last_close is None:
        if prefilled:
            return Regions(UNCLOSED_STATE, None, response)  # the response starts inside the block
        return Regions(NO_BLOCK, response, "")
    return Regions(CLOSED, response[start:], response[: last_close.start()])


def unclosed_detail(tags: Tags, prefilled: bool, response: str) -> str:
    if prefilled and not tags.open_re.search(response):
        return f"{UNCLOSED} (think_prefilled: {tags.close} never follows the prefilled {tags.open})"
    return f"{UNCLOSED} (no {tags.close} after the last {tags.open})"


def answer_region(item: Item) -> str | Verdict:
    """What an accuracy verifier may read of `item.response`, or the verdict when there is nothing:
    `parse_error` ("unclosed reasoning block ..."), `invalid_input` (bad settings, non-string response) or
    `response_too_large` (longer than base.MAX_RESPONSE_CHARS: never read). Every accuracy verifier calls
    this at its entry."""
    if not isinstance(item.response, str):
        return Verdict(0.0, INVALID_INPUT, f"response must be a string, got {type(item.response).__name__}")
    oversized = too_large(item.response)
    if oversized is not None:
        return oversized
    try:
        tags, prefilled = item_settings(item)
    except ValueError as exc:
        return Verdict(0.0, INVALID_INPUT, str(exc)[:200])
    parts = split(item.response, tags, prefilled)
    if parts.answer is None:
        assert tags is not None
        return Verdict(0.0, PARSE_ERROR, unclosed_detail(tags, prefilled, item.response))
    return parts.answer


def find_tags(text: str, tags: Tags) -> list[tuple[str, re.Match[str]]]:
    """Every opening ("open") and closing ("close") tag in `text`, in order (for the format verifier)."""
    found = [("open", m) for m in tags.open_re.finditer(text)]
    found += [("close", m) for m in tags.close_re.finditer(text)]
    return sorted(found, key=lambda pair: pair[1].start())
