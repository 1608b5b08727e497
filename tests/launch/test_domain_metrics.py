"""Per-domain step figures of a mixed run (issue 34): the reward manager's `rlvr_domain` column, the
per-domain aggregation of a step's rollout dump (runs.rollout_metrics), and the per-domain training-reward
lines of reward_curve.png. The verdicts are real: the math and ifeval verifiers score each response.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr_launch.runs import rollout_metrics as rm
from rlvr_launch.runs.rundir import STEP_KEY, RunDir, domain_reward_series
from rlvr_verifiers import registry, verl_bridge
from rlvr_verifiers.base import Verdict

RUNS = Path(__file__).parent / "fixtures" / "recorded_runs"

LOWERCASE_NO_NICE = json.dumps(
    {
        "instruction_id_list": ["change_case:english_lowercase", "keywords:forbidden_words"],
        "kwargs": [{}, {"forbidden_words": ["nice", "good"]}],
    }
)


def _dump_line(row: dict, response: str) -> dict:
    """One response as verl dumps it: the reward manager's columns for the row's real verdict."""
    extra_info = row.get("extra_info") or {}
    verifier = verl_bridge.route(row["data_source"], row.get("ability"), extra_info)
    item = verl_bridge.make_item(verifier, response, row["ground_truth"], {"data_source": row["data_source"]})
    verdict = item if isinstance(item, Verdict) else registry.get(verifier).verify(item)
    domain = verl_bridge.domain_of(extra_info, row["data_source"], verifier)
    info = verl_bridge.extra_info_for(verifier, verdict, 0.001, domain=domain)
    return {"input": "q", "output": response, "gts": row["ground_truth"], "score": verdict.score, **info}


def _mixed_step() -> list[dict]:
    addition = {"data_source": "addition", "ground_truth": "7", "extra_info": {"domain": "addition"}}
    ifeval = {
        "data_source": "ifeval",
        "ability": "instruction_following",
        "ground_truth": LOWERCASE_NO_NICE,
        "extra_info": {"domain": "ifeval", "verifier": "ifeval"},
    }
    return [
        _dump_line(addition, "3+4 = 7"),  # ok
        _dump_line(addition, "3+4 = 8"),  # wrong
        _dump_line(addition, ""),  # parse_error: no answer
        _dump_line(ifeval, "the fair opens today and science is fun."),  # ok
        _dump_line(ifeval, "The fair is NICE."),  # wrong: capitals and a forbidden word
    ]


def test_a_mixed_batch_gets_reward_pass_rate_count_length_and_statuses_per_domain():
    lines = _mixed_step()
    assert [x["rlvr_status"] for x in lines] == ["ok", "wrong", "parse_error", "ok", "wrong"]
    assert [x["rlvr_domain"] for x in lines] == ["addition"] * 3 + ["ifeval"] * 2
    m = rm.step_metrics_from_rollouts(lines)
    add, ife = "rlvr/domain/addition", "rlvr/domain/ifeval"
    assert m[f"{add}/count"] == 3.0 and m[f"{ife}/count"] == 2.0
    assert m[f"{add}/pass_rate"] == pytest.approx(1 / 3) and m[f"{ife}/pass_rate"] == 0.5
    assert m[f"{add}/reward_mean"] == pytest.approx(1 / 3) and m[f"{ife}/reward_mean"] == 0.5
    assert m[f"{add}/response_chars_mean"] == pytest.approx((7 + 7 + 0) / 3)
    assert m[f"{ife}/response_chars_mean"] == pytest.approx((len(lines[3]["output"]) + 17) / 2)
    assert (m[f"{add}/wrong"], m[f"{add}/parse_error"], m[f"{add}/timeout"]) == (1.0, 1.0, 0.0)
    assert (m[f"{ife}/wrong"], m[f"{ife}/parse_error"]) == (1.0, 0.0)
    # every failure status is counted for every domain (a continuous curve; 0 where none happened)
    for domain in ("addition", "ifeval"):
        assert {rm.split_domain_key(k)[1] for k in m if k.startswith(f"rlvr/domain/{domain}/")} == {
            "count",
            "pass_rate",
            "reward_mean",
            "response_chars_mean",
            *rm.FAILURE_STATUSES,
        }
    # the per-verifier figures are still there beside them
    assert m["rlvr/math/count"] == 3.0 and m["rlvr/ifeval/pass_rate"] == 0.5


def test_the_domain_is_the_rows_named_domain_else_its_data_source_else_its_verifier():
    assert verl_bridge.domain_of({"domain": "sums"}, "addition", "math") == "sums"
    assert verl_bridge.domain_of({"domain": ""}, "openai/gsm8k", "math") == "openai/gsm8k"
    assert verl_bridge.domain_of(None, None, "math") == "math"
    # a domain with "/" (a data_source) still splits back from its key
    key = rm.domain_key("reasoning_gym/chain_sum", "pass_rate")
    assert rm.split_domain_key(key) == ("reasoning_gym/chain_sum", "pass_rate")
    assert rm.split_domain_key("rlvr/math/pass_rate") is None


def _write_dumps(rollouts: Path, steps: dict[int, list[dict]]) -> None:
    rollouts.mkdir(parents=True)
    for step, lines in steps.items():
        (rollouts / f"{step}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_every_step_of_a_mixed_run_carries_every_domain_and_the_picture_draws_one_line_each(tmp_path):
    lines = _mixed_step()
    addition_only = [x for x in lines if x["rlvr_domain"] == "addition"]
    _write_dumps(tmp_path / "run" / "rollouts", {1: lines, 2: addition_only})
    derived = rm.derived_metrics(tmp_path / "run" / "rollouts")
    # step 2 sampled no ifeval prompt: its count is 0 and it has no means (not a made-up 0 reward)
    assert derived[2]["rlvr/domain/ifeval/count"] == 0.0 and derived[2]["rlvr/domain/ifeval/wrong"] == 0.0
    assert "rlvr/domain/ifeval/reward_mean" not in derived[2]
    assert derived[2]["rlvr/domain/addition/pass_rate"] == pytest.approx(1 / 3)
    rows = [{STEP_KEY: s, "critic/score/mean": 0.4, **m} for s, m in derived.items()]
    assert domain_reward_series(rows) == {"addition": [(1, pytest.approx(1 / 3)), (2, pytest.approx(1 / 3))],
                                          "ifeval": [(1, 0.5)]}  # fmt: skip
    run = RunDir(tmp_path / "run")
    assert run.plot_reward_curve(rows, title="mix") == run.curve_path and run.curve_path.stat().st_size > 0


def test_a_single_domain_runs_derived_metrics_are_unchanged():
    """A recorded cpu_demo run (math only, dumps without rlvr_domain) and the same dumps as today's reward
    manager writes them (rlvr_domain = the data source): no per-domain figure, the same metrics."""
    rollouts = RUNS / "recorded_cpu_demo_grpo" / "rollouts"
    recorded = rm.derived_metrics(rollouts)
    assert len(recorded) == 30
    assert not any(k.startswith("rlvr/domain/") for m in recorded.values() for k in m)
    assert set(recorded[1]) == {
        rm.ZERO_VAR,
        rm.ALL_RIGHT,
        rm.ALL_WRONG,
        rm.LEN_CORR,
        "rlvr/groups/count",
        "rlvr/response_chars/mean",
        "rlvr/math/count",
        "rlvr/math/pass_rate",
        "rlvr/math/parse_failures",
        "rlvr/no_answer_region",
    }
    for step in (1, 30):
        lines = [json.loads(x) for x in (rollouts / f"{step}.jsonl").read_text().splitlines()]
        assert (
            rm.step_metrics_from_rollouts([dict(x, rlvr_domain="addition") for x in lines]) == recorded[step]
        )
    rows = [{STEP_KEY: s, **m} for s, m in recorded.items()]
    assert domain_reward_series(rows) == {}
