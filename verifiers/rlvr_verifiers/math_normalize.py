"""Normalisation for the `math` verifier: string-level cleanup of an extracted answer (delimiters, spacing,
units, percent, thousands separators, labels, unicode) before parsing (rules: rlvr_verifiers/math.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlvr_verifiers.math_parse import _GREEK
from rlvr_verifiers.math_text import _UNIT_WORDS, _restore_control_escapes, _strip_math_delims, _unwrap_text

_UNIT_TAIL_RE = re.compile(
    r"^(?P<body>.*?[\d}).])(?:\s*(?P<unit>(?:(?:square|sq\.?|cubic)\s+)?(?:" + _UNIT_WORDS + r"))"
    r"|\s+(?P<unit1>[mshlg]))"
    r"(?P<pow>\s*\^\s*\{?\d\}?)?\s*$",
    re.IGNORECASE,
)


_THOUSANDS_WHOLE_RE = re.compile(r"^[-+]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?$")


_THOUSANDS_SPACE_RE = re.compile(r"^[-+]?[1-9]\d{0,2}(?: \d{3})+(?:\.\d+)?$")


_CHOICE_RE = re.compile(r"^\(?([A-J])\)?$|^\(([a-j])\)$")


_CHOICE_RESPONSE_RE = re.compile(r"^\(?([A-J])(?:\)|\.|:|\s|$)|^\(([a-j])\)")


# A number written in a base: `10001_2`, `10001_{2}`, `A3F_{16}`.
_BASE_RE = re.compile(r"^([0-9A-Za-z]+)_\{?(\d{1,2})\}?$")


# Words that turn a trailing \text{...} into a qualifier, not a unit: "5 \text{ or more}" is not 5.
_NOT_UNIT_WORDS = {
    "or",
    "and",
    "more",
    "less",
    "at",
    "least",
    "most",
    "than",
    "not",
    "approximately",
    "about",
    "roughly",
    "nearly",
    "almost",
    "over",
    "under",
    "only",
    "exactly",
    "if",
    "when",
}


def _is_unit_text(text: str) -> bool:
    if not re.fullmatch(r"\s*[A-Za-z][A-Za-z\s./]*", text):
        return False  # digits, brackets, math: not a unit
    return not (set(text.lower().replace(".", " ").replace("/", " ").split()) & _NOT_UNIT_WORDS)


def _canon_unit(unit: str) -> str:
    u = re.sub(r"[\s\\{}^.]", "", unit.lower())
    u = {
        "%": "percent",
        "pct": "percent",
        "percentage": "percent",
        "deg": "degree",
        "circ": "degree",
        "°": "degree",
    }.get(u, u)
    # Plurals: "inches", "boxes" drop "es", every other plural "s" ("degrees" is "degree", not "degre").
    if len(u) > 3 and u.endswith(("ches", "shes", "xes", "sses")):
        return u[:-2]
    if len(u) > 2 and u.endswith("s") and not u.endswith("ss"):
        return u[:-1]
    return u


@dataclass
class Normalized:
    text: str  # the math/text part
    unit: str | None = None
    label: str | None = None


def normalize(raw: str) -> Normalized:
    s = _restore_control_escapes(raw).strip()
    s = _strip_math_delims(s)
    s = s.replace("\n", " ").replace("\u2212", "-")
    if "\\begin" not in s:  # "\\\\frac" (an escaped string pasted as LaTeX) is "\\frac"; not in matrices
        s = re.sub(r"\\\\(?=[a-zA-Z])", lambda _: "\\", s)
    s = re.sub(r"(\d)\s*\{\s*,\s*\}\s*(?=\d{3}(?!\d))", r"\1", s)
    s = re.sub(r"\(([^(),;]*;[^(),]*)\)", lambda m: "(" + m.group(1).replace(";", ",") + ")", s)
    # Thousands separators that are unambiguous typography, before spacing commands disappear.
    s = re.sub(r"(\d),\\!\s*(?=\d{3}(?!\d))", r"\1", s)
    s = re.sub(r"(\d)\{,\}(?=\d{3}(?!\d))", r"\1", s)
    s = re.sub(r"(\d)\\,(?=\d{3}(?!\d))", r"\1", s)
    s = re.sub(r"(\d)\\,(?=\d{3}(?!\d))", r"\1", s)
    for cmd in (
        "\\displaystyle",
        "\\textstyle",
        "\\scriptstyle",
        "\\left",
        "\\right",
        "\\bigl",
        "\\bigr",
        "\\Bigl",
        "\\Bigr",
        "\\big",
        "\\Big",
    ):
        s = re.sub(re.escape(cmd) + r"(?![a-zA-Z])", "", s)
    s = s.replace("\\!", "")
    s = re.sub(r"\\(?:dfrac|tfrac|cfrac)(?![a-zA-Z])", r"\\frac", s)
    s = re.sub(r"(?<!\\)\\(?:,|;|:|quad|qquad| )|~", " ", s)  # not the second half of a \\ row break
    s = s.replace("\\$", "").replace("\\lbrace", "\\{").replace("\\rbrace", "\\}")
    s = re.sub(r"\$", " ", s).strip()  # math delimiters left inside ("$1$ and $2$"); \$ is gone already
    s = s.replace("€", "").replace("£", "").replace("¥", "").replace("²", "^2").replace("³", "^3")
    for uni, tex in _UNICODE_MATH.items():
        if uni in s:
            s = s.replace(uni, tex)
    s = re.sub(r"(?<![a-zA-Z\\])infinity\b|(?<![a-zA-Z\\])inf\b", r"\\infty ", s)
    s = re.sub(r"\\mathrm\{e\}|\\mathrm e(?![a-zA-Z])", "e", s)
    s = re.sub(r"\\mathbb\s*\{?\s*R\s*\}?|ℝ|^\\R$", r"(-\\infty, \\infty)", s)  # the real line
    if "\\over" in s:
        s = _over_to_frac(s)
    s = _drop_membership(s)
    s = _drop_approximation(s)
    s = re.sub(r"\\(?:emptyset|varnothing)(?![a-zA-Z])|∅", "\\\\emptyset", s)
    unit = None
    # Degrees and percent.
    m = re.search(r"(?:\^\s*\{?\s*\\circ\s*\}?|°|\\degree(?![a-zA-Z]))\s*(?:\\text\{\s*[CF]\s*\})?\s*$", s)
    if m:
        s, unit = s[: m.start()], "degree"
    m = re.search(r"(?:\\%|%|\\text\{\s*\\?%\s*\})\s*$", s)
    if m:
        s, unit = s[: m.start()], "percent"
    s = s.strip()
    # A trailing \text{unit} after a value.
    m = re.search(r"\\(?:text|mbox|mathrm|textrm)\s*\{([^{}]*)\}\s*(\^\s*\{?\d\}?)?\s*$", s)
    if m and m.start() > 0 and re.search(r"[\d}).]\s*$", s[: m.start()]) and _is_unit_text(m.group(1)):
        unit = unit or _canon_unit(m.group(1) + (m.group(2) or ""))
        s = s[: m.start()].strip()
    s = _unwrap_text(s).strip()
    if s.endswith(".") and not re.search(r"\d\.$", s[-3:]) or re.search(r"[^\d]\.$", s):
        s = s[:-1].rstrip()
    m = _UNIT_TAIL_RE.match(s)
    if m and not re.search(
        r"[a-zA-Z]", m.group("body").replace("\\frac", "").replace("\\sqrt", "").replace("\\pi", "")
    ):
        unit = unit or _canon_unit((m.group("unit") or m.group("unit1")) + (m.group("pow") or ""))
        s = m.group("body").strip()
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"(?<=[\d}])\s*(?<!\\)\\$", "", s)  # a stray backslash after the value: "185\\"
    if s.endswith(".") and re.fullmatch(r"[-+]?\d+\.", s):
        s = s[:-1]
    if _THOUSANDS_WHOLE_RE.match(s):
        s = s.replace(",", "")
    elif _THOUSANDS_SPACE_RE.match(s):
        s = s.replace(" ", "")
    s = _LIST_WORD_RE.sub(", ", s).strip(" ,") if re.search(r"\b(?:and|or)\b", s) else s
    if ";" in s and "," not in s:
        s = s.replace(";", ",")
    label, s = _split_label(s)
    s = _NUMBER_WORDS.get(s.lower(), s)  # "five" (the whole answer a number word) is 5
    return Normalized(s, unit, label)


_NUMBER_WORDS = {
    w: str(k)
    for k, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}


_UNICODE_MATH = {
    "π": "\\pi ",
    "∞": "\\infty ",
    "×": "\\times ",
    "·": "\\cdot ",
    "≤": "\\le ",
    "≥": "\\ge ",
    "≠": "\\ne ",
    "∪": "\\cup ",
    "−": "-",
}


_EQ_SPLIT_RE = re.compile(r"(?<![<>!=\\])=(?!=)")


_LABEL_CMDS = {
    "frac",
    "angle",
    "measuredangle",
    "triangle",
    "overline",
    "cdot",
    "vert",
    "lvert",
    "rvert",
    "vec",
}


def _top_level_positions(s: str, pattern: re.Pattern[str]) -> list[re.Match[str]]:
    """Matches of `pattern` outside (), [], {} groups."""
    out, depth, pos = [], 0, 0
    for m in pattern.finditer(s):
        for c in s[pos : m.start()]:
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
        pos = m.start()
        if depth == 0:
            out.append(m)
    return out


_DERIVATIVE_RE = re.compile(
    r"\\frac\s*\{\s*(?:d|\\partial)\s*(?:\^\{?\d\}?)?\s*\}\s*\{\s*(?:d|\\partial)\s*[a-zA-Z]\s*(?:\^\{?\d\}?)?\s*\}"
)


def _label_of(lhs: str) -> str | None:
    """The canonical name when `lhs` names what is being given (`x`, `a_{37}`, `f(x)`, `(p,q)`, `AB`,
    `|AB|`, `A:B`, `\\frac{NO}{BO}`, `x+y`): letters, subscripts and operators, no numbers. None when
    `lhs` is an expression with numbers (`2x+z`, `7`), which makes the whole an equation."""
    t = lhs.strip()
    if not t or len(t) > 40:
        return None
    if _DERIVATIVE_RE.match(t):
        # `\\frac{d}{dx}(x^3) = 3x^2`: a derivative stated = its value names what is given (its
        # numbers are the function's, not an equation's).
        return re.sub(r"[\s{}]", "", t)
    core = re.sub(r"_\{[^{}]*\}|_\\?\w+|'|\^\{?\\prime\}?", "", t)
    if re.search(r"\d|[=<>]", core):
        return None
    cmds = re.findall(r"\\([a-zA-Z]+)", core)
    if any(c not in _GREEK and c not in _LABEL_CMDS for c in cmds):
        return None
    if not re.fullmatch(r"[A-Za-z\\{}()|:,+\-*/\s\[\]]*", core):
        return None
    if not (re.search(r"[A-Za-z]", re.sub(r"\\[a-zA-Z]+", "", core)) or any(c in _GREEK for c in cmds)):
        return None
    return re.sub(r"[\s{}]", "", t)


def _split_label(s: str) -> tuple[str | None, str]:
    """`NAME = value` -> (NAME, value); a chain `x = 5+5+1 = 11` -> (x, 11) (its value is the last
    part). Not for lists (`k = 45, n = 2`: each item keeps its own label) nor for equations whose left
    side is an expression with numbers (`2x+4y-3=0`)."""
    eqs = _top_level_positions(s, _EQ_SPLIT_RE)
    if not eqs or _top_level_positions(s, re.compile(r",")):
        return None, s
    if re.search(r"<|>|\\(?:le|ge|leq|geq|lt|gt|ne|neq)(?![a-zA-Z])", s):
        return None, s
    parts = (
        [s[: eqs[0].start()]]
        + [s[a.end() : b.start()] for a, b in zip(eqs, eqs[1:], strict=False)]
        + [s[eqs[-1].end() :]]
    )
    if any(not p.strip() for p in parts):
        return None, s
    label = _label_of(parts[0])
    if len(parts) == 2 and label is None:
        if not any(re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", "", p)) for p in parts):
            return None, parts[1].strip()  # a computation "2+3 = 5": its result
        return None, s
    return label, parts[-1].strip()


def _over_to_frac(s: str) -> str:
    """`{a \\over b}` -> `{\\frac{a}{b}}` (TeX's primitive fraction; its group is the enclosing braces)."""
    for _ in range(20):
        m = re.search(r"\\over(?![a-zA-Z])", s)
        if not m:
            break
        depth, i = 0, m.start() - 1
        while i >= 0:
            if s[i] == "}":
                depth += 1
            elif s[i] == "{":
                if depth == 0:
                    break
                depth -= 1
            i -= 1
        depth, j = 0, m.end()
        while j < len(s):
            if s[j] == "{":
                depth += 1
            elif s[j] == "}":
                if depth == 0:
                    break
                depth -= 1
            j += 1
        s = (
            s[: i + 1]
            + "\\frac{"
            + s[i + 1 : m.start()].strip()
            + "}{"
            + s[m.end() : j].strip()
            + "}"
            + s[j:]
        )
    return s


def _drop_membership(s: str) -> str:
    # "x \in [1, 2)": the variable is a label of the set it belongs to.
    m = re.match(
        r"\s*(?:[a-zA-Z](?:_\{?\w+\}?)?|\\[a-zA-Z]+|\([a-z](?:\s*,\s*[a-z])+\))\s*\\in(?![a-zA-Z])\s*", s
    )
    return s[m.end() :] if m and m.end() < len(s) else s


def _drop_approximation(s: str) -> str:
    """`\\frac13 \\approx 0.333` -> the exact value; `x \\approx 11` -> `x = 11`; `\\approx 11` -> 11."""
    m = re.search(r"\\approx(?![a-zA-Z])|≈", s)
    if not m:
        return s
    left, right = s[: m.start()].strip(), re.split(r"\\approx(?![a-zA-Z])|≈", s[m.end() :])[0].strip()
    if not left:
        return right
    if _label_of(left) is not None and not _EQ_SPLIT_RE.search(left):
        return f"{left} = {right}"
    return left


_LIST_WORD_RE = re.compile(r"\s*,?\s*(?<![\\a-zA-Z])(?:and|or)(?![a-zA-Z])\s*")
