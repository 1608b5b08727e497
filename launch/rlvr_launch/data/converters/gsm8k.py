"""GSM8K (openai/gsm8k, config `main`): grade-school word problems -> the `math` verifier.

Source schema: `question` (str), `answer` (str: worked solution whose last line is `#### N`).
Ground truth: N with thousands separators removed (GSM8K answers are integers).
Dropped: no `question` (empty_question), no `#### ` line (no_final_answer_marker), nothing after it
(empty_answer), or something that is not a number (answer_not_a_number).
"""

from __future__ import annotations

import re

from rlvr_launch.data.converters import Drop, text_field, verl_row

NAME = "gsm8k"
VERIFIER = "math"
HUB_ID = "openai/gsm8k"
HUB_CONFIG = "main"
SPLITS = {"train": "train", "test": "test"}
SCHEMA = "question, answer ('... #### N')"

INSTRUCTION = "Solve the problem step by step. Put the final answer, a number, in \\boxed{}."
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def extract_answer(answer: str) -> str:
    if "####" not in answer:
        raise Drop("no_final_answer_marker")
    final = answer.rsplit("####", 1)[1].strip()
    if not final:
        raise Drop("empty_answer")
    final = final.replace(",", "").replace("$", "").strip()
    if not _NUMBER.match(final):
        raise Drop("answer_not_a_number", final)
    return final


def convert(row: dict, split: str, index: int) -> dict:
    question = text_field(row, "question")
    if not question:
        raise Drop("empty_question")
    ground_truth = extract_answer(str(row.get("answer") or ""))
    return verl_row(
        data_source=NAME,
        prompt=[{"role": "user", "content": f"{question.strip()}\n\n{INSTRUCTION}"}],
        ability="math",
        ground_truth=ground_truth,
        split=split,
        index=index,
        verifier=VERIFIER,
    )
