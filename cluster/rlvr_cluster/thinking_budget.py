"""`thinking_budget` agent loop: Qwen3's thinking budget enforced inside RL rollouts.

Registered in verl's agent-loop registry (name = config value = this file's name); select it with
`actor_rollout_ref.rollout.agent.default_agent_loop=thinking_budget` or a dataset `agent_name` column.

A request gets a budget B of response tokens for its reasoning block. The loop generates at most B
tokens; when `</think>` is not among them (and generation did not end), it appends the token ids of
a fixed early-stop phrase that closes the block, then generates the answer with what is left of
`rollout.response_length`. The ids handed to training are exactly the generated ids plus the
inserted ids (no text is re-tokenised); inserted ids carry response_mask 0 and log-prob 0.0, as verl's
tool agent loop does for tokens the policy did not sample.

B comes from, first to last: the row's `extra_info.thinking_budget`, the loop's `thinking_budget`
argument (an `agent_loop_config_path` entry), `actor_rollout_ref.rollout.custom.thinking_budget`.
No budget, a budget >= response_length, or a prompt that already closes its block (non-thinking mode:
the template prefilled an empty `<think>\\n\\n</think>\\n\\n`) -> exactly the single-turn loop's one call.

Per sample it records (in `extra_fields`, which verl puts in the batch's non_tensor_batch):
`thinking_budget_hit` (0/1), `thinking_tokens` (response tokens up to and including the close of the
block; B on a hit), `answer_tokens` (generated tokens after the block). `step_metrics` turns these
plus the scores into the per-step figures (hit rate, thinking length mean/p90, answer length,
accuracy split by hit / not hit; rlvr_cluster.thinking_metrics, which imports no verl).
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
from verl.utils.profiler import simple_timer

from rlvr_cluster.thinking_metrics import step_metrics, step_metrics_from_rollouts  # noqa: F401 - re-exported

logger = logging.getLogger(__name__)

AGENT_LOOP_NAME = "thinking_budget"
THINK_CLOSE = "</think>"
# Qwen3's documented early-stop phrase (its model card's thinking-budget recipe).
EARLY_STOP_PHRASE = (
    "\n\nConsidering the limited time by the user, I have to give the solution based on the thinking "
    "directly now.\n</think>\n\n"
)
BUDGET_KEY = "thinking_budget"


def _get(container: Any, key: str) -> Any:
    if container is None:
        return None
    if hasattr(container, "get"):
        return container.get(key)
    return getattr(container, key, None)


def parse_budget(value: Any, source: str) -> int | None:
    """None stays None; anything else must be a non-negative integer."""
    if value is None:
        return None
    try:
        budget = int(value)
    except (TypeError, ValueError):
        budget = None
    if budget is None or budget < 0 or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(
            f"thinking budget from {source} must be a non-negative integer number of tokens, got {value!r}"
        )
    return budget


def close_index(tokenizer, token_ids: list[int]) -> int | None:
    """Number of tokens up to and including the one that completes `</think>`, None if absent.

    Detection decodes the ids (it never re-encodes them): `</think>` may span several tokens.
    """
    text = tokenizer.decode(token_ids, skip_special_tokens=False)
    if THINK_CLOSE not in text:
        return None
    lo, hi = 1, len(token_ids)
    while lo < hi:  # the shortest prefix whose text contains the close tag
        mid = (lo + hi) // 2
        if THINK_CLOSE in tokenizer.decode(token_ids[:mid], skip_special_tokens=False):
            hi = mid
        else:
            lo = mid + 1
    return lo


@register(AGENT_LOOP_NAME)
class ThinkingBudgetAgentLoop(AgentLoopBase):
    """Single-turn generation with the reasoning block capped at a token budget."""

    def __init__(self, *args, thinking_budget: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.prompt_length = self.rollout_config.prompt_length
        self.response_length = self.rollout_config.response_length
        self.default_budget = parse_budget(thinking_budget, "the agent loop config")
        if self.default_budget is None:
            custom = _get(self.rollout_config, "custom")
            self.default_budget = parse_budget(
                _get(custom, BUDGET_KEY), "actor_rollout_ref.rollout.custom.thinking_budget"
            )
        self.early_stop_ids = self.tokenizer.encode(EARLY_STOP_PHRASE, add_special_tokens=False)
        eos = self.tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}

    def _budget(self, kwargs: dict[str, Any]) -> int | None:
        row = parse_budget(_get(kwargs.get("extra_info"), BUDGET_KEY), "the row's extra_info.thinking_budget")
        return row if row is not None else self.default_budget

    def _prompt_closes_block(self, prompt_ids: list[int]) -> bool:
        tail = self.tokenizer.decode(prompt_ids[-16:], skip_special_tokens=False)
        return tail.rstrip().endswith(THINK_CLOSE)

    async def _generate(self, prompt_ids, sampling_params, max_tokens, priority, metrics):
        params = dict(sampling_params)
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        request_id = (
            f"det-{priority}" if getattr(self.rollout_config, "full_determinism", False) else uuid4().hex
        )
        with simple_timer("generate_sequences", metrics):
            return await self.server_manager.generate(
                request_id=request_id, prompt_ids=prompt_ids, sampling_params=params, priority=priority
            )

    async def run(self, sampling_params: dict[str, Any], priority: int = 0, **kwargs) -> AgentLoopOutput:
        priority = int(priority)
        messages = list(kwargs["raw_prompt"])
        prompt_ids = await self.ct_build_initial_tokens(messages)
        budget = self._budget(kwargs)
        want_logprobs = bool(sampling_params.get("logprobs", False))
        metrics: dict[str, Any] = {}

        enforce = (
            budget is not None and budget < self.response_length and not self._prompt_closes_block(prompt_ids)
        )
        if enforce and budget == 0:
            # A zero budget: no reasoning at all, the phrase closes the block at once (no server call
            # asks for 0 tokens: vLLM refuses max_tokens=0).
            first = None
            gen1, lp1 = [], [] if want_logprobs else None
        else:
            first = await self._generate(
                prompt_ids, sampling_params, budget if enforce else None, priority, metrics
            )
            gen1 = list(first.token_ids)
            lp1 = list(first.log_probs) if first.log_probs else None
        ended = bool(gen1) and gen1[-1] in self.eos_ids
        closed_at = close_index(self.tokenizer, gen1)
        response_ids, response_mask = list(gen1), [1] * len(gen1)
        response_logprobs = lp1
        hit = 0
        extra = dict(first.extra_fields) if first is not None else {}
        if enforce and not ended and len(gen1) >= budget:
            if closed_at is not None:
                # The block closed within the budget: the answer continues, all of it sampled.
                tail_ids, tail_mask, tail_lp = [], [], []
                room = self.response_length - len(gen1)
            else:
                hit = 1
                tail_ids = list(self.early_stop_ids)
                tail_mask = [0] * len(tail_ids)
                tail_lp = [0.0] * len(tail_ids)
                room = self.response_length - len(gen1) - len(tail_ids)
            if room > 0:
                second = await self._generate(
                    prompt_ids + gen1 + tail_ids, sampling_params, room, priority, metrics
                )
                tail_ids += list(second.token_ids)
                tail_mask += [1] * len(second.token_ids)
                if want_logprobs:
                    tail_lp += list(second.log_probs or [0.0] * len(second.token_ids))
            response_ids += tail_ids
            response_mask += tail_mask
            if response_logprobs is not None:
                response_logprobs = response_logprobs + tail_lp

        if hit:
            thinking_tokens = len(gen1)
            answer_tokens = len(response_ids) - len(gen1) - len(self.early_stop_ids)
        elif closed_at is not None:
            thinking_tokens, answer_tokens = closed_at, len(response_ids) - closed_at
        else:
            closed_later = close_index(self.tokenizer, response_ids)
            thinking_tokens = closed_later or 0
            answer_tokens = len(response_ids) - thinking_tokens
        preempted = first.num_preempted if first is not None else None
        metrics["num_preempted"] = preempted if preempted is not None else -1

        n = self.response_length
        extra.update(
            {
                "turn_scores": [],
                "tool_rewards": [],
                "thinking_budget": -1 if budget is None else budget,
                "thinking_budget_hit": hit,
                "thinking_tokens": thinking_tokens,
                "answer_tokens": max(answer_tokens, 0),
            }
        )
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[:n],
            response_mask=response_mask[:n],
            response_logprobs=response_logprobs[:n] if response_logprobs else None,
            num_turns=2,
            metrics=metrics,
            extra_fields=extra,
        )
