"""The `thinking_budget` agent loop on verl's real vLLM rollout (rollout=vllm, vLLM's CPU build), inside
verl's trainer: one GRPO step of `experiment=cpu_thinking_budget` with a budget of 2 reasoning tokens.

The tiny model never closes its reasoning block within 2 tokens, so every response that does not end
first is a budget hit. What must hold on vLLM as on the hf rollout: the ids handed to training are the 2
generated ids, the early-stop phrase's ids, then exactly the ids vLLM generated for the answer (no
re-tokenisation); the inserted ids are masked out of the loss with log-prob 0.0; the answer's
log-probs are vLLM's own, aligned with their tokens (verl's actor recomputes every unmasked token's
log-prob on the whole sequence and agrees with vLLM's to fp32 precision, which a shifted or
misattributed answer would not); and the step's metrics.jsonl row carries the budget figures of these
same samples. The loop runs observed (thinking_budget_recorder.py): each server call and the loop's
output are recorded, nothing is replaced.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import thinking_budget_recorder as recorder
from vllm_cpu_support import needs_vllm_cpu

from rlvr_cluster.thinking_budget import EARLY_STOP_PHRASE

# vLLM engines and the real model take GBs and make /dev/shm segments others check: one at a time (conftest)
pytestmark = [pytest.mark.slow, needs_vllm_cpu, pytest.mark.xdist_group("vllm_or_real_model")]

BUDGET = 2
BATCH, N = 8, 2  # 16 samples: the recipe's micro-batch of 16 divides the mini-batch
# verl's training/rollout_probs_diff_max: largest |p_actor - p_rollout| over the unmasked tokens (fp32 both)
IN_SYNC = 1e-4


def test_a_budget_hit_on_the_vllm_rollout_hands_training_prefix_phrase_and_answer_ids_masked_and_logged(
    tmp_path, rlvr_cache, tiny_model_dir
):
    records_dir = tmp_path / "records"
    records_dir.mkdir()
    loops = tmp_path / "agent_loops.yaml"
    loops.write_text(f"- name: {recorder.NAME}\n  _target_: {recorder.TARGET}\n")
    root = tempfile.mkdtemp(prefix="rlvr-tbv-", dir="/tmp")
    here = str(Path(__file__).parent)
    env = {
        **os.environ,
        "RLVR_RAY_TMPDIR_ROOT": root,
        recorder.RECORDS_ENV: str(records_dir),
        "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])),
    }
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "rlvr_launch.cli", "train", "experiment=cpu_thinking_budget", "rollout=vllm",
        "trainer.total_training_steps=1", f"data.train_batch_size={BATCH}", f"actor_rollout_ref.rollout.n={N}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={BATCH}",
        f"actor_rollout_ref.rollout.custom.thinking_budget={BUDGET}",
        f"actor_rollout_ref.rollout.agent.default_agent_loop={recorder.NAME}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
        "--run-dir", str(run_dir),
    ]  # fmt: skip
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "name: vllm" in (run_dir / "config.yaml").read_text()

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    stop_ids = tokenizer.encode(EARLY_STOP_PHRASE, add_special_tokens=False)
    eos = tokenizer.eos_token_id
    records = [
        json.loads(line) for p in sorted(records_dir.glob("*.jsonl")) for line in p.read_text().splitlines()
    ]
    assert len(records) == BATCH * N
    hits = [r for r in records if r["extra_fields"]["thinking_budget_hit"]]
    assert hits, "no response hit the budget of 2 tokens"
    for r in records:
        calls, ids, mask, lps = r["calls"], r["response_ids"], r["response_mask"], r["response_logprobs"]
        first = calls[0]
        # the first call is the chat prompt, capped at the budget
        assert first["prompt_ids"] == r["prompt_ids"] and first["max_tokens"] == BUDGET
        assert r["extra_fields"]["thinking_budget"] == BUDGET
        assert len(ids) == len(mask) == len(lps) <= r["response_length"]
        if r not in hits:
            # ended (EOS) within the budget: one call, its tokens untouched
            assert len(calls) == 1 and first["token_ids"][-1] == eos and len(first["token_ids"]) <= BUDGET
            assert ids == first["token_ids"] and mask == [1] * len(ids) and lps == first["log_probs"]
            continue
        prefix = first["token_ids"]
        assert len(prefix) == BUDGET and "</think>" not in tokenizer.decode(prefix)
        assert len(calls) == 2
        second = calls[1]
        # the answer continues from prompt + prefix + phrase, with what is left of the response length
        assert second["prompt_ids"] == r["prompt_ids"] + prefix + stop_ids
        assert second["max_tokens"] == r["response_length"] - BUDGET - len(stop_ids)
        answer = second["token_ids"]
        assert 1 <= len(answer) <= second["max_tokens"]
        assert ids == prefix + stop_ids + answer
        assert tokenizer.decode(ids[BUDGET : BUDGET + len(stop_ids)]).endswith("</think>\n\n")
        assert mask == [1] * BUDGET + [0] * len(stop_ids) + [1] * len(answer)
        # vLLM's own log-probs for what it sampled, 0.0 for the inserted ids
        assert lps == first["log_probs"] + [0.0] * len(stop_ids) + second["log_probs"]
        assert all(math.isfinite(x) and x <= 0.0 for x in first["log_probs"] + second["log_probs"])
        assert r["extra_fields"]["thinking_tokens"] == BUDGET
        assert r["extra_fields"]["answer_tokens"] == len(answer)

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["training/global_step"] for row in rows] == [1]
    row = rows[0]
    # verl's actor agrees with vLLM on every unmasked token: the answer's log-probs sit on their tokens
    assert row["training/rollout_probs_diff_valid"] == 1
    assert row["training/rollout_probs_diff_max"] < IN_SYNC, row
    # the step's budget figures are those of the recorded samples
    assert row["thinking/budget_hit_rate"] == pytest.approx(len(hits) / len(records))
    thinking = [r["extra_fields"]["thinking_tokens"] for r in records]
    answers = [r["extra_fields"]["answer_tokens"] for r in records]
    assert row["thinking/thinking_tokens/mean"] == pytest.approx(sum(thinking) / len(records))
    assert row["thinking/answer_tokens/mean"] == pytest.approx(sum(answers) / len(records))
    assert math.isfinite(row["thinking/accuracy/hit"])
    assert math.isfinite(row["critic/score/mean"]) and math.isfinite(row["actor/pg_loss"])
