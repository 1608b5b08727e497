"""The `ifeval` verifier: instruction-following constraints (IFEval's families) checked deterministically.

Ground truth (a dict, or that dict as a JSON string), IFEval's own row layout:
    {"instruction_id_list": ["punctuation:no_comma", "length_constraints:number_words"],
     "kwargs": [{}, {"relation": "at least", "num_words": 300}],
     "mode"?: "strict" | "loose", "reward"?: "all" | "fraction"}
`kwargs[i]` holds the arguments of `instruction_id_list[i]`; keys whose value is null are dropped (the
published IFEval rows carry every argument name with null for the unused ones). A missing or malformed
argument, an unknown instruction id or an unknown argument name is `invalid_input` naming it.

What is checked: the ANSWER REGION only (`rlvr_verifiers.reasoning`: after the last `</think>`; an unclosed
reasoning block is `parse_error`), so a constraint met inside the reasoning is never paid. An empty (or
whitespace-only) answer follows no instruction, as in IFEval.

Modes (IFEval's two accuracies): `strict` checks the answer as written; `loose` counts an instruction as
followed when it holds for any of eight variants: the answer, with its first line removed, with its last line
removed, with both removed, and each of these four with every `*` deleted (IFEval's upper bound, which forgives
a preamble like "Sure, here it is:" and markdown emphasis).
Reward: `all` (default) pays 1 when every instruction is followed, else 0; `fraction` pays the fraction of
instructions followed (status `ok` when at least one is). Per row: the ground truth's `mode` / `reward`;
per item: `item.extra["ifeval_mode"]` / `item.extra["ifeval_reward"]`; else IFEvalConfig's defaults.

The families (IFEval's 25 instruction ids, with the semantics of its reference checker, lm-eval's
`tasks/ifeval/instructions.py`, against which tests/verifiers/test_ifeval_oracle.py measures agreement):
- keywords: `existence` (keywords: [str], each present, case-insensitive substring), `frequency` (keyword,
  frequency, relation: case-insensitive occurrences), `forbidden_words` (forbidden_words: [str], none as a
  whole word), `letter_frequency` (letter, let_frequency, let_relation; case-insensitive count).
- length_constraints: `number_words` (num_words, relation; words = runs of \\w), `number_sentences`
  (num_sentences, relation; see `count_sentences`), `number_paragraphs` (num_paragraphs: exactly that many
  non-empty parts between `***` dividers; rlvr's optional `divider` names another, e.g. RLVR-IFeval's
  `* * *`), `nth_paragraph_first_word` (num_paragraphs, nth_paragraph, first_word: paragraphs split by a
  blank line).
- detectable_format: `json_format` (the whole answer parses as JSON, a ``` fence allowed), `title` (a
  `<<title>>` on one line), `multiple_sections` (section_spliter, num_sections: at least that many `SPLITTER N`
  marks), `number_bullet_lists` (num_bullets: exactly that many `* ` / `- ` lines),
  `number_highlighted_sections` (num_highlights: at least that many `*text*` / `**text**` spans),
  `constrained_response` (one of "My answer is yes." / "... no." / "... maybe."; rlvr's optional `options`
  lists others, as RLVR-IFeval's rows do).
- detectable_content: `number_placeholders` (num_placeholders: at least that many `[...]`), `postscript`
  (postscript_marker: "P.S.", "P.P.S" or another marker, case-insensitive, anywhere).
- change_case: `english_lowercase` / `english_capital` (no upper- / lower-case letter, and detected English),
  `capital_word_frequency` (capital_frequency, capital_relation: all-capital words).
- startend: `end_checker` (end_phrase: the answer ends with it, case-insensitive, a closing `"` ignored),
  `quotation` (wrapped in double quotes).
- punctuation: `no_comma`. combination: `repeat_prompt` (prompt_to_repeat: the answer starts with it,
  case-insensitive), `two_responses` (exactly two different non-empty parts around `******`).
- language: `response_language` (language: ISO 639-1 code, by `langdetect` with a fixed seed on the first
  10,000 characters, as langdetect reads them).
Relations: IFEval's "less than" and "at least", plus "at most", "exactly" and "around" (|count - N| <= the
argument `tolerance`, default max(1, round(N / 10))) for RLVR-IFeval's rows (`rlvr data ifeval`).

Where rlvr is deliberately stricter than the reference checker (adjudicated, no false accept; each is
listed with its case in tests/verifiers/test_ifeval_oracle.py):
- Language detection that finds no language (langdetect raises: no letters) fails the language and case
  checks; the reference counts such an answer as following them ("instruction is followed").
- Keywords, keyword frequency, section splitters and postscript markers are literal text, never regular
  expressions (the reference passes them to `re` unescaped: a keyword `c++` would crash it, `a.b` matches
  `axb`).
- Sentences are counted by rlvr's own rule (`count_sentences`), not by nltk's punkt model: punkt needs a data
  download that an offline verifier node cannot make, so the number_sentences family has no oracle here.

Cost: every check is linear in the answer's length (no backtracking regular expressions: the bullet, title,
placeholder and postscript scans that IFEval writes as regexes with quadratic worst cases are hand-written
scans with the same result), and loose mode runs them on eight variants. Pure Python plus `langdetect` (in
rlvr's verifier-side dependencies); no torch, no verl.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlvr_verifiers import reasoning
from rlvr_verifiers.base import INVALID_INPUT, OK, WRONG, Item, Verdict
from rlvr_verifiers.registry import Verifier, register

STRICT, LOOSE = "strict", "loose"
ALL, FRACTION = "all", "fraction"
RELATIONS = ("less than", "at least", "at most", "exactly", "around")
CONSTRAINED_RESPONSES = ("My answer is yes.", "My answer is no.", "My answer is maybe.")
LANGDETECT_MAX_CHARS = 10_000  # langdetect reads no further (Detector.max_text_length)


@dataclass
class IFEvalConfig:
    mode: str = field(
        default=STRICT,
        metadata={
            "help": "strict: check the answer as written; loose: IFEval's upper bound, an instruction counts "
            "as followed if it holds with the first and/or last line removed and/or every * deleted. "
            "A row's ground-truth `mode` or item.extra['ifeval_mode'] overrides it."
        },
    )
    reward: str = field(
        default=ALL,
        metadata={
            "help": "all: pay 1 only when every instruction of the row is followed (IFEval's prompt-level "
            "accuracy); fraction: pay the fraction followed (instruction-level). A row's ground-truth "
            "`reward` or item.extra['ifeval_reward'] overrides it."
        },
    )

    def __post_init__(self) -> None:
        _check_choice("mode", self.mode, (STRICT, LOOSE))
        _check_choice("reward", self.reward, (ALL, FRACTION))


def _check_choice(what: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"ifeval {what} must be one of {', '.join(allowed)}, got {value!r}")
    return value


class BadArguments(ValueError):
    """An instruction's arguments are missing or malformed (-> invalid_input)."""


# ---- argument readers -------------------------------------------------------------------------------


def _int(args: dict[str, Any], key: str, minimum: int = 0) -> int:
    value = args.get(key)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise BadArguments(f"argument {key!r} must be an integer >= {minimum}, got {value!r}")
    return value


def _str(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise BadArguments(f"argument {key!r} must be a non-empty string, got {value!r}")
    return value.strip()


def _str_list(args: dict[str, Any], key: str) -> list[str]:
    value = args.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise BadArguments(f"argument {key!r} must be a non-empty list of non-empty strings, got {value!r}")
    return [v.strip() for v in value]


def _relation(args: dict[str, Any], key: str, n: int) -> Callable[[int], bool]:
    relation = args.get(key)
    if relation not in RELATIONS:
        raise BadArguments(f"argument {key!r} must be one of {', '.join(RELATIONS)}, got {relation!r}")
    if relation == "less than":
        return lambda count: count < n
    if relation == "at least":
        return lambda count: count >= n
    if relation == "at most":
        return lambda count: count <= n
    if relation == "exactly":
        return lambda count: count == n
    tolerance = args.get("tolerance", max(1, round(n / 10)))
    if not isinstance(tolerance, int) or isinstance(tolerance, bool) or tolerance < 0:
        raise BadArguments(f"argument 'tolerance' must be an integer >= 0, got {tolerance!r}")
    return lambda count: abs(count - n) <= tolerance


# ---- counting helpers (all linear) ------------------------------------------------------------------

_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs mt capt cpt lt col gen sgt rev gov sen rep fig no vol approx dept est inc ltd "
    "co corp jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_CLOSERS = "\"')]}\u201d\u2019"


_UNICODE_WORD_RE: re.Pattern[str] | None = None


def _unicode_word_re() -> re.Pattern[str]:
    """Unicode word characters as the `regex` engine's \\w has them (what nltk >= 3.10 tokenizes with):
    letters, letter-numbers, decimal digits, combining marks, connector punctuation, the join controls and
    the alphabetic symbols (circled / squared Latin letters). Python's `re` \\w differs: it splits a
    Kannada or Hindi word at every vowel sign, which would inflate a word count (an `at least N words`
    answer paid for a third of the words). Built once per process (~0.3 s)."""
    global _UNICODE_WORD_RE
    if _UNICODE_WORD_RE is None:
        import sys
        import unicodedata

        def word(cp: int) -> bool:
            if cp > sys.maxunicode:
                return False
            char = chr(cp)
            category = unicodedata.category(char)
            if category[0] in "LM" or category in ("Nd", "Nl", "Pc") or cp in (0x200C, 0x200D):
                return True
            name = unicodedata.name(char, "") if category == "So" else ""
            return "LATIN" in name and ("CIRCLED" in name or "SQUARED" in name)

        ranges, start = [], None
        for cp in range(sys.maxunicode + 2):
            inside = word(cp)
            if inside and start is None:
                start = cp
            elif not inside and start is not None:
                ranges.append(f"{re.escape(chr(start))}-{re.escape(chr(cp - 1))}")
                start = None
        _UNICODE_WORD_RE = re.compile("[" + "".join(ranges) + "]+")
    return _UNICODE_WORD_RE


def count_words(text: str) -> int:
    """Runs of word characters (IFEval: nltk's RegexpTokenizer(r"\\w+"), whose nltk >= 3.10 matches with
    the `regex` engine: combining marks belong to the word, see `_unicode_word_re`)."""
    return sum(1 for _ in _unicode_word_re().finditer(text))


def count_sentences(text: str) -> int:
    """Sentences: segments holding a letter or digit, ended by a run of `.`, `!` or `?` (closing quotes and
    brackets may follow) that stands before whitespace or the end of the text. A single `.` does not end a
    sentence after a known abbreviation (Mr, Dr, e.g. ...), an initial (one letter) or a token with an inner
    dot, nor before a word starting in lower case. One linear pass."""
    n = len(text)
    count = 0
    seen_alnum = False
    token_start = 0
    i = 0
    while i < n:
        ch = text[i]
        if ch.isspace():
            token_start = i + 1
            i += 1
            continue
        if ch not in ".!?":
            if ch.isalnum():
                seen_alnum = True
            i += 1
            continue
        j = i
        while j < n and text[j] in ".!?":
            j += 1
        k = j
        while k < n and text[k] in _CLOSERS:
            k += 1
        if k < n and not text[k].isspace():
            i = k  # e.g. "3.14", "a.b": not a boundary; the rest of the token is scanned normally
            continue
        boundary = True
        if j - i == 1 and ch == ".":
            token = text[token_start:i].lstrip("\"'([{\u201c\u2018").lower()
            if token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha()) or "." in token:
                boundary = False
            else:
                m = k
                while m < n and text[m].isspace():
                    m += 1
                if m < n and text[m].islower():
                    boundary = False
        if boundary and seen_alnum:
            count += 1
            seen_alnum = False
        i = k
    return count + (1 if seen_alnum else 0)


def _line_starts_scan(text: str, marker: str) -> int:
    """IFEval's `re.findall(r"^\\s*<marker>.*$", text, re.M)` count for marker "*" (followed by a non-*
    character, which may be a newline) or "-", without the regex's quadratic backtracking on whitespace."""
    n = len(text)
    count = 0
    pos = 0
    while pos < n:
        k = pos
        while k < n and text[k].isspace():
            k += 1
        if k < n and text[k] == marker and (marker != "*" or (k + 1 < n and text[k + 1] != "*")):
            count += 1
            body = k + 2 if marker == "*" else k + 1
            end = text.find("\n", body) if body < n else -1
            if end < 0:
                break
            pos = end + 1
            continue
        nl = text.find("\n", k)
        if nl < 0:
            break
        pos = nl + 1
    return count


def count_bullets(text: str) -> int:
    return _line_starts_scan(text, "*") + _line_starts_scan(text, "-")


_HIGHLIGHT_RE = re.compile(r"\*[^\n\*]*\*")
_DOUBLE_HIGHLIGHT_RE = re.compile(r"\*\*[^\n\*]*\*\*")


def count_highlights(text: str) -> int:
    count = sum(1 for m in _HIGHLIGHT_RE.finditer(text) if m.group(0).strip("*").strip())
    return count + sum(
        1
        for m in _DOUBLE_HIGHLIGHT_RE.finditer(text)
        if m.group(0).removeprefix("**").removesuffix("**").strip()
    )


def count_placeholders(text: str) -> int:
    """`[...]` spans within one line (IFEval: re.findall(r"\\[.*?\\]")), scanned without backtracking."""
    count = 0
    for line in text.split("\n"):
        start = line.find("[")
        while start >= 0:
            close = line.find("]", start + 1)
            if close < 0:
                break
            count += 1
            start = line.find("[", close + 1)
    return count


def has_title(text: str) -> bool:
    """A `<<title>>` with a non-blank title on one line (IFEval: re.findall(r"<<[^\\n]+>>"), greedy)."""
    for line in text.split("\n"):
        start = line.find("<<")
        if start < 0:
            continue
        end = line.rfind(">>")
        if end >= start + 3 and line[start : end + 2].lstrip("<").rstrip(">").strip():
            return True
    return False


def count_paragraphs(text: str, divider: str = "***") -> int | None:
    """Parts between dividers (`***`); None when an inner part is empty (IFEval: not followed)."""
    parts = re.split(r"\s?" + re.escape(divider) + r"\s?", text)
    count = len(parts)
    for index, part in enumerate(parts):
        if not part.strip():
            if index in (0, len(parts) - 1):
                count -= 1
            else:
                return None
    return count


def count_sections(text: str, splitter: str) -> int:
    return len(re.split(r"\s?" + re.escape(splitter) + r"\s?\d+\s?", text)) - 1


def count_capital_words(text: str) -> int:
    """All-capital words: whitespace- and apostrophe-separated tokens whose cased letters are all upper case
    (nltk's word_tokenize splits DON'T into DO + N'T, counted alike here as DON + T)."""
    return sum(1 for token in re.findall(r"[^\s']+", text) if token.isupper())


def is_json(text: str) -> bool:
    value = (
        text.strip()
        .removeprefix("```json")
        .removeprefix("```Json")
        .removeprefix("```JSON")
        .removeprefix("```")
        .removesuffix("```")
        .strip()
    )
    try:
        json.loads(value)
    except (ValueError, RecursionError):
        return False
    return True


def has_postscript(text: str, marker: str) -> bool:
    lower = text.lower()
    if marker == "P.P.S":
        return re.search(r"p\.\s?p\.\s?s", lower) is not None
    if marker == "P.S.":
        return re.search(r"p\.\s?s\.", lower) is not None
    return marker.lower() in lower


def two_responses(text: str) -> bool:
    valid = []
    parts = text.split("******")
    for index, part in enumerate(parts):
        if not part.strip():
            if index not in (0, len(parts) - 1):
                return False
        else:
            valid.append(part)
    return len(valid) == 2 and valid[0].strip() != valid[1].strip()


def nth_paragraph_first_word(text: str, num_paragraphs: int, nth: int, first_word: str) -> bool:
    paragraphs = text.split("\n\n")
    count = sum(1 for p in paragraphs if p.strip())
    if nth > count:
        return False
    paragraph = paragraphs[nth - 1].strip()
    if not paragraph:
        return False
    word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
    found = ""
    for letter in word:
        if letter in ".,?!'\"":
            break
        found += letter.lower()
    return count == num_paragraphs and found == first_word.lower()


# ---- language ---------------------------------------------------------------------------------------

_LANG_LOCK = threading.Lock()


def detect_language(text: str) -> str | None:
    """ISO 639-1 code by langdetect (seed 0: deterministic), or None when it finds no language."""
    from langdetect import DetectorFactory, detect
    from langdetect.lang_detect_exception import LangDetectException

    with _LANG_LOCK:  # the seed and the lazily loaded profiles are module globals
        DetectorFactory.seed = 0
        try:
            return detect(text[:LANGDETECT_MAX_CHARS])
        except LangDetectException:
            return None


# ---- the instructions ---------------------------------------------------------------------------------

Check = Callable[[str], bool]


def _build(instruction_id: str, args: dict[str, Any]) -> Check:
    """The check for one instruction with its arguments; BadArguments / KeyError when they are wrong."""
    a = args
    if instruction_id == "keywords:existence":
        words = [w.lower() for w in _str_list(a, "keywords")]
        return lambda t: all(w in t.lower() for w in words)
    if instruction_id == "keywords:frequency":
        keyword, n = _str(a, "keyword").lower(), _int(a, "frequency")
        ok = _relation(a, "relation", n)
        return lambda t: ok(t.lower().count(keyword))
    if instruction_id == "keywords:forbidden_words":
        patterns = [
            re.compile(r"\b" + re.escape(w) + r"\b", re.IGNORECASE) for w in _str_list(a, "forbidden_words")
        ]
        return lambda t: not any(p.search(t) for p in patterns)
    if instruction_id == "keywords:letter_frequency":
        letter, n = _str(a, "letter").lower(), _int(a, "let_frequency")
        if len(letter) != 1:
            raise BadArguments(f"argument 'letter' must be one character, got {letter!r}")
        ok = _relation(a, "let_relation", n)
        return lambda t: ok(t.lower().count(letter))
    if instruction_id == "language:response_language":
        language = _str(a, "language")
        return lambda t: detect_language(t) == language
    if instruction_id == "length_constraints:number_sentences":
        ok = _relation(a, "relation", _int(a, "num_sentences"))
        return lambda t: ok(count_sentences(t))
    if instruction_id == "length_constraints:number_words":
        ok = _relation(a, "relation", _int(a, "num_words"))
        return lambda t: ok(count_words(t))
    if instruction_id == "length_constraints:number_paragraphs":
        n, divider = _int(a, "num_paragraphs", 1), a.get("divider", "***")
        if not isinstance(divider, str) or not divider.strip():
            raise BadArguments(f"argument 'divider' must be a non-empty string, got {divider!r}")
        return lambda t: count_paragraphs(t, divider.strip()) == n
    if instruction_id == "length_constraints:nth_paragraph_first_word":
        n, nth, word = _int(a, "num_paragraphs", 1), _int(a, "nth_paragraph", 1), _str(a, "first_word")
        if nth > n:
            raise BadArguments(f"nth_paragraph={nth} is beyond num_paragraphs={n}")
        return lambda t: nth_paragraph_first_word(t, n, nth, word)
    if instruction_id == "detectable_content:number_placeholders":
        n = _int(a, "num_placeholders")
        return lambda t: count_placeholders(t) >= n
    if instruction_id == "detectable_content:postscript":
        marker = _str(a, "postscript_marker")
        return lambda t: has_postscript(t, marker)
    if instruction_id == "detectable_format:number_bullet_lists":
        n = _int(a, "num_bullets")
        return lambda t: count_bullets(t) == n
    if instruction_id == "detectable_format:constrained_response":
        options = _str_list(a, "options") if "options" in a else list(CONSTRAINED_RESPONSES)
        return lambda t: any(option in t.strip() for option in options)
    if instruction_id == "detectable_format:number_highlighted_sections":
        n = _int(a, "num_highlights")
        return lambda t: count_highlights(t) >= n
    if instruction_id == "detectable_format:multiple_sections":
        splitter, n = _str(a, "section_spliter"), _int(a, "num_sections")
        return lambda t: count_sections(t, splitter) >= n
    if instruction_id == "detectable_format:json_format":
        return is_json
    if instruction_id == "detectable_format:title":
        return has_title
    if instruction_id == "combination:two_responses":
        return two_responses
    if instruction_id == "combination:repeat_prompt":
        prompt = _str(a, "prompt_to_repeat").lower()
        return lambda t: t.strip().lower().startswith(prompt)
    if instruction_id == "startend:end_checker":
        phrase = _str(a, "end_phrase").lower()
        return lambda t: t.strip().strip('"').lower().endswith(phrase)
    if instruction_id == "change_case:capital_word_frequency":
        ok = _relation(a, "capital_relation", _int(a, "capital_frequency"))
        return lambda t: ok(count_capital_words(t))
    if instruction_id == "change_case:english_capital":
        return lambda t: t.isupper() and detect_language(t) == "en"
    if instruction_id == "change_case:english_lowercase":
        return lambda t: t.islower() and detect_language(t) == "en"
    if instruction_id == "punctuation:no_comma":
        return lambda t: "," not in t
    if instruction_id == "startend:quotation":
        return lambda t: len(t.strip()) > 1 and t.strip()[0] == '"' and t.strip()[-1] == '"'
    raise KeyError(instruction_id)


# The argument names each instruction accepts (an unknown name is invalid_input, so a typo never passes).
ARGUMENTS: dict[str, tuple[str, ...]] = {
    "keywords:existence": ("keywords",),
    "keywords:frequency": ("keyword", "frequency", "relation", "tolerance"),
    "keywords:forbidden_words": ("forbidden_words",),
    "keywords:letter_frequency": ("letter", "let_frequency", "let_relation", "tolerance"),
    "language:response_language": ("language",),
    "length_constraints:number_sentences": ("num_sentences", "relation", "tolerance"),
    "length_constraints:number_words": ("num_words", "relation", "tolerance"),
    "length_constraints:number_paragraphs": ("num_paragraphs", "divider"),
    "length_constraints:nth_paragraph_first_word": ("num_paragraphs", "nth_paragraph", "first_word"),
    "detectable_content:number_placeholders": ("num_placeholders",),
    "detectable_content:postscript": ("postscript_marker",),
    "detectable_format:number_bullet_lists": ("num_bullets",),
    "detectable_format:constrained_response": ("options",),
    "detectable_format:number_highlighted_sections": ("num_highlights",),
    "detectable_format:multiple_sections": ("section_spliter", "num_sections"),
    "detectable_format:json_format": (),
    "detectable_format:title": (),
    "combination:two_responses": (),
    "combination:repeat_prompt": ("prompt_to_repeat",),
    "startend:end_checker": ("end_phrase",),
    "change_case:capital_word_frequency": ("capital_frequency", "capital_relation", "tolerance"),
    "change_case:english_capital": (),
    "change_case:english_lowercase": (),
    "punctuation:no_comma": (),
    "startend:quotation": (),
}
INSTRUCTION_IDS = tuple(ARGUMENTS)


def build_check(instruction_id: str, args: dict[str, Any] | None) -> Check:
    """The check for one instruction; ValueError naming the problem for an unknown id or bad arguments."""
    if instruction_id not in ARGUMENTS:
        raise ValueError(
            f"unknown ifeval instruction {instruction_id!r}; known: {', '.join(INSTRUCTION_IDS)}"
        )
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ValueError(f"{instruction_id}: kwargs must be an object, got {type(args).__name__}")
    args = {k: v for k, v in args.items() if v is not None}
    unknown = sorted(set(args) - set(ARGUMENTS[instruction_id]))
    if unknown:
        raise ValueError(
            f"{instruction_id}: unknown argument(s) {unknown}; it takes {list(ARGUMENTS[instruction_id]) or 'none'}"
        )
    try:
        return _build(instruction_id, args)
    except BadArguments as exc:
        raise ValueError(f"{instruction_id}: {exc}") from None


def parse_ground_truth(gt: Any) -> tuple[list[tuple[str, Check]], str | None, str | None]:
    """[(instruction id, check)], row mode, row reward; ValueError naming the problem."""
    if isinstance(gt, str | bytes):
        try:
            gt = json.loads(gt)
        except json.JSONDecodeError as exc:
            raise ValueError(f"ifeval ground truth is not JSON: {exc.msg}") from None
    if not isinstance(gt, dict):
        raise ValueError('ifeval ground truth must be {"instruction_id_list": [...], "kwargs": [...]}')
    ids, kwargs = gt.get("instruction_id_list"), gt.get("kwargs")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"ifeval instruction_id_list must be a non-empty list of strings, got {ids!r}")
    if kwargs is None:
        kwargs = [{} for _ in ids]
    if not isinstance(kwargs, list) or len(kwargs) != len(ids):
        raise ValueError(
            f"ifeval kwargs must be a list of {len(ids)} objects (one per instruction), got {kwargs!r}"
        )
    mode, reward = gt.get("mode"), gt.get("reward")
    if mode is not None:
        _check_choice("mode", mode, (STRICT, LOOSE))
    if reward is not None:
        _check_choice("reward", reward, (ALL, FRACTION))
    return [(i, build_check(i, a)) for i, a in zip(ids, kwargs, strict=True)], mode, reward


def loose_variants(response: str) -> list[str]:
    """IFEval's eight loose variants (lm-eval's test_instruction_following_loose), in its order."""
    lines = response.split("\n")
    remove_first = "\n".join(lines[1:]).strip()
    remove_last = "\n".join(lines[:-1]).strip()
    remove_both = "\n".join(lines[1:-1]).strip()
    return [
        response,
        response.replace("*", ""),
        remove_first,
        remove_last,
        remove_both,
        remove_first.replace("*", ""),
        remove_last.replace("*", ""),
        remove_both.replace("*", ""),
    ]


def followed(response: str, checks: list[tuple[str, Check]], mode: str) -> list[bool]:
    """Per instruction: is it followed (in `mode`)? An empty variant follows nothing."""
    variants = [response] if mode == STRICT else loose_variants(response)
    variants = [v for v in dict.fromkeys(variants) if v.strip()]  # each distinct variant checked once
    return [any(check(v) for v in variants) for _, check in checks]


@register("ifeval")
class IFEvalVerifier(Verifier):
    name = "ifeval"

    def __init__(self, config: IFEvalConfig | None = None) -> None:
        self.config = config or IFEvalConfig()

    def verify(self, item: Item) -> Verdict:
        try:
            checks, row_mode, row_reward = parse_ground_truth(item.ground_truth)
            extra = item.extra or {}
            mode = _check_choice(
                "mode", extra.get("ifeval_mode", row_mode or self.config.mode), (STRICT, LOOSE)
            )
            reward = _check_choice(
                "reward", extra.get("ifeval_reward", row_reward or self.config.reward), (ALL, FRACTION)
            )
        except ValueError as exc:
            return Verdict(0.0, INVALID_INPUT, str(exc)[:300])
        region = reasoning.answer_region(item)  # never read inside the reasoning block (reasoning.py)
        if isinstance(region, Verdict):
            return region
        results = followed(region, checks, mode)
        n_ok = sum(results)
        failed = [instruction for (instruction, _), ok in zip(checks, results, strict=True) if not ok]
        metrics = {"ifeval_followed_fraction": n_ok / len(results)}
        detail = f"{mode}: {n_ok}/{len(results)} followed" + (
            f"; not followed: {', '.join(failed)}" if failed else ""
        )
        if n_ok == len(results):
            return Verdict(1.0, OK, detail, metrics)
        if reward == FRACTION and n_ok:
            return Verdict(n_ok / len(results), OK, detail, metrics)
        return Verdict(0.0, WRONG, detail, metrics)
