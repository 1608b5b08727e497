"""verl's reward loop -> rlvr's verifier pool: the reward manager `rlvr` (the only module here importing verl).

Select it with `reward.reward_manager.name=rlvr` (source `register`, verl's default). The module registers
the manager in verl's reward-loop registry on import; rlvr's verl plugin (rlvr_cluster.plugin, loaded in
every verl process through the `verl.plugins` entry point) imports it, so every reward-loop worker knows
the name. Importing it twice is harmless; another class claiming the name `rlvr` is an error.

Routing: each sample goes to one verifier, decided in this order:
1. `extra_info["verifier"]` when present (any registered verifier name);
2. the first `routes` entry (see BridgeConfig) whose key is a substring of the lower-cased `data_source`;
3. the built-in data_source table below (first match wins, substrings of the lower-cased data_source);
4. the same table applied to `ability`;
5. otherwise the sample is unroutable: status `invalid_input`, score 0, counted.
With `rubric: NAME` (a registered rubric, rlvr_verifiers.rubrics) every routed sample is scored by the
rubric instead, the routed verifier being its `routed` component (`extra["routed_verifier"]`); the
sample's `rlvr_verifier` column then names the rubric, and every sample also gets one column per paid
component other than correctness (`rlvr_rubric_format`, ...; rlvr_verifiers.rubric.component_columns),
from which `rlvr train` derives the per-step `rubric/<component>/mean` figures.

    data_source / ability contains        verifier
    reasoning_gym                          reasoning_gym
    ifeval, instruction_following          ifeval
    countdown                              countdown
    tool, function_call, bfcl, xlam        tool_call
    code, apps, taco, livecodebench,       code
      codeforces, humaneval, mbpp, leetcode, primeintellect
    gsm8k, math, aime, amc, olympiad,      math
      numina, deepscaler, dapo, addition, arithmetic

Ground truth: `reward_model["ground_truth"]`. For `math` it is the reference answer string. For `code`,
`countdown` and `tool_call` it is a JSON string (a dict is accepted too), decoded here:
code {"inputs": [...], "outputs": [...], "fn_name"?: str}; countdown {"target": int, "numbers": [int]};
tool_call {"tools": [...], "expected": ...}; ifeval {"instruction_id_list": [...], "kwargs": [...]};
reasoning_gym {"dataset": str, "entry": {...}}. A ground truth that does not decode is `invalid_input`.

Batching: verl calls `run_single` once per sample (the reward-loop manager gathers a whole chunk of
them concurrently; the agent loop streams them as rollouts finish). A per-worker micro-batcher collects
the calls that arrive within `micro_batch_wait_ms` (or until `micro_batch_size`), sends them to the
pool as one batch, and answers each caller; the pool bounds the batch's time, so run_single never hangs.

Reasoning blocks (`rlvr_verifiers.reasoning`): every item carries the task's `reasoning_tags` and
`think_prefilled` (`reward.reward_kwargs.rlvr`, set by the task recipe), so the verifiers read only the
answer region after the last closing tag. Where the tokenizer marks a tag as a special token, the
response is decoded with the tags kept (skipping special tokens would delete them and turn the
reasoning into answer text).

What comes back per sample (verl's `reward_extra_info`; every sample carries the same keys, as verl
requires): `acc` (the score), `rlvr_verifier`, `rlvr_status`, `rlvr_latency_ms` (None when never sent), and
`rlvr_no_answer_region` (1 when the response has no answer region: its reasoning block never closes, e.g.
cut by max_response_length), and `rlvr_domain` (`domain_of`: the row's `extra_info.domain`, which a
mixture's rows carry, else its data_source; from it `rlvr train` derives per-domain step figures,
rlvr_launch.runs.rollout_metrics). One 0/1 indicator per status (`rlvr_ok`, `rlvr_wrong`, `rlvr_parse_error`,
`rlvr_timeout`, `rlvr_sandbox_error`, `rlvr_invalid_input`) is opt-in (`status_indicators: true`): each
is derivable from `rlvr_status` (`status_indicators()`, `step_metrics()`, `rlvr diagnose`), while every
per-sample column is shipped to the actor three times a step as a non-tensor column, which costs a small
model's CPU step more than its compute. Opt in for verl's validation to average the indicators per data
source (`val-aux/<source>/rlvr_timeout/mean@1`) or to filter DAPO's groups on one. verl's validation
averages the numeric columns per data source and dumps them all with each step's rollouts; `step_metrics()` turns a step's values
into per-verifier figures (latency p50/p99, timeouts, parse failures, sandbox errors, pass rate,
responses without an answer region) for a trainer-side logger. Each micro-batch's pool metrics and its
count of responses without an answer region are also logged here.

Thinking budget (rlvr_cluster.thinking_budget): where the run's default agent loop is `thinking_budget`, or
the sample's agent-loop fields (verl's `tool_extra_fields`) carry them, every sample also gets
`rlvr_thinking_budget_hit`, `rlvr_thinking_tokens` and `rlvr_answer_tokens` (None for a sample from
another loop). verl dumps them with each step's rollouts, from which `rlvr train` derives the per-step
budget figures in metrics.jsonl (rlvr_cluster.thinking_metrics.step_metrics_from_rollouts).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager import registry as verl_registry
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from rlvr_verifiers import reasoning, registry
from rlvr_verifiers import rubric as rubric_module
from rlvr_verifiers.base import INVALID_INPUT, STATUSES, Item, Verdict
from rlvr_verifiers.overlong import OverlongConfig
from rlvr_verifiers.pool import PoolConfig, VerifierPool, _percentile, get_pool
from rlvr_verifiers.rubric import ROUTED, ROUTED_KEY

logger = logging.getLogger(__name__)

NAME = "rlvr"  # == reward.reward_manager.name

# Substring of the lower-cased data_source (then ability) -> verifier. First match wins.
ROUTE_TABLE: tuple[tuple[str, str], ...] = (
    ("reasoning_gym", "reasoning_gym"),  # before "countdown": reasoning_gym/countdown is reasoning-gym's
    ("ifeval", "ifeval"),
    ("instruction_following", "ifeval"),
    ("countdown", "countdown"),
    ("tool", "tool_call"),
    ("function_call", "tool_call"),
    ("bfcl", "tool_call"),
    ("xlam", "tool_call"),
    ("code", "code"),
    ("apps", "code"),
    ("taco", "code"),
    ("livecodebench", "code"),
    ("codeforces", "code"),
    ("humaneval", "code"),
    ("mbpp", "code"),
    ("leetcode", "code"),
    ("primeintellect", "code"),
    ("gsm8k", "math"),
    ("math", "math"),
    ("aime", "math"),
    ("amc", "math"),
    ("olympiad", "math"),
    ("numina", "math"),
    ("deepscaler", "math"),
    ("dapo", "math"),
    ("addition", "math"),
    ("arithmetic", "math"),
)
JSON_GROUND_TRUTH = frozenset({"code", "countdown", "tool_call", "ifeval", "reasoning_gym"})
UNROUTED = "unrouted"  # the metrics bucket of samples no verifier was found for
NO_ANSWER_REGION = "rlvr_no_answer_region"
DOMAIN = "rlvr_domain"
EXTRA_KEYS = ("acc", "rlvr_verifier", "rlvr_status", "rlvr_latency_ms", NO_ANSWER_REGION, DOMAIN)
STATUS_INDICATOR_KEYS = tuple(f"rlvr_{s}" for s in STATUSES)  # opt-in: BridgeConfig.status_indicators


@dataclass
class BridgeConfig:
    """`reward.reward_kwargs.rlvr` in the verl config."""

    pool: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "PoolConfig fields (rlvr_verifiers.pool.PoolConfig)."}
    )
    micro_batch_size: int = field(
        default=256, metadata={"help": "Send a micro-batch to the pool once this many samples wait."}
    )
    micro_batch_wait_ms: float = field(
        default=20.0, metadata={"help": "Longest a sample waits for others to join its micro-batch."}
    )
    routes: dict[str, str] = field(
        default_factory=dict,
        metadata={
            "help": "Extra data_source substring -> verifier routes, checked before the built-in table."
        },
    )
    reasoning_tags: Any = field(
        default_factory=lambda: list(reasoning.DEFAULT_TAGS),
        metadata={
            "help": "[OPEN, CLOSE] reasoning tags: verifiers read only what follows the last CLOSE "
            "(rlvr_verifiers.reasoning); off (false) reads the whole response."
        },
    )
    think_prefilled: bool = field(
        default=False,
        metadata={
            "help": "The chat template puts OPEN into the prompt: a response without CLOSE has no answer."
        },
    )
    status_indicators: bool = field(
        default=False,
        metadata={
            "help": "Also return one 0/1 column per verdict status (rlvr_ok, rlvr_timeout, ...), for "
            "verl's per-data-source validation means or a filter_groups metric; off, they are derived "
            "from rlvr_status after the fact, and each step ships 6 fewer per-sample columns."
        },
    )
    rubric: str | None = field(
        default=None,
        metadata={
            "help": "Score every sample with this registered rubric (rlvr_verifiers.rubrics: r1, r1_zero) "
            "instead of its routed verifier, which becomes the rubric's `routed` component."
        },
    )

    @classmethod
    def from_verl_config(cls, config: Any) -> BridgeConfig:
        reward = config.get("reward", config) if hasattr(config, "get") else {}
        kwargs = (reward.get("reward_kwargs") or {}) if hasattr(reward, "get") else {}
        values = kwargs.get("rlvr") or {}
        values = _plain(values)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown key(s) {unknown} in reward.reward_kwargs.rlvr; known: {sorted(known)}")
        out = cls(**values)
        PoolConfig.from_mapping(out.pool)  # fail at construction, not at the first reward
        if out.micro_batch_size < 1 or out.micro_batch_wait_ms < 0:
            raise ValueError("reward.reward_kwargs.rlvr: micro_batch_size >= 1 and micro_batch_wait_ms >= 0")
        out.reasoning_settings()  # fail at construction, not at the first reward
        if out.rubric is not None:
            from rlvr_verifiers.rubric import Rubric

            try:
                found = registry.get(out.rubric)
            except KeyError as e:
                raise ValueError(f"reward.reward_kwargs.rlvr.rubric: {e.args[0]}") from None
            if not isinstance(found, Rubric):
                raise ValueError(
                    f"reward.reward_kwargs.rlvr.rubric={out.rubric!r} is a verifier, not a rubric; "
                    "name a rubric (rlvr_verifiers.rubrics) or route to the verifier instead"
                )
        return out

    def reasoning_settings(self) -> tuple[reasoning.Tags | None, bool]:
        try:
            return reasoning.settings(self.reasoning_tags, self.think_prefilled)
        except ValueError as e:
            raise ValueError(f"reward.reward_kwargs.rlvr.reasoning_tags/think_prefilled: {e}") from None


def _plain(value: Any) -> Any:
    """OmegaConf containers -> plain dicts/lists (without importing omegaconf where it is absent)."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, DictConfig | ListConfig):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - verl always brings omegaconf
        pass
    return dict(value) if isinstance(value, dict) else value


def _get_path(config: Any, path: tuple[str, ...]) -> Any:
    """config[a][b]... or None (a DictConfig or a dict; a missing level is None)."""
    for key in path:
        config = config.get(key) if hasattr(config, "get") else None
    return config


def _scalar(value: Any) -> Any:
    """numpy scalars / 0-d arrays (verl's non_tensor_batch cells) -> Python values."""
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    return value


def route(
    data_source: Any, ability: Any, extra_info: dict | None, routes: dict[str, str] | None = None
) -> str | None:
    """The verifier for one sample, or None when no rule applies (see the module doc for the order)."""
    extra_info = extra_info or {}
    explicit = extra_info.get("verifier") if isinstance(extra_info, dict) else None
    if isinstance(explicit, str) and explicit:
        return explicit
    source = str(data_source or "").lower()
    for key, verifier in (routes or {}).items():
        if key.lower() in source:
            return verifier
    for text in (source, str(ability or "").lower()):
        if not text:
            continue
        for key, verifier in ROUTE_TABLE:
            if key in text:
                return verifier
    return None


def make_item(verifier: str, response: str, ground_truth: Any, extra: dict | None = None) -> Item | Verdict:
    """The Item for `verifier`, or an invalid_input Verdict when the ground truth is missing or bad."""
    if ground_truth is None:
        return Verdict(0.0, INVALID_INPUT, "no reward_model.ground_truth")
    if verifier in JSON_GROUND_TRUTH and isinstance(ground_truth, str | bytes):
        try:
            ground_truth = json.loads(ground_truth)
        except ValueError as e:
            return Verdict(0.0, INVALID_INPUT, f"{verifier} ground truth is not JSON: {e}"[:200])
    if verifier in JSON_GROUND_TRUTH and not isinstance(ground_truth, dict):
        return Verdict(0.0, INVALID_INPUT, f"{verifier} ground truth must be a JSON object")
    return Item(response=response, ground_truth=ground_truth, extra=dict(extra or {}))


def domain_of(extra_info: Any, data_source: Any, verifier: str) -> str:
    """The row's domain for per-domain step figures: `extra_info.domain` (a mixture's rows carry their
    part's name), else the row's data_source, else its verifier."""
    named = extra_info.get("domain") if isinstance(extra_info, dict) else None
    for value in (named, data_source):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return verifier


def extra_info_for(
    verifier: str,
    verdict: Verdict,
    latency_s: float | None,
    no_answer_region: bool = False,
    status_indicators: bool = False,
    domain: str | None = None,
) -> dict[str, Any]:
    """One sample's reward-extra columns: EXTRA_KEYS, then STATUS_INDICATOR_KEYS when opted in."""
    info: dict[str, Any] = {
        "acc": float(verdict.score),
        "rlvr_verifier": verifier,
        "rlvr_status": verdict.status,
        # None, not NaN, for a sample never sent to the pool: verl's validation metrics skip None values,
        # while one NaN would turn a whole data source's mean latency into NaN.
        "rlvr_latency_ms": 1000.0 * latency_s if latency_s is not None else None,
        NO_ANSWER_REGION: 1.0 if no_answer_region else 0.0,
        DOMAIN: domain if domain is not None else verifier,
    }
    if status_indicators:
        info.update({k: v[0] for k, v in status_indicators_of([verdict.status]).items()})
    return info


def status_indicators_of(statuses: Sequence[Any]) -> dict[str, list[float]]:
    """The per-status 0/1 columns (`rlvr_ok`, `rlvr_timeout`, ...) derived from `rlvr_status` values, e.g.
    from a rollout dump of a run that did not opt into `status_indicators`."""
    return {f"rlvr_{s}": [1.0 if str(x) == s else 0.0 for x in statuses] for s in STATUSES}


def special_tag_ids(tokenizer: Any, tags: reasoning.Tags | None) -> dict[int, str]:
    """Token id -> tag text for each reasoning tag that the tokenizer encodes as ONE token which
    `decode(skip_special_tokens=True)` deletes (a tag registered as a special token)."""
    out: dict[int, str] = {}
    for tag in (tags.open, tags.close) if tags is not None else ():
        ids = tokenizer.encode(tag, add_special_tokens=False)
        if len(ids) == 1 and not tokenizer.decode(ids, skip_special_tokens=True).strip():
            out[int(ids[0])] = tag
    return out


# Responses up to this many tokens are decoded on the event loop, longer ones in a thread (see _score_single).
INLINE_DECODE_MAX_TOKENS = 512


def decode_response(tokenizer: Any, ids: Sequence[int], keep: dict[int, str]) -> str:
    """`tokenizer.decode(ids, skip_special_tokens=True)`, except that the tokens in `keep` (reasoning
    tags registered as special tokens) stay in the text as their tag."""
    if not keep:
        return tokenizer.decode(ids, skip_special_tokens=True)
    parts: list[str] = []
    segment: list[int] = []
    for token in ids:
        if int(token) in keep:
            parts += [tokenizer.decode(segment, skip_special_tokens=True), keep[int(token)]]
            segment = []
        else:
            segment.append(int(token))
    parts.append(tokenizer.decode(segment, skip_special_tokens=True))
    return "".join(parts)


def step_metrics(reward_extra_infos: dict[str, Sequence[Any]], prefix: str = "rlvr") -> dict[str, float]:
    """Per-verifier figures for one training step from the per-sample `reward_extra_info` columns.

    `{prefix}/{verifier}/{count, pass_rate, mean_score, latency_p50_ms, latency_p99_ms, timeouts,
    parse_failures, sandbox_errors, invalid_inputs, ambiguous_answers, responses_too_large, no_answer_region}`
    and `{prefix}/no_answer_region`
    (responses of the step whose reasoning block never closes); samples without rlvr columns are ignored.
    """
    verifiers = list(reward_extra_infos.get("rlvr_verifier", []))
    if not verifiers:
        return {}
    statuses = list(reward_extra_infos["rlvr_status"])
    scores = [float(s) for s in reward_extra_infos["acc"]]
    latencies = [None if x is None else float(x) for x in reward_extra_infos["rlvr_latency_ms"]]
    no_region = [float(x or 0.0) for x in reward_extra_infos.get(NO_ANSWER_REGION, [0.0] * len(verifiers))]
    out: dict[str, float] = {f"{prefix}/no_answer_region": sum(no_region)}
    for verifier in sorted(set(verifiers)):
        idx = [i for i, v in enumerate(verifiers) if v == verifier]
        n = len(idx)
        count = {s: sum(statuses[i] == s for i in idx) for s in STATUSES}
        lat = [x for x in (latencies[i] for i in idx) if x is not None and x == x]  # never sent: no latency
        base = f"{prefix}/{verifier}"
        out.update(
            {
                f"{base}/count": float(n),
                f"{base}/pass_rate": count["ok"] / n,
                f"{base}/mean_score": sum(scores[i] for i in idx) / n,
                f"{base}/latency_p50_ms": _percentile(lat, 50),
                f"{base}/latency_p99_ms": _percentile(lat, 99),
                f"{base}/timeouts": float(count["timeout"]),
                f"{base}/parse_failures": float(count["parse_error"]),
                f"{base}/sandbox_errors": float(count["sandbox_error"]),
                f"{base}/invalid_inputs": float(count["invalid_input"]),
                f"{base}/ambiguous_answers": float(count["ambiguous_answer"]),
                f"{base}/responses_too_large": float(count["response_too_large"]),
                f"{base}/no_answer_region": sum(no_region[i] for i in idx),
            }
        )
    return out


class _MicroBatcher:
    """Collects concurrent single-sample requests into pool batches (one per event loop)."""

    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        self._pending: list[tuple[str, Item, asyncio.Future]] = []
        self._no_region: list[bool] = []  # per pending item: its response has no answer region
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()
        # Pool calls block on Ray; they run here, a few at a time (the pool itself bounds their work).
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rlvr-reward")
        self._pool: VerifierPool | None = None
        self.batches_sent = 0  # pool calls made (items_sent / batches_sent = the batching achieved)
        self.items_sent = 0
        self.no_answer_region_sent = 0  # of items_sent: responses whose reasoning block never closes
        self._warned_no_region = False
        self._pool_lock = threading.Lock()

    def pool(self) -> VerifierPool:
        with self._pool_lock:
            if self._pool is None:
                self._pool = get_pool(PoolConfig.from_mapping(self.config.pool))
            return self._pool

    async def submit(
        self, verifier: str, item: Item, no_answer_region: bool = False
    ) -> tuple[Verdict, float | None]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        self._pending.append((verifier, item, future))
        self._no_region.append(no_answer_region)
        if len(self._pending) >= self.config.micro_batch_size:
            self._flush(loop)
        elif self._timer is None:
            self._timer = loop.call_later(self.config.micro_batch_wait_ms / 1000.0, self._flush, loop)
        return await future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        no_region, self._no_region = sum(self._no_region), []
        if batch:
            task = loop.create_task(self._run(loop, batch, no_region))
            self._tasks.add(task)  # asyncio keeps only weak references to tasks
            task.add_done_callback(self._tasks.discard)

    async def _run(
        self,
        loop: asyncio.AbstractEventLoop,
        batch: list[tuple[str, Item, asyncio.Future]],
        no_region: int = 0,
    ) -> None:
        names = [v for v, _, _ in batch]
        self.batches_sent += 1
        self.items_sent += len(batch)
        self.no_answer_region_sent += no_region
        if no_region and not self._warned_no_region:
            self._warned_no_region = True
            logger.warning(
                "rlvr reward: %d of %d responses have no answer region (their reasoning block never closes, "
                "e.g. cut by data.max_response_length); they score parse_error. If the chat template does "
                "not prefill the opening tag, check reward.reward_kwargs.rlvr.think_prefilled",
                no_region,
                len(batch),
            )
        items = [it for _, it, _ in batch]
        try:
            result = await loop.run_in_executor(self._executor, lambda: self.pool().verify(names, items))
        except Exception as e:  # noqa: BLE001 - e.g. PoolError: every waiting caller must hear it
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(e)
            return
        logger.info(
            "rlvr reward micro-batch of %d (%d without an answer region): %s",
            len(batch),
            no_region,
            result.flat_metrics(),
        )
        for (_, _, future), verdict, latency in zip(batch, result.verdicts, result.latencies_s, strict=True):
            if not future.done():
                future.set_result((verdict, latency))


# The thinking_budget agent loop's per-sample fields -> this manager's columns (same names, rlvr_ prefix).
THINKING_BUDGET_LOOP = "thinking_budget"  # == rlvr_cluster.thinking_budget.AGENT_LOOP_NAME (no verl import)
THINKING_FIELDS = ("thinking_budget_hit", "thinking_tokens", "answer_tokens")
THINKING_KEYS = tuple(f"rlvr_{f}" for f in THINKING_FIELDS)


class RlvrRewardManager(RewardManagerBase):
    """verl reward-loop manager scoring every sample through rlvr's verifier pool."""

    def __init__(
        self, config, tokenizer, compute_score=None, reward_router_address=None, reward_model_tokenizer=None
    ):
        super().__init__(config, tokenizer, compute_score)
        # compute_score (verl's default_compute_score) is deliberately unused: rlvr's verifiers decide.
        self.bridge_config = BridgeConfig.from_verl_config(config)
        # DAPO's soft overlong punishment (sec. 3.4), configured as for verl's `dapo` manager: it shapes the
        # paid reward only; `acc` stays the verifier's verdict (dynamic sampling filters on it).
        self.overlong = OverlongConfig.from_verl_config(config)
        self.reasoning_tags, self.think_prefilled = self.bridge_config.reasoning_settings()
        # Reasoning tags the tokenizer would delete when skipping special tokens (kept when decoding).
        self._keep_ids = special_tag_ids(self.tokenizer, self.reasoning_tags)
        self._batcher = _MicroBatcher(self.bridge_config)
        # Budget columns for every sample of a run whose default agent loop is thinking_budget (verl
        # builds the columns from the first sample's keys, so they cannot depend on the sample).
        agent = _get_path(config, ("actor_rollout_ref", "rollout", "agent", "default_agent_loop"))
        self._thinking_columns = agent == THINKING_BUDGET_LOOP
        # A rubric run's per-component columns (rlvr_verifiers.rubric.component_columns), on every sample.
        self._rubric = registry.get(self.bridge_config.rubric) if self.bridge_config.rubric else None

    def _thinking_info(self, ntb: dict) -> dict[str, Any]:
        """The budget loop's fields of this sample as rlvr_ columns: from verl's `tool_extra_fields` (the
        reward computed inside the agent loop) or the batch's own columns (the reward computed later)."""
        fields_ = _scalar(ntb.get("tool_extra_fields"))
        fields_ = fields_ if isinstance(fields_, dict) else {}
        values = {f: fields_.get(f, _scalar(ntb.get(f))) for f in THINKING_FIELDS}
        if not self._thinking_columns and all(v is None for v in values.values()):
            return {}
        return {
            key: None if values[f] is None else float(values[f])
            for key, f in zip(THINKING_KEYS, THINKING_FIELDS, strict=True)
        }

    async def run_single(self, data: DataProto) -> dict:
        """The sample's verdict (`_score_single`), plus the thinking budget loop's columns."""
        # Multi-sequence outputs: the last sequence is scored, as in verl's managers. Indexed once: each
        # DataProto index builds a new item (256 samples a step on the CPU demo).
        data_item = data[len(data) - 1]
        answer = await self._score_single(data_item)
        answer["reward_extra_info"].update(self._thinking_info(data_item.non_tensor_batch))
        return answer

    async def _score_single(self, data_item) -> dict:
        response_ids = data_item.batch["responses"]
        response_length = response_ids.shape[-1]
        valid_length = int(data_item.batch["attention_mask"][-response_length:].sum())
        valid_ids = response_ids[:valid_length].tolist()
        if valid_length <= INLINE_DECODE_MAX_TOKENS:
            # A short response decodes in microseconds: a thread-pool round trip would cost more.
            response = decode_response(self.tokenizer, valid_ids, self._keep_ids)
        else:
            # A long one off the event loop, which the other samples' coroutines share. The running loop,
            # not self.loop: verl's managers assume they run on the loop they were built on.
            response = await asyncio.get_running_loop().run_in_executor(
                None, lambda: decode_response(self.tokenizer, valid_ids, self._keep_ids)
            )
        no_region = reasoning.split(response, self.reasoning_tags, self.think_prefilled).answer is None
        ntb = data_item.non_tensor_batch
        data_source = _scalar(ntb.get("data_source"))
        ability = _scalar(ntb.get("ability"))
        extra_info = _scalar(ntb.get("extra_info")) or {}
        reward_model = _scalar(ntb.get("reward_model")) or {}
        ground_truth = reward_model.get("ground_truth") if isinstance(reward_model, dict) else None

        verifier = route(data_source, ability, extra_info, self.bridge_config.routes)
        domain = domain_of(extra_info, data_source, verifier or UNROUTED)
        if verifier is None:
            verdict = Verdict(
                0.0, INVALID_INPUT, f"no verifier for data_source={data_source!r} ability={ability!r}"
            )
            return self._answer(UNROUTED, verdict, None, valid_length, no_region, domain)
        extra = {
            "data_source": data_source,
            "reasoning_tags": reasoning.tags_setting(self.reasoning_tags),
            "think_prefilled": self.think_prefilled,
        }
        item = make_item(verifier, response, ground_truth, extra)
        if isinstance(item, Verdict):
            return self._answer(verifier, item, None, valid_length, no_region, domain)
        if self.bridge_config.rubric is not None:  # the rubric scores; the routed verifier is its component
            item.extra[ROUTED_KEY] = verifier
            verifier = self.bridge_config.rubric
        verdict, latency = await self._batcher.submit(verifier, item, no_region)
        answer = self._answer(verifier, verdict, latency, valid_length, no_region, domain)
        if (
            self.bridge_config.rubric is not None
        ):  # `acc` stays correctness (what dynamic sampling filters on)
            answer["reward_extra_info"]["acc"] = float(verdict.metrics.get(f"{ROUTED}/score", 0.0))
        return answer

    def _answer(
        self,
        verifier: str,
        verdict: Verdict,
        latency: float | None,
        response_length: int,
        no_answer_region: bool = False,
        domain: str | None = None,
    ) -> dict:
        # Every sample carries the same extra-info keys: verl builds its columns from the first one.
        info = extra_info_for(
            verifier, verdict, latency, no_answer_region, self.bridge_config.status_indicators, domain
        )
        info.update(self.overlong.extra_info(response_length))
        if self._rubric is not None:  # None in every column for a sample the rubric never scored
            scored = verdict if verifier == self.bridge_config.rubric else None
            info.update(rubric_module.component_values(self._rubric, scored))
        return {
            "reward_score": float(verdict.score) + self.overlong.penalty(response_length),
            "reward_extra_info": info,
        }


def _register() -> None:
    existing = verl_registry.REWARD_MANAGER.get(NAME)
    if existing is not None and existing is not RlvrRewardManager:
        same = (existing.__module__, existing.__qualname__) == (__name__, RlvrRewardManager.__qualname__)
        if same:
            return  # this module imported a second time (under the same name): keep the first class
    # verl's register raises for a genuinely different class under the same name.
    verl_registry.register(NAME)(RlvrRewardManager)


_register()
