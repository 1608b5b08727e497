r"""The `math` verifier: is the response's final answer equal to the reference answer?

Ground truth: the reference answer string (it may itself contain `\boxed{...}`; then its final boxed
answer is the reference, read as below; a whole solution without a box but with "#### X" or a
"final answer is X" statement gives that answer). Score 1.0 with status `ok` when equal, 0.0 otherwise. The bar is ZERO false
accepts: when equality cannot be established (unparseable, too complex, symbolic check timed out)
the answer is not paid.

Extraction (from the response). The final answer is the last answer-bearing statement; a response whose
final answer is ambiguous gets `parse_error`, never a guess.
- A chat template's end/turn token (`<|im_end|>`, `<|im_start|>`, `<|endoftext|>`, `<|eot_id|>`,
  `</s>`) ends the response, and so does a new "Problem:" / "Question:" line after an answer (a
  few-shot model writing the next exercise). R1-Zero `<answer>...</answer>`: the last tagged block is read (by these
  same rules); an `<answer>` that never closes is `parse_error`.
- Boxes: the LAST `\boxed{...}` / `\boxed {...}` / `\fbox{...}` / `\framebox{...}` wins (nested braces
  matched; `\boxed 5` takes the next token). If the last one is never closed (a truncated response) the
  verdict is `parse_error`, never an earlier box. Boxes joined ONLY by connectives form one answer, a
  list in order: `\boxed{(2,2)} \quad \text{and} \quad \boxed{(6,2)}` is `(2,2), (6,2)`, `\boxed{1},
  \boxed{2}` and `\boxed{1}\boxed{2}` are `1, 2`. Connectives: punctuation, spacing, math delimiters,
  `and` / `or` / `for part (a)`, and at most one other word when `and`/`or` is there (`\boxed{1} papers
  and \boxed{2} bins`) and the next box's own label (`x=\boxed{2} or x=\boxed{-3}` is `2, -3`);
  never a digit, another `=`, or a word like `wait`, `but`, `not`, `so`, `answer`.
  Anything else between two boxes makes the last box win (`\boxed{3}. Wait... \boxed{5}` is 5), so an
  intermediate box is never paid, and a list is never equal to one of its items (`\boxed{2} \boxed{4}`
  != 4). A "final answer" statement after the last box is the last answer-bearing statement and wins
  (`\boxed{255} ... Final Answer: The final answer is $10,455$.` is 10,455; a hedged one -> `parse_error`;
  one that states no value, "Final answer: see above", leaves the box).
- Else the last answer marker: "answer is X", "Answer: X", "answer = X", GSM8K's "#### X", or "Answer"
  / "Final Answer" at a line start followed directly by math (`Answer $9$`, `Answer \[9\]`). The
  answer is a math segment right after it (with further segments joined by "and"/commas: `$12$ and
  $13$`), else the rest of THAT SENTENCE (it ends at `.`/`!`/`?` followed by a space or the end, or a
  line break, outside math: `12,000,023. I hope it is correct.` is 12,000,023). Inline `$...$` /
  `\(...\)` never spans lines; `$$`/`\[` may. A trailing parenthetical remark in words is dropped
  (`5 (the remaining apples)`). A prose answer ("The largest $n$ is 34") gives its stated value (below).
  More math after the answer in the same sentence (`$3$ or $5$`, `$5$, not $6$`), or a qualified answer
  (not, maybe, approximately, if...), -> `parse_error`.
- Else the final statement: the last non-empty line, less closing filler sentences ("I hope it is
  correct.", "Good luck!", "Let me know..."), and in it the last sentence: a bare math line or a math
  block is taken whole; a prose sentence gives its stated value, read in its result clause (after the
  last `;` and the last "so/thus/therefore/hence" that a value follows; a justification after the
  value, ", since 2 + 4 = 6" / "because" / "as" / "for", is dropped): the last value in it (a math segment,
  or a number with thousands commas, decimals, `a/b`, a percent), with values joined to it by "and" /
  commas (`The roots are 2 and 3` is `2, 3`), and a known unit word after it (`125 miles`). No value is
  read (`parse_error`) when the sentence hedges (or, maybe, perhaps, either, approximately, if, unless,
  ...), negates the value (`not 16`, `isn't 7`, or any negation after it: `15, not 16`), or the value
  is an operand (`3 times 4`, `20% of 50`, `5 more than`). An earlier equation in the paragraph is never
  the answer (`Let $d = 90/n$ ... so there are 12 sequences.` is 12).
- A `$` before a number that no closing `$` follows (`$18 a day`, `$1,250.`) is currency, not math. A
  decimal comma in a prose value (`Total : 3,45 $ par article.`; no space after the comma, not a group
  of three) stays one token `3,45`, read as a whole answer `3,45` is (below).
- A response that is only a matrix (`\begin{pmatrix}1&0\\0&1\end{pmatrix}`, no delimiters) is that matrix.
- Else `parse_error`.

Normalisation
- `$`, `\(`, `\[`, `\left`, `\right`, `\displaystyle`, `\textstyle`, `\scriptstyle`, `\!`, spacing
  commands, a trailing period and `\dfrac`/`\tfrac`/`\cfrac` (-> `\frac`) are dropped; `{a \over b}` is
  `\frac{a}{b}`; `\text{}`/`\textnormal{}`/`\mathrm{}`/`\mbox{}`/`\textbf{}`/... are unwrapped
  (`\mathrm{e}` is e); `\$`, `€`, `£`, `¥` (currency) are dropped; `\mathbb{R}` is `(-\infty, \infty)`;
  a doubled backslash before a command (`\\frac`, an escaped string pasted as LaTeX) is one, outside
  matrices; a whole answer that is a number word up to twenty (`five`) is that number. A form feed,
  backspace, bell or vertical tab is the `\f`/`\b`/`\a`/`\v` it was before a non-raw string literal
  mangled it (`<FF>rac{1}{4}` is `\frac{1}{4}`); a tab stays whitespace (`<TAB>ext{13}` is not 13). A
  stray backslash after a value (`185\`) is dropped.
- A membership label is dropped: `x \in [0, 1)` is `[0, 1)`. Unicode `π ∞ × · ≤ ≥ ≠ ∪ −` and the words
  `infinity`/`inf` are their LaTeX commands.
- Decimal comma: `1,22` (one comma, not a thousands group) equals `1.22` written with a point; a leading
  `0,` is never a thousands group (`0,111` is 0.111, never 111).
- Approximations: `EXACT \approx DECIMAL` is EXACT (`\frac{\sqrt3}{3} \approx 0.577` is sqrt3/3, never
  0.577); `x \approx 11` is `x = 11`.
- Thousands separators: `1{,}000`, `1\,000`, `1,\!000` (digit groups of exactly three after the
  separator) are ALWAYS thousands separators, anywhere. A plain comma (`1,000`) or a space
  (`1 000`) is a thousands separator ONLY when the whole answer is one number of the form
  `d{1,3}(,ddd)+` (optionally signed, with decimals and a unit); everywhere else a comma separates list
  items. `1\,00` (a group not of three) is not a number (so not equal to 100).
- Units: a trailing `\text{...}`/`\mbox{...}`/`\mathrm{...}` after a number, a known unit word
  (cm, meters, inches, dollars, degrees, ...), `^\circ` (degrees) and `\%` (percent) are unit labels.
  The number is compared as written; units never convert (`30^\circ` != `\pi/6`, `1 m` != `100 cm`).
  If only one side carries a unit, it is ignored (`5\text{ cm}` == `5`); if both do and they differ
  (after lowercasing and dropping a plural "s"), the answer is wrong.
- Percent: `\%`, `percent`, `pct`, `percentage` are one unit label: `50\%` == `50` and `12.5\%` ==
  `12.5`, but `50\%` != `0.5` and `0.42` != `42` (values are never rescaled by 100).
- Labels: `NAME = value` is the value labelled NAME, against a bare reference or a reference with the
  same label: `x = 5` == `5`, `f(x) = 1` == `1`, `(p,q) = (3,2)` == `(3,2)`, `a_{37} = 19`, `|AB| = 1`,
  `A:B = 1`, `\frac{NO}{BO} = ...`, `x + y = 12` == `12`. A NAME is letters, subscripts, primes, greek
  letters, operators, parentheses: NO numbers (`f(2) = 5` is not the label f(2) for 5; `7 = 11a+c` and
  `2x+z = 1` are equations, never equal to `11a+c` or `1`). A chain `x = 5+5+1 = 11` is its last part
  (labelled x); a computation `2+3 = 5` (no letters) is its result. Labels that differ (`x = 5` vs `y =
  5`) are compared as equations (so they differ). A derivative stated equal to its value names it:
  `\frac{d}{dy}(y^3) = 3y^2` == `3y^2` (the derivative itself is never evaluated). In a list each item keeps its own label (`a_3 = 2,
  a_{37} = 19` vs `a_{37} = 19, a_3 = 2`: items match only with their own labels when both are
  labelled; a labelled item matches a bare one by value: `AB = 4, CD = 5` == `4, 5`).
- Multiple choice: when the reference is a single letter A-J (optionally `(B)`, `\text{(B)}`), the
  response must name the same letter (`B`, `(B)`, `(B) 42`, `B.`); the letter is compared, nothing else.
  A response naming a second option letter after the first (`A or B`, `(A), (C)`) is wrong (a hedge).

Equality
- Numbers are exact rationals (Python fractions): `0.5` == `\frac{1}{2}` == `2/4` (unreduced
  fractions are equal to reduced ones: value equality), `5.` == `5` == `5.0`, `1.0001` != `1`,
  `0.333` != `1/3`; repeating decimals only as `0.\overline{3}` (== 1/3); `0.333...` is not a number.
  `2\frac{1}{2}` with integer literals is the mixed number 5/2; `-2\frac12` == -5/2.
- Fast exact path: values that are polynomials (variables allowed, with negative powers) over the
  rationals in `\pi`, `e`, `i` (the imaginary unit, i^2 = -1) and square roots of rationals are put
  in a canonical form (square roots of distinct square-free integers are linearly independent) and
  compared exactly, in-process: `\frac{\sqrt{2}}{2}` == `\frac{1}{\sqrt{2}}`, `2\sqrt{3}` == `\sqrt{12}`,
  `\frac{1}{1+\sqrt2}` == `\sqrt2-1` (division by `p + q\sqrt{r}` or `p + qi` via the conjugate),
  `3^4` != `4^3` (`^` is always power, never XOR).
  `MathVerifier.quick` runs this path alone (no sympy) on short inputs, so the verifier pool can
  decide most items in its caller's process without a round trip; it returns a verdict only where
  `verify` would return the same one.
- Symbolic path, only when the fast path cannot represent a side (trig, logs, factorials of symbols,
  rational functions, nested radicals, division by other sums), entirely inside a worker process with
  a wall-clock kill (`rlvr_verifiers._symbolic`; default 3 s, `item.extra["symbolic_timeout_s"]`;
  works from any thread or process): a 40-digit mpmath evaluation at fixed points first rejects clearly
  different values; equal-looking values must then be PROVEN equal by sympy (expand / radsimp /
  simplify / minimal polynomial). Unproven -> wrong; past the bound -> `timeout`. No numeric
  tolerance ever accepts: a 50-digit decimal of sqrt(2) is not sqrt(2). One exact exception, a double's
  rendering: a bare decimal of 14-17 significant digits equals a RATIONAL reference that has no finite
  decimal when it is that value rounded half-up or truncated at its last digit (`0.0833333333333333`
  == 1/12; `0.0833333333333334`, `0.08333333333` (11 digits), `0.125000000000001` (1/8 has a finite
  decimal) and `3.14159265358979` (pi: no decimal is irrational) are not).
- Complexity bound before any evaluation: integer exponents above 10,000, results above 100,000 bits,
  more than 2,000 polynomial terms or 300,000 coefficient products, factorials above 2,000, nesting
  deeper than 150, answers longer than 2,000 characters are not evaluated: `9^{9^{9^9}}` and
  `2^{2^{30}}` return `timeout` ("too complex") within microseconds unless the two answers are
  literally identical. Responses of any size are scanned in linear time (megabytes in milliseconds).
- Known false reject: "The answer is $\frac12$, or $0.5$." (two math answers in one sentence are
  read as a possible hedge, so neither is taken).
- `^` followed by an unbraced multi-digit number (`2^10`) or `\sqrt` followed by one is ambiguous (LaTeX
  renders `2^10` as 2^1 0) and is only compared as text, except in plain-text math (no TeX command and
  no brace anywhere in that answer), where `2^10` is 1024 and `7w^13` is 7w^{13}, as a calculator reads
  it. `\frac12` follows LaTeX (== 1/2).
- Lists written in words: `6 \text{ and } 8`, `19, 46, and 82`, `x = 5 \text{ or } x = 6` are the
  lists `6, 8` etc. (so never equal to one of their items); `;` separates items when there is no comma
  (`-12;-11;-10`), and inside a tuple without commas (`(0;-2;6)` is `(0,-2,6)`); plain braces only group
  (`{2, 3, 5}` is the list `2, 3, 5`: LaTeX hides them). Labelled solution groups separated by `;`,
  each naming the same unknowns in the same order, are a list of tuples: `p=5,q=2;p=7,q=2` ==
  `(5,2),(7,2)` (!= `(2,5),(2,7)`).
- Collections: `\{...\}` sets and bare comma lists (`1, 2, 3`, as in "find all solutions") are
  unordered (each element matched once, sizes must agree; duplicates in a `\{\}` set collapse);
  `(a, b)` / `[a, b]` / `(a, b]` tuples and intervals are ordered AND their brackets must match
  (open vs closed ends matter; `(1, 2)` != `[1, 2]`); unions `A \cup B` are unordered. A bare list is
  not equal to a tuple. `\emptyset` == `\varnothing` == `\{\}`. `\infty`/`-\infty` are compared as
  signed infinities. A list of solution tuples that names one twice equals the list without the repeat
  when the reference names none twice (`(1,2),(2,1),(1,2)` == `(1,2),(2,1)`, but `(1,2),(1,2)` !=
  `(1,2),(2,1)`; numbers stay a multiset: `2, 2, 3` != `2, 3`). A union of finite sets is the set of
  their elements (`\{1,3\} \cup \{2,4\}` == `\{1,2,3,4\}`; a union with an interval is not).
  Interval, tuple and set readings never meet: `(1,3)` (an interval or a pair) != `\{1,3\}` and !=
  `{1,3}` (grouping braces: the list 1, 3), so neither reading can be paid for the other.
- `a \pm b` (one `\pm` or `\mp`, nothing added after `b` in its group) is the unordered pair `a + b,
  a - b`: `1 \pm \sqrt2` == `1+\sqrt2, 1-\sqrt2`; `\pm 2` == `2, -2`; `\frac{-1 \pm \sqrt{13}}{4}` is its
  two values; inside a set or list the pair counts as two items (`\{1 \pm \sqrt5, -2\}` has three).
- Matrices (`pmatrix`, `bmatrix`, `vmatrix`, `matrix`, `array`, also wrapped in `\left[ ... \right]` or
  parentheses) compare entry by entry, row by row (a trailing row break is ignored). Matrix arithmetic
  written as the answer is evaluated exactly, cell by cell: sums, differences, products in the written
  order (juxtaposed, `\cdot`, `\times`) and a number in front (`2\begin{pmatrix}...`), at most 4
  matrices of at most 100 cells; shapes must agree, and anything else around the matrices (`^T`,
  `\det`, a variable factor) leaves it unevaluated (never equal).
- Relations: `x > 3` == `3 < x`; `\le`/`\leq`/`\geq`/`\ne`/`\lt`/`\gt` are understood; sides compared
  as values. Two single relations of the same kind are equivalent when one is the other times a
  constant, decided exactly over the polynomial algebra (never numerically, never sympy): any nonzero
  constant for `=` and `!=` (`2x+4y-3=0` == `y = -x/2 + 3/4`, `34x+45y-20z+100=0` == its negation), a
  POSITIVE one for `<` / `<=` (`x < 1` == `-x > -1`, but != `x > 1` and != `-x < -1`). An equation is
  never equal to an inequality. A reference one-variable inequality (`-2 \le x \le 7`, `k \ge 2`,
  `0 < f(x) < 1`) equals the interval it describes in the response (`[-2, 7]`, `[2, \infty)`, `(0, 1)`;
  open/closed ends must match); a reference in interval notation asks for the interval, so an inequality
  answering it is not paid (as math-verify's default). Likewise a reference `lo <= |z| <= hi` (rational
  0 < lo < hi) equals `[-hi, -lo] \cup [lo, hi]` in the response, and `|z| < hi` equals `(-hi, hi)`.
- Anything that does not parse as math is compared as text (lowercased, whitespace collapsed, `\text`
  unwrapped): `\text{Monday}` == `monday`.
"""

from __future__ import annotations

import json
import math as _pymath
import re
import threading
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from rlvr_verifiers import reasoning
from rlvr_verifiers.base import (
    AMBIGUOUS_ANSWER,
    OK,
    PARSE_ERROR,
    RESPONSE_TOO_LARGE,
    TIMEOUT,
    WRONG,
    Item,
    Verdict,
)
from rlvr_verifiers.registry import Verifier, register

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
# A response longer than this is not read (`response_too_large`): every scan below is linear, this bounds the
# constant (4M characters is about 1M tokens, beyond any generation length a recipe sets).
MAX_RESPONSE_CHARS = 4_000_000


class ParseFailure(Exception):
    """The text is not math this parser understands (then it is compared as text)."""


class TooComplex(Exception):
    """The answer exceeds the complexity bound; it is not evaluated."""


class NeedsSymbolic(Exception):
    """The exact path cannot decide this pair and symbolic checks are off (`MathVerifier.quick`)."""


class NotAlgebraic(Exception):
    """The fast exact path cannot represent this value; the symbolic path must decide."""


# ==================================================================================================
# Extraction


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


class Unclosed(Exception):
    pass


class Ambiguous(Exception):
    """The response states more than one final answer, or qualifies it: it is not paid (parse_error)."""


class MultipleCandidates(Ambiguous):
    """A prose answer without a final-answer marker states several values ("the square root of 64 is 8, and
    the cube root is 4"): none is paid (`ambiguous_answer`)."""


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


def _strip_math_delims(s: str) -> str:
    s = s.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\[", "\\]"), ("\\(", "\\)")):
        if s.startswith(left) and s.endswith(right) and len(s) >= len(left) + len(right):
            s = s[len(left) : len(s) - len(right)].strip()
    return s


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
    k = len(cands) - 1
    while k > 0 and _LIST_GAP_RE.fullmatch(s[cands[k - 1].end() : cands[k].start()]):
        k -= 1
    if _OPERAND_BEFORE_RE.search(s[: cands[k].start()]) or _NEGATED_BEFORE_RE.search(s[: cands[k].start()]):
        return None
    after = re.sub(r"^[$\u20ac\u00a3\u00a5]", "", s[cands[-1].end() :].strip()).strip()  # "1,000.99$"
    if re.search(r"[\d$\\=<>]", after) or _NEGATION_RE.search(s[cands[k].start() :]):
        return None
    words = re.findall(r"[A-Za-z]+", after)
    if any(w.lower() in _QUALIFIER_AFTER for w in words):
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
    stripped = _strip_math_delims(last)
    if stripped != last and not re.search(r"(?<!\\)\$|\\\(|\\\[", stripped):
        return stripped.rstrip(" .") or None
    if _is_pure_math(last) and "$" not in last:
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
    for m in _CANDIDATE_RE.finditer(s[:MAX_PHRASE_CHARS]):
        before = s[max(0, m.start() - 24) : m.start()]
        if _STATED_RE.search(before):
            if stated and _RESTATED_RE.search(before):
                stated.pop()  # "10, which is 1,000.99": the later value restates the earlier one
            stated.append(next(g for g in m.groups() if g).strip())
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


# ==================================================================================================
# Normalisation (string level)

_UNIT_WORDS = (
    "cm|mm|km|meters?|metres?|centimeters?|millimeters?|kilometers?|inch|inches|in|ft|feet|foot|"
    "yards?|yd|miles?|mi|sq|square|units?|degrees?|deg|radians?|rad|dollars?|cents?|euros?|pounds?|"
    "lbs?|kg|grams?|kilograms?|seconds?|sec|minutes?|min|hours?|hrs?|days?|weeks?|months?|"
    "years?|liters?|litres?|ml|mph|km/h|gallons?|ounces?|oz|people|students|ways|times|"
    "percent|percentage|pct|points?|cups?|pages?|books?|marbles?|cookies|apples|tiles|yuan|rupees?|usd|"
    "mg|cm3|ml|kwh|kw|watts?|volts?|amps?|joules?|newtons?|hz|kph|m/s|km/s|cents?|tons?|tonnes?"
)
_UNIT_TAIL_RE = re.compile(
    r"^(?P<body>.*?[\d}).])(?:\s*(?P<unit>(?:(?:square|sq\.?|cubic)\s+)?(?:" + _UNIT_WORDS + r"))"
    r"|\s+(?P<unit1>[mshlg]))"
    r"(?P<pow>\s*\^\s*\{?\d\}?)?\s*$",
    re.IGNORECASE,
)
# A unit word at the start of the words after a value in prose ("125 miles long").
_UNIT_WORD_RE = re.compile(r"(?:(?:square|sq|cubic)\s+)?(?:" + _UNIT_WORDS + r")\b", re.IGNORECASE)
_TEXT_CMD_RE = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|textsf|mbox|mathrm|mathbf|mathit|mathsf|mathnormal|textup|operatorname|boldsymbol|bm)\s*\{"
)
_THOUSANDS_WHOLE_RE = re.compile(r"^[-+]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?$")
_THOUSANDS_SPACE_RE = re.compile(r"^[-+]?[1-9]\d{0,2}(?: \d{3})+(?:\.\d+)?$")
_CHOICE_RE = re.compile(r"^\(?([A-J])\)?$|^\(([a-j])\)$")
_CHOICE_RESPONSE_RE = re.compile(r"^\(?([A-J])(?:\)|\.|:|\s|$)|^\(([a-j])\)")
# A number written in a base: `10001_2`, `10001_{2}`, `A3F_{16}`.
_BASE_RE = re.compile(r"^([0-9A-Za-z]+)_\{?(\d{1,2})\}?$")


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


# ==================================================================================================
# Tokenizer and parser (a LaTeX / plain-text math subset) -> expression trees (nested lists)

_TOKEN_RE = re.compile(
    r"(?P<num>\d+\.\d*|\.\d+|\d+)"
    r"|(?P<cmd>\\[a-zA-Z]+|\\[{}|])"
    r"|(?P<op><=|>=|!=|\*\*|[-+*/^_(){}\[\],=<>|!])"
    r"|(?P<letter>[a-zA-Zα-ωΑ-Ω])"
    r"|(?P<ws>\s+)"
    r"|(?P<bad>.)",
    re.DOTALL,
)

_FUNCS = {
    "sin",
    "cos",
    "tan",
    "cot",
    "sec",
    "csc",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
    "ln",
    "log",
    "exp",
}
_GREEK = {
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
    "Gamma",
    "Delta",
    "Theta",
    "Lambda",
    "Xi",
    "Sigma",
    "Phi",
    "Psi",
    "Omega",
}
_REL = {
    "<": "<",
    ">": ">",
    "<=": "<=",
    ">=": ">=",
    "\\le": "<=",
    "\\leq": "<=",
    "\\ge": ">=",
    "\\geq": ">=",
    "\\lt": "<",
    "\\gt": ">",
    "\\ne": "!=",
    "\\neq": "!=",
    "!=": "!=",
    "\\leqslant": "<=",
    "\\geqslant": ">=",
}
_OPEN = {"(", "[", "{", "\\{"}
_CLOSE = {")", "]", "}", "\\}"}


def tokenize(s: str) -> list[tuple[str, str]]:
    tokens = []
    for m in _TOKEN_RE.finditer(s):
        kind = m.lastgroup
        if kind == "ws":
            continue
        if kind == "bad":
            raise ParseFailure(f"unexpected character {m.group()!r}")
        val = m.group()
        if kind == "cmd" and val in ("\\cdot", "\\times", "\\ast"):
            kind, val = "op", "*"
        elif kind == "cmd" and val == "\\div":
            kind, val = "op", "/"
        elif kind == "op" and val == "**":
            val = "^"
        tokens.append((kind, val))
    return tokens


def _num_node(text: str) -> list[Any]:
    if "." in text:
        return [
            "num",
            str(Fraction(text.rstrip(".") or "0") if text.endswith(".") else Fraction(text)),
            "dec",
        ]
    return ["num", text, "int"]


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.t = tokens
        self.i = 0
        self.depth = 0
        # Plain-text math (no TeX command, no brace anywhere): `2^10` is 2 to the 10th, as a calculator
        # or a programming language reads it. In TeX it renders 2^1 followed by 0, so with any TeX in the
        # answer an unbraced multi-digit exponent stays ambiguous.
        self.plain = not any(v.startswith("\\") or v in ("{", "}") for _, v in tokens)

    def peek(self, k: int = 0) -> tuple[str, str] | None:
        j = self.i + k
        return self.t[j] if j < len(self.t) else None

    def next(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise ParseFailure("unexpected end")
        self.i += 1
        return tok

    def expect(self, val: str) -> None:
        tok = self.next()
        if tok[1] != val:
            raise ParseFailure(f"expected {val!r}, got {tok[1]!r}")

    def at(self, *vals: str) -> bool:
        tok = self.peek()
        return tok is not None and tok[1] in vals

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TooComplex(f"nesting deeper than {MAX_DEPTH}")

    # expr := term (('+'|'-') term)*
    def expr(self) -> list[Any]:
        self.enter()
        node = self.term()
        while self.at("+", "-"):
            op = self.next()[1]
            rhs = self.term()
            node = ["add", node, rhs if op == "+" else ["neg", rhs]]
        self.depth -= 1
        return node

    def _starts_atom(self) -> bool:
        tok = self.peek()
        if tok is None:
            return False
        kind, val = tok
        if kind in ("num", "letter"):
            return True
        if kind == "cmd":
            return (
                val[1:] in _FUNCS
                or val[1:] in _GREEK
                or val in ("\\pi", "\\frac", "\\sqrt", "\\binom", "\\infty", "\\overline")
            )
        return val in ("(", "{") or (val == "|" and False)

    def term(self) -> list[Any]:
        node = self.unary()
        while True:
            if self.at("*", "/"):
                op = self.next()[1]
                rhs = self.unary()
                node = ["mul", node, rhs] if op == "*" else ["div", node, rhs]
            elif self._starts_atom():
                if self.peek()[0] == "num" and _ends_with_number(node):
                    raise ParseFailure("two numbers side by side")
                rhs = self.power()
                if (
                    node[0] == "num"
                    and node[2] == "int"
                    and rhs[0] == "frac"
                    and rhs[1][0] == "num"
                    and rhs[1][2] == "int"
                    and rhs[2][0] == "num"
                    and rhs[2][2] == "int"
                ):
                    node = ["add", node, rhs]  # mixed number 2\frac{1}{2}
                elif (
                    node[0] == "neg"
                    and node[1][0] == "num"
                    and node[1][2] == "int"
                    and rhs[0] == "frac"
                    and rhs[1][0] == "num"
                    and rhs[1][2] == "int"
                    and rhs[2][0] == "num"
                    and rhs[2][2] == "int"
                ):
                    node = ["neg", ["add", node[1], rhs]]
                else:
                    node = ["mul", node, rhs]
            else:
                return node

    def unary(self) -> list[Any]:
        if self.at("-"):
            self.next()
            self.enter()
            node = ["neg", self.unary()]
            self.depth -= 1
            return node
        if self.at("+"):
            self.next()
            return self.unary()
        return self.power()

    def power(self) -> list[Any]:
        base = self.postfix(self.atom())
        if self.at("^"):
            self.next()
            exp = self.script_arg()
            return ["pow", base, exp]
        return base

    def postfix(self, node: list[Any]) -> list[Any]:
        while self.at("!"):
            self.next()
            node = ["fact", node]
        return node

    def script_arg(self) -> list[Any]:
        """The argument of ^ : a braced group or a single token (multi-digit bare numbers are ambiguous)."""
        tok = self.peek()
        if tok is None:
            raise ParseFailure("dangling ^")
        if tok[1] == "{":
            return self.group()
        if tok[1] == "-":
            self.next()
            return ["neg", self.script_arg()]
        if tok[0] == "num":
            if len(tok[1]) > 1 and not (self.plain and tok[1].isdigit()):
                raise ParseFailure("ambiguous unbraced multi-digit exponent")
            self.next()
            return _num_node(tok[1])
        return self.atom()

    def latex_arg(self) -> list[Any]:
        """A LaTeX macro argument: a braced group or a single character/command."""
        tok = self.peek()
        if tok is None:
            raise ParseFailure("missing argument")
        if tok[1] == "{":
            return self.group()
        if tok[0] == "num":
            self.next()
            if len(tok[1]) > 1:
                self.t.insert(self.i, ("num", tok[1][1:]))
            return _num_node(tok[1][0])
        if tok[0] == "letter":
            self.next()
            return ["var", tok[1]]
        return self.atom()

    def group(self) -> list[Any]:
        self.expect("{")
        node = self.expr()
        self.expect("}")
        return node

    def atom(self) -> list[Any]:
        self.enter()
        try:
            return self._atom()
        finally:
            self.depth -= 1

    def _atom(self) -> list[Any]:
        kind, val = self.next()
        if kind == "num":
            node = _num_node(val)
            if self.at("\\overline") and node[2] == "dec":
                self.next()
                rep = self.group()
                if rep[0] != "num" or rep[2] != "int":
                    raise ParseFailure("bad repeating decimal")
                return ["num", str(_repeating(val, self.t[self.i - 2][1])), "dec"]
            return node
        if kind == "letter":
            name = val
            if self.at("_"):
                self.next()
                tok = self.next()
                if tok[1] == "{":
                    parts = []
                    while not self.at("}"):
                        parts.append(self.next()[1])
                    self.expect("}")
                    name += "_" + "".join(parts)
                else:
                    name += "_" + tok[1]
            return ["var", name]
        if val in ("(", "["):
            node = self.expr()
            self.expect(")" if val == "(" else "]")
            return node
        if val == "{":
            node = self.expr()
            self.expect("}")
            return node
        if val == "|":
            node = self.expr()
            self.expect("|")
            return ["abs", node]
        if kind == "cmd":
            name = val[1:]
            if name == "pi":
                return ["pi"]
            if name == "infty":
                return ["inf"]
            if name in _GREEK:
                return ["var", name]
            if name == "frac":
                num = self.latex_arg()
                den = self.latex_arg()
                return ["frac", num, den]
            if name == "binom":
                return ["binom", self.latex_arg(), self.latex_arg()]
            if name == "sqrt":
                if self.at("["):
                    self.next()
                    index = self.expr()
                    self.expect("]")
                    return ["root", index, self.sqrt_arg()]
                return ["sqrt", self.sqrt_arg()]
            if name in _FUNCS:
                return self.function(name)
        raise ParseFailure(f"unexpected {val!r}")

    def sqrt_arg(self) -> list[Any]:
        tok = self.peek()
        if tok is not None and tok[0] == "num" and len(tok[1]) > 1:
            raise ParseFailure("ambiguous unbraced multi-digit square root")
        return self.latex_arg()

    def function(self, name: str) -> list[Any]:
        base = None
        if name == "log" and self.at("_"):
            self.next()
            base = self.latex_arg()
        power = None
        if self.at("^"):
            self.next()
            power = self.script_arg()
        if self.at("(", "{"):
            arg = self.atom()
        else:
            arg = self.power()
            while self._starts_atom() and not (self.peek()[0] == "cmd" and self.peek()[1][1:] in _FUNCS):
                arg = ["mul", arg, self.power()]
        node = ["log", base, arg] if base is not None else ["fn", name, arg]
        return ["pow", node, power] if power is not None else node


def _ends_with_number(node: list[Any]) -> bool:
    while node[0] in ("mul", "add", "pow"):
        node = node[-1]
    return node[0] == "num" or (node[0] == "fact")


def _repeating(prefix: str, digits: str) -> Fraction:
    """0.1\\overline{6} -> 1/6: prefix '0.1' then repeating block '6'."""
    whole, _, frac_part = prefix.partition(".")
    k, r = len(frac_part), len(digits)
    non_rep = Fraction(int(whole or "0")) + (Fraction(int(frac_part), 10**k) if frac_part else 0)
    return non_rep + Fraction(int(digits), (10**r - 1) * 10**k)


def parse_expr(text: str) -> list[Any]:
    parser = _Parser(tokenize(text))
    node = parser.expr()
    if parser.peek() is not None:
        raise ParseFailure(f"unexpected {parser.peek()[1]!r}")
    return node


# ==================================================================================================
# Values: scalars, collections, relations


@dataclass
class Scalar:
    tree: list[Any]
    label: str | None = None


@dataclass
class Collection:
    kind: str  # "set" (unordered, deduplicated), "list" (unordered bare list), "seq" (ordered), "pm" (a \pm pair)
    items: list[Any]
    brackets: str = ""  # for seq: opening+closing bracket, e.g. "(]"


@dataclass
class Union:
    parts: list[Any]


@dataclass
class Relation:
    chain: list[Any] = field(default_factory=list)  # [expr, op, expr, op, expr ...] with < / <= only


@dataclass
class Text:
    text: str


def _split_top(tokens: list[tuple[str, str]], sep: set[str]) -> list[list[tuple[str, str]]]:
    parts, cur, depth = [], [], 0
    for tok in tokens:
        if tok[1] in _OPEN:
            depth += 1
        elif tok[1] in _CLOSE:
            depth -= 1
        if depth == 0 and tok[1] in sep:
            parts.append(cur)
            cur = []
        else:
            cur.append(tok)
    parts.append(cur)
    return parts


def _outer_group_closes_at_end(tokens: list[tuple[str, str]]) -> bool:
    depth = 0
    for k, tok in enumerate(tokens):
        if tok[1] in _OPEN:
            depth += 1
        elif tok[1] in _CLOSE:
            depth -= 1
            if depth == 0:
                return k == len(tokens) - 1
    return False


def _detok(tokens: list[tuple[str, str]]) -> str:
    return " ".join(v for _, v in tokens)


def parse_value(text: str, depth: int = 0) -> Any:
    if depth > 8:
        raise TooComplex("collections nested too deep")
    text = text.strip()
    wrapped = _WRAPPED_MATRIX_RE.fullmatch(text)  # \left[\begin{array}...\end{array}\right]
    if wrapped:
        text = wrapped.group(1)
    n_matrices = len(_MATRIX_LITERAL_RE.findall(text))
    if n_matrices > MAX_MATRIX_LITERALS:
        raise TooComplex(f"more than {MAX_MATRIX_LITERALS} matrices in one answer")
    if n_matrices > 1 or re.match(r"[^\\]*[\d)}]\s*\\begin\{", text):
        arithmetic = _matrix_arithmetic(text, depth)
        if arithmetic is not None:
            return arithmetic
    m = _MATRIX_RE.fullmatch(text)
    if m:
        rows = [r for r in re.split(r"\\\\", m.group(2)) if r.strip()]
        if not rows:
            raise ParseFailure("empty matrix")
        cells = [Collection("seq", [parse_value(c, depth + 1) for c in row.split("&")], "[]") for row in rows]
        return Collection("seq", cells, "M")
    if ";" in text and "," in text and "=" in text:
        groups = _labelled_groups(text, depth)
        if groups is not None:
            return groups
    # Lists written with words or semicolons: "6 and 8", "19, 46, and 82", "x = 5 or x = 6", "-12; -11".
    text = _LIST_WORD_RE.sub(", ", text)
    if ";" in text and "," not in text:
        text = text.replace(";", ",")
    if _WORD_RE.search(text):
        raise ParseFailure("contains a word")
    tokens = tokenize(text)
    if not tokens:
        raise ParseFailure("empty")
    return _value(tokens, depth)


_LIST_WORD_RE = re.compile(r"\s*,?\s*(?<![\\a-zA-Z])(?:and|or)(?![a-zA-Z])\s*")
_WRAPPED_MATRIX_RE = re.compile(r"[\[(]\s*(\\begin\{([pbvB]?matrix|array)\}.*\\end\{\2\})\s*[\])]", re.DOTALL)
_MATRIX_RE = re.compile(r"\\begin\{([pbvB]?matrix|array)\}(?:\{[^{}]*\})?(.*)\\end\{\1\}", re.DOTALL)
# Three or more plain letters in a row (not a \command) make the answer text, not a product of variables.
_WORD_RE = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{3,}")


_MATRIX_LITERAL_RE = re.compile(
    r"\\begin\{([pbvB]?matrix)\}((?:(?!\\begin\{|\\end\{).)*)\\end\{\1\}", re.DOTALL
)
_MATRIX_OP_RE = re.compile(r"\s*(?:(\+|-)|(\\cdot|\\times)|())\s*")
MAX_MATRIX_CELLS = 100  # per matrix of an arithmetic answer (10x10)
MAX_MATRIX_LITERALS = 4  # matrices in one arithmetic answer: the evaluated cells stay small trees


def _labelled_groups(text: str, depth: int) -> Collection | None:
    """`p=5,q=2;p=7,q=2`: solution groups, each naming the same unknowns in the same order, are the list
    of tuples `(5,2),(7,2)` (the order inside a group is the order of its labels)."""
    parts = text.split(";")
    if len(parts) < 2:
        return None
    tuples, names = [], None
    for part in parts:
        try:
            group = parse_value(part, depth + 1)
        except ParseFailure:
            return None
        if not (isinstance(group, Collection) and group.kind == "list" and len(group.items) >= 2):
            return None
        if not all(isinstance(x, Scalar) and x.label for x in group.items):
            return None
        labels = [x.label for x in group.items]
        if len(set(labels)) != len(labels) or (names is not None and labels != names):
            return None
        names = labels
        tuples.append(Collection("seq", [Scalar(x.tree) for x in group.items], "()"))
    return Collection("list", tuples)


def _matrix_cells(body: str, depth: int) -> list[list[list[Any]]]:
    rows = [r for r in re.split(r"\\\\", body) if r.strip()]
    cells = [[_parse_tokens(tokenize(c)) for c in row.split("&")] for row in rows]
    if not cells or len({len(r) for r in cells}) != 1 or len(cells) * len(cells[0]) > MAX_MATRIX_CELLS:
        raise ParseFailure("ragged or empty matrix")
    return cells


def _matrix_arithmetic(text: str, depth: int) -> Collection | None:
    """Matrix arithmetic written as the answer, evaluated exactly cell by cell: `A + B`, `A - B`, `AB`,
    `A \\cdot B`, `2A` (a number in front). Shapes must agree; anything else in the text -> None (the
    text is then read as before, and a sum of matrices never equals a matrix by accident)."""
    pos, terms, sign = 0, [], "+"
    while pos < len(text):
        m = re.compile(r"\s*([^\\]*?)\s*(?=\\begin\{)").match(text, pos)
        if not m:
            return None
        coef = None
        if m.group(1):
            if not re.fullmatch(r"-?\d+(?:\.\d+)?|-?\\frac\{\d+\}\{\d+\}", m.group(1)):
                return None
            coef = _parse_tokens(tokenize(m.group(1)))
        factors = []
        pos = m.end()
        while True:
            lit = _MATRIX_LITERAL_RE.match(text, pos)
            if not lit:
                return None
            factors.append(_matrix_cells(lit.group(2), depth))
            pos = lit.end()
            op = _MATRIX_OP_RE.match(text, pos)
            if pos >= len(text.rstrip()) or op is None:
                break
            if op.group(1):  # + or -: the next term
                break
            pos = op.end()  # \cdot, \times or juxtaposition: the next factor
        product = factors[0]
        for f in factors[1:]:
            if len(product[0]) != len(f):
                return None  # shapes do not agree: not a product
            product = [
                [
                    _sum_nodes([["mul", product[r][k], f[k][c]] for k in range(len(f))])
                    for c in range(len(f[0]))
                ]
                for r in range(len(product))
            ]
        if coef is not None:
            product = [[["mul", coef, x] for x in row] for row in product]
        if sign == "-":
            product = [[["neg", x] for x in row] for row in product]
        terms.append(product)
        rest = text[pos:].strip()
        if not rest:
            break
        if rest[0] not in "+-":
            return None
        sign = rest[0]
        pos = text.index(rest[0], pos) + 1
    if len(terms) == 1 and len(factors) == 1 and coef is None:
        return None  # one plain matrix: the ordinary reading
    shape = (len(terms[0]), len(terms[0][0]))
    if any((len(t), len(t[0])) != shape for t in terms):
        return None
    total = [[_sum_nodes([t[r][c] for t in terms]) for c in range(shape[1])] for r in range(shape[0])]
    return Collection("seq", [Collection("seq", [Scalar(x) for x in row], "[]") for row in total], "M")


def _sum_nodes(nodes: list[list[Any]]) -> list[Any]:
    out = nodes[0]
    for n in nodes[1:]:
        out = ["add", out, n]
    return out


def _value(tokens: list[tuple[str, str]], depth: int) -> Any:
    if not tokens:
        raise ParseFailure("empty item")
    vals = [v for _, v in tokens]
    if vals in (["\\emptyset"], ["\\{", "\\}"], ["{", "}"]):
        return Collection("set", [])
    unions = _split_top(tokens, {"\\cup"})
    if len(unions) > 1:
        return Union([_value(p, depth + 1) for p in unions])
    if vals[0] == "\\{" and vals[-1] == "\\}" and _outer_group_closes_at_end(tokens):
        inner = tokens[1:-1]
        items = [_value(p, depth + 1) for p in _split_top(inner, {","})] if inner else []
        return Collection("set", _flatten_pm(items))
    if vals[0] == "{" and vals[-1] == "}" and _outer_group_closes_at_end(tokens):
        if len(_split_top(tokens[1:-1], {","})) > 1:  # {2, 3, 5}: plain braces only group (LaTeX hides them)
            return _value(tokens[1:-1], depth + 1)
    if vals[0] in ("(", "[") and vals[-1] in (")", "]") and _outer_group_closes_at_end(tokens):
        parts = _split_top(tokens[1:-1], {","})
        if len(parts) > 1:
            return Collection("seq", [_value(p, depth + 1) for p in parts], vals[0] + vals[-1])
    parts = _split_top(tokens, {","})
    if len(parts) > 1:
        return Collection("list", _flatten_pm([_value(p, depth + 1) for p in parts]))
    if not tokens:
        raise ParseFailure("empty item")
    # A labelled item inside a collection: x = 1, a_{37} = 19, f(x) = 2 (a chain keeps its last part).
    eq_parts = _split_top(tokens, {"="})
    if len(eq_parts) > 1 and all(eq_parts) and not any(v in _REL for v in vals):
        label = _label_of(_detok_tex(eq_parts[0]))
        if label is not None:
            value = _value(eq_parts[-1], depth + 1)
            if isinstance(value, Scalar):
                value.label = label
            return value
    pm = _split_top(tokens, {"\\pm", "\\mp"})
    if len(pm) == 1 and ("\\pm" in vals or "\\mp" in vals):
        return _nested_pm(tokens)
    if len(pm) == 2:  # a \pm b: the unordered pair {a + b, a - b}
        if len(_split_top(pm[1], {"+", "-"})) > 1:
            raise ParseFailure("ambiguous \\pm with a sum after it")
        a = _parse_tokens(pm[0]) if pm[0] else ["num", "0", "int"]
        b = _parse_tokens(pm[1])
        return Collection("pm", [Scalar(["add", a, b]), Scalar(["add", a, ["neg", b]])])
    if len(pm) > 2:
        raise ParseFailure("more than one \\pm")
    rel_parts = _split_top(tokens, set(_REL) | {"="})
    if len(rel_parts) > 1:
        ops = [_REL.get(v, v) for v in vals if v in _REL or v == "="]
        exprs = [_parse_tokens(p) for p in rel_parts]
        if ">" in ops or ">=" in ops:
            if "<" in ops or "<=" in ops:
                raise ParseFailure("mixed relation directions")
            exprs.reverse()
            ops = [{">": "<", ">=": "<="}[o] for o in reversed(ops)]
        chain: list[Any] = []
        for k, e in enumerate(exprs):
            if k:
                chain.append(ops[k - 1])
            chain.append(e)
        return Relation(chain)
    return Scalar(_parse_tokens(tokens))


def _flatten_pm(items: list[Any]) -> list[Any]:
    """`\\{1 \\pm \\sqrt5, -2\\}` is the three values 1+sqrt5, 1-sqrt5, -2."""
    out: list[Any] = []
    for it in items:
        out.extend(it.items if isinstance(it, Collection) and it.kind == "pm" else [it])
    return out


def _detok_tex(tokens: list[tuple[str, str]]) -> str:
    return "".join(v + (" " if v.startswith("\\") else "") for _, v in tokens)


def _nested_pm(tokens: list[tuple[str, str]]) -> Collection:
    """`\\frac{-1 \\pm \\sqrt{13}}{4}`: one \\pm inside a group is the unordered pair of its + and -
    readings, when no further sum follows it inside that group (else it is ambiguous)."""
    idx = [k for k, (_, v) in enumerate(tokens) if v in ("\\pm", "\\mp")]
    if len(idx) != 1:
        raise ParseFailure("more than one \\pm")
    depth = 0
    for _, v in tokens[idx[0] + 1 :]:
        if v in _OPEN:
            depth += 1
        elif v in _CLOSE:
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and v in ("+", "-"):
            raise ParseFailure("ambiguous \\pm with a sum after it")
    plus = tokens[: idx[0]] + [("op", "+")] + tokens[idx[0] + 1 :]
    minus = tokens[: idx[0]] + [("op", "-")] + tokens[idx[0] + 1 :]
    return Collection("pm", [Scalar(_parse_tokens(plus)), Scalar(_parse_tokens(minus))])


def _parse_tokens(tokens: list[tuple[str, str]]) -> list[Any]:
    parser = _Parser(list(tokens))
    node = parser.expr()
    if parser.peek() is not None:
        raise ParseFailure(f"unexpected {parser.peek()[1]!r}")
    return node


# ==================================================================================================
# The fast exact path: canonical polynomials over Q in pi, e, i, variables and square roots.

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


# --------------------------------------------------------------------------------------------------
# Bounded-complexity pre-check and numeric evaluation for the symbolic path.


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


# ==================================================================================================
# Equality


@dataclass
class _Ctx:
    deadline: float
    symbolic_timeout_s: float
    used_symbolic: bool = False
    allow_symbolic: bool = True  # False: raise NeedsSymbolic instead of asking sympy
    timed_out: bool = False
    too_complex: str = ""


def _scalar_equal(a: list[Any], b: list[Any], ctx: _Ctx) -> bool:
    inf_a, inf_b = _inf_sign(a), _inf_sign(b)
    if inf_a or inf_b:
        return inf_a == inf_b
    try:
        return algebra(a) == algebra(b)
    except NotAlgebraic:
        pass
    except ZeroDivisionError:
        return False
    precheck(a)
    precheck(b)
    if not ctx.allow_symbolic:
        raise NeedsSymbolic
    from rlvr_verifiers import _symbolic

    ctx.used_symbolic = True
    left = min(ctx.symbolic_timeout_s, ctx.deadline - time.monotonic())
    if left <= 0:
        ctx.timed_out = True
        return False
    result = _symbolic.pool().equal(_jsonable(a), _jsonable(b), left)
    if result is None:
        ctx.timed_out = True
        return False
    return result


def _jsonable(node: Any) -> Any:
    if isinstance(node, list):
        return [_jsonable(c) for c in node]
    return node


def _inf_sign(node: list[Any]) -> int:
    if node[0] == "inf":
        return 1
    if node[0] == "neg" and node[1][0] == "inf":
        return -1
    return 0


def values_equal(a: Any, b: Any, ctx: _Ctx) -> bool:
    if isinstance(a, Scalar) and isinstance(b, Scalar):
        if a.label and b.label and a.label != b.label:
            # `x + y = 5` vs `y = 5 - x`: different labels, possibly the same equation.
            ra, rb = _label_relation(a), _label_relation(b)
            return ra is not None and rb is not None and _equations_equivalent(ra, rb)
        return _scalar_equal(a.tree, b.tree, ctx)
    if isinstance(a, Text) or isinstance(b, Text):
        return isinstance(a, Text) and isinstance(b, Text) and a.text == b.text
    if isinstance(a, Scalar) and a.label and isinstance(b, Relation):
        a = _label_relation(a) or a
    if isinstance(b, Scalar) and b.label and isinstance(a, Relation):
        b = _label_relation(b) or b
    if isinstance(a, Relation) and isinstance(b, Relation):
        if len(a.chain) == len(b.chain) and all(
            (x == y) if isinstance(x, str) or isinstance(y, str) else _scalar_equal(x, y, ctx)
            for x, y in zip(a.chain, b.chain, strict=True)
        ):
            return True
        return _equations_equivalent(a, b)
    if isinstance(b, Relation) and isinstance(a, Collection):
        # The reference states an inequality, the response its interval: the same set. Not the other way
        # round: a reference in interval notation asks for the interval.
        b = _relation_interval(b) or _abs_relation_set(b) or b
    if isinstance(b, Relation) and isinstance(a, Union):
        b = _abs_relation_set(b) or b
    a, b = _finite_union(a), _finite_union(b)
    if isinstance(a, Union) and isinstance(b, Union):
        return _unordered_equal(a.parts, b.parts, ctx)
    if isinstance(a, Collection) and isinstance(b, Collection):
        unordered = {"set", "list", "pm"}
        if a.kind == "seq" or b.kind == "seq":
            if a.kind != b.kind or a.brackets != b.brackets or len(a.items) != len(b.items):
                return False
            return all(values_equal(x, y, ctx) for x, y in zip(a.items, b.items, strict=True))
        if a.kind in unordered and b.kind in unordered:
            ai = _dedupe(a.items, ctx) if a.kind == "set" else a.items
            bi = _dedupe(b.items, ctx) if b.kind == "set" else b.items
            if a.kind == "list" and _all_tuples(ai) and _all_tuples(bi) and len(ai) > len(bi):
                # A list of solution tuples that names one twice is the same solution set, when the
                # reference names none twice (numbers stay a multiset: roots with multiplicity).
                deduped_b = _dedupe(bi, ctx)
                if len(deduped_b) == len(bi):
                    ai = _dedupe(ai, ctx)
            return _unordered_equal(ai, bi, ctx)
    return False


def _label_relation(s: Scalar) -> Relation | None:
    """`y = 2x+3` as the equation it is (None when the label is not an expression, e.g. `(p,q)`)."""
    try:
        return Relation([parse_expr(s.label or ""), "=", s.tree])
    except (ParseFailure, TooComplex, IndexError, ValueError):
        return None


def _equations_equivalent(a: Relation, b: Relation) -> bool:
    """Single relations with the same solution set because one is a constant multiple of the other,
    decided exactly: `2x+4y-3=0` == `y=-x/2+3/4` (any nonzero factor for = and !=), `x<1` == `-x>-1`
    (a positive factor for < and <=; `x<1` != `x>1`). Only polynomial sides over the exact algebra; what
    it cannot represent is not equal (never asks sympy)."""
    if len(a.chain) != 3 or len(b.chain) != 3 or a.chain[1] != b.chain[1]:
        return False
    try:
        da = _add(algebra(a.chain[0]), {k: -v for k, v in algebra(a.chain[2]).items()})
        db = _add(algebra(b.chain[0]), {k: -v for k, v in algebra(b.chain[2]).items()})
    except (NotAlgebraic, ZeroDivisionError):
        return False
    if not da or not db:
        return not da and not db
    key = next(iter(da))
    if key not in db:
        return False
    c = db[key] / da[key]
    if a.chain[1] in ("<", "<=") and c <= 0:
        return False
    return len(da) == len(db) and all(db.get(k) == c * v for k, v in da.items())


def _free_vars(node: list[Any], out: set[str]) -> set[str]:
    if node[0] == "var" and node[1] not in ("e", "i"):
        out.add(node[1])
    for child in node[1:]:
        if isinstance(child, list):
            _free_vars(child, out)
    return out


def _relation_interval(r: Relation) -> Collection | None:
    """A one-variable inequality as the interval it describes: `-2 <= x < 7` -> [-2, 7), `x > 3` ->
    (3, \\infty), `k <= 2` -> (-\\infty, 2]. None when it is not of that form."""
    c = r.chain
    if any(isinstance(op, str) and op not in ("<", "<=") for op in c[1::2]):
        return None
    neg_inf, inf = ["neg", ["inf"]], ["inf"]

    def is_var(node: list[Any]) -> bool:  # a variable, or a function application f(x) (parsed f*x)
        if node[0] == "mul":
            return is_var(node[1]) and is_var(node[2])
        return node[0] == "var" and node[1] not in ("e", "i")

    if len(c) == 5 and is_var(c[2]) and not (_free_vars(c[0], set()) | _free_vars(c[4], set())):
        lo, hi, br = c[0], c[4], ("(" if c[1] == "<" else "[") + (")" if c[3] == "<" else "]")
    elif len(c) == 3 and is_var(c[0]) and not _free_vars(c[2], set()):
        lo, hi, br = neg_inf, c[2], "(" + (")" if c[1] == "<" else "]")
    elif len(c) == 3 and is_var(c[2]) and not _free_vars(c[0], set()):
        lo, hi, br = c[0], inf, ("(" if c[1] == "<" else "[") + ")"
    else:
        return None
    return Collection("seq", [Scalar(lo), Scalar(hi)], br)


def _finite_union(v: Any) -> Any:
    """`\\{2,6\\} \\cup \\{5,9\\}` (or `{2,6} \\cup {5,9}`, braces that only group): a union of finite sets is
    the set of their elements. A union with an interval, or anything else, stays as it is."""
    if not isinstance(v, Union):
        return v
    items: list[Any] = []
    for part in v.parts:
        if isinstance(part, Collection) and part.kind in ("set", "list"):
            items.extend(part.items)
        else:
            return v
    return Collection("set", items)


def _all_tuples(items: list[Any]) -> bool:
    return all(isinstance(x, Collection) and x.kind == "seq" and x.brackets == "()" for x in items)


def _abs_relation_set(r: Relation) -> Any:
    """`lo <= |z| <= hi` (constants 0 < lo < hi) as the set it describes, `[-hi, -lo] \\cup [lo, hi]`
    (ends open where the relation is strict); `|z| < hi` / `|z| <= hi` as `(-hi, hi)` / `[-hi, hi]`.
    None for any other shape (decided exactly: the ends must be rational)."""
    c = r.chain
    if any(isinstance(op, str) and op not in ("<", "<=") for op in c[1::2]):
        return None
    try:
        if len(c) == 5 and c[2][0] == "abs" and c[2][1][0] == "var":
            lo, hi = _as_rational(algebra(c[0])), _as_rational(algebra(c[4]))
            if lo is None or hi is None or not 0 < lo < hi:
                return None
            lo_open, hi_open = c[1] == "<", c[3] == "<"
            left = Collection(
                "seq",
                [Scalar(["neg", c[4]]), Scalar(["neg", c[0]])],
                ("(" if hi_open else "[") + (")" if lo_open else "]"),
            )
            right = Collection(
                "seq", [Scalar(c[0]), Scalar(c[4])], ("(" if lo_open else "[") + (")" if hi_open else "]")
            )
            return Union([left, right])
        if len(c) == 3 and c[0][0] == "abs" and c[0][1][0] == "var":
            hi = _as_rational(algebra(c[2]))
            if hi is None or hi <= 0:
                return None
            br = "()" if c[1] == "<" else "[]"
            return Collection("seq", [Scalar(["neg", c[2]]), Scalar(c[2])], br)
    except (NotAlgebraic, ZeroDivisionError, TooComplex):
        return None
    return None


def _dedupe(items: list[Any], ctx: _Ctx) -> list[Any]:
    out: list[Any] = []
    for it in items:
        if not any(values_equal(it, o, ctx) for o in out):
            out.append(it)
    return out


def _unordered_equal(a: list[Any], b: list[Any], ctx: _Ctx) -> bool:
    if len(a) != len(b):
        return False
    remaining = list(b)
    for x in a:
        for k, y in enumerate(remaining):
            if values_equal(x, y, ctx):
                del remaining[k]
                break
        else:
            return False
    return True


def _text_key(s: str) -> str:
    s = _unwrap_text(s).lower()
    s = re.sub(r"\\(?:text|mathrm)", "", s)
    s = re.sub(r"[{}\s]+", " ", s).strip(" .,:;")
    return s


@dataclass
class Answer:
    norm: Normalized
    value: Any = None
    error: str = ""


def _prepare(raw: str) -> Answer:
    norm = normalize(raw)
    if len(norm.text) > MAX_ANSWER_CHARS:
        return Answer(norm, None, "too_complex")
    try:
        value = parse_value(norm.text)
        if norm.label and isinstance(value, Scalar):
            value.label = norm.label
        return Answer(norm, value)
    except ParseFailure:
        return Answer(norm, Text(_text_key(norm.text)))
    except TooComplex as exc:
        return Answer(norm, None, f"too_complex: {exc}")
    except RecursionError:
        return Answer(norm, None, "too_complex: recursion")
    except (IndexError, KeyError, ValueError, ZeroDivisionError, TypeError):
        # A parser corner case: the answer is not math this parser understands; compare it as text.
        return Answer(norm, Text(_text_key(norm.text)))


def _choice(s: str) -> str | None:
    m = _CHOICE_RE.match(s.strip())
    return (m.group(1) or m.group(2)) if m else None


def _decimal_comma_equal(a: str, b: str) -> bool:
    """`1,22` (a decimal comma: one comma, not a thousands group) against `1.22` written with a point."""
    for x, y in ((a, b), (b, a)):
        if (
            re.fullmatch(r"-?\d+,\d+", x)
            and not _THOUSANDS_WHOLE_RE.match(x)
            and re.fullmatch(r"-?\d+\.\d+", y)
        ):
            return Fraction(x.replace(",", ".")) == Fraction(y)
    return False


# A machine float's rendering of a rational value with no finite decimal: a decimal of 14-17
# significant digits (what a double prints) that is the value correctly rounded or truncated at its
# last digit (`0.0833333333333333` for 1/12). Shorter decimals are approximations and are never paid
# (`0.6666667`), nor is any decimal of an irrational value (`3.14159265358979` is not pi).
FLOAT_RENDERING_DIGITS = (14, 17)
_LONG_DECIMAL_RE = re.compile(r"[-+]?(\d*)\.(\d+)")


def _float_rendering_equal(text: str, ref: Any) -> bool:
    """`text` (a bare decimal) is a double's rendering of the rational reference (see
    FLOAT_RENDERING_DIGITS): the reference has no finite decimal, and the text is the reference rounded
    half-up or truncated at the text's last digit, no other digit string."""
    m = _LONG_DECIMAL_RE.fullmatch(text.strip())
    if not m or not isinstance(ref, Scalar) or ref.label:
        return False
    digits = (m.group(1) + m.group(2)).lstrip("0")
    if not FLOAT_RENDERING_DIGITS[0] <= len(digits) <= FLOAT_RENDERING_DIGITS[1]:
        return False
    try:
        exact = _as_rational(algebra(ref.tree))
    except (NotAlgebraic, ZeroDivisionError, TooComplex):
        return False
    den = exact.denominator if exact is not None else 0
    while den and den % 2 == 0:
        den //= 2
    while den and den % 5 == 0:
        den //= 5
    if den <= 1:
        return False  # irrational, or a finite decimal (then only that decimal is equal)
    got, scale = Fraction(text.strip()), 10 ** len(m.group(2))
    scaled = exact * scale
    truncated = Fraction(int(scaled), scale)  # int() truncates toward zero, for either sign
    away = truncated + (Fraction(1, scale) if exact > 0 else Fraction(-1, scale))
    rounded = away if abs(exact - truncated) * 2 >= Fraction(1, scale) else truncated
    return got in (truncated, rounded)


def check(
    response_answer: str, reference: str, timeout_s: float = SYMBOLIC_TIMEOUT_S, allow_symbolic: bool = True
) -> Verdict:
    """Compare an extracted answer with a reference answer (both raw strings).

    `allow_symbolic=False`: raise NeedsSymbolic where the symbolic path would be asked; every verdict it
    does return is the one the full check returns (the same steps in the same order, minus sympy)."""
    ref = _prepare(reference)
    if not ref.norm.text:
        from rlvr_verifiers.base import INVALID_INPUT

        return Verdict(0.0, INVALID_INPUT, "empty reference answer")
    resp_norm = normalize(response_answer)
    truth = ref.norm.text.strip().lower()
    if truth in ("true", "false", "yes", "no"):
        # A truth value is compared as a word (case-insensitive), never read as a product of variables.
        got = re.sub(r"[^a-z]", "", _unwrap_text(resp_norm.text).lower())
        if got == truth:
            return Verdict(1.0, OK, f"truth value {truth}")
        return Verdict(0.0, WRONG, f"{resp_norm.text[:40]!r} != {truth}")
    letter = _choice(_unwrap_text(ref.norm.text))
    if letter is not None:
        text = _unwrap_text(resp_norm.text).strip()
        m = _CHOICE_RESPONSE_RE.match(text)
        got = (m.group(1) or m.group(2)) if m else None
        if got and letter.islower() and m.group(1):
            got = None  # a reference `(b)` asks for the parenthesised lower-case option
        other = r"(?<![A-Za-z])[A-J](?![A-Za-z])" if got and got.isupper() else r"\([a-j]\)"
        if got and re.search(other, text[m.end() :]):
            return Verdict(0.0, WRONG, f"more than one choice named: {text[:40]!r}")  # a hedge like "A or B"
        if got == letter:
            return Verdict(1.0, OK, f"choice {letter}")
        return Verdict(0.0, WRONG, f"choice {got or resp_norm.text[:40]!r} != {letter}")
    if ref.norm.unit and resp_norm.unit and ref.norm.unit != resp_norm.unit:
        return Verdict(0.0, WRONG, f"unit {resp_norm.unit!r} != {ref.norm.unit!r}")
    if _decimal_comma_equal(resp_norm.text, ref.norm.text):
        return Verdict(1.0, OK, "decimal comma")
    base = _BASE_RE.match(ref.norm.text.replace(" ", ""))
    if base and base.group(2) != "10":
        # A numeral in the base the problem asks for: `10001` (no subscript) or with the same subscript.
        got = _BASE_RE.match(resp_norm.text.replace(" ", ""))
        digits = got.group(1) if got and got.group(2) == base.group(2) else resp_norm.text.replace(" ", "")
        if digits.lower() == base.group(1).lower() and not resp_norm.label:
            return Verdict(1.0, OK, f"numeral in base {base.group(2)}")
    if resp_norm.text == ref.norm.text and (
        not (ref.norm.label and resp_norm.label) or ref.norm.label == resp_norm.label
    ):
        return Verdict(1.0, OK, "identical")
    resp = _prepare(response_answer)
    for side in (ref, resp):
        if side.error:
            return Verdict(0.0, TIMEOUT, f"not evaluated: {side.error}")
    ctx = _Ctx(time.monotonic() + timeout_s, timeout_s, allow_symbolic=allow_symbolic)
    _BUDGET.left = MAX_OPS
    try:
        equal = values_equal(resp.value, ref.value, ctx)
    except TooComplex as exc:
        return Verdict(0.0, TIMEOUT, f"not evaluated: too_complex: {exc}")
    except RecursionError:
        return Verdict(0.0, TIMEOUT, "not evaluated: too_complex: recursion")
    if not equal and _float_rendering_equal(resp.norm.text, ref.value):
        return Verdict(1.0, OK, "a double's rendering of the rational value")
    metrics = {"symbolic": float(ctx.used_symbolic)}
    if equal:
        return Verdict(1.0, OK, "symbolic" if ctx.used_symbolic else "exact", metrics)
    if ctx.timed_out:
        return Verdict(0.0, TIMEOUT, f"symbolic check exceeded {timeout_s}s", metrics)
    return Verdict(0.0, WRONG, f"{resp.norm.text[:60]!r} != {ref.norm.text[:60]!r}", metrics)


def reference_answer(ground_truth: Any) -> str:
    if not isinstance(ground_truth, (str, int, float)) or isinstance(ground_truth, bool):
        raise TypeError(f"math ground truth must be a string, got {type(ground_truth).__name__}")
    text = str(ground_truth)
    try:
        boxed = last_boxed(text)
    except Unclosed:
        raise ValueError("math ground truth has an unclosed \\boxed{") from None
    if boxed is None and ("####" in text or (len(text) > 60 and _ANSWER_RE.search(text))):
        # A whole solution as the reference ("... Final Answer: The final answer is $28\%$."): its answer.
        try:
            found = extract_answer(text)
        except (Unclosed, Ambiguous):
            found = None
        if found:
            return found
    return boxed if boxed is not None else text


@register("math")
class MathVerifier(Verifier):
    """See the module docstring. `extra["symbolic_timeout_s"]` overrides the symbolic bound."""

    name = "math"

    def __init__(self, symbolic_timeout_s: float = SYMBOLIC_TIMEOUT_S) -> None:
        self.symbolic_timeout_s = symbolic_timeout_s

    def warm_up(self) -> None:
        """Start and warm every sympy worker now (the pool calls this), so no item pays the start-up."""
        from rlvr_verifiers import _symbolic

        # A trig identity: sympy's simplify imports and caches a lot on first use.
        _symbolic.pool().warm_up(
            _jsonable(parse_expr(r"\sin^2 x+\cos^2 x")), _jsonable(parse_expr("1")), 60.0
        )

    def _answer_and_reference(self, item: Item) -> Verdict | tuple[str, str, float]:
        """(answer, reference, symbolic timeout), or the verdict when the item cannot get that far."""
        from rlvr_verifiers.base import INVALID_INPUT

        try:
            reference = reference_answer(item.ground_truth)
        except (TypeError, ValueError) as exc:
            return Verdict(0.0, INVALID_INPUT, str(exc))
        if not isinstance(item.response, str):
            return Verdict(
                0.0, INVALID_INPUT, f"response must be a string, got {type(item.response).__name__}"
            )
        if len(item.response) > MAX_RESPONSE_CHARS:
            return Verdict(
                0.0,
                RESPONSE_TOO_LARGE,
                f"response has {len(item.response):,} characters, over the math verifier's limit of "
                f"{MAX_RESPONSE_CHARS:,}: cap the generation length (max_response_length)",
            )
        region = reasoning.answer_region(item)  # never read inside the reasoning block (reasoning.py)
        if isinstance(region, Verdict):
            return region
        try:
            answer = extract_answer(region)
        except Unclosed:
            return Verdict(0.0, PARSE_ERROR, "last \\boxed{ is never closed")
        except MultipleCandidates as exc:
            return Verdict(0.0, AMBIGUOUS_ANSWER, str(exc))
        except Ambiguous as exc:
            return Verdict(0.0, PARSE_ERROR, f"ambiguous final answer: {exc}")
        if answer is None or not answer.strip():
            return Verdict(0.0, PARSE_ERROR, "no final answer found")
        timeout_s = (
            float(item.extra.get("symbolic_timeout_s", self.symbolic_timeout_s))
            if item.extra
            else self.symbolic_timeout_s
        )
        return answer, reference, timeout_s

    def verify(self, item: Item) -> Verdict:
        prepared = self._answer_and_reference(item)
        if isinstance(prepared, Verdict):
            return prepared
        try:
            return check(*prepared)
        except Exception as exc:  # noqa: BLE001 - every item gets a verdict; a bug here is never a reward
            return Verdict(
                0.0, PARSE_ERROR, f"unhandled {type(exc).__name__} while checking: {str(exc)[:80]}"
            )

    def quick(self, item: Item) -> Verdict | None:
        """The verdict when the exact path alone decides it on short inputs, else None.

        The verifier pool calls this in its caller's process (the trainer's reward worker) before it
        ships anything to an actor, so the common case (a number, a fraction, a radical) costs no round
        trip. It is safe there because it runs no code, starts no process and asks no sympy, and its
        inputs are short (responses up to QUICK_MAX_RESPONSE_CHARS, answers up to QUICK_MAX_ANSWER_CHARS),
        on top of the exact path's own complexity bounds. Every verdict it returns is the one `verify`
        returns; anything else (symbolic, too complex, a checker bug) is left to an actor (None)."""
        if isinstance(item.response, str) and len(item.response) > QUICK_MAX_RESPONSE_CHARS:
            return None
        prepared = self._answer_and_reference(item)
        if isinstance(prepared, Verdict):
            return prepared
        answer, reference, _ = prepared
        if len(answer) > QUICK_MAX_ANSWER_CHARS or len(reference) > QUICK_MAX_ANSWER_CHARS:
            return None
        try:
            verdict = check(*prepared, allow_symbolic=False)
        except Exception:  # noqa: BLE001 - NeedsSymbolic, or anything verify() would report: an actor decides
            return None
        return verdict if verdict.status in (OK, WRONG) else None
