r"""MATH (Hendrycks et al.; hub copies such as DigitalLearningGmbH/MATH-lighteval) -> the `math` verifier.

Source schema: `problem` (str), `solution` (str with the final answer in `\boxed{...}`), `level`
("Level 1".."Level 5"), `type` (subject). Copies that carry an explicit `answer` column (MATH-500 style)
use it. Ground truth: `answer` if present, else the content of the solution's LAST `\boxed{}`/`\fbox{}`.
Dropped: no problem (empty_question), no boxed answer (no_boxed_answer), a box that never closes
(unbalanced_boxed_answer: a truncated solution), an empty box (empty_answer).
"""

from __future__ import annotations

from rlvr_launch.data.converters import Drop, last_boxed, text_field, verl_row

NAME = "math"
VERIFIER = "math"
HUB_ID = "DigitalLearningGmbH/MATH-lighteval"
HUB_CONFIG = None
SPLITS = {"train": "train", "test": "test"}
SCHEMA = "problem, solution (\\boxed{answer}), level, type [, answer]"

INSTRUCTION = "Think step by step, then put the final answer in \\boxed{}."


def extract_answer(row: dict) -> str:
    explicit = text_field(row, "answer")
    if explicit:
        return explicit.strip()
    solution = text_field(row, "solution")
    has_box = "\\boxed" in solution or "\\fbox" in solution
    if not has_box:
        raise Drop("no_boxed_answer")
    answer = last_boxed(solution)
    if answer is None:
        raise Drop("unbalanced_boxed_answer")
    if not answer.strip():
        raise Drop("empty_answer")
    return answer.strip()


def convert(row: dict, split: str, index: int) -> dict:
    problem = text_field(row, "problem", "question")
    if not problem:
        raise Drop("empty_question")
    ground_truth = extract_answer(row)
    extra = {}
    for key in ("level", "type", "subject", "unique_id"):
        value = row.get(key)
        if value not in (None, ""):
            extra[key] = str(value)
    return verl_row(
        data_source=NAME,
        prompt=[{"role": "user", "content": f"{problem.strip()}\n\n{INSTRUCTION}"}],
        ability="math",
        ground_truth=ground_truth,
        split=split,
        index=index,
        verifier=VERIFIER,
        extra=extra,
    )
