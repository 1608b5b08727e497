"""The thinking budget's per-step figures: the agent loop's fields -> rlvr's reward columns -> verl's
rollout dumps -> `rlvr train`'s metrics.jsonl rows (the run itself: tests/launch/test_thinking_budget_train.py)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from rlvr_cluster.thinking_metrics import step_metrics_from_rollouts
from rlvr_launch.diagnosis import diagnose
from rlvr_verifiers.verl_bridge import THINKING_KEYS, RlvrRewardManager


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from rlvr_launch.runs.embedded_model import TinySpec, build_tokenizer

    out = tmp_path_factory.mktemp("tok")
    build_tokenizer(TinySpec(), out)
    return out


def manager(tokenizer_dir: Path, agent_loop: str) -> RlvrRewardManager:
    import verl
    from hydra import compose, initialize_config_dir
    from transformers import AutoTokenizer

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        config = compose(
            "ppo_trainer",
            overrides=[
                "reward.reward_manager.name=rlvr",
                f"actor_rollout_ref.model.path={tokenizer_dir}",
                f"actor_rollout_ref.rollout.agent.default_agent_loop={agent_loop}",
            ],
        )
    return RlvrRewardManager(config, AutoTokenizer.from_pretrained(tokenizer_dir))


def test_the_reward_manager_copies_the_budget_loops_fields_into_its_columns(tokenizer_dir):
    m = manager(tokenizer_dir, "thinking_budget")
    fields = {"thinking_budget_hit": 1, "thinking_tokens": 16, "answer_tokens": 3, "turn_scores": []}
    # reward computed inside the agent loop: verl hands the loop's fields as `tool_extra_fields`
    inside = m._thinking_info({"tool_extra_fields": np.array(fields, dtype=object)})
    assert inside == dict(zip(THINKING_KEYS, (1.0, 16.0, 3.0), strict=True))
    # reward computed after the rollout: the fields are the batch's own columns
    after = m._thinking_info({"thinking_budget_hit": 0, "thinking_tokens": 5, "answer_tokens": 7})
    assert after == dict(zip(THINKING_KEYS, (0.0, 5.0, 7.0), strict=True))
    # a sample of another loop in a budget run still carries the columns (verl stacks them by the
    # first sample's keys), as None, which verl's means and the per-step figures skip
    assert m._thinking_info({"tool_extra_fields": np.array({}, dtype=object)}) == dict.fromkeys(THINKING_KEYS)


def test_a_run_without_the_budget_loop_gets_no_budget_columns(tokenizer_dir):
    m = manager(tokenizer_dir, "single_turn_agent")
    assert m._thinking_info({"tool_extra_fields": np.array({"turn_scores": []}, dtype=object)}) == {}


def dump_line(hit, thinking, answer, acc, score=None):
    return {
        "output": "x",
        "score": acc if score is None else score,
        "acc": acc,
        "rlvr_thinking_budget_hit": hit,
        "rlvr_thinking_tokens": thinking,
        "rlvr_answer_tokens": answer,
    }


def test_a_steps_dump_gives_hit_rate_lengths_and_accuracy_split_by_hit():
    lines = [
        dump_line(1.0, 4.0, 2.0, 0.0),
        dump_line(1.0, 4.0, 4.0, 1.0),
        dump_line(0.0, 1.0, 1.0, 1.0, score=0.5),  # a shaped paid score: accuracy reads the verdict
        dump_line(0.0, 3.0, 1.0, 1.0),
        dump_line(None, None, None, 0.0),  # another loop's sample: left out
    ]
    m = step_metrics_from_rollouts(lines)
    assert m == {
        "thinking/budget_hit_rate": 0.5,
        "thinking/thinking_tokens/mean": 3.0,
        "thinking/thinking_tokens/p90": pytest.approx(4.0),
        "thinking/answer_tokens/mean": 2.0,
        "thinking/accuracy/hit": 0.5,
        "thinking/accuracy/not_hit": 1.0,
    }
    assert all(math.isfinite(v) for v in m.values())
    # no hit in the step: the hit split is absent, never 0 or NaN
    assert "thinking/accuracy/hit" not in step_metrics_from_rollouts(lines[2:4])
    # a dump without the columns (another run) adds nothing
    assert step_metrics_from_rollouts([{"output": "x", "score": 1.0}]) == {}


def test_rlvr_trains_derived_rows_carry_the_budget_figures(tmp_path):
    import json

    (tmp_path / "rollouts").mkdir()
    for step, lines in ((1, [dump_line(1.0, 2.0, 3.0, 0.0)]), (2, [dump_line(0.0, 1.0, 1.0, 1.0)])):
        (tmp_path / "rollouts" / f"{step}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = diagnose.derived_metrics(tmp_path / "rollouts")
    assert rows[1]["thinking/budget_hit_rate"] == 1.0 and rows[1]["thinking/accuracy/hit"] == 0.0
    assert rows[2]["thinking/budget_hit_rate"] == 0.0 and rows[2]["thinking/accuracy/not_hit"] == 1.0
