"""`rlvr data NAME`: real dataset schemas (small local fixtures in tests/launch/fixtures/data, written in
each source's own layout) -> verl parquet rows whose ground truths the task's verifier accepts.

Every fixture holds good rows and rows that must be dropped, one per drop reason; the tests pin the
written rows, their ground truths and routing, and the exact per-reason drop counts (nothing silent).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlvr_launch.cli import UserError
from rlvr_launch.data import convert as data
from rlvr_launch.data.converters import NAMES, load

FIXTURES = Path(__file__).parent / "fixtures" / "data"

# The installed console script (`python -m rlvr_launch.cli` would import cli twice, as __main__ too).
RLVR = str(Path(sys.executable).parent / "rlvr")


def _rows(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def _truths(path: Path) -> list:
    return [r["reward_model"]["ground_truth"] for r in _rows(path)]


def test_every_task_has_a_converter_and_a_recipe():
    from rlvr_launch.recipes import compose

    tasks = set(compose.group_entries("task"))
    for name in NAMES:
        module = load(name)
        assert module.NAME == name
        assert name in tasks, f"recipes/task/{name}.yaml is missing"
        assert module.VERIFIER in ("math", "code", "countdown", "tool_call")


def test_gsm8k_keeps_the_final_number_and_counts_each_drop(tmp_path):
    report = data.prepare("gsm8k", tmp_path, str(FIXTURES / "gsm8k"))
    train = report["splits"]["train"]
    assert train["read"] == 8 and train["written"] == 3
    assert train["dropped"] == {
        "answer_not_a_number": 1,
        "empty_answer": 1,
        "empty_question": 1,
        "malformed_source_row": 1,
        "no_final_answer_marker": 1,
    }
    assert _truths(tmp_path / "train.parquet") == ["72", "1200", "10"]  # thousands separator removed
    assert _truths(tmp_path / "test.parquet") == ["18", "3"]
    row = _rows(tmp_path / "train.parquet")[0]
    assert row["data_source"] == "gsm8k" and row["ability"] == "math"
    assert row["reward_model"]["style"] == "rule"
    assert row["extra_info"]["verifier"] == "math" and row["extra_info"]["split"] == "train"
    assert row["prompt"][0]["role"] == "user" and "Natalia" in row["prompt"][0]["content"]
    assert json.loads((tmp_path / data.REPORT_NAME).read_text()) == report


def test_math_takes_the_last_box_or_the_explicit_answer(tmp_path):
    report = data.prepare("math", tmp_path, str(FIXTURES / "math"))
    assert report["splits"]["train"]["dropped"] == {
        "empty_answer": 1,
        "no_boxed_answer": 1,
        "unbalanced_boxed_answer": 1,
    }
    assert _truths(tmp_path / "train.parquet") == ["\\frac{3}{4}", "\\frac{\\sqrt{3}}{2}", "4", "6"]
    first = _rows(tmp_path / "train.parquet")[0]["extra_info"]
    assert first["level"] == "Level 1" and first["type"] == "Prealgebra" and first["verifier"] == "math"


def test_apps_tests_become_code_ground_truths(tmp_path):
    report = data.prepare("code", tmp_path, str(FIXTURES / "code" / "apps.jsonl"), test_size=1)
    train = report["splits"]["train"]
    assert train["dropped"] == {"inputs_outputs_mismatch": 1, "no_tests": 1, "tests_not_json": 1}
    assert train["written"] + report["splits"]["test"]["written"] == 2
    truths = {
        r["extra_info"]["problem_id"]: json.loads(r["reward_model"]["ground_truth"])
        for p in ("train.parquet", "test.parquet")
        for r in _rows(tmp_path / p)
    }
    assert truths["1"] == {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]}
    assert truths["2"] == {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [[3], [7]]}


def test_livecodebench_uses_json_private_tests_and_never_unpickles(tmp_path):
    report = data.prepare("code", tmp_path, str(FIXTURES / "code" / "livecodebench.jsonl"), test_size=1)
    train = report["splits"]["train"]
    assert train["dropped"] == {"functional_without_fn_name": 1, "mixed_test_types": 1}
    assert train["notes"] == {"private_tests_pickled_ignored": 1}
    rows = {
        r["extra_info"]["question_id"]: r for p in ("train", "test") for r in _rows(tmp_path / f"{p}.parquet")
    }
    stdin = json.loads(rows["abc001_a"]["reward_model"]["ground_truth"])
    assert stdin == {"inputs": ["3\n", "5\n"], "outputs": ["6\n", "10\n"]}  # public + zlib-JSON private
    functional = json.loads(rows["1"]["reward_model"]["ground_truth"])
    assert functional["fn_name"] == "twoSum" and len(functional["inputs"]) == 2  # pickled private skipped
    assert "class Solution" in rows["1"]["prompt"][0]["content"]


def test_countdown_requires_every_number_and_carves_a_test_split(tmp_path):
    report = data.prepare("countdown", tmp_path, str(FIXTURES / "countdown" / "countdown.jsonl"), test_size=1)
    assert report["splits"]["train"]["dropped"] == {
        "missing_target_or_nums": 1,
        "non_integer_value": 1,
        "too_few_numbers": 1,
    }
    assert report["splits"]["train"]["written"] == 3 and report["splits"]["test"]["written"] == 1
    assert report["splits"]["train"]["held_out"] == 1
    truths = [json.loads(t) for p in ("train", "test") for t in _truths(tmp_path / f"{p}.parquet")]
    assert {t["target"] for t in truths} == {24, 10, 98, 5}
    assert all(t["use_all"] is True for t in truths)
    assert _rows(tmp_path / "test.parquet")[0]["extra_info"]["split"] == "test"


def test_carving_is_deterministic_and_disjoint(tmp_path):
    a = data.prepare(
        "countdown", tmp_path / "a", str(FIXTURES / "countdown" / "countdown.jsonl"), test_size=2
    )
    b = data.prepare(
        "countdown", tmp_path / "b", str(FIXTURES / "countdown" / "countdown.jsonl"), test_size=2
    )
    assert a["splits"] == {k: {**v, "file": v["file"].replace("/b/", "/a/")} for k, v in b["splits"].items()}
    train = set(_truths(tmp_path / "a" / "train.parquet"))
    test = set(_truths(tmp_path / "a" / "test.parquet"))
    assert len(test) == 2 and not train & test


def test_xlam_tools_become_json_schemas_the_reference_satisfies(tmp_path):
    report = data.prepare("tool_use", tmp_path, str(FIXTURES / "tool_use" / "xlam.jsonl"), test_size=1)
    assert report["splits"]["train"]["dropped"] == {
        "answer_calls_unknown_tool": 1,
        "answers_not_json": 1,
        "reference_call_fails_tool_schema": 1,
        "tools_not_json": 1,
    }
    rows = {r["extra_info"]["id"]: r for p in ("train", "test") for r in _rows(tmp_path / f"{p}.parquet")}
    assert set(rows) == {"1", "2", "3"}
    truth = json.loads(rows["2"]["reward_model"]["ground_truth"])
    params = {t["function"]["name"]: t["function"]["parameters"] for t in truth["tools"]}
    assert params["sum_list"] == {
        "type": "object",
        "properties": {"numbers": {"type": "array", "description": "The numbers."}},
        "required": ["numbers"],
    }
    assert params["is_prime"]["properties"]["n"]["type"] == "integer"
    weather = json.loads(rows["1"]["reward_model"]["ground_truth"])["tools"][0]["function"]["parameters"]
    assert weather["required"] == ["city"]  # "str, optional" with a default is not required
    assert rows["1"]["prompt"][0]["role"] == "system" and "<tools>" in rows["1"]["prompt"][0]["content"]
    assert rows["1"]["extra_info"]["verifier"] == "tool_call"


def test_parquet_and_json_sources_read_like_jsonl(tmp_path):
    rows = [json.loads(line) for line in (FIXTURES / "gsm8k" / "test.jsonl").read_text().splitlines()]
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), src / "train.parquet")
    (src / "test.json").write_text(json.dumps(rows))
    report = data.prepare("gsm8k", tmp_path / "out", str(src))
    assert report["splits"]["train"]["written"] == 2 and report["splits"]["test"]["written"] == 2
    assert (
        _truths(tmp_path / "out" / "train.parquet")
        == _truths(tmp_path / "out" / "test.parquet")
        == ["18", "3"]
    )


def test_limit_caps_the_rows_read(tmp_path):
    report = data.prepare("gsm8k", tmp_path, str(FIXTURES / "gsm8k"), limit=2)
    assert report["splits"]["train"]["read"] == 2 and report["splits"]["train"]["written"] == 2


def test_output_passes_the_trainers_dataset_check(tmp_path):
    from rlvr_launch.runs.datacheck import check_parquet

    for name, source, kwargs in [
        ("gsm8k", FIXTURES / "gsm8k", {}),
        ("math", FIXTURES / "math", {}),
        ("code", FIXTURES / "code" / "apps.jsonl", {"test_size": 1}),
        ("countdown", FIXTURES / "countdown" / "countdown.jsonl", {"test_size": 1}),
        ("tool_use", FIXTURES / "tool_use" / "xlam.jsonl", {"test_size": 1}),
    ]:
        out = tmp_path / name
        data.prepare(name, out, str(source), **kwargs)
        for split in ("train", "test"):
            assert check_parquet(out / f"{split}.parquet", task=name) >= 1


def test_a_source_with_no_usable_row_is_an_error_naming_the_schema(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "not gsm8k"}) + "\n")
    with pytest.raises(UserError, match=r"no usable rows.*question, answer"):
        data.prepare("gsm8k", tmp_path / "out", str(bad))
    report = json.loads((tmp_path / "out" / data.REPORT_NAME).read_text())
    assert report["splits"]["train"]["dropped"] == {"empty_question": 1}


def test_missing_local_source_names_the_path(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        data.prepare("gsm8k", tmp_path, str(tmp_path / "nope.jsonl"))


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_unreachable_hub_fails_with_the_local_file_fix(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    out = subprocess.run(
        [RLVR, "data", "gsm8k", "--out", str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 2
    assert "openai/gsm8k" in out.stderr and "--source /path/to/local.jsonl" in out.stderr
    assert "Traceback" not in out.stderr


def test_cli_prints_the_drop_table(tmp_path):
    out = subprocess.run(
        [RLVR, "data", "math", "--out", str(tmp_path), "--source", str(FIXTURES / "math")],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "no_boxed_answer=1" in out.stdout and "unbalanced_boxed_answer=1" in out.stdout
    assert (tmp_path / data.REPORT_NAME).is_file()


# ---- the ground truths are usable by the verifiers ----------------------------------------------------


def _verify(verifier: str, pairs: list[tuple[str, str]]):
    from rlvr_verifiers import registry
    from rlvr_verifiers.base import Item

    return registry.get(verifier).verify_batch([Item(response=r, ground_truth=gt) for r, gt in pairs])


def _fixture_rows(name: str, source: Path, tmp_path: Path, **kwargs) -> list[dict]:
    data.prepare(name, tmp_path / name, str(source), **kwargs)
    return [r for p in ("train", "test") for r in _rows(tmp_path / name / f"{p}.parquet")]


def test_reference_answers_score_1_and_wrong_ones_0_with_the_math_verifier(tmp_path):
    rows = _fixture_rows("gsm8k", FIXTURES / "gsm8k", tmp_path)
    solutions = {
        json.loads(line)["question"]: json.loads(line)["answer"]
        for f in ("train.jsonl", "test.jsonl")
        for line in (FIXTURES / "gsm8k" / f).read_text().splitlines()
        if line.strip().endswith("}")
    }
    pairs = []
    for row in rows:
        question = row["prompt"][0]["content"].split("\n\n")[0]
        final = solutions[question].rsplit("####", 1)[1].strip()
        pairs.append((f"So the total is \\boxed{{{final}}}.", row["reward_model"]["ground_truth"]))
    verdicts = _verify("math", pairs)
    assert [v.score for v in verdicts] == [1.0] * len(pairs), [v.detail for v in verdicts]
    wrong = _verify("math", [("\\boxed{999999}", gt) for _, gt in pairs])
    assert all(v.score == 0.0 for v in wrong)

    rows = _fixture_rows("math", FIXTURES / "math", tmp_path)
    sources = [
        json.loads(line)
        for f in ("train.jsonl", "test.jsonl")
        for line in (FIXTURES / "math" / f).read_text().splitlines()
    ]
    by_problem = {s["problem"]: s for s in sources}
    pairs = []
    for row in rows:
        src = by_problem[row["prompt"][0]["content"].split("\n\n")[0]]
        response = src["solution"] if "\\boxed" in src["solution"] else f"\\boxed{{{src['answer']}}}"
        pairs.append((response, row["reward_model"]["ground_truth"]))
    assert [v.score for v in _verify("math", pairs)] == [1.0] * len(pairs)


COUNTDOWN_SOLUTIONS = {24: "4 * 6 * 1", 10: "2 * 3 + 4", 98: "44 + 19 + 35", 5: "7 - 3 + 2 - 1"}


def test_reference_expressions_score_1_with_the_countdown_verifier(tmp_path):
    rows = _fixture_rows("countdown", FIXTURES / "countdown" / "countdown.jsonl", tmp_path, test_size=1)
    pairs, wrong = [], []
    for row in rows:
        truth = json.loads(row["reward_model"]["ground_truth"])
        expr = COUNTDOWN_SOLUTIONS[truth["target"]]
        pairs.append((f"<think>...</think><answer> {expr} </answer>", row["reward_model"]["ground_truth"]))
        wrong.append((f"<answer> {truth['numbers'][0]} </answer>", row["reward_model"]["ground_truth"]))
    verdicts = _verify("countdown", pairs)
    assert [v.score for v in verdicts] == [1.0] * len(pairs), [v.detail for v in verdicts]
    assert all(v.score == 0.0 for v in _verify("countdown", wrong))


def test_reference_calls_score_1_with_the_tool_call_verifier(tmp_path):
    rows = _fixture_rows("tool_use", FIXTURES / "tool_use" / "xlam.jsonl", tmp_path, test_size=1)
    pairs, wrong = [], []
    for row in rows:
        truth = json.loads(row["reward_model"]["ground_truth"])
        calls = "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in truth["expected"])
        pairs.append((calls, row["reward_model"]["ground_truth"]))
        wrong.append(
            (
                '<tool_call>{"name": "get_weather", "arguments": {"city": "Atlantis"}}</tool_call>',
                row["reward_model"]["ground_truth"],
            )
        )
    verdicts = _verify("tool_call", pairs)
    assert [v.score for v in verdicts] == [1.0] * len(pairs), [v.detail for v in verdicts]
    assert all(v.score == 0.0 for v in _verify("tool_call", wrong))


LCB_SOLUTIONS = {
    "abc001_a": "n = int(input())\nprint(2 * n)\n",
    "1": (
        "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
        "        seen = {}\n        for i, x in enumerate(nums):\n"
        "            if target - x in seen:\n                return [seen[target - x], i]\n"
        "            seen[x] = i\n"
    ),
}


@pytest.mark.slow
def test_reference_programs_pass_the_code_verifiers_sandbox(tmp_path):
    rows = _fixture_rows("code", FIXTURES / "code" / "apps.jsonl", tmp_path / "apps", test_size=1)
    apps = {
        json.loads(line)["problem_id"]: json.loads(line)
        for line in (FIXTURES / "code" / "apps.jsonl").read_text().splitlines()
    }
    pairs = []
    for row in rows:
        solution = json.loads(apps[int(row["extra_info"]["problem_id"])]["solutions"])[0]
        pairs.append((f"```python\n{solution}```", row["reward_model"]["ground_truth"]))
    for row in _fixture_rows(
        "code", FIXTURES / "code" / "livecodebench.jsonl", tmp_path / "lcb", test_size=1
    ):
        pairs.append(
            (
                f"```python\n{LCB_SOLUTIONS[row['extra_info']['question_id']]}```",
                row["reward_model"]["ground_truth"],
            )
        )
    verdicts = _verify("code", pairs)
    assert [v.score for v in verdicts] == [1.0] * len(pairs), [(v.status, v.detail) for v in verdicts]
    wrong = _verify("code", [("```python\nprint(0)\n```", gt) for _, gt in pairs])
    assert all(v.score == 0.0 for v in wrong)
