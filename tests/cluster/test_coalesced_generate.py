"""The in-process router sends the agent loop's concurrent generate requests to the `hf` server together.

verl's LLM client awaits `server.generate.remote(...)` once per sample; through rlvr's in-process router
(cpu platform) a server that answers `generate_many` gets the requests made in one turn of the event loop
as one Ray call (rlvr_cluster/slim_router.py, CoalescedGenerate). What must hold: each caller gets its own
request's reply (the same tokens as when sent alone), one request's failure reaches only its caller, a
dead server fails every waiting caller instead of hanging them, and a server without `generate_many`
(verl's vLLM or SGLang) keeps its own handle. A real `hf` server actor in a private Ray, the tiny model.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import textwrap
from pathlib import Path

import pytest

from rlvr_cluster import slim_router
from rlvr_cluster.hf_server import HFServer, ServerSettings

pytestmark = pytest.mark.slow  # a Ray actor with a model: kept out of the fast set


@pytest.fixture(scope="module")
def ray_server(private_ray, tiny_model_dir):
    settings = ServerSettings(model_path=str(tiny_model_dir), prompt_length=32, response_length=6, seed=0)
    server = private_ray.remote(num_cpus=0)(HFServer).remote(settings)
    private_ray.get(server.weights_version.remote())  # built
    return server


@pytest.fixture(scope="module")
def prompts(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    out = []
    for a, b in [(2, 3), (17, 5), (40, 9), (63, 6), (88, 1), (5, 5), (71, 8), (30, 2)]:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": f"{a}+{b}="}], add_generation_prompt=True, tokenize=False
        )
        out.append(tokenizer.encode(text, add_special_tokens=False))
    return out


def _balancer(servers: dict):
    from verl.workers.rollout.router import get_router_handle

    path = Path(slim_router.__file__).with_name("in_process_router.yaml")
    return get_router_handle(servers=servers, router_config_path=str(path))


async def _generate_as_verls_client(lb, request_id: str, prompt_ids: list[int], **extra):
    """The calls verl's LLMServerClient.generate makes (verl/workers/rollout/llm_server.py)."""
    server_id, server = await lb.acquire_server.remote(request_id=request_id)
    try:
        return await server.generate.remote(
            request_id=request_id,
            prompt_ids=prompt_ids,
            sampling_params={"temperature": 0.0, "logprobs": True},
            image_data=extra.get("image_data"),
            video_data=None,
        )
    finally:
        lb.release_server.remote(server_id=server_id, request_id=request_id)


def test_concurrent_requests_travel_as_one_call_and_each_caller_gets_its_own_reply(
    private_ray, ray_server, prompts
):
    lb = _balancer({"hf-0": ray_server})
    handle = lb.policy._servers["hf-0"]
    assert isinstance(handle, slim_router.CoalescingServer)

    async def together():
        return await asyncio.gather(
            *[_generate_as_verls_client(lb, f"r{i}", p) for i, p in enumerate(prompts * 4)]
        )

    async def alone(prompt):
        return await ray_server.generate.remote(
            prompt_ids=prompt, sampling_params={"temperature": 0.0, "logprobs": True}, request_id="alone"
        )

    replies = asyncio.run(together())
    assert handle.generate.requests == 32
    assert handle.generate.calls < 32 // 4, handle.generate.calls  # one per sample would be 32
    singles = [asyncio.run(alone(p)) for p in prompts]
    # Greedy: each caller's tokens are its own prompt's (a mix-up between callers would differ).
    assert len({tuple(s.token_ids) for s in singles}) > 1
    for i, reply in enumerate(replies):
        assert reply.token_ids == singles[i % len(prompts)].token_ids
        assert reply.log_probs is not None and len(reply.log_probs) == len(reply.token_ids)


def test_one_requests_failure_reaches_only_its_caller(private_ray, ray_server, prompts):
    lb = _balancer({"hf-0": ray_server})

    async def mixed():
        return await asyncio.gather(
            _generate_as_verls_client(lb, "ok-0", prompts[0]),
            _generate_as_verls_client(lb, "bad", prompts[1], image_data=["an image"]),
            _generate_as_verls_client(lb, "ok-1", prompts[2]),
            return_exceptions=True,
        )

    ok0, bad, ok1 = asyncio.run(mixed())
    assert isinstance(bad, ValueError) and "text-only" in str(bad)
    assert not isinstance(ok0, BaseException) and not isinstance(ok1, BaseException)
    assert ok0.token_ids and ok1.token_ids
    assert lb.policy._servers["hf-0"].generate.calls == 1


def test_a_dead_server_fails_every_waiting_caller_instead_of_hanging(private_ray, tiny_model_dir, prompts):
    from ray.exceptions import RayActorError

    settings = ServerSettings(model_path=str(tiny_model_dir), prompt_length=32, response_length=6)
    doomed = private_ray.remote(num_cpus=0)(HFServer).remote(settings)
    private_ray.get(doomed.weights_version.remote())
    lb = _balancer({"hf-0": doomed})
    private_ray.kill(doomed)

    async def all_waiting():
        return await asyncio.wait_for(
            asyncio.gather(
                *[_generate_as_verls_client(lb, f"r{i}", p) for i, p in enumerate(prompts)],
                return_exceptions=True,
            ),
            timeout=120,
        )

    outcomes = asyncio.run(all_waiting())
    assert len(outcomes) == len(prompts)
    assert all(isinstance(o, RayActorError) for o in outcomes), outcomes


def test_a_server_without_generate_many_keeps_its_own_handle(private_ray):
    @private_ray.remote(num_cpus=0)
    class VllmLikeServer:  # verl's vLLM / SGLang servers answer generate only
        async def generate(self, **_request):
            return None

    handle = VllmLikeServer.remote()
    lb = _balancer({"vllm-0": handle})
    assert lb.policy._servers["vllm-0"] is handle
    lb.add_servers.remote(servers={"vllm-1": handle})
    assert lb.policy._servers["vllm-1"] is handle


def test_servers_added_later_are_coalesced_too(private_ray, ray_server):
    lb = _balancer({})
    lb.add_servers.remote({"hf-0": ray_server})
    assert isinstance(lb.policy._servers["hf-0"], slim_router.CoalescingServer)
    assert lb.policy._servers["hf-0"].weights_version is not None  # the handle's other methods pass through


def test_verls_client_calls_generate_with_keywords_only():
    """CoalescedGenerate.remote takes the request as keywords (it forwards them to HFServer.generate):
    fails when verl's client starts passing the request positionally."""
    from verl.workers.rollout.llm_server import LLMServerClient

    tree = ast.parse(textwrap.dedent(inspect.getsource(LLMServerClient.generate)))
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "remote"
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "generate"
    ]
    assert len(calls) == 1, "verl's client no longer makes one server.generate.remote call"
    assert calls[0].args == [], "verl's client passes generate's request positionally"
