"""A rubric-paid run's per-step component figures: the rubric's verdict -> the reward manager's
`rlvr_rubric_*` columns -> verl's rollout dumps -> `rlvr train`'s metrics.jsonl rows
(`rubric/format/mean`, ...). The training run itself: tests/launch/test_pipeline_e2e.py (r1_zero)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rlvr_launch.diagnosis import diagnose
from rlvr_verifiers import registry
from rlvr_verifiers.base import INVALID_INPUT, Item, Verdict
from rlvr_verifiers.rubric import (
    ROUTED_KEY,
    Rubric,
    component_columns,
    component_values,
    step_metrics_from_rollouts,
)

MATH = {ROUTED_KEY: "math"}


def test_each_paid_component_but_correctness_gets_a_column_named_for_what_it_measures() -> None:
    assert list(component_columns(registry.get("r1_zero"))) == ["rlvr_rubric_format"]
    assert list(component_columns(registry.get("r1"))) == [
        "rlvr_rubric_format",
        "rlvr_rubric_language_consistency",
        "rlvr_rubric_helpfulness",
    ]
    # correctness is `acc` (the routed verifier's score) and gets no column of its own
    plain = Rubric.from_dict({"name": "c", "components": ["routed"]})
    assert component_columns(plain) == {}


@pytest.mark.parametrize(
    "response,format_,language,helpful",
    [
        ("<think>3+4: count up. So 3+4=7.</think>7", 1.0, 1.0, 1.0),
        ("<think>3 and 4 mixed 三加四</think>7", 1.0, 8 / 11, 1.0),
        ("<think>ok</think>I cannot help with that", 1.0, 1.0, 0.25),
        ("7", 0.0, 0.0, 1.0),  # no block: the format verdict reports no language metric: pays 0
        ("<think>3+4 never closes", 0.0, 0.0, 0.0),
    ],
)
def test_the_columns_hold_each_components_unweighted_value_and_weigh_up_to_the_paid_score(
    response: str, format_: float, language: float, helpful: float
) -> None:
    rubric = registry.get("r1")
    verdict = rubric.verify(Item(response, "7", dict(MATH)))
    values = component_values(rubric, verdict)
    assert values == {
        "rlvr_rubric_format": pytest.approx(format_),
        "rlvr_rubric_language_consistency": pytest.approx(language),
        "rlvr_rubric_helpfulness": pytest.approx(helpful),
    }
    correctness = verdict.metrics["routed/score"]
    weights = {"format": 0.2, "language_consistency": 0.1, "helpfulness": 0.2}
    weighted = sum(weights[c.removeprefix("rlvr_rubric_")] * v for c, v in values.items())
    assert verdict.score == pytest.approx(correctness + weighted)


def test_a_sample_the_rubric_never_scored_has_none_in_every_column() -> None:
    rubric = registry.get("r1")
    assert component_values(rubric, None) == dict.fromkeys(component_columns(rubric))
    # the pool gave up on the batch: a timeout verdict carries no per-component metrics
    assert set(component_values(rubric, Verdict(0.0, "timeout", "pool timed out")).values()) == {None}


def _line(fmt, acc, score, **extra) -> dict:
    return {"input": "q", "output": "r", "score": score, "acc": acc, "rlvr_rubric_format": fmt, **extra}


def test_step_figures_are_the_means_over_the_samples_the_rubric_scored() -> None:
    lines = [
        _line(1.0, 1.0, 1.5),
        _line(1.0, 0.0, 0.5),
        _line(0.0, 1.0, 1.0),
        _line(0.0, 0.0, 0.0),
        _line(None, 0.0, 0.0),  # unroutable: never scored by the rubric, left out of every figure
    ]
    m = step_metrics_from_rollouts(lines)
    assert m == {
        "rubric/format/mean": 0.5,
        "rubric/correctness/mean": 0.5,
        "rubric/total/mean": pytest.approx(0.75),
    }
    # DAPO's overlong shaping is not the rubric's: the total is the paid score without it
    shaped = [_line(1.0, 1.0, 1.2, overlong_reward=-0.3), _line(1.0, 0.0, 0.5, overlong_reward=0.0)]
    assert step_metrics_from_rollouts(shaped)["rubric/total/mean"] == pytest.approx(1.0)


def test_a_plain_run_gets_no_rubric_figures() -> None:
    plain = [{"input": "q", "output": "r", "score": 1.0, "acc": 1.0, "rlvr_status": "ok"}]
    assert step_metrics_from_rollouts(plain) == {}
    assert not any(k.startswith("rubric/") for k in diagnose.step_metrics_from_rollouts(plain))
    assert step_metrics_from_rollouts([_line(None, 0.0, 0.0)]) == {}  # nothing scored: no figure, no NaN


def test_rlvr_train_joins_the_figures_to_each_dumped_steps_row(tmp_path: Path) -> None:
    """diagnose.derived_metrics is what `rlvr train` joins to metrics.jsonl (train.finalize)."""
    rollouts = tmp_path / "rollouts"
    rollouts.mkdir()
    steps = {1: [_line(0.0, 0.0, 0.0), _line(0.0, 1.0, 1.0)], 2: [_line(1.0, 1.0, 1.5), _line(1.0, 0.0, 0.5)]}
    for step, lines in steps.items():
        (rollouts / f"{step}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    derived = diagnose.derived_metrics(rollouts)
    assert derived[1]["rubric/format/mean"] == 0.0 and derived[2]["rubric/format/mean"] == 1.0
    assert derived[2]["rubric/total/mean"] == 1.0 and derived[1]["rubric/correctness/mean"] == 0.5


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from rlvr_launch.runs.embedded_model import TinySpec, build_tokenizer

    out = tmp_path_factory.mktemp("tok")
    build_tokenizer(TinySpec(), out)
    return out


def _manager(tokenizer_dir: Path, rubric: str | None):
    import verl
    from hydra import compose, initialize_config_dir
    from transformers import AutoTokenizer

    from rlvr_verifiers.verl_bridge import RlvrRewardManager

    overrides = ["reward.reward_manager.name=rlvr", f"actor_rollout_ref.model.path={tokenizer_dir}"]
    if rubric:
        overrides.append("+reward.reward_kwargs={rlvr:{rubric:" + rubric + "}}")
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        config = compose("ppo_trainer", overrides=overrides)
    return RlvrRewardManager(config, AutoTokenizer.from_pretrained(tokenizer_dir))


def test_the_reward_manager_adds_the_columns_to_every_sample_of_a_rubric_run_only(tokenizer_dir) -> None:
    rubric = registry.get("r1_zero")
    m = _manager(tokenizer_dir, "r1_zero")
    verdict = rubric.verify(Item("<think>3+4=7</think>8", "7", dict(MATH)))  # well formed, wrong
    scored = m._answer("r1_zero", verdict, 0.01, 10)
    assert scored["reward_extra_info"]["rlvr_rubric_format"] == 1.0
    assert scored["reward_score"] == 0.5
    # an unroutable sample never reaches the rubric: same keys (verl stacks by the first sample's), None
    unrouted = m._answer("unrouted", Verdict(0.0, INVALID_INPUT, "no verifier"), None, 10)
    assert unrouted["reward_extra_info"]["rlvr_rubric_format"] is None
    assert tuple(unrouted["reward_extra_info"]) == tuple(scored["reward_extra_info"])
    plain = _manager(tokenizer_dir, None)._answer("math", Verdict(1.0, "ok", ""), 0.01, 10)
    assert not any(k.startswith("rlvr_rubric_") for k in plain["reward_extra_info"])


def test_the_reward_picture_draws_the_format_rate_of_a_rubric_run(tmp_path: Path) -> None:
    from rlvr_launch.runs.rundir import FORMAT_KEY, REWARD_KEY, STEP_KEY, RunDir

    plain = [{STEP_KEY: s, REWARD_KEY: 0.1 * s} for s in (1, 2, 3)]
    rubric = [{**r, FORMAT_KEY: 0.3 * r[STEP_KEY]} for r in plain]
    pictures = []
    for i, rows in enumerate([plain, plain, rubric]):
        rd = RunDir(tmp_path / str(i))
        rd.path.mkdir(parents=True, exist_ok=True)
        pictures.append(rd.plot_reward_curve(rows, title="t").read_bytes())
    assert pictures[0] == pictures[1]  # the same rows draw the same picture
    assert pictures[2] != pictures[0]  # the format rate is a line of its own
