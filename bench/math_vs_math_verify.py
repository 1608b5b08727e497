r"""Benchmark: rlvr's `math` verifier vs HF math-verify on an adversarial answer set, side by side.

    python bench/math_vs_math_verify.py            # all three sets: the tables, ratios, per-family rows
    python bench/math_vs_math_verify.py --set corpus   # only the dataset-forms corpus, per family
    python bench/math_vs_math_verify.py --set graders  # only other projects' grader-test cases, per family
    python bench/math_vs_math_verify.py --set real     # real model generations: per source, answer type, split
    python bench/math_vs_math_verify.py --dump bench/data/math_pairs.jsonl
    from math_vs_math_verify import run; run()      # -> dict (bench/verifiers.py calls this)

The answer set (`pairs()`, deterministic, built here in code) holds labelled (response, reference)
pairs across the categories of shared/design/verifiers-math.md: fractions vs decimals, \boxed variants,
units, percents, intervals, sets, thousands separators, negatives, leading text, radicals / pi /
symbolic identities, equations, multiple choice, text answers, tuples, scientific notation, and
pathological inputs. Each pair says WHY its label holds. A label is `None` when a reasonable grader
could go either way (e.g. `50\%` vs `0.5`: it depends on the question); those are reported but left
out of accuracy. Labels are about mathematical value as a human grader reads the final answer; they
are NOT derived from either scorer.

Both scorers see the same strings in the same process, one after the other, single-threaded, each
warmed up first (imports, sympy worker start): math-verify as `verify(parse(gold), parse(response))`
with the reference wrapped in `\boxed{}` when it has none (the form that gave math-verify its best
accuracy here), ours as `registry.get("math").verify(Item(response, reference))`. Latency is per
pair, wall clock, including answer extraction for both. math-verify's own timeouts use
`signal.alarm`, which works here because the benchmark runs on the main thread.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _p(category: str, response: str, reference: str, label: bool | None, why: str) -> dict[str, Any]:
    return {"category": category, "response": response, "reference": reference, "label": label, "why": why}


_WRAPS = (
    "So the final answer is $\\boxed{{{a}}}$.",
    "Putting it together, we obtain \\boxed{{{a}}}",
    "We simplify step by step.\n\nThe answer is $\\boxed{{{a}}}$. I hope it is correct.",
    "Answer: ${a}$",
)


def _wrap(answer: str, k: int) -> str:
    return _WRAPS[k % len(_WRAPS)].format(a=answer)


def pairs() -> list[dict[str, Any]]:
    """The adversarial answer set (deterministic)."""
    out: list[dict[str, Any]] = []
    k = 0

    def add(cat: str, ans: str, ref: str, label: bool | None, why: str, raw: bool = False) -> None:
        nonlocal k
        out.append(_p(cat, ans if raw else _wrap(ans, k), ref, label, why))
        k += 1

    # -- fractions vs decimals (exact rational value) -------------------------------------------
    rng = random.Random(20261129)
    fracs = set()
    while len(fracs) < 20:
        q = rng.choice([2, 4, 5, 8, 10, 16, 20, 25, 40, 50])
        p = rng.randint(1, 3 * q)
        f = Fraction(p, q)
        if f.denominator > 1:
            fracs.add(f)
    for f in sorted(fracs):
        dec = f"{float(f):.6f}".rstrip("0")
        add(
            "fraction_decimal",
            dec,
            f"\\frac{{{f.numerator}}}{{{f.denominator}}}",
            True,
            f"{dec} == {f} exactly",
        )
    for f in sorted(fracs)[:10]:
        near = f + Fraction(1, 1000)
        dec = f"{float(near):.6f}".rstrip("0")
        add(
            "fraction_decimal",
            dec,
            f"\\frac{{{f.numerator}}}{{{f.denominator}}}",
            False,
            f"{dec} != {f} (off by 0.001)",
        )
    for ans, ref, lab, why in [
        ("0.333", "\\frac{1}{3}", False, "a truncated decimal is not 1/3"),
        ("0.67", "\\frac{2}{3}", False, "rounded decimal is not 2/3"),
        ("0.6666667", "\\frac23", False, "rounded decimal is not 2/3"),
        ("\\frac{2}{4}", "\\frac{1}{2}", True, "unreduced fraction, same value"),
        ("\\frac{6}{8}", "0.75", True, "same value"),
        ("2/4", "1/2", True, "same value"),
        ("-0.25", "-\\frac14", True, "same value"),
        ("1.05", "\\frac{21}{20}", True, "same value"),
        ("1.0001", "1", False, "1.0001 is not 1 (no tolerance)"),
        ("0.1", "\\frac{1}{9}", False, "0.1 != 1/9"),
        ("0.\\overline{1}", "\\frac{1}{9}", True, "repeating decimal 0.111... == 1/9"),
        ("\\dfrac{3}{2}", "1.5", True, "same value"),
        ("\\tfrac{3}{2}", "\\frac32", True, "same value"),
        ("\\frac{10}{4}", "\\frac{5}{2}", True, "same value"),
        ("2\\frac{1}{2}", "\\frac{5}{2}", True, "mixed number 2 1/2"),
        ("0.5", "\\frac{1}{5}", False, "0.5 != 1/5"),
        (".5", "\\frac12", True, "leading-dot decimal"),
        ("1.50", "\\frac{3}{2}", True, "trailing zero"),
        ("\\frac{1}{2}", "\\frac{1}{3}", False, "different values"),
        ("\\frac{3}{4}", "\\frac{4}{3}", False, "reciprocal"),
    ]:
        add("fraction_decimal", ans, ref, lab, why)

    # -- \boxed variants and extraction ------------------------------------------------------------
    for resp, ref, lab, why in [
        ("The value is \\boxed {42}.", "42", True, "space before the brace"),
        ("The value is \\fbox{42}.", "42", True, "\\fbox"),
        ("We get $\\boxed{\\frac{1}{2}}$.", "0.5", True, "nested braces"),
        ("First guess \\boxed{3}, but correcting: \\boxed{5}", "5", True, "the last box is the answer"),
        ("First guess \\boxed{3}, but correcting: \\boxed{5}", "3", False, "the last box is the answer"),
        ("\\boxed{\\boxed{7}}", "7", True, "doubly boxed"),
        ("$\\boxed{12}$", "12", True, "boxed in math mode"),
        ("Thus \\boxed{\\dfrac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}", True, "dfrac inside box"),
        ("So \\boxed{x^{2}}", "x^2", True, "braced exponent"),
        ("We find \\boxed{8} apples, then \\boxed{10} in total.", "8", False, "last box says 10"),
        ("\\boxed{\\left(1,2\\right)}", "(1,2)", True, "\\left/\\right"),
        ("The answer: \\boxed{ 6 }", "6", True, "spaces inside the box"),
        ("\\boxed{-3}", "\\boxed{-3}", True, "reference boxed too"),
        ("\\boxed{4}", "The solution gives \\boxed{4}.", True, "reference is a boxed solution"),
        ("\\boxed{4}", "The solution gives \\boxed{5}.", False, "reference is a boxed solution"),
        ("Since 2+2=4, the answer is \\boxed{4", "4", None, "truncated box: a human may still read 4"),
        ("\\boxed{\\text{(C)}}", "C", True, "boxed choice"),
        ("\\boxed{10}\\%", "10", True, "box followed by text outside"),
        (
            "\\boxed{2} and \\boxed{3}",
            "2, 3",
            None,
            "two boxes: last-box rule says 3, a human may read {2, 3}",
        ),
        ("I'll answer \\boxed{\\{1, 2\\}}", "\\{1,2\\}", True, "set in a box"),
    ]:
        add("boxed", resp, ref, lab, why, raw=True)

    # -- units ----------------------------------------------------------------------------------
    for ans, ref, lab, why in [
        ("5\\text{ cm}", "5", True, "unit label on the answer"),
        ("5 \\text{ cm}^2", "5", True, "squared unit"),
        ("12 \\text{ inches}", "12", True, "unit word"),
        ("\\$45", "45", True, "currency sign"),
        ("45 \\text{ dollars}", "45", True, "unit word"),
        ("5\\text{ cm}", "6", False, "different number"),
        ("30^\\circ", "30", True, "degrees"),
        ("30^{\\circ}", "30", True, "degrees"),
        ("30°", "30", True, "degree sign"),
        ("30^\\circ", "60", False, "different number"),
        ("\\frac{\\pi}{6}", "30^\\circ", None, "same angle in radians: depends on the question"),
        ("100\\text{ cm}", "1\\text{ m}", None, "same length, different unit: depends on the question"),
        ("7 \\text{ meters}", "7", True, "unit word"),
        ("7\\text{ m}", "7\\text{ m}", True, "same unit"),
        ("3 \\text{ hours}", "3", True, "unit word"),
        ("3 \\text{ hours}", "4", False, "different number"),
        ("\\$1.50", "1.5", True, "currency and trailing zero"),
        ("20 \\text{ square units}", "20", True, "unit words"),
        ("8\\text{ mph}", "8", True, "unit"),
        ("15\\mbox{ cm}", "15", True, "\\mbox unit"),
        ("25 \\text{ km}", "2.5", False, "different number"),
        ("9\\text{ ft}^2", "9", True, "unit"),
        ("2 \\text{ kg}", "3", False, "different number"),
        ("90^\\circ", "90", True, "degrees"),
        ("45^\\circ", "\\frac{\\pi}{4}", None, "degrees vs radians: depends on the question"),
    ]:
        add("units", ans, ref, lab, why)

    # -- percents ---------------------------------------------------------------------------------
    for ans, ref, lab, why in [
        ("12.5\\%", "12.5", True, "percent sign on a percentage answer"),
        ("50\\%", "50", True, "percent sign"),
        ("12.5", "12.5\\%", True, "reference carries the sign"),
        ("42\\%", "42\\%", True, "same"),
        ("0.42", "42", False, "0.42 is not 42"),
        ("7\\%", "8", False, "different number"),
        ("50\\%", "0.5", None, "percent vs fraction: depends on the question"),
        ("0.42", "42\\%", None, "fraction vs percent: depends on the question"),
        ("33\\frac{1}{3}\\%", "\\frac{100}{3}", True, "mixed-number percent"),
        ("20\\%", "25", False, "different number"),
        ("5%", "5", True, "plain percent sign"),
        ("5 \\text{ percent}", "5", True, "percent word"),
        ("150\\%", "150", True, "over one hundred"),
        ("0.5\\%", "0.5", True, "small percent"),
        ("0.5\\%", "50", False, "never rescaled"),
        ("62.5\\%", "62.5", True, "decimal percent"),
        ("62.5\\%", "62.6", False, "different number"),
        ("100\\%", "1", None, "100% vs 1: depends on the question"),
        ("3.5\\%", "3.5", True, "decimal percent"),
        ("17\\%", "17", True, "percent"),
    ]:
        add("percent", ans, ref, lab, why)

    # -- intervals -------------------------------------------------------------------------------
    for ans, ref, lab, why in [
        ("(1,2]", "(1, 2]", True, "same interval"),
        ("(1,2]", "[1,2]", False, "open vs closed left end"),
        ("(1,2]", "(1,2)", False, "closed vs open right end"),
        ("(-\\infty, 3)", "(-\\infty,3)", True, "same"),
        ("(-\\infty,3]", "(-\\infty,3)", False, "closed vs open"),
        ("[2,5)", "[2, 5)", True, "same"),
        ("(0,\\infty)", "(0, \\infty)", True, "same"),
        ("(-\\infty,1)\\cup(2,\\infty)", "(2,\\infty)\\cup(-\\infty,1)", True, "union is unordered"),
        ("(-\\infty,1)\\cup(2,\\infty)", "(-\\infty,1]\\cup(2,\\infty)", False, "one end differs"),
        ("\\left[ 1, 2 \\right]", "[1,2]", True, "\\left/\\right"),
        ("[\\frac12, 3]", "[0.5, 3]", True, "end as fraction vs decimal"),
        ("(1,3)", "(1,4)", False, "different end"),
        ("[-2, 2]", "[-2,2]", True, "same"),
        ("[-2, 2]", "[2,-2]", False, "ends swapped"),
        ("(-\\infty, \\infty)", "(-\\infty,\\infty)", True, "whole line"),
        ("(-\\infty, 0)", "(0, \\infty)", False, "different half-lines"),
        ("[0,1)", "[0,1]", False, "open vs closed right end"),
        ("(\\sqrt{2}, 3]", "(\\sqrt2,3]", True, "same"),
        ("[1, \\infty)", "[1,\\infty)", True, "same"),
        ("(2, 5)", "(2,5]", False, "open vs closed"),
    ]:
        add("interval", ans, ref, lab, why)

    # -- sets and unordered lists --------------------------------------------------------------------
    for ans, ref, lab, why in [
        ("\\{1,2,3\\}", "\\{3,1,2\\}", True, "sets are unordered"),
        ("1, 2, 3", "3, 2, 1", True, "all solutions, any order"),
        ("\\{1,2\\}", "\\{1,2,3\\}", False, "missing element"),
        ("\\emptyset", "\\varnothing", True, "empty set"),
        ("\\emptyset", "\\{\\}", True, "empty set"),
        ("\\{0\\}", "\\emptyset", False, "{0} is not empty"),
        ("2, -2", "-2, 2", True, "same solutions"),
        ("2, -2", "2", False, "extra solution"),
        ("\\{-1, 1\\}", "-1, 1", True, "set vs list of solutions"),
        ("1, 2", "1, 2, 3", False, "missing element"),
        ("\\{\\frac12, 2\\}", "\\{2, 0.5\\}", True, "same elements"),
        ("3, 5, 7", "3, 5, 8", False, "one element differs"),
        ("\\{a, b\\}", "\\{b, a\\}", True, "unordered"),
        ("\\varnothing", "\\{0\\}", False, "empty vs {0}"),
        ("1, 1, 2", "1, 2", None, "a double root listed twice: depends on the question"),
        ("\\{1,2,3\\}", "\\{1,2,4\\}", False, "one element differs"),
        ("-3, 4", "4, -3", True, "unordered"),
        ("\\sqrt2, -\\sqrt2", "-\\sqrt{2}, \\sqrt{2}", True, "unordered radicals"),
        ("0, 1", "\\{0, 1\\}", True, "list vs set"),
        ("\\{2\\}", "2", None, "set vs number: depends on the question"),
    ]:
        add("set", ans, ref, lab, why)

    # -- thousands separators ------------------------------------------------------------------------
    for resp, ref, lab, why in [
        (_wrap("1,000", 0), "1000", True, "comma thousands separator"),
        (_wrap("1\\,000", 1), "1000", True, "thin-space separator"),
        (_wrap("1{,}000", 2), "1000", True, "braced comma separator"),
        (_wrap("10,\\!000", 3), "10000", True, "MATH-style separator"),
        ("\\boxed{1\\,000}", "0", False, "1\\,000 is one thousand, not 1*000"),
        ("\\boxed{2\\,500}", "502", False, "2\\,500 is 2500"),
        ("\\boxed{2\\,500}", "2500", True, "2\\,500 is 2500"),
        (_wrap("1,000,000", 0), "10^6", True, "a million"),
        (_wrap("1,234.5", 1), "1234.5", True, "separator with decimals"),
        (_wrap("1,000", 2), "1", False, "one thousand is not one"),
        (_wrap("12,345", 3), "12345", True, "separator"),
        (_wrap("1 000", 0), "1000", True, "space separator"),
        (_wrap("1000", 1), "1,000", True, "reference has the separator"),
        (_wrap("1\\,000\\,000", 2), "1000000", True, "two thin spaces"),
        (_wrap("2{,}500", 3), "2500", True, "braced comma"),
        (_wrap("2,500", 0), "250", False, "different number"),
        (_wrap("3,000", 1), "3000", True, "separator"),
        (_wrap("1\\,000", 2), "100", False, "different number"),
        (_wrap("\\$10,000", 3), "10000", True, "currency and separator"),
        (_wrap("4,096", 0), "2^{12}", True, "power"),
        (_wrap("65,536", 1), "65536", True, "separator"),
        (_wrap("999,999", 2), "999999", True, "separator"),
        (_wrap("5,000", 3), "5", False, "different number"),
        (_wrap("100,000", 0), "10^5", True, "power"),
        (_wrap("1,001", 1), "1001", True, "separator"),
        (_wrap("1\\,000", 2), "10^3", True, "power"),
        (_wrap("7,200", 3), "7200", True, "separator"),
        (_wrap("7,200", 0), "720", False, "different number"),
        ("\\boxed{1,000}", "1, 000", None, "a list (1, 0) or one thousand: ambiguous reference"),
        (_wrap("1\\,00", 1), "100", None, "'1\\,00' is a malformed number a human may read as 100"),
    ]:
        out.append(_p("thousands", resp, ref, lab, why))

    # -- negatives ------------------------------------------------------------------------------------
    for ans, ref, lab, why in [
        ("-5", "-5", True, "same"),
        ("-5", "5", False, "sign"),
        ("- 5", "-5", True, "space after minus"),
        ("−5", "-5", True, "unicode minus"),
        ("-\\frac{1}{2}", "\\frac{-1}{2}", True, "sign placement"),
        ("-\\frac{1}{2}", "\\frac{1}{-2}", True, "sign in denominator"),
        ("-(-3)", "3", True, "double negative"),
        ("-0", "0", True, "negative zero"),
        ("-3", "3", False, "sign"),
        ("-\\sqrt{2}", "\\sqrt{2}", False, "sign"),
        ("-2.5", "-\\frac52", True, "same"),
        ("-2.5", "2.5", False, "sign"),
        ("(-1)^3", "-1", True, "odd power"),
        ("(-1)^2", "-1", False, "even power"),
        ("-2^2", "-4", True, "precedence: -(2^2)"),
        ("-2^2", "4", False, "precedence: -(2^2)"),
        ("-\\pi", "-\\pi", True, "same"),
        ("-x", "x", False, "sign"),
        ("-12", "-12.0", True, "trailing zero"),
        ("-1", "1", False, "sign"),
    ]:
        add("negative", ans, ref, lab, why)

    # -- leading text / extraction without a box ----------------------------------------------------
    for resp, ref, lab, why in [
        ("The answer is 42.", "42", True, "'The answer is'"),
        ("Answer: 42", "42", True, "'Answer:'"),
        ("Final answer: $\\frac{3}{4}$", "0.75", True, "'Final answer:'"),
        ("After simplifying we get\n$x = 7$", "7", True, "trailing statement"),
        ("Therefore, the final answer is $\\boxed{7}$. I hope it is correct.", "7", True, "boxed then text"),
        ("The answer is 41, no wait. The answer is 43.", "41", False, "the last statement wins"),
        ("The answer is 41, no wait. The answer is 43.", "43", True, "the last statement wins"),
        ("**Answer:** 12", "12", True, "markdown"),
        ("I think it might be 5 or 6.", "5", False, "no committed answer"),
        ("We have 3 cases, each with 4 options, so the total is 12.", "12", True, "trailing 'is X'"),
        ("We have 3 cases, each with 4 options, so the total is 12.", "3", False, "3 is not the answer"),
        ("The final answer is $\\frac{\\sqrt{3}}{3}$", "\\frac{1}{\\sqrt3}", True, "rationalised"),
        ("The answer is: 2", "2", True, "'is:'"),
        ("Thus the answer is $-1$.", "-1", True, "math mode"),
        ("Thus the answer is $-1$.", "1", False, "sign"),
        ("So $x = 4$.", "4", True, "trailing equation"),
        ("Hence the area equals $16\\pi$.", "16\\pi", True, "trailing 'equals'"),
        ("Hence the area equals $16\\pi$.", "16", False, "missing pi"),
        ("The answer is $\\frac{1}{2}$, or $0.5$.", "\\frac12", True, "two forms of the same value"),
        ("Final Answer: The final answer is $8$. I hope it is correct.", "8", True, "Minerva style"),
        ("Final Answer: The final answer is $8$. I hope it is correct.", "9", False, "Minerva style"),
        ("answer is 100", "100", True, "lowercase"),
        ("The answer is 100 apples", "100", True, "unit word"),
        ("Answer: (1, 2)", "(1,2)", True, "tuple"),
        ("Answer: x = 3", "3", True, "labelled"),
        ("The answer is \\boxed{5} because 2+3=5. Answer: 6", "5", True, "a box beats 'Answer:'"),
        ("So the result is 2^{10} = 1024.", "1024", True, "trailing equation: value after '='"),
        ("There is no solution.", "\\emptyset", None, "words vs symbol: a human would accept"),
        ("The answer is 7 since 3+4 = 7", "7", None, "'is 7 since ...': extraction-dependent"),
        ("Answer: 0.5", "50\\%", None, "fraction vs percent"),
    ]:
        out.append(_p("leading_text", resp, ref, lab, why))

    # -- radicals, pi, symbolic identities ----------------------------------------------------------------
    for ans, ref, lab, why in [
        ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", True, "rationalised denominator"),
        ("2\\sqrt{3}", "\\sqrt{12}", True, "simplified radical"),
        ("\\sqrt{8}", "2\\sqrt2", True, "simplified radical"),
        ("\\sqrt{8}", "3\\sqrt2", False, "different coefficient"),
        ("\\pi/2", "\\frac{\\pi}{2}", True, "same"),
        ("2\\pi", "6.28", False, "a decimal approximation is not 2pi"),
        ("\\pi", "3.14159", False, "approximation"),
        ("3^4", "4^3", False, "81 vs 64 (^ is power, not XOR)"),
        ("3^4", "81", True, "power"),
        ("x^2+2x+1", "(x+1)^2", True, "expanded square"),
        ("(x+1)^2", "x^2+1", False, "missing middle term"),
        ("\\frac{1}{1+\\sqrt2}", "\\sqrt2-1", True, "rationalised"),
        ("\\sin^2 x+\\cos^2 x", "1", True, "Pythagorean identity"),
        ("\\log_2 8", "3", True, "logarithm"),
        ("\\log_2 8", "4", False, "logarithm"),
        ("2^{10}", "1024", True, "power"),
        ("10!", "3628800", True, "factorial"),
        ("\\binom{5}{2}", "10", True, "binomial"),
        ("\\sqrt[3]{27}", "3", True, "cube root"),
        ("i^2", "-1", True, "imaginary unit"),
        ("(1+i)^2", "2i", True, "complex square"),
        ("3+4i", "4i+3", True, "commutative"),
        ("3+4i", "3-4i", False, "conjugate"),
        ("\\frac{\\pi}{3}", "\\frac{2\\pi}{6}", True, "unreduced"),
        ("\\frac{\\pi}{3}", "\\frac{\\pi}{6}", False, "different"),
        ("2\\sqrt{2}+\\sqrt{2}", "3\\sqrt2", True, "collect terms"),
        ("\\sqrt{2}\\sqrt{3}", "\\sqrt6", True, "product of radicals"),
        ("\\sqrt2+\\sqrt3", "\\sqrt5", False, "radicals do not add"),
        ("\\frac{3\\sqrt{5}}{5}", "\\frac{3}{\\sqrt5}", True, "rationalised"),
        ("e^2", "e^{2}", True, "braces"),
        ("\\cos(\\pi/3)", "\\frac12", True, "trig value"),
        ("\\cos(\\pi/3)", "\\frac{\\sqrt3}{2}", False, "that is sin"),
        ("\\tan(\\pi/4)", "1", True, "trig value"),
        ("\\ln(e^3)", "3", True, "log of exp"),
        ("2x+3", "3+2x", True, "commutative"),
        ("2x+3", "2x-3", False, "sign"),
        ("\\frac{x}{2}", "0.5x", True, "coefficient as decimal"),
        ("x^2-1", "(x-1)(x+1)", True, "factored"),
        ("x^2-1", "(x-1)^2", False, "not the same polynomial"),
        ("\\frac{x^2-1}{x-1}", "x+1", True, "cancel the common factor"),
        ("\\sqrt{50}", "5\\sqrt{2}", True, "simplified radical"),
        ("\\sqrt{\\frac{1}{2}}", "\\frac{\\sqrt2}{2}", True, "radical of a fraction"),
        ("4\\pi r^2", "4 r^2 \\pi", True, "commutative"),
        ("\\frac{1}{\\sqrt{3}+1}", "\\frac{\\sqrt3-1}{2}", True, "rationalised"),
        ("\\frac{1}{\\sqrt{3}+1}", "\\frac{\\sqrt3+1}{2}", False, "wrong sign"),
        ("2^{-1}", "0.5", True, "negative exponent"),
        ("8^{1/3}", "2", True, "fractional exponent"),
        ("8^{2/3}", "4", True, "fractional exponent"),
        ("\\sqrt{2}^2", "2", True, "square of a root"),
        ("\\pi^2/6", "\\frac{\\pi^2}{6}", True, "same"),
    ]:
        add("symbolic", ans, ref, lab, why)

    # -- equations, labels ----------------------------------------------------------------------------
    for ans, ref, lab, why in [
        ("x=5", "5", True, "labelled answer"),
        ("5", "x=5", True, "reference labelled"),
        ("x = 5", "y=5", False, "the question asks for y"),
        ("y = 2x+3", "2x+3", True, "labelled expression"),
        ("y = 2x+3", "y=2x+3", True, "same equation"),
        ("y = 2x+3", "y=3x+2", False, "different line"),
        ("x=-2", "-2", True, "labelled negative"),
        ("k = \\frac{1}{2}", "0.5", True, "labelled fraction"),
        ("x = 3", "4", False, "different value"),
        ("a=7", "a = 7", True, "spaces"),
        ("x = 1, 2", "1, 2", None, "label on a list: formatting"),
        ("n = 10", "10", True, "labelled"),
        ("\\theta = \\frac{\\pi}{4}", "\\frac{\\pi}{4}", True, "greek label"),
        ("x = 2", "x=2", True, "same"),
        ("t=9", "8", False, "different value"),
    ]:
        add("equation", ans, ref, lab, why)

    # -- multiple choice ------------------------------------------------------------------------------
    for resp, ref, lab, why in [
        ("\\boxed{(B)}", "B", True, "parenthesised letter"),
        ("\\boxed{B}", "\\text{(B)}", True, "text reference"),
        ("\\boxed{(C)}", "B", False, "different letter"),
        ("\\boxed{\\textbf{(B) } 12}", "B", True, "letter with its option text"),
        ("The answer is (D).", "D", True, "letter in text"),
        ("The answer is (D).", "A", False, "different letter"),
        ("\\boxed{E}", "(E)", True, "parenthesised reference"),
        ("\\boxed{A}", "(E)", False, "different letter"),
        ("Answer: C", "C", True, "plain letter"),
        ("\\boxed{\\text{B}}", "B", True, "text letter"),
        ("\\boxed{b}", "B", None, "lower-case letter: depends on the options' case"),
        ("\\boxed{(A)}", "A", True, "letter"),
        ("\\boxed{(A)}", "B", False, "different letter"),
        ("\\boxed{D.}", "D", True, "letter with a period"),
        ("\\boxed{\\mathrm{(C)}}", "C", True, "mathrm letter"),
    ]:
        out.append(_p("choice", resp, ref, lab, why))

    # -- text answers ----------------------------------------------------------------------------------
    for ans, ref, lab, why in [
        ("\\text{Monday}", "Monday", True, "text"),
        ("\\text{yes}", "Yes", True, "case"),
        ("\\text{no}", "yes", False, "different word"),
        ("\\text{odd}", "\\text{even}", False, "different word"),
        ("\\text{even}", "even", True, "text"),
        ("\\text{Tuesday}", "Monday", False, "different word"),
    ]:
        add("text", ans, ref, lab, why)

    # -- tuples / points ---------------------------------------------------------------------------------
    for ans, ref, lab, why in [
        ("(1,2)", "(1, 2)", True, "same point"),
        ("(1,2)", "(2,1)", False, "order matters"),
        ("(3, -1)", "(3,-1)", True, "same"),
        ("(\\frac12, 2)", "(0.5,2)", True, "coordinate as fraction vs decimal"),
        ("(1,2,3)", "(1,2)", False, "different length"),
        ("(0, 0)", "(0,0)", True, "origin"),
        ("(2, \\sqrt{3})", "(2,\\sqrt3)", True, "radical coordinate"),
        ("(-1, 4)", "(1, 4)", False, "sign"),
        ("(1, 2, 3)", "(1, 2, 3)", True, "triple"),
        ("(1, 2, 3)", "(1, 3, 2)", False, "order matters"),
    ]:
        add("tuple", ans, ref, lab, why)

    # -- scientific notation ------------------------------------------------------------------------------
    for ans, ref, lab, why in [
        ("1.5\\times10^{3}", "1500", True, "scientific notation"),
        ("3\\times 10^8", "300000000", True, "scientific notation"),
        ("2.5\\cdot 10^{-2}", "0.025", True, "negative exponent"),
        ("1.5\\times10^{3}", "150", False, "wrong magnitude"),
        ("6.02\\times10^{23}", "6.02\\times 10^{23}", True, "same"),
        ("6.02\\times10^{23}", "6.02\\times 10^{22}", False, "exponent differs"),
    ]:
        add("scientific", ans, ref, lab, why)

    # -- plus-minus and matrices -----------------------------------------------------------------------
    for ans, ref, lab, why in [
        ("1 \\pm \\sqrt2", "1+\\sqrt2, 1-\\sqrt2", True, "a +- b is the pair a+b, a-b"),
        ("\\pm 2", "2, -2", True, "+-2 is the pair 2, -2"),
        ("\\pm 2", "2", False, "only one of the two"),
        ("3 \\pm \\sqrt{5}", "3-\\sqrt5, 3+\\sqrt5", True, "unordered pair"),
        ("3 \\pm \\sqrt{5}", "3+\\sqrt5", False, "only one of the two"),
        (
            "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}",
            "\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}",
            True,
            "same matrix",
        ),
        (
            "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}",
            "\\begin{pmatrix}1&3\\\\2&4\\end{pmatrix}",
            False,
            "transposed",
        ),
        (
            "\\begin{pmatrix} \\frac12 \\\\ -3 \\end{pmatrix}",
            "\\begin{pmatrix}0.5\\\\-3\\end{pmatrix}",
            True,
            "same vector",
        ),
        (
            "\\begin{pmatrix} 2 \\\\ 3 \\end{pmatrix}",
            "\\begin{pmatrix}3\\\\2\\end{pmatrix}",
            False,
            "entries swapped",
        ),
        (
            "\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}",
            "\\begin{pmatrix}1&0\\\\0&1\\end{pmatrix}",
            True,
            "identity",
        ),
    ]:
        add("pm_matrix", ans, ref, lab, why)

    # -- pathological inputs (must finish within their bound) -------------------------------------------------
    nested = "(" * 40 + "1" + ")" * 40
    for resp, ref, lab, why in [
        ("\\boxed{9^{9^{9^9}}}", "1", False, "astronomically large, not 1"),
        ("\\boxed{2^{2^{30}}}", "2", False, "astronomically large, not 2"),
        (f"\\boxed{{{nested}}}", "1", True, "deeply nested parentheses around 1"),
        ("x " * 200_000 + "\\boxed{17}", "17", True, "a 400 kB response ending in the answer"),
        (
            "\\boxed{" + "\\frac{1}{" * 30 + "2" + "}" * 30 + "}",
            "2",
            True,
            "30 nested reciprocals of 2 give 2",
        ),
    ]:
        out.append(_p("pathological", resp, ref, lab, why))
    return out


# ------------------------------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _score(name: str, decide, data: list[dict[str, Any]]) -> dict[str, Any]:
    latencies, decisions = [], []
    for pair in data:
        t0 = time.perf_counter()
        try:
            accepted = bool(decide(pair["response"], pair["reference"]))
        except Exception:  # noqa: BLE001 - a crash of either scorer counts as a reject, and is counted
            accepted = False
        latencies.append(time.perf_counter() - t0)
        decisions.append(accepted)
    labelled = [(d, p["label"]) for d, p in zip(decisions, data, strict=True) if p["label"] is not None]
    correct = sum(d == lab for d, lab in labelled)
    false_accepts = [p for d, p in zip(decisions, data, strict=True) if d and p["label"] is False]
    false_rejects = [p for d, p in zip(decisions, data, strict=True) if not d and p["label"] is True]
    total = sum(latencies)
    ordinary = [t for t, p in zip(latencies, data, strict=True) if p["category"] != "pathological"]
    return {
        "scorer": name,
        "pairs": len(data),
        "labelled": len(labelled),
        "accuracy": correct / len(labelled),
        "false_accepts": len(false_accepts),
        "false_rejects": len(false_rejects),
        "false_accept_examples": [(p["response"][-60:], p["reference"]) for p in false_accepts[:10]],
        "false_reject_examples": [(p["response"][-60:], p["reference"]) for p in false_rejects[:40]],
        "verifications_per_s": len(data) / total,
        "verifications_per_s_excluding_pathological": len(ordinary) / sum(ordinary),
        "median_ms": statistics.median(latencies) * 1e3,
        "p99_ms": _percentile(latencies, 0.99) * 1e3,
        "max_ms": max(latencies) * 1e3,
        "decisions": decisions,
    }


def run(verbose: bool = True) -> dict[str, Any]:
    """Score the answer set with both scorers; returns both result rows and the ratios."""
    sys.path.insert(0, str(ROOT / "verifiers"))
    from math_verify import parse, verify

    from rlvr_verifiers import registry
    from rlvr_verifiers.base import Item

    ours = registry.get("math")
    data = pairs()

    def mv_decide(response: str, reference: str) -> bool:
        gold = reference if "\\boxed" in reference else "\\boxed{" + reference + "}"
        return verify(parse(gold), parse(response))

    def ours_decide(response: str, reference: str) -> bool:
        return ours.verify(Item(response, reference)).status == "ok"

    # Warm-up outside the timed runs: imports, regex caches, and our sympy worker process.
    for decide in (mv_decide, ours_decide):
        decide("\\boxed{\\frac{1}{1+\\sqrt2}}", "\\sqrt2-1")
        decide("\\boxed{\\sin^2 x+\\cos^2 x}", "1")
    mv = _score("math-verify 0.9.0", mv_decide, data)
    us = _score("rlvr math", ours_decide, data)
    ratios = {
        "throughput_x": us["verifications_per_s"] / mv["verifications_per_s"],
        # Without the 5 pathological pairs, where math-verify waits for its own 5 s timeouts:
        "throughput_x_excluding_pathological": us["verifications_per_s_excluding_pathological"]
        / mv["verifications_per_s_excluding_pathological"],
        "median_latency_x": mv["median_ms"] / us["median_ms"],
        "p99_latency_x": mv["p99_ms"] / us["p99_ms"],
        "accuracy_diff_pts": (us["accuracy"] - mv["accuracy"]) * 100,
    }
    by_cat: dict[str, list[int]] = {}
    for p, d_mv, d_us in zip(data, mv["decisions"], us["decisions"], strict=True):
        if p["label"] is None:
            continue
        row = by_cat.setdefault(p["category"], [0, 0, 0])
        row[0] += 1
        row[1] += d_mv == p["label"]
        row[2] += d_us == p["label"]
    result = {
        "math_verify": {k: v for k, v in mv.items() if k != "decisions"},
        "ours": {k: v for k, v in us.items() if k != "decisions"},
        "ratios": ratios,
        "by_category": {
            c: {"n": r[0], "math_verify_correct": r[1], "ours_correct": r[2]} for c, r in by_cat.items()
        },
        "targets_met": {
            "zero_false_accepts": us["false_accepts"] == 0,
            "throughput_10x": ratios["throughput_x_excluding_pathological"] >= 10,
            "accuracy_at_least_math_verify": us["accuracy"] >= mv["accuracy"],
        },
    }
    if verbose:
        _print(result)
    return result


def _print(result: dict[str, Any]) -> None:
    mv, us, r = result["math_verify"], result["ours"], result["ratios"]
    print(f"math answer set: {mv['pairs']} pairs, {mv['labelled']} with an unambiguous label")
    print(
        f"{'scorer':<20} {'accuracy':>9} {'false acc':>9} {'false rej':>9} {'verif/s':>9} {'median ms':>10} {'p99 ms':>8} {'max ms':>8}"
    )
    for row in (mv, us):
        print(
            f"{row['scorer']:<20} {row['accuracy'] * 100:8.1f}% {row['false_accepts']:>9} {row['false_rejects']:>9} "
            f"{row['verifications_per_s']:9.0f} {row['median_ms']:10.3f} {row['p99_ms']:8.2f} {row['max_ms']:8.1f}"
        )
    print(
        f"ratios (ours vs math-verify): throughput {r['throughput_x']:.1f}x "
        f"({r['throughput_x_excluding_pathological']:.1f}x without the pathological pairs), "
        f"median latency {r['median_latency_x']:.1f}x, "
        f"p99 latency {r['p99_latency_x']:.1f}x, accuracy {r['accuracy_diff_pts']:+.1f} points"
    )
    print("per category (labelled n / math-verify correct / ours correct):")
    for cat, c in result["by_category"].items():
        print(f"  {cat:<18} {c['n']:>4} {c['math_verify_correct']:>4} {c['ours_correct']:>4}")
    for row in (mv, us):
        if row["false_accept_examples"]:
            print(f"{row['scorer']} false accepts: {row['false_accept_examples']}")
        if row["false_reject_examples"]:
            print(f"{row['scorer']} false rejects: {row['false_reject_examples']}")
    print(f"targets: {result['targets_met']}")


CORPUS = ROOT / "tests" / "verifiers" / "data" / "math_answers.jsonl"
# Equivalence cases of other projects' answer-grading tests, re-encoded in our own words, one family per
# kind of case and the project it comes from in each pair's "source" (see tests/verifiers/test_math_graders.py).
GRADERS_CORPUS = ROOT / "tests" / "verifiers" / "data" / "math_answers_graders.jsonl"


def corpus_pairs(path: Path = CORPUS) -> list[dict[str, Any]]:
    """The labelled corpus of answer forms real datasets use (tests/verifiers/data/math_answers.jsonl):
    full responses as a model writes them (Minerva "Final Answer" sentences, GSM8K `####`, boxes, R1
    `<think>` outputs) against references, one family tag per pair."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_corpus(verbose: bool = True, path: Path = CORPUS) -> dict[str, Any]:
    """Both scorers on the corpus: accuracy, false accepts and false rejects per family and overall,
    side by side, and throughput (same process, one after the other, each warmed up first)."""
    sys.path.insert(0, str(ROOT / "verifiers"))
    from math_verify import parse, verify

    from rlvr_verifiers import registry
    from rlvr_verifiers.base import Item

    ours = registry.get("math")
    data = corpus_pairs(path)

    def mv_decide(response: str, reference: str) -> bool:
        gold = reference if "\\boxed" in reference else "\\boxed{" + reference + "}"
        return verify(parse(gold), parse(response))

    def ours_decide(response: str, reference: str) -> bool:
        return ours.verify(Item(response, reference)).status == "ok"

    for decide in (mv_decide, ours_decide):
        decide("\\boxed{\\frac{1}{1+\\sqrt2}}", "\\sqrt2-1")
        decide("\\boxed{\\sin^2 x+\\cos^2 x}", "1")
    # The "reasoning" family (R1 `<think>` outputs) is labelled by the shared reasoning-block rule
    # (rlvr_verifiers/reasoning.py): where that rule is not in this tree yet, the family is shown on its
    # own line and left out of the overall figures and the targets.
    import importlib.util

    reasoning_rule = importlib.util.find_spec("rlvr_verifiers.reasoning") is not None
    rows = [dict(p, category=p["family"]) for p in data]
    counted = [p for p in rows if reasoning_rule or p["family"] != "reasoning"]
    mv = _score("math-verify 0.9.0", mv_decide, counted)
    us = _score("rlvr math", ours_decide, counted)
    pending = [p for p in rows if p not in counted]
    mv_pending = _score("math-verify 0.9.0", mv_decide, pending) if pending else None
    us_pending = _score("rlvr math", ours_decide, pending) if pending else None
    families: dict[str, dict[str, int]] = {}
    all_mv = mv["decisions"] + (mv_pending["decisions"] if pending else [])
    all_us = us["decisions"] + (us_pending["decisions"] if pending else [])
    for p, d_mv, d_us in zip(counted + pending, all_mv, all_us, strict=True):
        if p["label"] is None:  # a form the suites label both ways: shown in no figure
            continue
        f = families.setdefault(p["family"], {"n": 0})
        f["n"] += 1
        for key, d in (("mv", d_mv), ("ours", d_us)):
            f[f"{key}_correct"] = f.get(f"{key}_correct", 0) + (d == p["label"])
            f[f"{key}_false_accepts"] = f.get(f"{key}_false_accepts", 0) + (d and not p["label"])
            f[f"{key}_false_rejects"] = f.get(f"{key}_false_rejects", 0) + (not d and p["label"])
    result = {
        "corpus": str(path.relative_to(ROOT)),
        "math_verify": {k: v for k, v in mv.items() if k != "decisions"},
        "ours": {k: v for k, v in us.items() if k != "decisions"},
        "by_family": families,
        "reasoning_rule_present": reasoning_rule,
        "throughput_x": us["verifications_per_s"] / mv["verifications_per_s"],
        "targets_met": {
            "zero_false_accepts": us["false_accepts"] == 0,
            "accuracy_at_least_math_verify_in_every_family": all(
                f["ours_correct"] >= f["mv_correct"]
                for name, f in families.items()
                if reasoning_rule or name != "reasoning"
            ),
            "accuracy_at_least_math_verify_overall": us["accuracy"] >= mv["accuracy"],
            "throughput_10x": us["verifications_per_s"] >= 10 * mv["verifications_per_s"],
        },
    }
    if verbose:
        _print_corpus(result)
    return result


def _print_corpus(result: dict[str, Any]) -> None:
    mv, us = result["math_verify"], result["ours"]
    n_all = sum(f["n"] for f in result["by_family"].values())
    print(f"corpus: {n_all} labelled pairs ({result['corpus']})")
    print(
        f"{'family':<16} {'n':>4} | {'math-verify acc':>15} {'FA':>3} {'FR':>3} | {'rlvr acc':>8} {'FA':>3} {'FR':>3}"
    )
    for name, f in sorted(result["by_family"].items()):
        if name == "reasoning" and not result["reasoning_rule_present"]:
            continue
        print(
            f"{name:<16} {f['n']:>4} | {100 * f['mv_correct'] / f['n']:14.1f}% {f['mv_false_accepts']:>3} "
            f"{f['mv_false_rejects']:>3} | {100 * f['ours_correct'] / f['n']:7.1f}% {f['ours_false_accepts']:>3} "
            f"{f['ours_false_rejects']:>3}"
        )
    print(
        f"{'overall':<16} {mv['pairs']:>4} | {100 * mv['accuracy']:14.1f}% {mv['false_accepts']:>3} "
        f"{mv['false_rejects']:>3} | {100 * us['accuracy']:7.1f}% {us['false_accepts']:>3} {us['false_rejects']:>3}"
    )
    f = result["by_family"].get("reasoning")
    if f and not result["reasoning_rule_present"]:
        print(
            f"{'reasoning*':<16} {f['n']:>4} | {100 * f['mv_correct'] / f['n']:14.1f}% {f['mv_false_accepts']:>3} "
            f"{f['mv_false_rejects']:>3} | {100 * f['ours_correct'] / f['n']:7.1f}% {f['ours_false_accepts']:>3} "
            f"{f['ours_false_rejects']:>3}"
        )
        print(
            "  * not counted above: labelled by the reasoning-block rule (rlvr_verifiers/reasoning.py), not in this tree"
        )
    print(
        f"throughput: rlvr {us['verifications_per_s']:.0f}/s vs math-verify {mv['verifications_per_s']:.0f}/s "
        f"= {result['throughput_x']:.1f}x (median {us['median_ms']:.3f} vs {mv['median_ms']:.3f} ms)"
    )
    for row in (mv, us):
        if row["false_accept_examples"]:
            print(f"{row['scorer']} false accepts: {row['false_accept_examples']}")
        if row["false_reject_examples"]:
            print(f"{row['scorer']} false rejects: {row['false_reject_examples']}")
    print(f"targets: {result['targets_met']}")


REAL_CORPUS = ROOT / "tests" / "verifiers" / "data" / "math_real_outputs.jsonl"


def run_real(verbose: bool = True, path: Path = REAL_CORPUS) -> dict[str, Any]:
    """Both scorers on real model generations (tests/verifiers/data/math_real_outputs.jsonl): accuracy,
    false accepts and false rejects overall, per source, per answer type and per split (dev vs held-out
    sources); debatable rows are counted apart. Each item carries the settings it was generated under
    (`think_prefilled`); math-verify reads the whole response, as it does in a reward function."""
    sys.path.insert(0, str(ROOT / "verifiers"))
    from math_verify import parse, verify

    from rlvr_verifiers import registry
    from rlvr_verifiers.base import Item

    ours = registry.get("math")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def mv_decide(row: dict[str, Any]) -> bool:
        gold = row["gold"] if "\\boxed" in row["gold"] else "\\boxed{" + row["gold"] + "}"
        try:
            return bool(verify(parse(gold), parse(row["response"])))
        except Exception:  # noqa: BLE001 - a crash is a reject, as in a reward function
            return False

    def ours_decide(row: dict[str, Any]) -> bool:
        return ours.verify(Item(row["response"], row["gold"], row.get("extra") or {})).status == "ok"

    groups: dict[str, dict[str, dict[str, int]]] = {
        "overall": {},
        "split": {},
        "source": {},
        "answer_type": {},
    }
    statuses: dict[str, int] = {}
    errors: dict[str, list[str]] = {
        "rlvr_false_accepts": [],
        "rlvr_false_rejects": [],
        "mv_false_accepts": [],
    }
    for row in rows:
        d_mv, d_us = mv_decide(row), ours_decide(row)
        status = ours.verify(Item(row["response"], row["gold"], row.get("extra") or {})).status
        statuses[status] = statuses.get(status, 0) + 1
        keys = {
            "overall": "all",
            "split": row["split"],
            "source": row["source"],
            "answer_type": row["answer_type"],
        }
        for group, key in keys.items():
            g = groups[group].setdefault(
                key,
                {
                    "n": 0,
                    "debatable": 0,
                    "mv_ok": 0,
                    "mv_fa": 0,
                    "mv_fr": 0,
                    "us_ok": 0,
                    "us_fa": 0,
                    "us_fr": 0,
                },
            )
            if row["label"] is None:
                g["debatable"] += 1
                continue
            g["n"] += 1
            for name, d in (("mv", d_mv), ("us", d_us)):
                g[f"{name}_ok"] += d == row["label"]
                g[f"{name}_fa"] += d and not row["label"]
                g[f"{name}_fr"] += (not d) and row["label"]
        if row["label"] is not None:
            if d_us and not row["label"]:
                errors["rlvr_false_accepts"].append(row["id"])
            if not d_us and row["label"]:
                errors["rlvr_false_rejects"].append(row["id"])
            if d_mv and not row["label"]:
                errors["mv_false_accepts"].append(row["id"])
    result = {
        "corpus": str(path.relative_to(ROOT)),
        "groups": groups,
        "rlvr_statuses": statuses,
        "errors": errors,
    }
    if verbose:
        _print_real(result)
    return result


def _print_real(result: dict[str, Any]) -> None:
    print(
        f"real model outputs ({result['corpus']}); FA = false accepts, FR = false rejects; debatable rows apart"
    )
    print(
        f"{'group':<28} {'n':>4} {'deb':>4} | {'math-verify':>11} {'FA':>3} {'FR':>3} | {'rlvr':>6} {'FA':>3} {'FR':>3}"
    )
    for group in ("overall", "split", "source", "answer_type"):
        for key, g in sorted(result["groups"][group].items()):
            n = g["n"] or 1
            print(
                f"{group + ':' + key:<28} {g['n']:>4} {g['debatable']:>4} | {100 * g['mv_ok'] / n:10.1f}% "
                f"{g['mv_fa']:>3} {g['mv_fr']:>3} | {100 * g['us_ok'] / n:5.1f}% {g['us_fa']:>3} {g['us_fr']:>3}"
            )
    print(f"rlvr statuses: {result['rlvr_statuses']}")
    for k, v in result["errors"].items():
        print(f"{k}: {v}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dump", help="write the adversarial answer set as JSONL to this path and exit")
    ap.add_argument(
        "--set",
        choices=("adversarial", "corpus", "graders", "real", "both", "all"),
        default="all",
        help="the built-in adversarial set, the dataset-forms corpus, the other projects' grader cases "
        "(both in tests/verifiers/data/), both = the first two, all = the three",
    )
    args = ap.parse_args()
    if args.dump:
        with open(args.dump, "w") as f:
            f.writelines(json.dumps(pair) + "\n" for pair in pairs())
        return 0
    print(f"load average at start: {os.getloadavg()[0]:.1f} (1 min)")
    if args.set in ("adversarial", "both", "all"):
        run()
    if args.set in ("corpus", "both", "all"):
        print()
        run_corpus()
    if args.set in ("graders", "all"):
        print()
        run_corpus(path=GRADERS_CORPUS)
    if args.set in ("real", "all"):
        print()
        run_real()
    print(f"load average at end: {os.getloadavg()[0]:.1f} (1 min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
