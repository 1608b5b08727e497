"""Extraction for the `math` verifier: the final answer in a response (boxes, answer markers, answer tags, JSON
answer fields, truth values, the final statement). The rules are in rlvr_verifiers/math.py's module doc.
Every scan is linear in the response (no backtracking regex over the whole text).
"""

from __future__ import annotations

import json
import re

from rlvr_verifiers.math_text import (
    _UNIT_WORD_RE,
    Unclosed,
    _braced,
    _restore_control_escapes,
    _strip_math_delims,
    _unwrap_text,
)

_BOX_RE = re.compile(r"\\(?:boxed|fbox|framebox)(?![a-zA-Z])\s*")


# Answer markers: "answer is X", "Answer: X", "answer = X", GSM8K's "#### X", and "Answer $X$" /
# "Final Answer \[X\]" at the start of a line (math right after the word).
_ANSWER_RE = re.compile(
    r"\banswer\b[ \t]*(?:\([^()\n]{0,40}\)[ \t]*)?(?:\*\*)?\s*(?:is\b|:|=)"
    r"|(?:^|\n)[ \t>#*]*(?:final\s+)?answer\b(?:\*\*)?[ \t]*(?=\$|\\\[|\\\()"
    r"|(?:^|\n)[ \t*]*A[ \t]*:(?=[ \t]*(?:\$|\\\(|-?\d))"
    r"|####",
    re.IGNORECASE,
)


# Display math ($$, \[) may span lines; inline math ($, \() may not.
_MATH_SEGMENT_RE = re.compile(
    r"\$\$(.+?)\$\$|\$((?:[^$\\\n]|\\.)+)\$|\\\[(.+?)\\\]|\\\(([^\n]+?)\\\)", re.DOTALL
)


_BARE_MATH_RE = re.compile(r"^[\d\s+\-*/^().,;{}\[\]\\a-zA-Z=<>|!_:'&]*$")


# Splits prose into sentences: math segments and brace groups are skipped whole; a sentence ends at
# '.', '!' or '?' followed by whitespace (or the end), or at a newline. "3.5" does not end one.
_SENTENCE_SCAN_RE = re.compile(
    r"\$\$.*?\$\$|(?<!\\)\$(?:[^$\\\n]|\\.)*\$|\\\([^\n]*?\\\)|\\\[.*?\\\]|\{[^{}\n]*\}|[.!?](?=\s|$)|\n",
    re.DOTALL,
)


# Closing sentences that carry no answer (Minerva's "I hope it is correct.").
_FILLER_RE = re.compile(
    r"\s*(?:i hope (?:it|this|that|my answer) (?:is|was) (?:correct|right|helpful)|(?:i )?hope (?:this|it|that) helps"
    r"|good luck|let me know\b[^.!?]*|thank you|thanks|feel free\b[^.!?]*|please\b[^.!?]*"
    r"|(?:this|the|my|that|which) (?:final )?(?:answer|solution|result) is (?:correct|right|verified|confirmed|final)"
    r"|(?:the )?end(?: of (?:the )?(?:solution|answer))?)\s*[.!]?\s*",
    re.IGNORECASE,
)


# Words that make a prose statement a hedge or a qualification: no answer is read from it.
_HEDGE_RE = re.compile(
    r"\b(?:or|nor|maybe|perhaps|possibly|probably|either|unless|except|otherwise|approximately|roughly|"
    r"nearly|almost|guess|unsure|unclear|if|assuming)\b",
    re.IGNORECASE,
)


_NEGATION_RE = re.compile(r"\b(?:not|no|never|nor)\b|n't\b", re.IGNORECASE)


# A negation right before the value ("is not 5", "isn't exactly 5").
_NEGATED_BEFORE_RE = re.compile(r"(?:\b(?:not|never)\b|n't)\s*(?:[A-Za-z]+\s+)?$", re.IGNORECASE)


# A value in prose: a math segment, or a bare number (thousands commas, decimals, percent).
_CANDIDATE_RE = re.compile(
    r"\$\$(.+?)\$\$|(?<!\\)\$((?:[^$\\]|\\.)+)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]"
    r"|(?<![\w.\\^_/])([-\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+(?![\d.]))?(?:\s*(?:\\?%|percent\b))?)",
    re.DOTALL,
)


_CLAUSE_RE = re.compile(r";")


_CONSEQUENCE_RE = re.compile(r"\b(?:so|thus|therefore|hence|consequently)\b,?", re.IGNORECASE)


_JUSTIFICATION_RE = re.compile(r"[,;]?\s+\b(?:since|because|as|given|whereas|due to|for)\b", re.IGNORECASE)


_LIST_GAP_RE = re.compile(r"\s*(?:,|;|&|,?\s*\band\b)\s*", re.IGNORECASE)


# Text right before a value that makes it an operand, not a result ("3 times 4", "20% of 50").
_OPERAND_BEFORE_RE = re.compile(
    r"(?:[-+*/\u00d7\u00f7^]|\\times|\\cdot|\\div|\btimes|\bplus|\bminus|\bdivided by|\bmultiplied by|\bover"
    r"|\bout of|\bper|(?:\d|%|percent)\s+of)\s*$",
    re.IGNORECASE,
)


_QUALIFIER_AFTER = {
    "less",
    "more",
    "than",
    "fewer",
    "greater",
    "smaller",
    "larger",
    "times",
    "per",
    "of",
    "out",
    "plus",
    "minus",
    "over",
    "under",
    "at",
    "least",
    "most",
    "each",
    "divided",
}


# An approximation sign right before the value ("\frac{22}{3} \approx 7"): the value is rounded, not stated.
_APPROX_BEFORE_RE = re.compile(r"(?:\\approx|\u2248|\\sim|~)\s*$")
_QUALIFIER_ANYWHERE = _QUALIFIER_AFTER - {"of", "out", "at", "each", "per", "over", "under"}
# Between two boxes that form one answer only connectives may stand ("\boxed{2} and \boxed{3}").
_BOX_GAP_WORDS = {"and", "or", "for", "part", "parts", "also", "respectively"}


_BOX_GAP_DENY = {
    "no",
    "not",
    "wait",
    "but",
    "actually",
    "instead",
    "wrong",
    "incorrect",
    "correct",
    "so",
    "therefore",
    "thus",
    "hence",
    "answer",
    "final",
    "is",
    "was",
    "then",
    "than",
    "check",
    "recheck",
    "mistake",
    "oops",
    "hmm",
    "earlier",
    "previous",
    "before",
    "correction",
}


MAX_JOINED_BOXES = 20


MAX_PHRASE_CHARS = 3000


class Ambiguous(Exception):
    """The response states more than one final answer, or qualifies it: it is not paid (parse_error)."""


class MultipleCandidates(Ambiguous):
    """A prose answer without a final-answer marker states several values ("the square root of 64 is 8, and
    the cube root is 4"): none is paid (`ambiguous_answer`)."""


def _box_content(text: str, i: int, limit: int | None = None) -> tuple[str, int]:
    if i < len(text) and text[i] == "{":
        return _braced(text, i, limit)
    m = re.compile(r"[^\s$]+").match(text, i)
    if not m or (limit is not None and m.end() > limit):
        raise Unclosed
    return m.group(0), m.end()


def _boxes_join(gap: str) -> bool:
    """Whether the text between two boxes only connects them ("\\quad \\text{and} \\quad", ", ")."""
    # The next box's own label ("x = \boxed{2} or x = \boxed{-3}") is not between the two answers.
    gap = re.sub(r"(?:[A-Za-z](?:_\{?\w+\}?)?|\\[a-zA-Z]+(?:_\{?\w+\}?)?)\s*=\s*\$?\s*$", "", gap)
    if len(gap) > 80 or re.search(r"\d|=", gap):
        return False
    words = [
        w.lower()
        for w in re.findall(
            r"[A-Za-z]+",
            _unwrap_text(gap).replace("\\quad", " ").replace("\\qquad", " ").replace("\\text", " "),
        )
    ]
    words = [w for w in words if w not in ("quad", "qquad", "text", "mbox", "textrm")]
    if any(w in _BOX_GAP_DENY for w in words):
        return False
    other = [w for w in words if w not in _BOX_GAP_WORDS and len(w) > 1]
    return len(words) <= 6 and (not other or (len(other) == 1 and ("and" in words or "or" in words)))


def _boxed_with_end(text: str) -> tuple[str, int] | None:
    """The final boxed answer and where it ends. Boxes joined only by connectives form one answer
    (a list, in order); otherwise the last box wins. None if there is no box; Unclosed if the last one
    never closes."""
    matches = list(_BOX_RE.finditer(text))  # linear scan
    if not matches:
        return None
    last = matches[-1]
    content, end = _box_content(text, last.end())
    parts = [content]
    later_start = last.start()
    for m in reversed(matches[-1 - MAX_JOINED_BOXES : -1]):
        try:
            c, e = _box_content(text, m.end(), later_start)
        except Unclosed:
            break  # it encloses the later box (\boxed{\boxed{7}}) or is malformed
        if not _boxes_join(text[e:later_start]):
            break
        parts.append(c)
        later_start = m.start()
    if len(parts) == 1:
        return content, end
    return ", ".join(p.strip() for p in reversed(parts)), end


def last_boxed(text: str) -> str | None:
    """Content of the final `\\boxed{}` answer (see `_boxed_with_end`); None if there is none."""
    found = _boxed_with_end(text)
    return None if found is None else found[0]


def _sentences(text: str) -> list[str]:
    out, start = [], 0
    for m in _SENTENCE_SCAN_RE.finditer(text):
        if len(m.group()) == 1 and m.group() in ".!?\n":
            out.append(text[start : m.start()])
            start = m.end()
    out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


def _first_sentence(text: str) -> str:
    for m in _SENTENCE_SCAN_RE.finditer(text):
        if len(m.group()) == 1 and m.group() in ".!?\n":
            return text[: m.start()]
    return text


def _drop_currency_dollars(s: str) -> str:
    # "$18 every day": a dollar sign before a number that no second '$' closes is currency, not math.
    return _CURRENCY_RE.sub("", s)


# A '$' before a number that prose, punctuation, an operator or the end follows ("$18 a day", "$1,250.",
# "$10,200 + $255"), not a closing '$' ("$14{,}916$" is math).
_CURRENCY_RE = re.compile(
    r"(?<![\\$])\$(?=(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d,.]*\$)"
    r"(?:$|[,;!?.](?:\s|$)|\s+[A-Za-z]{2,}|\s*[-+=*/\u00d7]\s|\s*\)))"
)


def _strip_parenthetical(s: str) -> str:
    # "15 (the number of apples)": a trailing remark in words (no digits) is not part of the answer.
    m = re.fullmatch(r"(.*?\S)\s*\(([^()]*)\)\s*\.?", s, re.DOTALL)
    if m and re.search(r"[A-Za-z]{2,}", m.group(2)) and not re.search(r"\d|\\", m.group(2)):
        return m.group(1)
    return s


def _is_pure_math(s: str) -> bool:
    # An environment's name (`\\begin{pmatrix}`) is no prose word.
    words = re.findall(r"(?<![\\a-zA-Z])[a-zA-Z]{4,}", _ENV_NAME_RE.sub(" ", _unwrap_text(s)))
    return bool(_BARE_MATH_RE.match(s)) and not words


_ENV_NAME_RE = re.compile(r"\\(?:begin|end)\{[a-zA-Z*]+\}")


def _statement_value(sentence: str, no_marker: bool = False) -> str | None:
    """The answer stated by one prose sentence: its last value ("there are 12 distinct sequences" ->
    12), with a trailing unit in words; a list when values are joined by "and"/commas. None when the
    sentence hedges or qualifies (or, not, maybe, approximately...), or the last value is an operand
    ("3 times 4")."""
    s = _drop_currency_dollars(sentence).strip().rstrip(" .")
    # The clause that states the result: after the last ";" and the last "so/thus/therefore/hence" when
    # a value follows it; then without a justification after the value ("5, since 2 + 4 = 6").
    masked = _CANDIDATE_RE.sub(lambda m: "x" * len(m.group()), s)  # connectives inside math don't count
    for pattern in (_CLAUSE_RE, _CONSEQUENCE_RE):
        cut = None
        for m in pattern.finditer(masked):
            cut = m
        if cut and _CANDIDATE_RE.search(s[cut.end() :]):
            s, masked = s[cut.end() :].strip(), masked[cut.end() :].strip()
    because = _JUSTIFICATION_RE.search(masked)
    if because and _CANDIDATE_RE.search(s[: because.start()]):
        s = s[: because.start()].rstrip(" ,;")
    if no_marker:
        _check_single_statement(s)
    outside = _CANDIDATE_RE.sub(" ", s)
    if _HEDGE_RE.search(outside):
        return None
    cands = list(_CANDIDATE_RE.finditer(s))
    if not cands:
        return None
    _check_not_operands(s, cands)
    k = len(cands) - 1
    while k > 0 and _LIST_GAP_RE.fullmatch(s[cands[k - 1].end() : cands[k].start()]):
        k -= 1
    before = s[: cands[k].start()]
    if (
        _OPERAND_BEFORE_RE.search(before)
        or _NEGATED_BEFORE_RE.search(before)
        or _APPROX_BEFORE_RE.search(before)
    ):
        return None
    after = re.sub(r"^[$\u20ac\u00a3\u00a5]", "", s[cands[-1].end() :].strip()).strip()  # "1,000.99$"
    if re.search(r"[\d$\\=<>]", after) or _NEGATION_RE.search(s[cands[k].start() :]):
        return None
    words = re.findall(r"[A-Za-z]+", after)
    # A qualifier right after the value ("5 of them", "5 more", "3 times") or a comparison anywhere after it
    # ("8 packs more than needed"); a preposition after a noun is not one ("8 packs of gum").
    if words and (
        words[0].lower() in _QUALIFIER_AFTER or any(w.lower() in _QUALIFIER_ANYWHERE for w in words)
    ):
        return None
    values = [next(g for g in c.groups() if g).strip() for c in cands[k:]]
    if (
        len(values) == 2
        and s[cands[k].end() : cands[k + 1].start()] == ","
        and re.fullmatch(r"-?\d+", values[0])
        and re.fullmatch(r"\d{1,2}|\d{4,}", values[1])
    ):
        # "3,45" (no space, not a thousands group) stays one token: a decimal comma, or the list 3, 45,
        # as `check` reads a whole answer "3,45" (never 345).
        values = [values[0] + "," + values[1]]
    value = ", ".join(values)
    if words and _UNIT_WORD_RE.match(after):  # "125 miles": a known unit stays with its value
        value += r" \text{ " + " ".join(words[:2]) + "}"
    return value


def _check_not_operands(s: str, cands: list[re.Match]) -> None:
    """Operands are no answer ("add 9 to 9", "9 added to 9"): when the last two values are the operands of an operation they are
    two quantities (even when they are the same number), not a result: `MultipleCandidates`."""
    if len(cands) < 2 or not _OPERAND_JOIN_RE.fullmatch(s[cands[-2].end() : cands[-1].start()]):
        return
    joined = s[cands[-2].end() : cands[-1].start()].strip()
    if _OPERATION_BEFORE_RE.search(s[: cands[-2].start()]) or " " in joined:
        raise MultipleCandidates(f"the statement names the operands of an operation: {s[:80]!r}")


def _answer_phrase(text: str, pos: int) -> str | None:
    """The answer after a marker at `pos`: a math segment (with any segments joined to it by "and" or
    commas), else the rest of that sentence. Ambiguous when more math follows in the same sentence."""
    rest = text[pos : pos + MAX_PHRASE_CHARS].lstrip(" \t\r\n:*").lstrip()
    rest = _drop_currency_dollars(re.sub(r'^\\?["\u201c`]', "", rest))  # a quoted answer: "\"$12$\""
    truth = _truth_value(_first_sentence(rest) if not re.match(r"\s*\w+,", rest) else rest[:400])
    if truth is not None:
        return truth
    m = _MATH_SEGMENT_RE.match(rest)
    if m:
        values = [next(g for g in m.groups() if g).strip()]
        end = m.end()
        while True:
            gap = _LIST_GAP_RE.match(rest, end)
            nxt = _MATH_SEGMENT_RE.match(rest, gap.end()) if gap else None
            if not nxt:
                break
            values.append(next(g for g in nxt.groups() if g).strip())
            end = nxt.end()
        tail = _strip_parenthetical("x" + _first_sentence(rest[end:]))[1:]
        unit_tail = re.fullmatch(r"\s*[A-Za-z][A-Za-z ]{0,30}\^\{?[23]\}?\s*", tail or "")
        if (
            (re.search(r"\d|\$|\\\(|\\\[", tail) and not unit_tail)
            or _HEDGE_RE.search(tail)
            or _NEGATION_RE.search(tail)
        ):
            raise Ambiguous(f"more after the answer: {rest[: end + 40]!r}")
        unit = re.fullmatch(r"\s*([A-Za-z][A-Za-z ]{0,30})(\^\{?[23]\}?)?\s*", tail or "")
        if unit:  # "$125$ miles", "$\frac12$ cm^2": a unit in words
            values[-1] += r" \text{ " + unit.group(1).strip() + "}" + (unit.group(2) or "")
        return ", ".join(values)
    sentence = _strip_parenthetical(_first_sentence(rest).strip()).strip().rstrip(" .").strip("*").strip()
    if not sentence:
        return None
    if _is_pure_math(sentence):
        if _NEGATION_RE.search(sentence) or _HEDGE_RE.search(re.sub(r"\bor\b", "", sentence)):
            raise Ambiguous(f"the answer is qualified: {sentence[:80]!r}")
        return sentence
    value = _statement_value(sentence)
    if value is None:
        if not _CANDIDATE_RE.search(_drop_currency_dollars(sentence)):
            return None  # "Final answer: see above": no value stated here
        raise Ambiguous(f"the answer statement is hedged or qualified: {sentence[:80]!r}")
    return value


_LEADING_CONSEQUENCE_RE = re.compile(
    r"(?:and\s+)?(?:so|thus|therefore|hence|consequently)\b\s*,?\s*(?=\S)", re.IGNORECASE
)


# An arithmetic instruction or restatement naming its operands ("add 9 to 9", "multiply 3 by 4",
# "subtract 2 from 7", "the sum of 9 and 9", "9 added to 9"): the operation word before the first operand.
_OPERATION_BEFORE_RE = re.compile(
    r"\b(?:add|adds|adding|subtract|subtracts|subtracting|multiply|multiplies|multiplying|divide|divides|"
    r"dividing|take|takes|taking|sum|product|difference|quotient|total)\b(?:\s+(?:of|between|together))?"
    r"(?:\s+(?:the\s+)?(?:numbers?|values?))?\s*$",
    re.IGNORECASE,
)


# What joins two operands of such an operation ("9 to 9", "3 by 4", "7 from 2", "12 into 3", "9 and 9").
_OPERAND_JOIN_RE = re.compile(
    r"\s+(?:to|from|by|into|and|with|away\s+from|added\s+to|subtracted\s+from|taken\s+from)\s+",
    re.IGNORECASE,
)


def _final_statement(text: str) -> str | None:
    """The answer of a response's last statement (no box, no marker): the last non-empty line, less
    closing filler ("I hope it is correct."); a math block or bare math line is taken whole, a prose
    sentence gives its stated value (`_statement_value`)."""
    lines = [ln.strip() for ln in text[-20_000:].rstrip().splitlines()[-4:] if ln.strip()]
    while lines:
        line = lines[-1]
        if line in ("$$", "\\]") and len(lines) >= 2:
            return _strip_math_delims(lines[-2]).rstrip(" .") or None
        sentences = _sentences(line[-5000:])
        while sentences and _FILLER_RE.fullmatch(sentences[-1]):
            sentences.pop()
        if sentences:
            break
        lines.pop()
    if not lines:
        return None
    last = sentences[-1].strip().rstrip(" .")
    # "So, 9 + 0 = 9": a leading consequence word is prose, not part of the math ("So" is too short to
    # count as a prose word below, and "So, 9 + 0 = 9" whole would be read as the list "So, 9").
    lead = _LEADING_CONSEQUENCE_RE.match(last)
    if lead and _is_pure_math(last[lead.end() :]):
        last = last[lead.end() :]
    stripped = _strip_math_delims(last)
    if stripped != last and not re.search(r"(?<!\\)\$|\\\(|\\\[", stripped):
        return stripped.rstrip(" .") or None
    if _is_pure_math(last) and "$" not in last:
        if "\\" not in last:  # "We add 9 to 9" has no word of four letters, yet names two operands
            _check_not_operands(last, list(_CANDIDATE_RE.finditer(last)))
        return last or None
    return _statement_value(last, no_marker=True)


# A value a clause states: after a copula or `=` ("... is 8", "... are 3", "= 40").
_STATED_RE = re.compile(r"(?:\b(?:is|are|was|were|equals|equal to|gives|be)\b|=)\s*$", re.IGNORECASE)


_RESTATED_RE = re.compile(r"\b(?:which|that|this)\s+(?:is|equals)\s*$|\bi\.e\.,?\s*$", re.IGNORECASE)


def _check_single_statement(sentence: str) -> None:
    """A prose final statement with no answer marker that states two DIFFERENT values, each in its own clause
    ("the square root of 64 is 8, and the cube root of 64 is 4"), names candidates, not an answer."""
    s = sentence
    stated: list[str] = []
    last_end = 0
    for m in _CANDIDATE_RE.finditer(s[:MAX_PHRASE_CHARS]):
        before = s[max(0, m.start() - 24) : m.start()]
        if _STATED_RE.search(before):
            # "10, which is 1,000.99" restates the earlier value; "2^{10} = 1024" (no word between) is one
            # computation whose result is the later value.
            if stated and (
                _RESTATED_RE.search(before) or not re.search(r"[A-Za-z]{2,}", s[last_end : m.start()])
            ):
                stated.pop()
            stated.append(next(g for g in m.groups() if g).strip())
            last_end = m.end()
    if len(set(stated)) >= 2:
        raise MultipleCandidates(f"the final statement names several values: {sentence[:80]!r}")


# A new turn after the answer: a few-shot model writing the next exercise, or a hallucinated dialogue turn.
_NEXT_PROBLEM_RE = re.compile(
    r"\n[ \t]*(?:#+[ \t]*|\*\*)?(?:Problem|Question|Human|User|Q)[ \t]*(?:\d+[ \t]*)?(?:\*\*)?:",
    re.IGNORECASE,
)


_END_TOKEN_RE = re.compile(r"<\|(?:im_start|im_end|endoftext|eot_id|end_of_text|end)\|>|</s>")


# An answer tag, written loosely (`<answer>`, `< answer >`, `</ answer>`): group 1 is the slash of a closing one.
_ANSWER_TAG_RE = re.compile(r"<[ \t]*(/?)[ \t]*answer[ \t]*>", re.IGNORECASE)


# A JSON answer field ("answer": ..., "final_answer": ...); the value is decoded by the JSON decoder.
_JSON_ANSWER_RE = re.compile(r'"(?:final[_ ]?)?answer"\s*:\s*', re.IGNORECASE)


# An answer label written inside the math (`\text{Answer: } 5`, `\textbf{Final Answer:} 5`, `Answer: 5`).
_ANSWER_LABEL_RE = re.compile(
    r"^\s*(?:\\(?:text|textbf|mathrm|textit)\s*\{\s*(?:final\s+)?answer\s*:?\s*\}\s*:?|(?:final\s+)?answer\s*:)\s*",
    re.IGNORECASE,
)


# A truth value as the whole answer ("True.", "No, the coin is tails up", "**Yes**").
_TRUTH_RE = re.compile(
    r"[*\"'`\s]*(true|false|yes|no)[*\"'`]*\s*(?:$|[.!][*\"'`]*\s*$|[,;:.]\s+(?P<rest>.*))", re.I | re.S
)


MAX_TAGS = 10_000  # answer tags read per response; more is not an answer (parse_error)


def _answer_tag_region(text: str) -> str | None:
    """The text the last answer tag encloses: the content of the last `<answer>...</answer>` block, or after an
    `<answer>` that never closes when a final box follows it. None when there is no answer tag. One linear scan
    of the tags (no backtracking). Raises Ambiguous on an unclosed tag without a box, or nested tags."""
    tags = []
    for m in _ANSWER_TAG_RE.finditer(text):
        tags.append(m)
        if len(tags) > MAX_TAGS:
            raise Ambiguous("too many answer tags")
    if not tags:
        return None
    last = tags[-1]
    if not last.group(1):  # an opening tag is the last one: it never closes
        after = text[last.end() :]
        if _BOX_RE.search(after):
            return after
        raise Ambiguous("an <answer> tag is never closed")
    opening = None
    for k in range(len(tags) - 2, -1, -1):
        if not tags[k].group(1):
            opening = tags[k]
            if k > 0 and not tags[k - 1].group(1):
                raise Ambiguous("nested <answer> tags")
            break
    if opening is None:  # a closing tag without an opening one: what precedes it is the answer region
        return text[: last.start()]
    return text[opening.end() : last.start()]


def _json_answer(text: str) -> str | None:
    """The value of the last "answer" field of a JSON object in the response (text around it allowed)."""
    if "{" not in text:
        return None
    last = None
    for m in _JSON_ANSWER_RE.finditer(text):
        last = m
    if last is None:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text, last.end())
    except ValueError:
        return None
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _truth_value(phrase: str) -> str | None:
    """`True`/`False`/`Yes`/`No` when that word is the whole answer, or leads it followed only by its
    explanation ("False, portfolio 2 is not the optimal one"); None when another truth word follows (a hedge)."""
    m = _TRUTH_RE.match(phrase[:400])
    if not m:
        return None
    rest = m.group("rest") or ""
    if re.search(r"\b(?:true|false|yes|no)\b", rest, re.IGNORECASE):
        return None
    return m.group(1).capitalize()


def _strip_trailing_filler(text: str) -> str:
    """The response without closing lines that are only filler ("This answer is correct." repeated)."""
    end = len(text)
    for _ in range(200):  # bounded: filler lines, each inspected once
        stripped = text[:end].rstrip()
        start = stripped.rfind("\n") + 1
        line = stripped[start:].strip()
        if not line or len(line) > 300:
            break
        sentences = _sentences(line)
        if not sentences or not all(_FILLER_RE.fullmatch(x) for x in sentences):
            break
        end = start
    return text[:end]


def extract_answer(text: str, _depth: int = 0) -> str | None:
    """The final answer in a response (see the module doc), or None. Raises Unclosed / Ambiguous."""
    found = _extract(text, _depth)
    if found is not None:
        found = _ANSWER_LABEL_RE.sub("", found, count=1)  # `\text{Answer: } 5` inside the math is 5
    return found


def _extract(text: str, _depth: int) -> str | None:
    text = _restore_control_escapes(text)
    m = _END_TOKEN_RE.search(text)
    if m and text[: m.start()].strip():
        text = text[: m.start()]  # a chat template's end/turn token: what follows is not the response
    m = _NEXT_PROBLEM_RE.search(text)
    if m and (_BOX_RE.search(text, 0, m.start()) or _ANSWER_RE.search(text, 0, m.start())):
        text = text[: m.start()]  # a few-shot model went on to write the next "Problem:" after answering
    if _depth < 2:
        # R1-Zero style `<answer>...</answer>` (loosely written tags too): the last tagged block is the answer
        # region; then a JSON object's "answer" field.
        region = _answer_tag_region(text)
        if region is not None:
            region = region.strip()
            return extract_answer(region, _depth + 1) if region else None
        value = _json_answer(text)
        if value is not None:
            return extract_answer(value, _depth + 1) or value
    text = _strip_trailing_filler(text)
    truth = _truth_value(text) if len(text) < 400 else None
    if truth is not None:  # the whole region is a truth value ("True.", "No, the coin is tails up.")
        return truth
    boxed = _boxed_with_end(text)
    if boxed is not None:
        content, end = boxed
        # A "final answer" statement after the last box is the last answer-bearing statement: it wins
        # (hedged -> Ambiguous); one that states no value ("Final answer: see above") leaves the box.
        final = None
        for m in _ANSWER_RE.finditer(text, end):  # linear; only the last such statement is read
            if "final" in text[max(0, m.start() - 12) : m.end()].lower():
                final = m
        if final is not None:
            later = _answer_phrase(text, final.end())
            if later:
                return later
        return content
    last = None
    for match in _ANSWER_RE.finditer(text):
        last = match
    if last is not None:
        phrase = _answer_phrase(text, last.end())
        if phrase:
            return phrase
    return _final_statement(text)
