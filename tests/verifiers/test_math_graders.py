r"""The `math` verifier on the equivalence cases other projects' answer graders test (issue 11), and on the
forms where math-verify's own suite still led: a double's rendering of a fraction, matrix arithmetic
written as the answer, a solution tuple listed twice, labelled solution groups, TeX commands mangled
by a non-raw string literal, plain-text exponents.

Threat model: each of these is a new way for a response to be paid, so each comes with the near misses
it must reject (a shorter decimal, a decimal of an irrational, a wrong last digit; a product in the other
order, mismatched shapes, a transpose; a repeat that hides a missing solution; a group in another order;
a tab before "ext"). The corpus tests/verifiers/data/math_answers_graders.jsonl holds these cases in our
own words, each pair with the project whose tests it follows; a label is null where those suites
disagree with each other (not counted anywhere).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from rlvr_verifiers import registry
from rlvr_verifiers.base import Item

MATH = registry.get("math")
CORPUS = Path(__file__).parent / "data" / "math_answers_graders.jsonl"
ROWS = [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


def accepted(response: str, reference: str) -> bool:
    return MATH.verify(Item(response, reference)).status == "ok"


def test_corpus_records_a_source_per_pair_and_both_labels_per_family() -> None:
    assert len(ROWS) >= 100
    assert all(r["source"] and r["why"] for r in ROWS)
    assert len({r["source"] for r in ROWS}) >= 4
    labels = Counter((r["family"], r["label"]) for r in ROWS)
    for family in {r["family"] for r in ROWS}:
        assert labels[(family, True)] >= 1 and labels[(family, False)] >= 1, family


@pytest.mark.parametrize(
    "row",
    [r for r in ROWS if r["label"] is not None],
    ids=lambda r: f"{r['family']}-{'eq' if r['label'] else 'ne'}-{r['why'][:40]}",
)
def test_grader_case_is_decided_as_labelled(row) -> None:
    v = MATH.verify(Item(row["response"], row["reference"]))
    assert (v.status == "ok") is row["label"], (row, v)


def test_no_pair_of_the_corpus_is_falsely_accepted() -> None:
    # Read pair by pair above too; kept as one assertion that names every false accept at once.
    wrong = [r for r in ROWS if r["label"] is False and accepted(r["response"], r["reference"])]
    assert not wrong


def test_quick_path_gives_the_full_verdict_on_the_grader_cases() -> None:
    decided = 0
    for row in ROWS:
        item = Item(row["response"], row["reference"])
        quick = MATH.quick(item)
        if quick is not None:
            decided += 1
            assert quick.status == MATH.verify(item).status, row
    assert decided >= len(ROWS) // 2


@pytest.mark.parametrize(
    "answer,reference,equal",
    [
        # A double's rendering (14-17 significant digits) of a rational with no finite decimal.
        ("0.0833333333333333", r"\frac{1}{12}", True),  # truncated
        ("0.0833333333333334", r"\frac{1}{12}", False),  # neither rounded nor truncated
        ("0.142857142857143", r"\frac{1}{7}", True),  # rounded half-up
        ("0.142857142857142", r"\frac{1}{7}", True),  # truncated
        ("0.142857142857144", r"\frac{1}{7}", False),
        ("-0.142857142857143", r"-\frac{1}{7}", True),
        ("-0.142857142857143", r"\frac{1}{7}", False),
        ("0.1428571428571", r"\frac{1}{7}", False),  # 13 digits: an approximation
        ("0.142857142857142857142857", r"\frac{1}{7}", False),  # no double prints 24 digits
        ("0.125000000000001", r"\frac{1}{8}", False),  # 1/8 has a finite decimal: only 0.125 is equal
        ("3.14159265358979", r"\pi", False),  # no decimal is an irrational value
        ("1.41421356237310", r"\sqrt{2}", False),
        ("0.0833333333333333", "x", False),
        ("0.0833333333333333", r"y = \frac{1}{12}", False),  # a labelled reference is not a bare value
        ("(0.333333333333333, 1)", r"(\frac{1}{3}, 1)", False),  # only a bare decimal, not inside a tuple
    ],
)
def test_a_double_rendering_of_a_fraction(answer: str, reference: str, equal: bool) -> None:
    assert accepted(rf"$\boxed{{{answer}}}$", reference) is equal


@pytest.mark.parametrize(
    "answer,reference,equal",
    [
        (
            r"\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix} + \begin{pmatrix}5 & 6 \\ 7 & 8\end{pmatrix}",
            r"\begin{pmatrix}6 & 8 \\ 10 & 12\end{pmatrix}",
            True,
        ),
        (
            r"\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix} + \begin{pmatrix}5 & 6 \\ 7 & 8\end{pmatrix}",
            r"\begin{pmatrix}6 & 8 \\ 10 & 13\end{pmatrix}",
            False,
        ),
        (
            r"\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix} - \begin{pmatrix}5 & 6 \\ 7 & 8\end{pmatrix}",
            r"\begin{pmatrix}-4 & -4 \\ -4 & -4\end{pmatrix}",
            True,
        ),
        (  # AB != BA: the product is in the written order
            r"\begin{pmatrix}1 & 1 \\ 0 & 1\end{pmatrix}\begin{pmatrix}1 & 0 \\ 1 & 1\end{pmatrix}",
            r"\begin{pmatrix}2 & 1 \\ 1 & 1\end{pmatrix}",
            True,
        ),
        (
            r"\begin{pmatrix}1 & 1 \\ 0 & 1\end{pmatrix}\begin{pmatrix}1 & 0 \\ 1 & 1\end{pmatrix}",
            r"\begin{pmatrix}1 & 1 \\ 1 & 2\end{pmatrix}",
            False,
        ),
        (
            r"\begin{pmatrix}1 & 0 \\ 0 & 1\end{pmatrix} \cdot \begin{pmatrix}a & b \\ c & d\end{pmatrix}",
            r"\begin{pmatrix}a & b \\ c & d\end{pmatrix}",
            True,
        ),
        (r"3\begin{pmatrix}1 & -1\end{pmatrix}", r"\begin{pmatrix}3 & -3\end{pmatrix}", True),
        (r"3\begin{pmatrix}1 & -1\end{pmatrix}", r"\begin{pmatrix}3 & 3\end{pmatrix}", False),
        (  # 2x1 times 2x1 is no product: not evaluated, never equal
            r"\begin{pmatrix}1 \\ 2\end{pmatrix}\begin{pmatrix}3 \\ 4\end{pmatrix}",
            r"\begin{pmatrix}3 \\ 8\end{pmatrix}",
            False,
        ),
        (  # shapes of a sum disagree
            r"\begin{pmatrix}1 & 2\end{pmatrix} + \begin{pmatrix}1 \\ 2\end{pmatrix}",
            r"\begin{pmatrix}2 & 4\end{pmatrix}",
            False,
        ),
        (  # a determinant, an inverse or a transpose is not evaluated
            r"\det\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}\begin{pmatrix}1 & 0 \\ 0 & 1\end{pmatrix}",
            r"\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}",
            False,
        ),
        (
            r"\begin{pmatrix}1 & 2\end{pmatrix}^T\begin{pmatrix}1 & 1\end{pmatrix}",
            r"\begin{pmatrix}1 & 1 \\ 2 & 2\end{pmatrix}",
            False,
        ),
        (r"x\begin{pmatrix}1 & 0\end{pmatrix}", r"\begin{pmatrix}x & 0\end{pmatrix}", False),
    ],
)
def test_matrix_arithmetic_written_as_the_answer(answer: str, reference: str, equal: bool) -> None:
    assert accepted(rf"The result is $\boxed{{{answer}}}$.", reference) is equal


@pytest.mark.parametrize(
    "answer,reference,equal",
    [
        (r"(1,2),(2,1),(1,2)", r"(1,2),(2,1)", True),
        (r"(1,2),(2,1),(1,2),(2,1)", r"(2,1),(1,2)", True),
        (r"(1,2),(1,2)", r"(1,2),(2,1)", False),  # the repeat hides a missing solution
        (r"(1,2),(2,1),(1,2)", r"(1,2),(2,1),(3,3)", False),
        (r"(1,2),(2,1),(2,2)", r"(1,2),(2,1)", False),
        (r"1, 1, 2", r"1, 2", False),  # numbers stay a multiset (roots with multiplicity)
        (r"(1,2),(1,2)", r"(1,2),(1,2)", True),
        (r"(1,2),(2,1)", r"(1,2),(1,2),(2,1)", False),  # the reference repeats one: multiset
    ],
)
def test_a_solution_tuple_listed_twice(answer: str, reference: str, equal: bool) -> None:
    assert accepted(rf"$\boxed{{{answer}}}$", reference) is equal


@pytest.mark.parametrize(
    "answer,reference,equal",
    [
        (r"p=5,q=2;p=7,q=2", r"(5,2),(7,2)", True),
        (r"p=5,q=2;p=7,q=2", r"(7,2),(5,2)", True),
        (r"p=5,q=2;p=7,q=2", r"(2,5),(2,7)", False),
        (r"p=5,q=2;p=7,q=2", r"(5,2)", False),
        (r"p=5,q=2;q=2,p=7", r"(5,2),(7,2)", False),  # groups naming the unknowns in another order
        (r"p=5,q=2;p=7", r"(5,2),(7,2)", False),
        (r"(5,2),(7,2)", r"p=5,q=2;p=7,q=2", True),
    ],
)
def test_labelled_solution_groups(answer: str, reference: str, equal: bool) -> None:
    assert accepted(rf"$\boxed{{{answer}}}$", reference) is equal


@pytest.mark.parametrize(
    "response,reference,equal",
    [
        ("$\\frac{1}{4}$", "$\x0crac{1}{4}$", True),  # "\frac" in a non-raw string: form feed + "rac"
        ("$\\frac{1}{4}$", "$\x0crac{1}{5}$", False),
        ("$\\boxed{\x0crac{1}{4}}$", "\\frac14", True),
        ("$\\boxed{\x0crac{1}{4}}$", "\\frac15", False),
        ("$\\boxed{13}$", "$\text{13}$", False),  # a tab stays whitespace: "<tab>ext{13}" is not 13
    ],
)
def test_tex_commands_mangled_by_a_non_raw_string(response: str, reference: str, equal: bool) -> None:
    assert accepted(response, reference) is equal


@pytest.mark.parametrize(
    "answer,reference,equal",
    [
        ("2^10", "1024", True),  # plain text (no TeX, no braces): 2 to the 10th
        ("2^10", "20", False),
        ("7w^13(7w^13+2)", r"7w^{13}(2+7w^{13})", True),
        ("7w^13(7w^13+2)", r"7w^{13}(2-7w^{13})", False),
        (r"2^10 \pi", r"1024\pi", False),  # a TeX command in the answer: an unbraced 10 stays ambiguous
        (r"2^{1}0", "1024", False),
        ("x^23", r"3x^2", False),
    ],
)
def test_plain_text_exponents(answer: str, reference: str, equal: bool) -> None:
    assert accepted(f"The answer is {answer}", reference) is equal


@pytest.mark.parametrize(
    "answer,reference",
    [
        (r"-3 \le y \le 4", r"y \in [-3, 4]"),  # math-verify's default: an interval reference asks for it
        (r"-3 < y < 4", "(-3, 4)"),  # (-3, 4) may be a point
        (r"\{2, 5\}", "(2, 5)"),  # a set is neither the interval nor the pair
        ("{2, 5}", "(2, 5)"),  # grouping braces: the list 2, 5
        ("(2, 5)", r"\{2, 5\}"),
    ],
)
def test_interval_tuple_and_set_readings_stay_apart(answer: str, reference: str) -> None:
    assert not accepted(rf"$\boxed{{{answer}}}$", reference)


def test_matrix_arithmetic_is_bounded() -> None:
    # Products of products grow each cell's expression: more than four matrices are not evaluated.
    m = r"\begin{pmatrix}" + r"\\".join(" & ".join(["1"] * 10) for _ in range(10)) + r"\end{pmatrix}"
    v = MATH.verify(Item(rf"$\boxed{{{m * 30}}}$", m))
    assert v.status != "ok"
    assert "too_complex" in v.detail
    four = MATH.verify(Item(rf"$\boxed{{{m * 4}}}$", m))  # 10x10 ones^4 = 1000 * ones: not ones
    assert four.status == "wrong"


@pytest.mark.parametrize(
    "response,reference,equal",
    [
        # A response that is the bare matrix (a grader comparing extracted strings): the environment's
        # name is no prose word.
        (r"\begin{pmatrix}1&0\\0&1\end{pmatrix}", r"\begin{bmatrix}1 & 0\\ 0 & 1\end{bmatrix}", True),
        (r"\begin{pmatrix}1&0\\0&1\end{pmatrix}", r"\begin{bmatrix}0 & 1\\ 1 & 0\end{bmatrix}", False),
        (
            r"The matrix is \begin{pmatrix}1&0\\0&1\end{pmatrix} or its inverse",
            r"\begin{pmatrix}1&0\\0&1\end{pmatrix}",
            False,
        ),
        # A stray backslash after the value.
        ("185\\", "185", True),
        ("185\\", "186", False),
        ("\\", "185", False),
    ],
)
def test_bare_matrices_and_a_stray_backslash(response: str, reference: str, equal: bool) -> None:
    assert accepted(response, reference) is equal


@pytest.mark.parametrize(
    "answer,reference,equal",
    [
        (r"\{1,3\} \cup \{2,4\}", r"\{1,2,3,4\}", True),
        (r"{1,3} \cup {2,4}", r"{1,2,3,4}", True),  # braces that only group, as models write them
        (r"\{1,2,3,4\}", r"\{4,3\} \cup \{1,2\}", True),
        (r"\{1,3\} \cup \{3,4\}", r"\{1,3,4\}", True),  # a shared element counts once in a union
        (r"\{1,3\} \cup \{2,4\}", r"\{1,2,3\}", False),
        (r"\{1,3\} \cup \{2,4\}", r"\{1,2,3,4,5\}", False),
        (r"[1,3] \cup \{4\}", r"\{1,3,4\}", False),  # an interval is not its two ends
        (r"(1,3) \cup (4,5)", r"\{1,3,4,5\}", False),
    ],
)
def test_a_union_of_finite_sets_is_their_set(answer: str, reference: str, equal: bool) -> None:
    assert accepted(rf"$\boxed{{{answer}}}$", reference) is equal


@pytest.mark.parametrize(
    "response,reference,equal",
    [
        (r"$\frac{d}{dy}(y^3) = 3y^2$", "3y^2", True),  # a derivative stated = its value
        (r"$\frac{d^2}{dx^2}(x^3) = 6x$", "6x", True),
        (r"$\frac{d}{dy}(y^3) = 3y^2$", "3y", False),
        (r"$\frac{d}{dy}(y^3) = 3y^2$", r"\frac{d}{dy}(y^3) = 3y", False),
        (r"$\frac{d}{dx}x^3$", "3x^2", False),  # the derivative itself is not evaluated
        (r"$\frac{dy}{dx} = 2$", "2", True),  # dy/dx names what is given (a plain label)
    ],
)
def test_a_derivative_stated_equal_to_its_value(response: str, reference: str, equal: bool) -> None:
    assert accepted(response, reference) is equal


@pytest.mark.parametrize(
    "response,reference,equal",
    [
        ("Total : 3,45 $ par article.", "3.45", True),  # a decimal comma in prose, a currency sign after
        ("Total : 3,45 $ par article.", "345", False),  # never a thousands group
        ("Total : 3,45 $ par article.", "3.54", False),
        ("The values are 3,45.", "3, 45", True),  # the same token read as a list
        ("The values are 3, 45.", "3.45", False),  # with a space it is a list only
        ("It costs 1,250 dollars.", "1250", True),  # a three-digit group is thousands
        ("It costs 1,250 dollars.", "1.25", False),
    ],
)
def test_a_decimal_comma_in_prose(response: str, reference: str, equal: bool) -> None:
    assert accepted(response, reference) is equal


@pytest.mark.parametrize(
    "answer,reference,equal",
    [
        # A reference absolute-value inequality is answered by the set it describes (as a reference
        # inequality is answered by its interval); never the other way round.
        (r"z \in [-\frac{3}{2}, -1] \cup [1, \frac{3}{2}]", r"1 \le |z| \le \frac{3}{2}", True),
        (r"[-2, -1) \cup (1, 2]", r"1 < |z| \le 2", True),
        (r"[-2, -1) \cup (1, 2]", r"1 \le |z| \le 2", False),  # ends open where the reference is closed
        (r"[1, 2]", r"1 \le |z| \le 2", False),  # half of the set
        (r"[-2, 2]", r"1 \le |z| \le 2", False),
        (r"(-2, 2)", r"|x| < 2", True),
        (r"[-2, 2]", r"|x| < 2", False),
        (r"(0, 2)", r"|x| < 2", False),
        (r"[-2, -1] \cup [1, 2]", r"-1 \le |z| \le 2", False),  # a negative lower end is not this shape
        (r"1 \le |z| \le 2", r"[-2, -1] \cup [1, 2]", False),  # a set reference asks for the set
    ],
)
def test_an_absolute_value_inequality_reference_and_its_set(answer: str, reference: str, equal: bool) -> None:
    assert accepted(rf"$\boxed{{{answer}}}$", reference) is equal
