"""The hf server's teacher mode: what verl's on-policy distillation asks a teacher, answered with the
teacher model's own log-probs, position by position, in the layout verl's vLLM teacher returns."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
import torch
from vllm_cpu_support import require_vllm_cpu

from rlvr_cluster.hf_server import HFServer, prompt_logprobs_reply


@pytest.fixture(scope="module")
def teacher(tiny_model_dir):
    config = SimpleNamespace(prompt_length=40, response_length=1, seed=0)
    model_config = SimpleNamespace(path=str(tiny_model_dir), local_path=None, tokenizer=None)
    return HFServer(config, model_config)


@pytest.fixture(scope="module")
def reference_model(tiny_model_dir):
    """The same weights loaded independently of the server (the server's own model is not consulted)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def sequence(tiny_model_dir) -> list[int]:
    """A chat prompt plus a response: what the student's agent loop sends (prompt + response ids)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = tok.apply_chat_template(
        [{"role": "user", "content": "7+5="}], add_generation_prompt=True, tokenize=False
    )
    return tok.encode(text + "12<|im_end|>", add_special_tokens=False)


def _ask(server, ids, params):
    return asyncio.run(server.generate(list(ids), dict(params), "teacher-0"))


def _prefix_distribution(model, ids: list[int], position: int) -> torch.Tensor:
    """log p(. | ids[:position + 1]) from a forward pass over that prefix alone."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids[: position + 1]])).logits[0, -1].float()
    return torch.log_softmax(logits, dim=-1)


def test_k0_rows_are_each_next_tokens_log_prob_and_the_last_row_is_verls_dummy(
    teacher, reference_model, sequence
):
    # verl's request for estimator losses (k1/k2/k3/low_var_kl): teacher_manager._get_teacher_sampling_params
    out = _ask(
        teacher, sequence, {"max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 0, "detokenize": False}
    )
    ids, logps = out.extra_fields["prompt_ids"], out.extra_fields["prompt_logprobs"]
    assert len(ids) == len(logps) == len(sequence)  # verl asserts this, then pads by position
    for i in range(len(sequence) - 1):
        assert ids[i] == [sequence[i + 1]], f"row {i} must score the token that follows position {i}"
        expected = float(_prefix_distribution(reference_model, sequence, i)[sequence[i + 1]])
        assert logps[i][0] == pytest.approx(expected, abs=1e-4)
    assert ids[-1] == [0] and logps[-1] == [0.0]
    # the first row is conditioned on the first token only, so it differs from an unconditioned guess
    assert logps[0][0] != pytest.approx(logps[1][0], abs=1e-6)


def test_topk_rows_are_the_k_most_likely_tokens_most_likely_first(teacher, reference_model, sequence):
    k = 5
    out = _ask(teacher, sequence, {"max_tokens": 1, "temperature": 1.0, "prompt_logprobs": k})
    ids, logps = out.extra_fields["prompt_ids"], out.extra_fields["prompt_logprobs"]
    assert len(ids) == len(sequence) and all(len(row) == k for row in ids + logps)
    for i in (0, 1, len(sequence) // 2, len(sequence) - 2):
        dist = _prefix_distribution(reference_model, sequence, i)
        top = torch.topk(dist, k)
        assert ids[i] == top.indices.tolist()
        assert logps[i] == pytest.approx(top.values.tolist(), abs=1e-4)
        assert logps[i] == sorted(logps[i], reverse=True)
    assert ids[-1] == [0] * k and logps[-1] == [0.0] * k
    # the one generated token of the max_tokens=1 request: the greedy continuation of the whole sequence
    assert out.token_ids == [int(_prefix_distribution(reference_model, sequence, len(sequence) - 1).argmax())]


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_the_reply_matches_what_verls_vllm_teacher_extracts_from_the_same_distributions(
    reference_model, sequence
):
    """verl's own extract_prompt_logprobs, fed vLLM-shaped prompt log-probs of the same model, gives our rows."""
    require_vllm_cpu()  # verl's vllm_rollout utils import vLLM (the vllm-cpu extra)
    from verl.workers.rollout.vllm_rollout.utils import extract_prompt_logprobs

    for k in (0, 3):
        vllm_rows: list = [None]  # vLLM has no log-prob for the first prompt token
        for i in range(len(sequence) - 1):
            dist = _prefix_distribution(reference_model, sequence, i)
            given = sequence[i + 1]
            rank = int((dist > dist[given]).sum()) + 1
            row = {given: SimpleNamespace(logprob=float(dist[given]), rank=rank)}
            if k:
                top = torch.topk(dist, k)
                for r, (tid, lp) in enumerate(zip(top.indices.tolist(), top.values.tolist(), strict=True)):
                    row[tid] = SimpleNamespace(logprob=lp, rank=r + 1)
            vllm_rows.append(row)
        verl_view: dict = {}
        extract_prompt_logprobs(SimpleNamespace(prompt_logprobs=vllm_rows), k, verl_view)
        ours = prompt_logprobs_reply(reference_model, sequence, {"max_tokens": 1, "prompt_logprobs": k})
        assert ours.extra_fields["prompt_ids"] == verl_view["prompt_ids"]
        assert torch.allclose(
            torch.tensor(ours.extra_fields["prompt_logprobs"]),
            torch.tensor(verl_view["prompt_logprobs"]),
            atol=1e-5,
        )


def test_ordinary_generation_is_untouched_by_the_teacher_path(teacher, sequence):
    out = _ask(teacher, sequence[:-3], {"temperature": 0.0, "logprobs": True})
    assert "prompt_logprobs" not in out.extra_fields and out.log_probs is not None
    assert teacher.scored_requests > 0  # the earlier requests went the teacher way, this one did not


@pytest.mark.parametrize(
    ("params", "ids", "says"),
    [
        ({"prompt_logprobs": -1}, None, "whole number >= 0"),
        ({"prompt_logprobs": 2.5}, None, "whole number >= 0"),
        ({"prompt_logprobs": True}, None, "whole number >= 0"),
        ({"prompt_logprobs": 10**7}, None, "exceeds the teacher's vocabulary"),
        ({"prompt_logprobs": 0, "max_tokens": 8}, None, "max_tokens=1 only"),
        ({"prompt_logprobs": 0}, [], "at least one token id"),
        ({"prompt_logprobs": 0}, [1, 2, 10**7], "outside the teacher's vocabulary"),
        ({"prompt_logprobs": 0}, [1] * 100_000, "exceeds the teacher's"),
    ],
)
def test_a_bad_teacher_request_is_refused_naming_the_problem(teacher, sequence, params, ids, says):
    with pytest.raises(ValueError, match=says):
        _ask(teacher, sequence if ids is None else ids, params)
