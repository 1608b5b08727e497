"""The `thinking_budget` agent loop on the real hf rollout server and the embedded tiny model.

A budget hit must hand training exactly: the generated prefix, the early-stop phrase's ids (masked out
of the loss, log-prob 0), then the generated answer; a request that ends within its budget must be
what the single-turn loop would have produced.
"""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

from rlvr_cluster.hf_rollout import HFServer
from rlvr_cluster.thinking_budget import (
    AGENT_LOOP_NAME,
    EARLY_STOP_PHRASE,
    ThinkingBudgetAgentLoop,
    close_index,
    parse_budget,
    step_metrics,
)

PROMPT_LEN, RESPONSE_LEN = 32, 160
GREEDY = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "logprobs": True}


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    config = SimpleNamespace(prompt_length=PROMPT_LEN, response_length=RESPONSE_LEN, seed=0)
    model_config = SimpleNamespace(path=str(tiny_model_dir), local_path=None, tokenizer=None)
    return HFServer(config, model_config, replica_rank=0, node_rank=0)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


class _ServerClient:
    """What verl's LLM server client does for one replica: forward the request to the server."""

    def __init__(self, server):
        self.server = server
        self.calls: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        self.calls.append({"prompt_ids": list(prompt_ids), "sampling_params": dict(sampling_params)})
        return await self.server.generate(prompt_ids, sampling_params, request_id)


def _run(loop_cls, server, tokenizer, row: dict, custom=None, template_kwargs=None, **loop_kwargs):
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {"prompt_length": PROMPT_LEN, "response_length": RESPONSE_LEN, "custom": custom}
            },
            "data": {"apply_chat_template_kwargs": template_kwargs or {}},
        }
    )
    client = _ServerClient(server)

    async def go():
        loop = loop_cls(
            trainer_config=DictConfigWrap(config),
            server_manager=client,
            tokenizer=tokenizer,
            processor=None,
            dataset_cls=None,
            data_config=DictConfigWrap(config.data),
            hf_model_type="qwen2",
            **loop_kwargs,
        )
        return await loop.run(dict(GREEDY), **row)

    return asyncio.run(go()), client


def _row(prompt: str, budget=None) -> dict:
    extra = {} if budget is None else {"thinking_budget": budget}
    return {"raw_prompt": [{"role": "user", "content": prompt}], "extra_info": extra}


def _model_logprobs(model, ids: list[int], start: int) -> list[float]:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    return [float(logp[i - 1, ids[i]]) for i in range(start, len(ids))]


def test_the_loop_is_in_verls_registry_under_its_file_name():
    assert (
        _agent_loop_registry[AGENT_LOOP_NAME]["_target_"]
        == "rlvr_cluster.thinking_budget.ThinkingBudgetAgentLoop"
    )


def test_a_budget_hit_inserts_the_early_stop_ids_masked_and_continues_the_answer(server, tokenizer):
    out, client = _run(ThinkingBudgetAgentLoop, server, tokenizer, _row("3+4=", budget=1))
    stop_ids = tokenizer.encode(EARLY_STOP_PHRASE, add_special_tokens=False)
    assert len(client.calls) == 2
    first, second = client.calls
    assert first["sampling_params"]["max_tokens"] == 1
    prefix = out.response_ids[:1]
    # the first call's prompt is the chat prompt; the second continues from prompt + prefix + phrase
    assert second["prompt_ids"] == out.prompt_ids + prefix + stop_ids
    assert second["sampling_params"]["max_tokens"] == RESPONSE_LEN - 1 - len(stop_ids)
    answer = out.response_ids[1 + len(stop_ids) :]
    assert out.response_ids == prefix + stop_ids + answer
    assert len(answer) >= 1
    assert tokenizer.decode(out.response_ids[1 : 1 + len(stop_ids)]) == EARLY_STOP_PHRASE
    assert out.response_mask == [1] + [0] * len(stop_ids) + [1] * len(answer)
    # sampled tokens carry the model's own log-probs; inserted ones 0.0 (masked out anyway)
    full = out.prompt_ids + out.response_ids
    expected = _model_logprobs(server.model, full, len(out.prompt_ids))
    for i, (got, want) in enumerate(zip(out.response_logprobs, expected, strict=True)):
        if out.response_mask[i]:
            assert got == pytest.approx(want, abs=1e-4)
        else:
            assert got == 0.0
    # the answer is what the model generates greedily after the inserted phrase
    assert answer == server_greedy(server, out.prompt_ids + prefix + stop_ids, len(answer))
    extra = out.extra_fields
    assert extra["thinking_budget_hit"] == 1
    assert extra["thinking_budget"] == 1
    assert extra["thinking_tokens"] == 1
    assert extra["answer_tokens"] == len(answer)


def test_a_zero_budget_closes_the_block_at_once_without_asking_the_server_for_zero_tokens(server, tokenizer):
    out, client = _run(ThinkingBudgetAgentLoop, server, tokenizer, _row("3+4=", budget=0))
    stop_ids = tokenizer.encode(EARLY_STOP_PHRASE, add_special_tokens=False)
    # one call, for the answer after the phrase (vLLM refuses max_tokens=0)
    assert [c["prompt_ids"] for c in client.calls] == [out.prompt_ids + stop_ids]
    assert client.calls[0]["sampling_params"]["max_tokens"] == RESPONSE_LEN - len(stop_ids)
    answer = out.response_ids[len(stop_ids) :]
    assert out.response_ids[: len(stop_ids)] == stop_ids and len(answer) >= 1
    assert out.response_mask == [0] * len(stop_ids) + [1] * len(answer)
    assert out.response_logprobs[: len(stop_ids)] == [0.0] * len(stop_ids)
    assert answer == server_greedy(server, out.prompt_ids + stop_ids, len(answer))
    assert (out.extra_fields["thinking_budget_hit"], out.extra_fields["thinking_tokens"]) == (1, 0)
    assert out.extra_fields["answer_tokens"] == len(answer)


def server_greedy(server, prompt_ids: list[int], n: int) -> list[int]:
    ids = list(prompt_ids)
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(server.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt_ids) :]


def test_a_request_that_ends_within_its_budget_is_the_single_turn_loops_output(server, tokenizer):
    budgeted, client = _run(ThinkingBudgetAgentLoop, server, tokenizer, _row("3+4=", budget=12))
    plain, _ = _run(SingleTurnAgentLoop, server, tokenizer, _row("3+4="))
    assert len(client.calls) == 1
    assert budgeted.prompt_ids == plain.prompt_ids
    assert budgeted.response_ids == plain.response_ids
    assert len(plain.response_ids) < 12 and plain.response_ids[-1] == tokenizer.eos_token_id
    assert budgeted.response_mask == plain.response_mask == [1] * len(plain.response_ids)
    assert budgeted.response_logprobs == pytest.approx(plain.response_logprobs, abs=1e-6)
    assert budgeted.extra_fields["thinking_budget_hit"] == 0
    assert budgeted.extra_fields["answer_tokens"] == len(plain.response_ids)


def test_budget_comes_from_the_row_before_the_loop_config_before_rollout_custom(server, tokenizer):
    _, client = _run(ThinkingBudgetAgentLoop, server, tokenizer, _row("3+4="), custom={"thinking_budget": 2})
    assert client.calls[0]["sampling_params"]["max_tokens"] == 2
    _, client = _run(
        ThinkingBudgetAgentLoop,
        server,
        tokenizer,
        _row("3+4="),
        custom={"thinking_budget": 2},
        thinking_budget=3,
    )
    assert client.calls[0]["sampling_params"]["max_tokens"] == 3
    _, client = _run(ThinkingBudgetAgentLoop, server, tokenizer, _row("3+4=", budget=1), thinking_budget=3)
    assert client.calls[0]["sampling_params"]["max_tokens"] == 1
    # no budget anywhere: one call, no cap of its own
    out, client = _run(ThinkingBudgetAgentLoop, server, tokenizer, _row("3+4="))
    assert len(client.calls) == 1 and "max_tokens" not in client.calls[0]["sampling_params"]
    assert out.extra_fields["thinking_budget"] == -1


def test_a_non_thinking_prompt_gets_no_budget(server, tokenizer):
    # non-thinking mode (the recipe's enable_thinking=False, or the row's /no_think switch): the
    # template prefills the empty block, so there is nothing to cap
    for row, template_kwargs in (
        (_row("3+4=", budget=1), {"enable_thinking": False}),
        (_row("3+4= /no_think", budget=1), None),
    ):
        out, client = _run(ThinkingBudgetAgentLoop, server, tokenizer, row, template_kwargs=template_kwargs)
        assert tokenizer.decode(out.prompt_ids).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
        assert len(client.calls) == 1 and "max_tokens" not in client.calls[0]["sampling_params"]
        assert out.response_mask == [1] * len(out.response_ids)
        assert out.extra_fields["thinking_budget_hit"] == 0
    # the same row in thinking mode is capped
    out, client = _run(ThinkingBudgetAgentLoop, server, tokenizer, _row("3+4=", budget=1), template_kwargs={})
    assert client.calls[0]["sampling_params"]["max_tokens"] == 1


def test_bad_budgets_are_refused_with_their_source():
    assert parse_budget("16", "x") == 16 and parse_budget(None, "x") is None
    for bad in (-1, "lots", 2.5):
        with pytest.raises(ValueError, match="the row's extra_info.thinking_budget"):
            parse_budget(bad, "the row's extra_info.thinking_budget")


def test_close_index_finds_the_token_that_completes_the_tag(tokenizer):
    ids = tokenizer.encode("ab</think>\n\n7", add_special_tokens=False)
    k = close_index(tokenizer, ids)
    assert tokenizer.decode(ids[:k]).endswith("</think>")
    assert "</think>" not in tokenizer.decode(ids[: k - 1])
    assert close_index(tokenizer, tokenizer.encode("no tag here", add_special_tokens=False)) is None


def test_step_metrics_split_accuracy_by_budget_hit():
    m = step_metrics(
        hits=[1, 1, 0, 0], thinking_tokens=[8, 8, 2, 4], answer_tokens=[1, 3, 2, 2], scores=[1, 0, 1, 1]
    )
    assert m["thinking/budget_hit_rate"] == 0.5
    assert m["thinking/thinking_tokens/mean"] == 5.5
    assert m["thinking/thinking_tokens/p90"] == pytest.approx(8.0)
    assert m["thinking/answer_tokens/mean"] == 2.0
    assert m["thinking/accuracy/hit"] == 0.5 and m["thinking/accuracy/not_hit"] == 1.0
    none_hit = step_metrics([0, 0], [1, 2], [1, 1], [0, 1])
    assert "thinking/accuracy/hit" not in none_hit
    assert all(math.isfinite(v) for v in none_hit.values())
    with pytest.raises(ValueError):
        step_metrics([1], [1, 2], [1], [1])


THINKING_ANSWER = "<think>\n3 and 4\n</think>\n\n7"


@pytest.fixture(scope="module")
def thinking_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model taught (a few seconds of SFT) to answer `3+4=` with a closed reasoning block."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "3+4="}], add_generation_prompt=True, tokenize=False
    )
    prompt_ids = tok.encode(prompt, add_special_tokens=False)
    answer_ids = tok.encode(THINKING_ANSWER, add_special_tokens=False) + [tok.eos_token_id]
    ids = torch.tensor([prompt_ids + answer_ids])
    labels = ids.clone()
    labels[0, : len(prompt_ids)] = -100
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(400):
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 1e-3:
            break
    model.eval()
    out = tmp_path_factory.mktemp("thinking-model")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_a_block_closed_within_the_budget_is_the_single_turn_loops_output(thinking_model_dir, tokenizer):
    config = SimpleNamespace(prompt_length=PROMPT_LEN, response_length=RESPONSE_LEN, seed=0)
    model_config = SimpleNamespace(path=str(thinking_model_dir), local_path=None, tokenizer=None)
    thinking_server = HFServer(config, model_config, replica_rank=0, node_rank=0)
    plain, _ = _run(SingleTurnAgentLoop, thinking_server, tokenizer, _row("3+4="))
    expected = tokenizer.encode(THINKING_ANSWER, add_special_tokens=False) + [tokenizer.eos_token_id]
    assert plain.response_ids == expected, "the SFT did not teach the closed block"
    closes = close_index(tokenizer, expected)
    # the budget ends after the block closed but before the answer: a second call continues it
    budget = closes + 1
    assert budget < len(expected) - 1
    out, client = _run(ThinkingBudgetAgentLoop, thinking_server, tokenizer, _row("3+4=", budget=budget))
    assert len(client.calls) == 2
    assert client.calls[1]["prompt_ids"] == out.prompt_ids + expected[:budget]
    assert out.response_ids == plain.response_ids
    assert out.response_mask == [1] * len(expected)
    assert out.response_logprobs == pytest.approx(plain.response_logprobs, abs=1e-4)
    assert out.extra_fields["thinking_budget_hit"] == 0
    assert out.extra_fields["thinking_tokens"] == closes
    assert out.extra_fields["answer_tokens"] == len(expected) - closes
    # the same model with a budget that ends inside the block: a hit, the phrase after `budget` tokens
    short = closes - 3
    out, _ = _run(ThinkingBudgetAgentLoop, thinking_server, tokenizer, _row("3+4=", budget=short))
    stop_ids = tokenizer.encode(EARLY_STOP_PHRASE, add_special_tokens=False)
    assert out.response_ids[:short] == expected[:short]
    assert out.response_ids[short : short + len(stop_ids)] == stop_ids
    assert out.response_mask[: short + len(stop_ids)] == [1] * short + [0] * len(stop_ids)
    assert out.extra_fields["thinking_budget_hit"] == 1 and out.extra_fields["thinking_tokens"] == short
