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

    data_source / ability contains        verifier
    countdown                              countdown
    tool, function_call, bfcl, xlam        tool_call
    code, apps, taco, livecodebench,       code
      codeforces, humaneval, mbpp, leetcode, primeintellect
    gsm8k, math, aime, amc, olympiad,      math
      numina, deepscaler, dapo, addition, arithmetic

Ground truth: `reward_model["ground_truth"]`. For `math` it is the reference answer string. For `code`,
`countdown` and `tool_call` it is a JSON string (a dict is accepted too), decoded here:
code {"inputs": [...], "outputs": [...], "fn_name"?: str}; countdown {"target": int, "numbers": [int]};
tool_call {"tools": [...], "expected": ...}. A ground truth that does not decode is `invalid_input`.

Batching: verl calls `run_single` once per sample (the reward-loop manager gathers a whole chunk of
them concurrently; the agent loop streams them as rollouts finish). A per-worker micro-batcher collects
the calls that arrive within `micro_batch_wait_ms` (or until `micro_batch_size`), sends them to the
pool as one batch, and answers each caller; the pool bounds the batch's time, so run_single never hangs.

What comes back per sample (verl's `reward_extra_info`; every sample carries the same keys, as verl
requires): `acc` (the score), `rlvr_verifier`, `rlvr_status`, `rlvr_latency_ms` (None when never sent), and one 0/1 indicator
per status (`rlvr_ok`, `rlvr_wrong`, `rlvr_parse_error`, `rlvr_timeout`, `rlvr_sandbox_error`,
`rlvr_invalid_input`). verl's validation averages the numeric ones per data source; `step_metrics()`
turns a step's values into per-verifier figures (latency p50/p99, timeouts, parse failures, sandbox
errors, pass rate) for a trainer-side logger. Each micro-batch's pool metrics are also logged here.
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

from rlvr_verifiers.base import INVALID_INPUT, STATUSES, Item, Verdict
from rlvr_verifiers.overlong import OverlongConfig
from rlvr_verifiers.pool import PoolConfig, VerifierPool, _percentile, get_pool

logger = logging.getLogger(__name__)

NAME = "rlvr"  # == reward.reward_manager.name

# Substring of the lower-cased data_source (then ability) -> verifier. First match wins.
ROUTE_TABLE: tuple[tuple[str, str], ...] = (
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
JSON_GROUND_TRUTH = frozenset({"code", "countdown", "tool_call"})
UNROUTED = "unrouted"  # the metrics bucket of samples no verifier was found for
EXTRA_KEYS = ("acc", "rlvr_verifier", "rlvr_status", "rlvr_latency_ms") + tuple(f"rlvr_{s}" for s in STATUSES)


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
        return out


def _plain(value: Any) -> Any:
    """OmegaConf containers -> plain dicts/lists (without importing omegaconf where it is absent)."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, DictConfig | ListConfig):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - verl always brings omegaconf
        pass
    return dict(value) if isinstance(value, dict) else value


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


def extra_info_for(verifier: str, verdict: Verdict, latency_s: float | None) -> dict[str, Any]:
    info: dict[str, Any] = {
        "acc": float(verdict.score),
        "rlvr_verifier": verifier,
        "rlvr_status": verdict.status,
        # None, not NaN, for a sample never sent to the pool: verl's validation metrics skip None values,
        # while one NaN would turn a whole data source's mean latency into NaN.
        "rlvr_latency_ms": 1000.0 * latency_s if latency_s is not None else None,
    }
    for status in STATUSES:
        info[f"rlvr_{status}"] = 1.0 if verdict.status == status else 0.0
    return info


def step_metrics(reward_extra_infos: dict[str, Sequence[Any]], prefix: str = "rlvr") -> dict[str, float]:
    """Per-verifier figures for one training step from the per-sample `reward_extra_info` columns.

    `{prefix}/{verifier}/{count, pass_rate, mean_score, latency_p50_ms, latency_p99_ms, timeouts,
    parse_failures, sandbox_errors, invalid_inputs}`; samples without rlvr columns are ignored.
    """
    verifiers = list(reward_extra_infos.get("rlvr_verifier", []))
    if not verifiers:
        return {}
    statuses = list(reward_extra_infos["rlvr_status"])
    scores = [float(s) for s in reward_extra_infos["acc"]]
    latencies = [None if x is None else float(x) for x in reward_extra_infos["rlvr_latency_ms"]]
    out: dict[str, float] = {}
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
            }
        )
    return out


class _MicroBatcher:
    """Collects concurrent single-sample requests into pool batches (one per event loop)."""

    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        self._pending: list[tuple[str, Item, asyncio.Future]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()
        # Pool calls block on Ray; they run here, a few at a time (the pool itself bounds their work).
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rlvr-reward")
        self._pool: VerifierPool | None = None
        self.batches_sent = 0  # pool calls made (items_sent / batches_sent = the batching achieved)
        self.items_sent = 0
        self._pool_lock = threading.Lock()

    def pool(self) -> VerifierPool:
        with self._pool_lock:
            if self._pool is None:
                self._pool = get_pool(PoolConfig.from_mapping(self.config.pool))
            return self._pool

    async def submit(self, verifier: str, item: Item) -> tuple[Verdict, float | None]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        self._pending.append((verifier, item, future))
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
        if batch:
            task = loop.create_task(self._run(loop, batch))
            self._tasks.add(task)  # asyncio keeps only weak references to tasks
            task.add_done_callback(self._tasks.discard)

    async def _run(
        self, loop: asyncio.AbstractEventLoop, batch: list[tuple[str, Item, asyncio.Future]]
    ) -> None:
        names = [v for v, _, _ in batch]
        self.batches_sent += 1
        self.items_sent += len(batch)
        items = [it for _, it, _ in batch]
        try:
            result = await loop.run_in_executor(self._executor, lambda: self.pool().verify(names, items))
        except Exception as e:  # noqa: BLE001 - e.g. PoolError: every waiting caller must hear it
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(e)
            return
        logger.info("rlvr reward micro-batch of %d: %s", len(batch), result.flat_metrics())
        for (_, _, future), verdict, latency in zip(batch, result.verdicts, result.latencies_s, strict=True):
            if not future.done():
                future.set_result((verdict, latency))


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
        self._batcher = _MicroBatcher(self.bridge_config)

    async def run_single(self, data: DataProto) -> dict:
        data = data[-1:]  # multi-sequence outputs: the last sequence is scored, as in verl's managers
        data_item = data[0]
        response_ids = data_item.batch["responses"]
        response_length = response_ids.shape[-1]
        valid_length = data_item.batch["attention_mask"][-response_length:].sum()
        valid_ids = response_ids[:valid_length]
        # The running loop, not self.loop: verl's managers assume they run on the loop they were built on.
        response = await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.tokenizer.decode(valid_ids, skip_special_tokens=True)
        )
        ntb = data_item.non_tensor_batch
        data_source = _scalar(ntb.get("data_source"))
        ability = _scalar(ntb.get("ability"))
        extra_info = _scalar(ntb.get("extra_info")) or {}
        reward_model = _scalar(ntb.get("reward_model")) or {}
        ground_truth = reward_model.get("ground_truth") if isinstance(reward_model, dict) else None

        verifier = route(data_source, ability, extra_info, self.bridge_config.routes)
        if verifier is None:
            verdict = Verdict(
                0.0, INVALID_INPUT, f"no verifier for data_source={data_source!r} ability={ability!r}"
            )
            return self._answer(UNROUTED, verdict, None, int(valid_length))
        item = make_item(verifier, response, ground_truth, {"data_source": data_source})
        if isinstance(item, Verdict):
            return self._answer(verifier, item, None, int(valid_length))
        verdict, latency = await self._batcher.submit(verifier, item)
        return self._answer(verifier, verdict, latency, int(valid_length))

    def _answer(self, verifier: str, verdict: Verdict, latency: float | None, response_length: int) -> dict:
        # Every sample carries the same extra-info keys: verl builds its columns from the first one.
        info = extra_info_for(verifier, verdict, latency)
        info.update(self.overlong.extra_info(response_length))
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
