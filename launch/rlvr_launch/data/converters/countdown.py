"""Countdown (Jiayi-Pan/Countdown-Tasks-3to4, the TinyZero task) -> the `countdown` verifier.

Source schema: `target` (int), `nums` (list of int). Ground truth: {"target", "numbers", "use_all": true}
as JSON: the tasks are generated so that every number is used exactly once, and TinyZero's reward
requires that. The source has only a train split; `test` is carved from it by `rlvr data`.
Dropped: missing target or numbers (missing_target_or_nums), non-integer values (non_integer_value),
fewer than two numbers (too_few_numbers).
"""

from __future__ import annotations

from rlvr_launch.data.converters import Drop, verl_row

NAME = "countdown"
VERIFIER = "countdown"
HUB_ID = "Jiayi-Pan/Countdown-Tasks-3to4"
HUB_CONFIG = None
SPLITS = {"train": "train", "test": None}
SCHEMA = "target, nums"

TEMPLATE = (
    "Using the numbers {numbers}, create an equation that equals {target}. You can use basic arithmetic "
    "operations (+, -, *, /) and each number exactly once. Show your work in <think> </think> tags and "
    "return the final equation in <answer> </answer> tags, for example <answer> (1 + 2) / 3 </answer>."
)


def _int(value) -> int:
    if isinstance(value, bool):
        raise Drop("non_integer_value")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise Drop("non_integer_value", repr(value))


def convert(row: dict, split: str, index: int) -> dict:
    target, nums = row.get("target"), row.get("nums", row.get("numbers"))
    if target is None or nums is None:
        raise Drop("missing_target_or_nums")
    if hasattr(nums, "tolist"):
        nums = nums.tolist()
    if not isinstance(nums, list | tuple):
        raise Drop("missing_target_or_nums")
    numbers = [_int(n) for n in nums]
    if len(numbers) < 2:
        raise Drop("too_few_numbers")
    target = _int(target)
    return verl_row(
        data_source=NAME,
        prompt=[{"role": "user", "content": TEMPLATE.format(numbers=numbers, target=target)}],
        ability="countdown",
        ground_truth={"target": target, "numbers": numbers, "use_all": True},
        split=split,
        index=index,
        verifier=VERIFIER,
    )
