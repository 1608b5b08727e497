"""`rlvr filter` and the `filter` stage kind (issue 34): K verified responses per prompt, the prompts whose
pass rate lies in the band kept, the rest dropped and counted per reason and per domain."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from rlvr_launch import cli
from rlvr_launch.errors import UserError
from rlvr_launch.pipelines import filter as difficulty_filter
from rlvr_launch.pipelines import stages
from rlvr_launch.pipelines.filter import ABOVE, ALWAYS, BELOW, NEVER, NOT_SAMPLED


def test_the_default_band_drops_exactly_the_never_and_always_solved_prompts():
    low, high = difficulty_filter.band(4, None, None)
    assert (low, high) == (0.25, 0.75)
    assert [difficulty_filter.verdict_of(p, 4, low, high) for p in range(5)] == [
        NEVER,
        None,
        None,
        None,
        ALWAYS,
    ]
    # an explicit band, inclusive at both ends; 1/3 as a bound keeps 1 of 3 (no float surprise)
    low, high = difficulty_filter.band(8, 0.25, 0.625)
    got = [difficulty_filter.verdict_of(p, 8, low, high) for p in range(9)]
    assert got == [NEVER, BELOW, None, None, None, None, ABOVE, ABOVE, ALWAYS]
    low, high = difficulty_filter.band(3, 1 / 3, 1.0)
    assert [difficulty_filter.verdict_of(p, 3, low, high) for p in range(4)] == [NEVER, None, None, None]


@pytest.mark.parametrize(
    ("k", "low", "high", "message"),
    [
        (0, None, None, "--k must be >= 1"),
        (1, None, None, r"the band is empty: --min-pass-rate 1 > --max-pass-rate 0 \(with --k 1"),
        (4, 0.8, 0.2, "the band is empty"),
        (4, -0.1, 0.5, r"must lie in \[0, 1\]"),
        (4, 0.1, 1.5, r"must lie in \[0, 1\]"),
    ],
)
def test_a_bad_band_is_refused_in_one_line(k, low, high, message):
    with pytest.raises(UserError, match=message):
        difficulty_filter.band(k, low, high)


def test_the_report_counts_every_row_per_reason_and_per_domain():
    domains = ["addition", "ifeval", "addition", "ifeval", "addition", "addition"]
    passes = {0: 0, 1: 0, 2: 2, 3: 4, 4: 1}  # row 5 not sampled (past --limit)
    kept, dropped, report = difficulty_filter.decide(passes, domains, 4, 0.25, 0.75)
    assert kept == [2, 4]
    assert dropped == {0: NEVER, 1: NEVER, 3: ALWAYS, 5: NOT_SAMPLED}
    assert report["dropped"] == {ALWAYS: 1, NEVER: 2, NOT_SAMPLED: 1} and report["kept"] == 2
    assert report["rows"] == 6 and report["sampled"] == 5
    add, ife = report["by_domain"]["addition"], report["by_domain"]["ifeval"]
    assert add["histogram"] == {"0/4": 1, "1/4": 1, "2/4": 1, "3/4": 0, "4/4": 0}
    assert ife["histogram"] == {"0/4": 1, "1/4": 0, "2/4": 0, "3/4": 0, "4/4": 1}
    assert (add["kept"], add["dropped"]) == (2, {NEVER: 1, NOT_SAMPLED: 1})
    assert (ife["kept"], ife["dropped"]) == (0, {ALWAYS: 1, NEVER: 1})
    assert (
        difficulty_filter.domain_of_row({"data_source": "openai/gsm8k", "extra_info": {"domain": "gsm"}})
        == "gsm"
    )
    assert (
        difficulty_filter.domain_of_row({"data_source": "openai/gsm8k", "extra_info": {}}) == "openai/gsm8k"
    )


def test_filter_is_a_command_and_a_stage_kind_the_pipeline_runner_knows():
    from rlvr_launch.pipelines import pipeline  # noqa: F401 - the runner imports every kind it can run

    assert stages.STAGE_KINDS["filter"] is difficulty_filter.run_filter
    args = cli.build_parser().parse_args(["filter", "M", "--task", "addition", "--k", "4", "--out", "O"])
    assert (args.k, args.min_pass_rate, args.max_pass_rate) == (4, None, None)


@pytest.mark.slow  # the tiny model generates 4 x 56 responses (hf rollout, in process)
def test_filter_keeps_the_rows_in_the_band_as_they_were_and_the_stage_filters_a_mixture(
    tiny_model_dir, tmp_path, capsys
):
    # the command, on the demo's sums: the first 24 prompts sampled, the other 776 dropped as not_sampled
    out = tmp_path / "sums"
    rc = cli.main(
        ["filter", str(tiny_model_dir), "--task", "addition", "--k", "4", "--limit", "24", "--out", str(out)]
    )
    assert rc == 0 and "prompts kept (pass rate in [0.25, 0.75] over k=4)" in capsys.readouterr().out
    report = json.loads((out / "filter_report.json").read_text())
    source = pq.read_table(report["data"][0]).to_pylist()
    kept = pq.read_table(out / "train.parquet").to_pylist()
    histogram = report["by_domain"]["addition"]["histogram"]
    assert sum(histogram.values()) == 24 and report["dropped"][NOT_SAMPLED] == len(source) - 24
    assert report["kept"] == len(kept) == histogram["1/4"] + histogram["2/4"] + histogram["3/4"]
    assert report["kept"] + sum(report["dropped"].values()) == len(source)
    assert (
        report["dropped"].get(NEVER, 0) == histogram["0/4"]
        and report["dropped"].get(ALWAYS, 0) == histogram["4/4"]
    )
    first = source[:24]
    assert all(row in first for row in kept) and [first.index(r) for r in kept] == sorted(
        first.index(r) for r in kept
    )

    # the stage kind, on a mixture from an earlier stage: per-domain histograms for both domains
    from rlvr_launch.recipes import compose
    from rlvr_launch.runs import mix as task_mix

    mixture = task_mix.prepare(
        compose.compose(["experiment=cpu_mix", f"rlvr.data_dir={tmp_path}"]), log=lambda m: None
    )
    stage = stages.Stage(
        name="difficulty",
        kind="filter",
        dir=tmp_path / "stage",
        inputs={"model": str(tiny_model_dir), "data": str(mixture / "train.parquet")},
        args={"task": "mix", "k": 4, "limit": 32, "max_tokens": 8, "min_pass_rate": 0.0},
        overrides=[f"rlvr.data_dir={tmp_path}"],
        log=lambda m: None,
    )
    result = stages.STAGE_KINDS["filter"](stage)
    report = json.loads((tmp_path / "stage" / "data" / "filter_report.json").read_text())
    assert set(report["by_domain"]) == {"addition", "ifeval"}
    sampled = sum(sum(d["histogram"].values()) for d in report["by_domain"].values())
    assert sampled == 32 and result["metrics"]["kept"] == report["kept"] > 0
    assert pq.read_table(result["outputs"]["data"]).num_rows == report["kept"]
