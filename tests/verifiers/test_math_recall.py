r"""The `math` verifier on the answer forms real datasets and model outputs use (issue 11): each family is
accepted in its equivalent forms and its near misses are rejected, and an answer that is hedged, stated
twice differently, or hidden behind a label or an earlier box is never paid.

Threat model: the policy is paid for whatever the verifier reads as its final answer. A rule that reads
a list of candidates as "one of them matches", an earlier box, an intermediate equation or a value the
sentence negates is a reward-hacking channel; so every new reading rule below comes with the near miss
it must reject. The labelled corpus (tests/verifiers/data/math_answers.jsonl) is checked pair by pair.
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections import Counter
from pathlib import Path

import pytest

from rlvr_verifiers import registry
from rlvr_verifiers.base import Item
from rlvr_verifiers.math import check, extract_answer

MATH = registry.get("math")
CORPUS = Path(__file__).parent / "data" / "math_answers.jsonl"
ROWS = [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]
# R1 `<think>` pairs are labelled by the shared reasoning-block rule (rlvr_verifiers/reasoning.py). It is part
# of the product: if the module disappears the corpus must fail loudly, never silently drop those rows.
REASONING_RULE = importlib.util.find_spec("rlvr_verifiers.reasoning") is not None
assert REASONING_RULE, "rlvr_verifiers.reasoning is missing: the 'reasoning' corpus rows cannot be decided"


def verdict(response: str, reference: str):
    return MATH.verify(Item(response, reference))


def accepted(response: str, reference: str) -> bool:
    return verdict(response, reference).status == "ok"


# ------------------------------------------------------------------------------------------ the corpus


def test_corpus_covers_every_family_in_both_directions() -> None:
    assert len(ROWS) >= 400
    by_family = Counter((r["family"], r["label"]) for r in ROWS)
    families = {r["family"] for r in ROWS}
    assert {
        "final_text",
        "labelled",
        "multi_box",
        "relations",
        "lists",
        "matrices",
        "tex_spelling",
        "units",
        "final_statement",
        "reasoning",
    } <= families
    for family in families:
        assert by_family[(family, True)] >= 5 and by_family[(family, False)] >= 5, family
    assert {r["source"] for r in ROWS} >= {"math", "gsm8k", "aime", "olympiad", "minerva", "r1"}


@pytest.mark.parametrize(
    "row",
    [r for r in ROWS if REASONING_RULE or r["family"] != "reasoning"],
    ids=lambda r: f"{r['family']}-{'eq' if r['label'] else 'ne'}-{r['why'][:40]}",
)
def test_corpus_pair_is_decided_as_labelled(row) -> None:
    v = verdict(row["response"], row["reference"])
    assert (v.status == "ok") is row["label"], (row, v)


def test_quick_path_gives_the_full_verdict_on_the_corpus() -> None:
    # The pool trusts `quick` in the trainer's process: wherever it decides, it must say what verify says.
    decided = 0
    for row in ROWS:
        item = Item(row["response"], row["reference"])
        quick = MATH.quick(item)
        if quick is not None:
            decided += 1
            full = MATH.verify(item)
            assert (quick.score, quick.status, quick.detail) == (full.score, full.status, full.detail), row
    assert decided >= 0.8 * len(ROWS)


# ------------------------------------------------------------------- full-text answers without a box


@pytest.mark.parametrize(
    "response,reference,equal",
    [
        ("Final Answer: The final answer is 12,000,023. I hope it is correct.", "12000023", True),
        ("Final Answer: The final answer is 12,000,023. I hope it is correct.", "12000032", False),
        ("Final Answer: The largest $n$ is 34.", "34", True),
        ("Final Answer: The largest $n$ is 34.", "35", False),
        ("Answer $ 9 $", "9", True),
        ("Answer \\[ 9 \\]", "9", True),
        ("Answer $ 9 $", "8", False),
        ("The answer is: 5", "5", True),
        ("The answer is: 5", "6", False),
        ("Adding up:\n#### 72", "72", True),
        ("Adding up:\n#### 72", "27", False),
        ("The answer is 15 (the number of marbles left).", "15", True),
        ("The answer is 15 (the number of marbles left).", "16", False),
        ("ANSWER: 3/4", "0.75", True),
        ("<think>sum</think>\n<answer>42</answer>", "42", True),
        ("<think>sum</think>\n<answer>41</answer>", "42", False),
    ],
)
def test_answers_in_prose_end_at_the_sentence(response, reference, equal) -> None:
    assert accepted(response, reference) is equal


@pytest.mark.parametrize(
    "response,expected",
    [
        ("Final Answer: The final answer is 12,000,023. I hope it is correct.", "12,000,023"),
        ("Final Answer: The final answer is $\\frac{3}{7}$. I hope it is correct.", "\\frac{3}{7}"),
        ("Final Answer: The largest $n$ is 34.", "34"),
        ("The answer is 5 (the remaining apples).", "5"),
        ("Natalia sold 48 clips.\n#### 72", "72"),
        ("So she makes $18 every day.", "18"),
        ("The distance is 125 miles.", "125 \\text{ miles}"),
        ("The roots are 2 and 3.", "2, 3"),
        ("There are 12 distinct sequences. I hope it is correct.", "12"),
    ],
)
def test_extraction_of_prose_answers(response, expected) -> None:
    assert extract_answer(response) == expected


# -------------------------------------------------------------------- the final statement, not a guess


def test_an_earlier_equation_in_the_last_paragraph_is_not_the_answer() -> None:
    # The latent false accept: the paragraph's last sentence states 12; `d = 90/n` came earlier.
    response = (
        "Let $d = \\frac{90}{n}$ be the common difference; each divisor $n$ of 90 gives one sequence, so there"
        " are 12 distinct sequences. I hope it is correct."
    )
    assert accepted(response, "12")
    assert not accepted(response, "\\frac{90}{n}")


@pytest.mark.parametrize(
    "response,reference",
    [
        ("The answer is 15, not 16.", "16"),
        ("The answer is 15, not 16.", "15"),  # a qualified statement is ambiguous, not a guess
        ("It could be 4 or 5.", "4"),
        ("It could be 4 or 5.", "5"),
        ("I am not sure, maybe 8.", "8"),
        ("The answer is $3$ or $5$.", "3"),
        ("The answer isn't 7.", "7"),
        ("Final answer: either 4 or 9", "9"),
        ("The total is 3 times 4.", "4"),  # an operand is not a result
        ("The answer is 20% of 50.", "50"),
        ("So she has 5 more apples than Tom.", "5"),
        ("The roots are 2 and 3.", "3"),  # the last of two stated values alone is not the answer
    ],
)
def test_hedged_negated_or_partial_statements_are_never_paid(response, reference) -> None:
    v = verdict(response, reference)
    assert v.status != "ok", v


@pytest.mark.parametrize(
    "response",
    ["The answer is 15, not 16.", "Maybe it is 8.", "The answer is $5$, not $6$.", "<answer>5"],
)
def test_ambiguous_final_answers_are_a_parse_error(response) -> None:
    assert verdict(response, "5").status == "parse_error"


# SmolLM2-135M-Instruct on "What is a + b?" ends with an equation chain after a consequence word.
@pytest.mark.parametrize(
    "response,reference,equal",
    [
        ("To find 9 + 0, we add the numbers. So, 9 + 0 = 9.", "9", True),
        ("So 9 + 0 = 9.", "9", True),
        ("Thus, 9 + 0 = 9", "9", True),
        ("And so, 9 + 0 = 8 + 1 = 9.", "9", True),
        ("Therefore, 9 + 0 = 9.", "9", True),
        ("So, x = 9.", "9", True),
        # near misses: the chain's result, never an operand
        ("So, 9 + 0 = 9.", "0", False),
        ("So, 9 + 0 = 10.", "9", False),
        ("So, 9 + 9 = 18.", "9", False),
        ("So, 9 + 9 = 18.", "18", True),
    ],
)
def test_a_final_equation_chain_after_so_is_its_result(response, reference, equal) -> None:
    assert accepted(response, reference) is equal, verdict(response, reference)


# SmolLM2 on "What is 9 + 9?" ended with "... add 9 to 9." and was paid 9: the operands of an operation
# named in a final prose sentence are two quantities (even when the same number), not an answer.
@pytest.mark.parametrize(
    "response",
    [
        "To find the sum, we need to add 9 to 9.",
        "We add 9 to 9.",
        "Multiply 3 by 4.",
        "Subtract 2 from 7.",
        "Now divide 12 by 3.",
        "First, take 2 away from 7.",
        "The answer comes from 9 added to 9.",
        "Let's add the numbers 9 to 9.",
    ],
)
def test_a_final_sentence_naming_operands_is_ambiguous_never_paid(response) -> None:
    for reference in ("9", "3", "4", "2", "7", "12", "18"):
        v = verdict(response, reference)
        assert v.status == "ambiguous_answer" and v.score == 0.0, (reference, v)


@pytest.mark.parametrize(
    "response,reference",
    [
        ("The answer is 9.", "9"),
        ("So the total is 9.", "9"),
        ("9 apples", "9"),
        ("Adding 9 to 9 gives 18.", "18"),
        ("The price went from 5 to 9.", "9"),  # "from ... to" without an operation word is a result
        ("He has 9 apples, which is 9.", "9"),  # a restatement is one value
    ],
)
def test_results_next_to_operation_words_are_still_read(response, reference) -> None:
    assert accepted(response, reference), verdict(response, reference)


# ------------------------------------------------------------------------------------- several boxes


@pytest.mark.parametrize(
    "response,reference,equal",
    [
        (r"$\boxed{(2, 2)} \quad \text{and} \quad \boxed{(6, 2)}$", "(2, 2), (6, 2)", True),
        (r"$\boxed{(2, 2)} \quad \text{and} \quad \boxed{(6, 2)}$", "(2, 2), (6, 3)", False),
        (r"$\boxed{(2, 2)} \quad \text{and} \quad \boxed{(6, 2)}$", "(6, 2)", False),
        (r"$\boxed{k = 45} \quad \text{and} \quad \boxed{n = 2}$", "k = 45, n = 2", True),
        (r"$\boxed{k = 45} \quad \text{and} \quad \boxed{n = 2}$", "k = 45, n = 3", False),
        (r"\boxed{1},\boxed{2},\boxed{3}", r"\{1,2,3\}", True),
        (r"\boxed{1} papers and \boxed{2} bins", "1, 2", True),
        (r"\boxed{2} \quad \boxed{4}", "4", False),  # side by side they are a list, not the last value
        (r"Either \boxed{3} or \boxed{4}", "3", False),
        (r"\boxed{(3, 3)} \text{ for part (a) and } \boxed{(1, 1)}", "(3, 3), (1, 1)", True),
    ],
)
def test_boxes_joined_by_connectives_form_one_answer(response, reference, equal) -> None:
    assert accepted(response, reference) is equal


@pytest.mark.parametrize(
    "response,reference,equal",
    [
        (r"First \boxed{3}. Wait, that was wrong; redoing it gives \boxed{5}.", "5", True),
        (r"First \boxed{3}. Wait, that was wrong; redoing it gives \boxed{5}.", "3", False),
        (r"\boxed{1} no no no no no \boxed{2}", "1, 2", False),
        (r"\boxed{1} no no no no no \boxed{2}", "2", True),
        (r"\boxed{3} is wrong; \boxed{4}", "3", False),
    ],
)
def test_an_intermediate_box_followed_by_prose_loses_to_the_last_box(response, reference, equal) -> None:
    assert accepted(response, reference) is equal


def test_text_after_the_response_ends_is_not_read() -> None:
    few_shot = (
        "So x = 3.\nFinal Answer: The final answer is $3$. I hope it is correct.\n\nProblem:\nWhat is 2+2?\n"
        "Solution: 2+2=4.\nFinal Answer: The final answer is $4$. I hope it is correct."
    )
    assert accepted(few_shot, "3") and not accepted(few_shot, "4")
    chat = "The answer is 12.<|im_end|>\n<|im_start|>user\nThe answer is 13."
    assert accepted(chat, "12") and not accepted(chat, "13")
    assert accepted("Question: what is asked?\nWe compute \\boxed{5}.", "5")  # a leading "Question:" stays


def test_a_final_answer_statement_after_the_last_box_is_the_answer() -> None:
    # The last answer-bearing statement wins: the earlier box is never paid.
    response = r"We had \boxed{12} as a bound. Final Answer: The final answer is 15. I hope it is correct."
    assert not accepted(response, "12")
    assert accepted(response, "15")
    hedged = r"So \boxed{12}. Final answer: either 12 or 15"
    assert verdict(hedged, "12").status == "parse_error"
    assert accepted(r"So \boxed{12}. Final answer: see above.", "12")  # no value stated: the box stands
    assert accepted(r"So \boxed{12}.\n\nFinal Answer: The final answer is $12$. I hope it is correct.", "12")


# --------------------------------------------------------------------------------- labels vs values


@pytest.mark.parametrize(
    "answer,reference,equal",
    [
        ("f(x)=1", "1", True),
        ("f(x)=1", "2", False),
        ("(p,q)=(3,2)", "(3, 2)", True),
        ("(3, 2)", "(p,q)=(3,2)", True),
        ("(p,q)=(3,2)", "(2, 3)", False),
        ("x = 5", "5", True),
        ("x = 5", "y = 5", False),
        ("g(t) = 4t^2-1", "4t^2-1", True),
        ("a_{37} = 19, a_3 = 2", "a_3=2, a_{37}=19", True),
        ("a_{37} = 19, a_3 = 2", "a_3=19, a_{37}=2", False),  # a label attached to the wrong value
        ("|AB| = 1", "1", True),
        (r"\frac{NO}{BO}=\frac{1}{\sqrt{6}}", r"\frac{\sqrt6}{6}", True),
        ("x = 5+5+1 = 11", "11", True),  # a chain's value is its last part
        ("x = 5+5+1 = 11", "7", False),
        ("2+3 = 5", "5", True),  # a computation's result
        ("7 = 11a+c", "11a+c", False),  # a number on the left: an equation, not a label
        ("11a+c", "7 = 11a+c", False),
        ("0", "a + 3z = 0", False),
        ("1", "2x + z = 1", False),
        ("f(2) = 5", "2", False),  # f(2) names a number, the answer states 5
        ("x + y = 12", "12", True),
    ],
)
def test_labelled_values_against_bare_values_both_ways(answer, reference, equal) -> None:
    v = check(answer, reference)
    assert (v.status == "ok") is equal, v


# ------------------------------------------------------------------------ equations and inequalities


@pytest.mark.parametrize(
    "answer,reference,equal",
    [
        (r"y=-\frac{1}{2}x+\frac{3}{4}", "2x+4y-3=0", True),
        (r"y=-\frac{1}{2}x-\frac{3}{4}", "2x+4y-3=0", False),
        ("-x > -1", "x < 1", True),
        ("x > 1", "x < 1", False),
        ("-x < -1", "x < 1", False),
        (r"-x \geq -1", r"x \le 1", True),
        ("-34x-45y+20z-100=0", "34x+45y-20z+100=0", True),
        ("-34x-45y+20z+100=0", "34x+45y-20z+100=0", False),
        (r"\frac{x^2}{16}+\frac{y^2}{12}=\frac14", r"\frac{x^2}{4}+\frac{y^2}{3}=1", True),
        ("x^2 + y^2 = 25", "x^2+y^2=5", False),
        ("x = 4", "x < 4", False),
        (r"x \neq 3", "x != 3", True),
        (r"x \neq 3", r"x \neq 4", False),
        ("[-2, 7]", r"-2 \le x \le 7", True),  # the interval of a reference inequality
        ("(-2, 7]", r"-2 \le x \le 7", False),
        (r"x \in [-2, 7]", r"-2 \le x \le 7", True),
        (r"(2, \infty)", r"k \ge 2", False),
        (r"k \ge 2", r"[2, \infty)", False),  # a reference in interval notation asks for the interval
        ("(0, 1)", "0 < f(x) < 1", True),
        ("(0, 1)", "0 < 2x < 1", False),  # the interval of 2x is not the solution set of x
    ],
)
def test_relations_are_compared_as_relations(answer, reference, equal) -> None:
    v = check(answer, reference)
    assert (v.status == "ok") is equal, v


# ---------------------------------------------------------------------------------- lists and sets


@pytest.mark.parametrize(
    "answer,reference,equal",
    [
        (r"6 \text{ and } 8", "6,8", True),
        (r"6 \text{ and } 8", "6", False),
        ("{2, 3, 5, 7, 13}", "2, 3, 5, 7, 13", True),
        ("{2, 3, 5, 7, 13}", "2, 3, 5, 7, 11", False),
        ("-12;-11;-10", r"\{-12, -11, -10\}", True),
        ("-12;-11", r"\{-12, -11, -10\}", False),
        ("(0;0;6),(4;-2;0)", "(4, -2, 0), (0, 0, 6)", True),
        (r"19, 46, \text{ and } 82", "19, 46, 82", True),
        (r"x = 5 \text{ or } x = 6", "5, 6", True),
        (r"x = 5 \text{ or } x = 6", "5", False),
        (r"\{1 \pm \sqrt{5}, -2\}", r"-2, 1+\sqrt5, 1-\sqrt5", True),
        (r"\{1 \pm \sqrt{5}, -2\}", r"-2, 1+\sqrt5", False),
        (r"\frac{-1 \pm \sqrt{13}}{4}", r"\frac{-1+\sqrt{13}}{4}, \frac{-1-\sqrt{13}}{4}", True),
        (r"\frac{-1 \pm \sqrt{13}}{4}", r"\frac{-1+\sqrt{13}}{4}", False),
        ("1, 2", "(1, 2)", False),
    ],
)
def test_lists_written_with_words_braces_or_semicolons(answer, reference, equal) -> None:
    v = check(answer, reference)
    assert (v.status == "ok") is equal, v


# ------------------------------------------------------------------------------ matrices and TeX


@pytest.mark.parametrize(
    "answer,reference,equal",
    [
        (
            r"\left[\begin{array}{cc} 1 & 2 \\ 3 & 4 \end{array}\right]",
            r"\begin{pmatrix}1&2\\3&4\end{pmatrix}",
            True,
        ),
        (
            r"\left[\begin{array}{cc} 1 & 2 \\ 3 & 5 \end{array}\right]",
            r"\begin{pmatrix}1&2\\3&4\end{pmatrix}",
            False,
        ),
        (
            r"\begin{bmatrix} 2 & -1 \\ 1 & 3 \end{bmatrix}",
            r"\begin{pmatrix} 2 & 1 \\ -1 & 3 \end{pmatrix}",
            False,
        ),
        (r"\left(\begin{matrix} 5 \\ -1 \end{matrix}\right)", r"\begin{pmatrix} 5 \\ -1 \end{pmatrix}", True),
        (r"{1 \over 2}", r"\frac12", True),
        (r"{1 \over 3}", r"\frac12", False),
        (r"\textstyle \frac{7}{2}", "3.5", True),
        (r"\textstyle \frac{7}{2}", "2.5", False),
        (r"x \in [0, 1)", "[0, 1)", True),
        (r"x \in [0, 1)", "[0, 1]", False),
        (r"\mathbb{R}", r"(-\infty, \infty)", True),
        (r"\mathbb{R}", r"(0, \infty)", False),
        (r"\frac{\sqrt{3}}{3} \approx 0.577", r"\frac{\sqrt3}{3}", True),
        (r"\frac{\sqrt{3}}{3} \approx 0.577", "0.577", False),  # the exact value counts, not its rounding
        (r"1 - \frac{1}{\mathrm{e}}", r"1-\frac{1}{e}", True),
        (r"\\frac{1}{2}", "0.5", True),  # an escaped string pasted as LaTeX
    ],
)
def test_matrices_and_tex_spellings(answer, reference, equal) -> None:
    v = check(answer, reference)
    assert (v.status == "ok") is equal, v


# -------------------------------------------------------------------------- text and unit wrappers


@pytest.mark.parametrize(
    "answer,reference,equal",
    [
        (r"125\textnormal{ miles}", "125", True),
        (r"125\textnormal{ miles}", r"125 \text{ km}", False),
        (r"15\text{ cm}^2", r"15 \mbox{ cm}^2", True),
        (r"15\text{ cm}^2", r"15 \text{ m}^2", False),
        (r"28 \text{ pct}", r"28\%", True),
        (r"28 \text{ percentage}", r"28\%", True),
        (r"28 \text{ percent}", "0.28", False),
        (r"3 \text{ hours}", r"3 \text{ minutes}", False),
        (r"5 \text{ or more}", "5", False),
        (r"\$1,000.99", "1000.99", True),
        (r"16386.17", r"\$16,386.20", False),
    ],
)
def test_text_and_unit_wrappers(answer, reference, equal) -> None:
    v = check(answer, reference)
    assert (v.status == "ok") is equal, v


def test_a_prose_answer_keeps_its_unit_so_a_different_unit_is_rejected() -> None:
    assert accepted("The distance is 125 miles.", "125")
    assert not accepted("The distance is 125 miles.", r"125 \text{ km}")


@pytest.mark.parametrize(
    "response,reference,equal",
    [
        ("So the answer must be 5, since 2 + 4 = 6.", "5", True),
        ("So the answer must be 5, since 2 + 4 = 6.", "6", False),  # the justification's value
        ("Let $d = 90/n$; each divisor gives one, so there are 12 sequences.", "12", True),
        ("Let $d = 90/n$; each divisor gives one, so there are 12 sequences.", "90/n", False),
        ("So the number is 10 which is 1,000.99.", "1000.99", True),  # "which is" restates the value
        ("Final answer: 1,22", "1.22", True),  # decimal comma
        ("Final answer: 1,22", "122", False),
        ("Final answer: 1,220", "1.22", False),  # a thousands group
        (r"\boxed{0,111}", "111", False),  # a leading 0 is never a thousands group
        (r"\boxed{2π}", r"2\pi", True),
        (r"\boxed{(-∞, 3]}", r"(-\infty, 3)", False),
    ],
)
def test_result_clause_decimal_comma_and_unicode(response, reference, equal) -> None:
    assert accepted(response, reference) is equal


# ------------------------------------------------------------------------------ bounds stay linear


def test_many_joined_boxes_and_long_prose_are_scanned_within_a_bound() -> None:
    # Joining looks back over at most MAX_JOINED_BOXES boxes; prose scanning reads only the tail.
    cases = [
        (r"\boxed{1}, " * 100_000 + r"\boxed{2}", "2"),
        ("We note that 3 apples and 4 pears are here. " * 5_000 + "So there are 7 fruits.", "7"),  # 230 KB
        ("$" * 50_000 + " the answer is 5", "5"),
        ("Final Answer: " + "(" * 50_000, "5"),
    ]
    # CPU time of this process (the checks run in process): the bound is on the work, not on how long a
    # loaded machine keeps it waiting (a quadratic scan of these inputs takes minutes of CPU; linear, ~0.05 s).
    for response, reference in cases:
        start = time.process_time()
        v = verdict(response, reference)
        assert time.process_time() - start < 2.0, (response[:40], v)
    assert accepted(cases[1][0], "7")
