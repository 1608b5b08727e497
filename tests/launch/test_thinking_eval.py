"""`rlvr eval --thinking-budget`: accuracy and token cost per thinking budget, thinking and non-thinking
mode, through rlvr's `thinking_budget` agent loop on the hf server and the embedded tiny model."""

from __future__ import annotations

import json
import shutil

import pytest

from rlvr_cluster.thinking_budget import EARLY_STOP_PHRASE
from rlvr_launch import cli
from rlvr_launch.errors import UserError
from rlvr_launch.pipelines import evaluate

LIMIT = 8


@pytest.fixture(scope="module")
def sweep(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "budget.json"
    argv = ["eval", str(tiny_model_dir), "--task", "addition", "--thinking-budget", "32,0,2"]
    assert cli.main([*argv, "--limit", str(LIMIT), "--out", str(out)]) == 0
    return json.loads(out.read_text()), out


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_each_budget_gets_its_accuracy_and_token_cost_and_a_png(sweep, tiny_model_dir):
    report, out = sweep
    from transformers import AutoTokenizer

    phrase = len(
        AutoTokenizer.from_pretrained(tiny_model_dir).encode(EARLY_STOP_PHRASE, add_special_tokens=False)
    )
    assert report["early_stop_tokens"] == phrase and report["prompts"] == LIMIT
    rows = {r["budget"]: r for r in report["thinking"]}
    assert list(rows) == [0, 2, 32]  # sorted, one row each
    # budget 0: every response is the phrase then the answer: no reasoning, all hits
    zero = rows[0]
    assert zero["budget_hit_rate"] == 1.0 and zero["mean_thinking_tokens"] == 0.0
    assert phrase < zero["mean_total_tokens"] <= phrase + report["answer_tokens"]
    # a budget far above what the model writes changes nothing: it is plain greedy decoding, so its
    # pass@1 is the pass@1 `rlvr eval` measures without a budget on the same prompts
    plain = evaluate.evaluate(str(tiny_model_dir), "addition", limit=LIMIT)
    assert rows[32]["budget_hit_rate"] == 0.0
    assert rows[32]["pass@1"] == pytest.approx(plain["pass@1"])
    assert rows[32]["mean_total_tokens"] == pytest.approx(plain["greedy"]["length"]["mean"])
    for r in rows.values():
        assert 0.0 <= r["pass@1"] <= 1.0
    # non-thinking mode: the template's empty block, no budget, never a hit, at most the answer room
    nt = report["non_thinking"]
    assert nt["budget"] is None and nt["budget_hit_rate"] == 0.0
    assert nt["mean_total_tokens"] <= report["answer_tokens"]
    png = out.with_suffix(".png")
    assert report["plot"] == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_budgets_and_a_template_without_non_thinking_mode_are_refused(tiny_model_dir, tmp_path):
    for bad in ("", "a,16", "16,-1"):
        with pytest.raises(UserError, match="--thinking-budget wants comma-separated"):
            evaluate.parse_budgets(bad)
    # a copy of the tiny model whose chat template ignores enable_thinking (plain ChatML)
    model = tmp_path / "no-modes"
    shutil.copytree(tiny_model_dir, model)
    (model / "chat_template.jinja").write_text(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    with pytest.raises(UserError, match="has no non-thinking mode"):
        evaluate.budget_sweep(str(model), "addition", [0], limit=2)
