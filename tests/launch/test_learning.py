"""The policy learns: the default experiment, shortened, raises the reward (slow: one real verl run).

`rlvr train` with the default experiment (cpu_demo: verl's GRPO on the embedded tiny model and
addition) and only its length changed: STEPS steps, validation before training and every VAL_EVERY
steps, no checkpoints. The mean reward of the last WINDOW steps must beat the first WINDOW's by
MARGIN.

The margins are measured (bench/learning_margins.py, record in bench/results/learning_margins.json): ten
healthy runs of exactly this run and ten with the update switched off (`actor_rollout_ref.actor.optim.lr=0`:
rollouts, rewards and every step run, the weights never change), 40 steps each, load 1.5-10:

- reward, mean of the last WINDOW steps minus the first WINDOW's: healthy +0.207 (sd 0.015, min +0.180),
  no-update +0.010 (sd 0.019, max +0.036). MARGIN 0.12 sits 5.6 sd under the healthy mean and 5.8 sd
  over the no-update one: under a normal model a false failure or a false pass is ~1e-8 per run (ten runs
  a side pin an sd only to about +-25%; at 4 sd the rates would still be ~3e-5). (The earlier 0.08 was 8.2 sd from the healthy
  runs but only 3.7 from the no-update ones: a run that does not learn would have passed ~1 time in 8000.)
  The rollout samples differently each run, so this figure varies from run to run by that sd.
- held-out greedy accuracy on the 200 sums never trained, mean of the last HELD_OUT_LATE validations
  (steps 25-40) minus the one before training: healthy +0.238 (sd 0.022, min +0.201); no-update exactly
  0.000 in every run (greedy decoding of unchanged weights gives the step-0 figure). HELD_OUT_MARGIN 0.12
  is 5.3 sd under the healthy mean (~6e-8 per run) and fails every run whose weights do not move. One
  snapshot would not do: a single 200-sum validation moves by up to 0.13 between validations five steps
  apart late in a healthy run.

A run whose updates do not reach the policy (a broken advantage, a flipped loss sign, weights never synced
to the rollout) stays flat or falls, as the no-update runs do. Re-measure after changing the default
experiment: `python bench/learning_margins.py --runs 10` (~25 min on 2 cores, two runs at a time).
"""

from __future__ import annotations

import json
import math

import pytest
from learning_run import STEPS, VAL_EVERY

WINDOW = 10
MARGIN = 0.12
HELD_OUT_MARGIN = 0.12
HELD_OUT_LATE = 4
HELD_OUT = "val-core/addition/acc/mean@1"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_default_experiment_raises_the_mean_reward(default_experiment_run):
    run_dir, out = default_experiment_run  # conftest: one 40-step run, shared with test_algo_recipes' grpo
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rewards = [r["critic/score/mean"] for r in rows if "critic/score/mean" in r]
    assert len(rewards) == STEPS and all(math.isfinite(r) for r in rewards), rewards
    first = sum(rewards[:WINDOW]) / WINDOW
    last = sum(rewards[-WINDOW:]) / WINDOW
    print(
        f"mean reward, first {WINDOW} steps {first:.3f} -> last {WINDOW} {last:.3f}: {[round(r, 2) for r in rewards]}"
    )
    assert last - first >= MARGIN, f"reward {first:.3f} -> {last:.3f}: the policy did not learn ({rewards})"
    held_out = [(r["training/global_step"], r[HELD_OUT]) for r in rows if HELD_OUT in r]
    assert [step for step, _ in held_out] == list(range(0, STEPS + 1, VAL_EVERY)), held_out
    before = held_out[0][1]
    late = [accuracy for _, accuracy in held_out[-HELD_OUT_LATE:]]
    after = sum(late) / len(late)
    print(f"held-out greedy accuracy (200 sums never trained): {held_out}")
    assert after - before >= HELD_OUT_MARGIN, (
        f"held-out greedy accuracy {before:.3f} before training, {after:.3f} on average over the last "
        f"{HELD_OUT_LATE} validations {held_out}: RL did not carry over to unseen sums"
    )
