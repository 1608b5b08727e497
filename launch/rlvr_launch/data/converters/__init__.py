"""Dataset converters for `rlvr data NAME`: one module per task, module name == task name == recipe name.

A converter turns one row of the REAL dataset's schema into one row of verl's parquet format
(RECIPES.md): data_source, prompt (chat messages), ability, reward_model {"style": "rule",
"ground_truth": str}, extra_info {"split", "index", "verifier", ...}. A row without a usable ground
truth raises `Drop(reason)`; `rlvr data` counts drops per reason and never loses a row silently.

A converter module defines:
    NAME        the task name (== module name == recipes/task/NAME.yaml)
    VERIFIER    the rlvr_verifiers registry key its ground truths are written for
    HUB_ID      default source on a model hub (datasets.load_dataset); HUB_CONFIG optional
    SPLITS      {our split: the source's split}; a split mapped to None is carved from `train`
    SCHEMA      one line naming the source schema (shown in `rlvr data --help`)
    convert(row: dict, split: str, index: int) -> dict   (or raises Drop)
Optional: NOTES, a tuple of note kinds a converter may report (not drops: e.g. ignored private tests)
through `note(kind)` inside convert.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

# Task names with a converter: module file name == task name == recipes/task/NAME.yaml.
NAMES = ("gsm8k", "math", "code", "countdown", "tool_use")


class Drop(Exception):
    """The row has no usable ground truth (or no usable prompt); `reason` is the counted kind."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


class Notes:
    """Per-conversion counters of things worth reporting that do not drop the row."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def __call__(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1


def load(name: str):
    if name not in NAMES:
        raise KeyError(name)
    return importlib.import_module(f"rlvr_launch.data.converters.{name}")


def verl_row(
    *,
    data_source: str,
    prompt: list[dict[str, str]],
    ability: str,
    ground_truth: Any,
    split: str,
    index: int,
    verifier: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One row in verl's parquet format. A non-string ground truth is JSON-encoded (RECIPES.md)."""
    if not isinstance(ground_truth, str):
        ground_truth = json.dumps(ground_truth, ensure_ascii=False, sort_keys=True)
    if not ground_truth.strip():
        raise Drop("empty_ground_truth")
    info = {"split": split, "index": int(index), "verifier": verifier}
    for key, value in (extra or {}).items():
        # parquet needs one type per column across rows: rlvr keeps extra_info values as strings
        info[key] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return {
        "data_source": data_source,
        "prompt": prompt,
        "ability": ability,
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": info,
    }


def text_field(row: dict, *names: str) -> str:
    """The first non-empty string among `names` (sources spell the same column differently)."""
    for name in names:
        value = row.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def last_boxed(text: str) -> str | None:
    r"""Content of the last \boxed{...} / \fbox{...} in `text`; None if there is none or it never closes."""
    best = None
    for command in ("\\boxed", "\\fbox"):
        start = text.rfind(command)
        if start >= 0 and (best is None or start > best[0]):
            best = (start, command)
    if best is None:
        return None
    i = best[0] + len(best[1])
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text):
        return None
    if text[i] != "{":
        # `\boxed 5`: the next whitespace-delimited token
        token = text[i:].split()[0] if text[i:].split() else ""
        return token.rstrip("$.") or None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None  # unbalanced: a truncated solution
