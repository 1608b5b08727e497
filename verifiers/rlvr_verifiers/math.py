r"""The `math` verifier: is the response's final answer equal to the reference answer?

Ground truth: the reference answer string (it may itself contain `\boxed{...}`; then its final boxed
answer is the reference, read as below; a whole solution without a box but with "#### X" or a
"final answer is X" statement gives that answer). Score 1.0 with status `ok` when equal, 0.0 otherwise. The bar is ZERO false
accepts: when equality cannot be established (unparseable, too complex, symbolic check timed out)
the answer is not paid.

Modules (one concern each, no cycles): `math_extract` (the answer in a response), `math_text` (LaTeX text
scanning both extraction and normalisation use), `math_normalize` (string-level cleanup), `math_parse`
(tokenizer and parser), `math_values` (scalars, collections, relations), `math_exact` (the exact algebra),
`math_equal` (`check`), `math_bounds` (limits and exceptions); this module is the registered verifier.

Size: a response over MAX_RESPONSE_CHARS (256 Ki characters, the limit every verifier shares: base.py) is `response_too_large`, not read; below it every
scan is linear (no backtracking regex over the whole response; answer tags are paired in one scan).

Extraction (from the response). The final answer is the last answer-bearing statement; a response whose
final answer is ambiguous gets `parse_error`, never a guess; a prose final statement without any answer
marker or box that states two different values in their own clauses ("the square root of 64 is 8, and the
cube root of 64 is 4") gets `ambiguous_answer` (a restatement, "10, which is 1,000.99", is one value), and so
does a final sentence whose last two values are the operands of an operation ("add 9 to 9", "multiply 3 by
4", "subtract 2 from 7", "the sum of 9 and 9", "9 added to 9"): two quantities even when the same number.
A final equation chain after a leading "So,"/"Thus"/"Therefore" ("So, 9 + 0 = 9.") is the chain (its result).
- Answer tags may be written loosely (`< answer >`, `</ answer>`); an `<answer>` that never closes is read
  only when a final `\boxed{}` follows it. A JSON object's `"answer"` (or `"final_answer"`) field is the
  answer region when there is no answer tag (text around the object allowed). An answer label inside the
  math (`\boxed{\text{Answer: } 5}`) is dropped.
- `True`/`False`/`Yes`/`No` as the answer ("The answer is True.", "Therefore, the answer (Yes or No) is No.",
  "False, portfolio 2 is not optimal") is that truth value; a second truth word ("True or False") is a hedge.
  A truth-value reference is compared as a word, case-insensitively.
- Markers also read: `answer (Yes or No) is X` (a short parenthetical after "answer"), and `A: X` at a line
  start followed directly by a value. Closing filler lines ("This answer is correct.", "The end.") and a new
  turn after an answer (`Problem:`, `Question:`, `Human:`, `User:`, `Q:`, with `#`/`**`) are not read.
- A reference numeral in a base (`10001_2`) equals the same digits with the same subscript or none.
- A lower-case option in parentheses (`(b)`) as the reference asks for that option (`(b)`, `(b) 42`).
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

from typing import Any

from rlvr_verifiers import reasoning
from rlvr_verifiers.base import (
    AMBIGUOUS_ANSWER,
    INVALID_INPUT,
    OK,
    PARSE_ERROR,
    RESPONSE_TOO_LARGE,
    WRONG,
    Item,
    Verdict,
)
from rlvr_verifiers.math_bounds import (
    MAX_RESPONSE_CHARS,
    QUICK_MAX_ANSWER_CHARS,
    QUICK_MAX_RESPONSE_CHARS,
    SYMBOLIC_TIMEOUT_S,
)
from rlvr_verifiers.math_equal import _jsonable, check
from rlvr_verifiers.math_extract import _ANSWER_RE, Ambiguous, MultipleCandidates, extract_answer, last_boxed
from rlvr_verifiers.math_normalize import normalize
from rlvr_verifiers.math_parse import parse_expr
from rlvr_verifiers.math_text import Unclosed
from rlvr_verifiers.math_values import parse_value
from rlvr_verifiers.registry import Verifier, register

__all__ = [
    "MathVerifier",
    "check",
    "extract_answer",
    "last_boxed",
    "normalize",
    "parse_expr",
    "parse_value",
    "reference_answer",
    "MAX_RESPONSE_CHARS",
    "QUICK_MAX_ANSWER_CHARS",
    "QUICK_MAX_RESPONSE_CHARS",
    "SYMBOLIC_TIMEOUT_S",
]


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
