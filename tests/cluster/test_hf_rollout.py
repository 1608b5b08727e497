"""The hf rollout server: token-in/token-out generation whose log-probs are the model's own."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
import torch

from rlvr_cluster.hf_rollout import HFServer
from rlvr_cluster.hf_server import GATHER_S


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    config = SimpleNamespace(prompt_length=32, response_length=6, seed=0)
    model_config = SimpleNamespace(path=str(tiny_model_dir), local_path=None, tokenizer=None)
    return HFServer(config, model_config, replica_rank=0, node_rank=0)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _prompt(tokenizer, text: str) -> list[int]:
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
    )
    return tokenizer.encode(text, add_special_tokens=False)


def _generate_many(server, prompts, params):
    async def go():
        return await asyncio.gather(
            *[server.generate(p, dict(params), f"r{i}") for i, p in enumerate(prompts)]
        )

    return asyncio.run(go())


def _reference_logprobs(model, prompt: list[int], tokens: list[int], temperature: float) -> list[float]:
    ids = torch.tensor([prompt + tokens])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    logp = torch.log_softmax(logits / (temperature if temperature > 0 else 1.0), dim=-1)
    return [float(logp[i, t]) for i, t in enumerate(tokens)]


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_greedy_batch_equals_one_by_one_despite_left_padding(server, tokenizer):
    prompts = [_prompt(tokenizer, t) for t in ("3+4=", "12+9=", "1+1=", "what is 7+8?")]
    greedy = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "logprobs": True}
    batched = _generate_many(server, prompts, greedy)
    single = [_generate_many(server, [p], greedy)[0] for p in prompts]
    assert [o.token_ids for o in batched] == [o.token_ids for o in single]
    for a, b in zip(batched, single, strict=True):
        assert a.log_probs == pytest.approx(b.log_probs, abs=1e-4)


def test_log_probs_are_the_models_own_at_the_sampling_temperature(server, tokenizer):
    prompts = [_prompt(tokenizer, t) for t in ("2+5=", "9+9=", "0+3=")] * 3
    outputs = _generate_many(
        server, prompts, {"temperature": 0.7, "top_p": 1.0, "top_k": -1, "logprobs": True}
    )
    for prompt, out in zip(prompts, outputs, strict=True):
        expected = _reference_logprobs(server.model, prompt, out.token_ids, 0.7)
        assert out.log_probs == pytest.approx(expected, abs=1e-4)


def test_generation_stops_at_end_of_turn_and_respects_the_length_budget(server, tokenizer):
    out = _generate_many(server, [_prompt(tokenizer, "3+4=")] * 16, {"temperature": 1.0, "logprobs": False})
    eos = tokenizer.eos_token_id
    for o in out:
        assert 1 <= len(o.token_ids) <= 6
        assert eos not in o.token_ids[:-1], "tokens were generated after the end of the turn"
        assert o.log_probs is None


def test_pushed_weights_change_what_the_server_generates(tiny_model_dir, tokenizer):
    config = SimpleNamespace(prompt_length=32, response_length=4, seed=0)
    server = HFServer(config, SimpleNamespace(path=str(tiny_model_dir)), replica_rank=0, node_rank=0)
    prompt = _prompt(tokenizer, "4+4=")
    before = _generate_many(server, [prompt], {"temperature": 0.0, "logprobs": True})[0]
    weights = [
        (name, torch.zeros_like(t)) for name, t in server.model.state_dict().items() if "lm_head" not in name
    ]
    assert server.load_weights(weights) == len(weights)
    after = _generate_many(server, [prompt], {"temperature": 0.0, "logprobs": True})[0]
    assert after.log_probs != pytest.approx(before.log_probs, abs=1e-3)


def test_weights_the_model_does_not_have_are_rejected(server):
    with pytest.raises(KeyError, match="does not have"):
        server.load_weights([("model.no_such_layer.weight", torch.zeros(2))])


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_the_server_process_never_imports_verl(tiny_model_dir):
    """The server is a Ray actor of its own: importing verl there would cost ~160 MiB of memory."""
    import subprocess
    import sys

    code = (
        "import sys; from rlvr_cluster.hf_server import HFServer, ServerSettings;"
        f"s = HFServer(ServerSettings(model_path={str(tiny_model_dir)!r}, prompt_length=16, response_length=4));"
        "print(sorted(m for m in sys.modules if m == 'verl' or m.startswith('verl.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_process_holding_only_server_handles_never_imports_torch():
    """Ray imports the module of an actor's class wherever a handle to it is unpickled: verl's load-balancer
    actor (rlvr_cluster/slim_router.py, no torch of its own) holds every server's handle. torch at this
    module's top would cost that process ~0.18 GiB."""
    import subprocess
    import sys

    code = (
        "import sys; import rlvr_cluster.hf_server;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'verl')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_requests_arriving_over_a_burst_are_decoded_in_a_few_batched_calls(tiny_model_dir, tokenizer):
    """verl's agent loop sends one request per sample, a few milliseconds apart: they must share decodes."""
    config = SimpleNamespace(prompt_length=32, response_length=4, seed=0)
    server = HFServer(config, SimpleNamespace(path=str(tiny_model_dir)), replica_rank=0, node_rank=0)
    prompt = _prompt(tokenizer, "2+2=")

    sent: list[float] = []

    async def go():
        async def one(i):
            await asyncio.sleep(0.002 * i)  # 48 requests over ~96 ms, as the agent loop streams them
            sent.append(time.monotonic())
            return await server.generate(prompt, {"temperature": 1.0, "logprobs": True}, f"r{i}")

        return await asyncio.gather(*[one(i) for i in range(48)])

    outputs = asyncio.run(go())
    # Each of the server's gather-and-decode cycles lasts at least GATHER_S (its gathering sleep), so
    # requests that arrive over a spread of S seconds can start at most S / GATHER_S + 1 decodes, however
    # fast the decode itself (96 ms nominal -> 20, vs 48 for one decode per request). The spread is
    # measured: a loaded machine's late timers stretch it.
    spread = max(sent) - min(sent)
    bound = int(spread / GATHER_S) + 1
    assert len(outputs) == 48 and all(1 <= len(o.token_ids) <= 4 for o in outputs)
    stats = server.batching()
    assert stats["decoded_requests"] == 48
    # One decode per request would be 48 calls; requests that arrive while a batch decodes join the next.
    assert stats["decode_calls"] <= bound and stats["decode_calls"] < 48, (stats, bound, spread)
