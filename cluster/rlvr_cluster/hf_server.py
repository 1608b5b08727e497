"""The `hf` rollout's generation server: a Ray actor with a Hugging Face model, and nothing of verl.

This module imports torch and transformers only, and those only where a server or a decode needs them:
every process that receives an `HFServer` actor handle imports this module (Ray loads the class's
module), and verl's load-balancer actor holds all of them; at module level this module would put torch
in that process (~0.18 GiB more resident). The actor process that holds a server never imports verl
(about 160 MiB of resident memory per process on top of torch), and its settings and
replies are plain values: `ServerSettings` instead of verl's RolloutConfig, `GeneratedTokens` (the
fields of verl's `TokenOutput`, which the agent loop reads by attribute) instead of the pydantic model.
tests/cluster/test_verl_private_details.py checks that the two field lists stay equal.

`HFServer.generate` is token-in / token-out with per-token log-probs. Concurrent requests (verl's agent
loop sends one per sample) are gathered and decoded together with a KV cache; `batching()` counts the
decode calls and the requests they served. `generate_many` takes several requests in one call.

Teacher mode (verl's on-policy distillation): a request with `prompt_logprobs=K` in its sampling params is
not generated but scored, one forward pass over the given ids (`prompt_logprobs_reply`), and answered in
the layout of verl's vLLM teacher. `HFReplica` launches such servers on verl's teacher resource pool.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# How long the server waits for more concurrent requests before decoding a batch; requests that
# arrive while a batch decodes form the next one.
GATHER_S = 0.005


@dataclass
class ServerSettings:
    """What the server needs from verl's rollout and model configs, as plain values."""

    model_path: str
    prompt_length: int
    response_length: int
    seed: int = 0
    eos_ids: list[int] = field(default_factory=list)


@dataclass
class GeneratedTokens:
    """One reply: the fields of verl's TokenOutput (verl/workers/rollout/replica.py), read by attribute."""

    token_ids: list[int]
    log_probs: list[float] | None = None
    routed_experts: Any = None
    stop_reason: str | None = None
    num_preempted: int | None = None
    extra_fields: dict[str, Any] = field(default_factory=dict)


def _field(config: Any, key: str) -> Any:
    """A field of a dataclass config or of a DictConfig (verl passes either), None when absent."""
    if hasattr(config, "get") and not hasattr(config, "__dataclass_fields__"):
        return config.get(key)
    return getattr(config, key, None)


def settings_from(config: Any, model_config: Any) -> ServerSettings:
    """ServerSettings from verl's RolloutConfig and HFModelConfig (or any objects with those fields)."""
    path = _field(model_config, "local_path") or _field(model_config, "path")
    return ServerSettings(
        model_path=os.path.expanduser(str(path)),
        prompt_length=int(_field(config, "prompt_length")),
        response_length=int(_field(config, "response_length")),
        seed=int(_field(config, "seed") or 0),
        eos_ids=sorted(_eos_ids(None, _field(model_config, "tokenizer"))),
    )


def _eos_ids(model, tokenizer) -> set[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), getattr(model, "config", None), tokenizer):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if value is None:
            continue
        ids.update(value if isinstance(value, (list, tuple)) else [value])
    return ids


def _sample(logits: torch.Tensor, temperature: float, top_p: float, top_k: int, generator) -> torch.Tensor:
    """Next token per row. `logits` are already divided by the temperature (when > 0)."""
    import torch

    if temperature <= 0:
        return logits.argmax(dim=-1)
    if top_k is not None and top_k > 0 and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and 0 < top_p < 1:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        remove = cumulative - sorted_logits.softmax(-1) > top_p
        sorted_logits = sorted_logits.masked_fill(remove, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def _check_prompt_logprobs_request(model, prompt_ids: list[int], sampling_params: dict[str, Any]) -> int:
    """The request's K (top-K per position; 0 = the sequence's own token only), or a clear ValueError."""
    k = sampling_params.get("prompt_logprobs")
    vocab = int(model.config.vocab_size)
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(
            f"prompt_logprobs must be a whole number >= 0 (top-K log-probs per position; 0 = the given "
            f"token's only), got {k!r}"
        )
    if k > vocab:
        raise ValueError(f"prompt_logprobs={k} exceeds the teacher's vocabulary of {vocab} tokens")
    max_tokens = sampling_params.get("max_tokens", 1)
    if max_tokens not in (None, 1):
        raise ValueError(
            f"the hf teacher answers prompt_logprobs requests with max_tokens=1 only (a forward pass over the "
            f"given ids, as verl's distillation asks), got max_tokens={max_tokens!r}"
        )
    if not prompt_ids:
        raise ValueError("a prompt_logprobs request needs at least one token id")
    bad = [t for t in prompt_ids if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < vocab]
    if bad:
        raise ValueError(
            f"token ids outside the teacher's vocabulary [0, {vocab}): {bad[:5]} — the student and the teacher "
            "must share one tokenizer"
        )
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and len(prompt_ids) > int(limit):
        raise ValueError(
            f"a sequence of {len(prompt_ids)} tokens exceeds the teacher's {limit} positions "
            "(max_position_embeddings); shorten data.max_prompt_length + rollout.response_length"
        )
    return k


def prompt_logprobs_reply(
    model, prompt_ids: list[int], sampling_params: dict[str, Any], global_steps: int | None = None
) -> GeneratedTokens:
    """One forward pass of `model` over `prompt_ids`, shaped as verl's vLLM teacher replies.

    `extra_fields["prompt_ids"]` and `["prompt_logprobs"]` hold one row per given id, as verl's
    `extract_prompt_logprobs` (workers/rollout/vllm_rollout/utils.py) builds them: row i is the
    distribution predicting token i+1 (position i's logits, at temperature 1) — with K = 0 the log-prob of
    the given token i+1 and its id, with K > 0 the K most likely ids and their log-probs, most likely
    first; the last row is a dummy of zeros (nothing follows the last token). `token_ids` is the one
    generated token of the max_tokens=1 request (the greedy next token).
    """
    import torch

    k = _check_prompt_logprobs_request(model, prompt_ids, sampling_params)
    ids = torch.tensor([prompt_ids], dtype=torch.long)
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
    width = max(k, 1)
    if k == 0:
        targets = ids[0, 1:]
        top_ids = targets[:, None]
        top_logp = logp[:-1].gather(-1, top_ids)
    else:
        top = torch.topk(logp[:-1], k, dim=-1)
        top_ids, top_logp = top.indices, top.values
    rows_ids = top_ids.tolist() + [[0] * width]
    rows_logp = top_logp.tolist() + [[0.0] * width]
    next_token = int(logp[-1].argmax())
    return GeneratedTokens(
        token_ids=[next_token],
        log_probs=[float(logp[-1, next_token])] if sampling_params.get("logprobs") else None,
        stop_reason="length",
        extra_fields={"prompt_ids": rows_ids, "prompt_logprobs": rows_logp, "global_steps": global_steps},
    )


class HFServer:
    """Generation server of one replica (a Ray actor). Loads the model from the settings' model path.

    `settings` is a ServerSettings; verl's RolloutConfig and HFModelConfig (or objects with their
    fields) are accepted too and converted with `settings_from`.
    """

    def __init__(self, settings: Any, model_config: Any = None, replica_rank: int = 0, node_rank: int = 0):
        import torch
        from transformers import AutoModelForCausalLM

        if not isinstance(settings, ServerSettings):
            settings = settings_from(settings, model_config)
        self.settings = settings
        self.replica_rank = replica_rank
        self.global_steps: int | None = None
        torch.set_num_threads(max(1, int(os.environ.get("RLVR_ROLLOUT_THREADS", "1"))))
        self.model = AutoModelForCausalLM.from_pretrained(
            settings.model_path, dtype=torch.float32, attn_implementation="eager"
        )
        self.model.eval()
        self.eos_ids = _eos_ids(self.model, None) | set(settings.eos_ids)
        self.pad_id = self.model.config.pad_token_id
        if self.pad_id is None:
            self.pad_id = next(iter(self.eos_ids), 0)
        self.generator = torch.Generator().manual_seed(settings.seed + replica_rank)
        self._pending: list[tuple[list[int], dict, asyncio.Future]] = []
        self._batcher: asyncio.Task | None = None
        self._weights_version = 0
        # Decode calls made and requests they served (requests / calls = the batching achieved).
        self.decode_calls = 0
        self.decoded_requests = 0
        self.scored_requests = 0  # teacher-mode requests (prompt_logprobs) answered

    # --- token-in / token-out generation ---------------------------------------------------------

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
        **_kwargs: Any,
    ) -> GeneratedTokens:
        if image_data or video_data:
            raise ValueError("the hf rollout backend serves text-only models")
        if sampling_params.get("prompt_logprobs") is not None:  # a distillation teacher's request
            return await asyncio.to_thread(self.score_prompt, list(prompt_ids), sampling_params)
        prompt_ids = list(prompt_ids)
        response_length = self.settings.response_length
        budget = self.settings.prompt_length + response_length - len(prompt_ids)
        max_tokens = sampling_params.get("max_tokens", sampling_params.get("max_new_tokens"))
        if max_tokens is None:
            max_tokens = min(response_length, budget)
        max_tokens = max(1, min(int(max_tokens), response_length))
        params = {
            "temperature": float(sampling_params.get("temperature", 1.0)),
            "top_p": float(sampling_params.get("top_p", 1.0)),
            "top_k": int(sampling_params.get("top_k", -1) or -1),
            "max_tokens": max_tokens,
            "logprobs": bool(sampling_params.get("logprobs", False)),
        }
        future = asyncio.get_running_loop().create_future()
        self._pending.append((prompt_ids, params, future))
        if self._batcher is None or self._batcher.done():
            self._batcher = asyncio.create_task(self._drain())
        token_ids, log_probs = await future
        return GeneratedTokens(
            token_ids=token_ids,
            log_probs=log_probs if params["logprobs"] else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    async def generate_many(self, requests: list[dict[str, Any]]) -> list[Any]:
        """Several `generate` requests (each a dict of its keyword arguments) in one call: rlvr's
        in-process router sends the agent loop's concurrent requests this way, one Ray round trip instead
        of one per sample (slim_router.CoalescedGenerate). Each request's outcome is its own: one that
        failed has its exception in its place, the others their GeneratedTokens."""
        return await asyncio.gather(
            *(self.generate(**request) for request in requests), return_exceptions=True
        )

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(GATHER_S)
            batch, self._pending = self._pending, []
            groups: dict[tuple, list[tuple[list[int], dict, asyncio.Future]]] = {}
            for request in batch:
                key = tuple(sorted(request[1].items()))
                groups.setdefault(key, []).append(request)
            for requests in groups.values():
                params = requests[0][1]
                try:
                    results = await asyncio.to_thread(self._decode, [r[0] for r in requests], params)
                except Exception as e:  # every waiting request learns why, none hangs
                    for _, _, fut in requests:
                        if not fut.done():
                            fut.set_exception(e)
                    continue
                for (_, _, fut), result in zip(requests, results, strict=True):
                    if not fut.done():
                        fut.set_result(result)

    def _decode(self, prompts: list[list[int]], params: dict) -> list[tuple[list[int], list[float]]]:
        import torch

        with torch.no_grad():
            return self._decode_no_grad(prompts, params)

    def _decode_no_grad(self, prompts: list[list[int]], params: dict) -> list[tuple[list[int], list[float]]]:
        import torch

        batch = len(prompts)
        self.decode_calls += 1
        self.decoded_requests += batch
        width = max(len(p) for p in prompts)
        input_ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((batch, width), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding keeps every row's last token aligned
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            attention_mask[row, width - len(prompt) :] = 1
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=True
        )
        past = out.past_key_values
        logits = out.logits[:, -1, :].float()
        next_position = position_ids[:, -1:] + 1
        temperature = params["temperature"]
        finished = torch.zeros(batch, dtype=torch.bool)
        tokens: list[list[int]] = [[] for _ in range(batch)]
        log_probs: list[list[float]] = [[] for _ in range(batch)]
        eos = torch.tensor(sorted(self.eos_ids), dtype=torch.long) if self.eos_ids else None
        for _ in range(params["max_tokens"]):
            # Log-probs of the sampling distribution (logits / temperature), as verl's actor computes them.
            scaled = logits / temperature if temperature > 0 else logits
            logp = torch.log_softmax(scaled, dim=-1)
            next_tokens = _sample(scaled, temperature, params["top_p"], params["top_k"], self.generator)
            chosen = logp.gather(-1, next_tokens[:, None]).squeeze(-1)
            for row in range(batch):
                if not finished[row]:
                    tokens[row].append(int(next_tokens[row]))
                    log_probs[row].append(float(chosen[row]))
            if eos is not None:
                finished |= torch.isin(next_tokens, eos)
            if bool(finished.all()):
                break
            attention_mask = torch.cat([attention_mask, torch.ones((batch, 1), dtype=torch.long)], dim=-1)
            out = self.model(
                input_ids=next_tokens[:, None],
                attention_mask=attention_mask,
                position_ids=next_position,
                past_key_values=past,
                use_cache=True,
            )
            past = out.past_key_values
            logits = out.logits[:, -1, :].float()
            next_position = next_position + 1
        return list(zip(tokens, log_probs, strict=True))

    # --- teacher mode: log-probs of a given sequence (verl's on-policy distillation) ----------------

    def score_prompt(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GeneratedTokens:
        """Answer a `prompt_logprobs` request as verl's vLLM teacher does (see `prompt_logprobs_reply`)."""
        self.scored_requests += 1
        return prompt_logprobs_reply(self.model, prompt_ids, sampling_params, self.global_steps)

    # --- weights ----------------------------------------------------------------------------------

    def load_weights(self, named_tensors: list[tuple[str, torch.Tensor]]) -> int:
        """Replace the model's weights with the actor's. Returns the number of tensors loaded."""
        import torch

        state = self.model.state_dict()
        unknown = [name for name, _ in named_tensors if name not in state]
        if unknown:
            raise KeyError(f"weights the rollout model does not have: {unknown[:5]} (of {len(unknown)})")
        with torch.no_grad():
            for name, tensor in named_tensors:
                state[name].copy_(tensor.to(dtype=state[name].dtype))
        self._weights_version += 1
        return len(named_tensors)

    def weights_version(self) -> int:
        return self._weights_version

    def batching(self) -> dict[str, int]:
        """Decode calls made and requests served so far."""
        return {"decode_calls": self.decode_calls, "decoded_requests": self.decoded_requests}

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    # --- lifecycle hooks verl calls on every backend; nothing to free on CPU --------------------------

    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def wait_for_requests_to_drain(self) -> None:
        while self._pending or (self._batcher is not None and not self._batcher.done()):
            await asyncio.sleep(0.01)

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict:
        return {"aborted_count": 0, "request_ids": []}

    async def abort_request(self, request_id: str, reset_prefix_cache: bool = True) -> dict:
        return {"aborted": False, "request_id": request_id}

    async def resume_generation(self) -> None:
        return None

    async def resume_engine_generation(self) -> None:
        return None

    async def open_submission_gate(self) -> None:
        return None

    async def start_profile(self, **_kwargs) -> None:
        return None

    async def stop_profile(self) -> None:
        return None
