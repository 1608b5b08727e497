"""The verifier pool: Ray actors that score batches of responses with a hard bound on time.

    pool = VerifierPool(PoolConfig(num_actors=4))
    result = pool.verify(["math", "code", ...], [Item(...), ...])   # one verifier name per item
    result.verdicts      # one Verdict per item, in input order, always
    result.metrics       # per verifier: latency p50/p99, counts per status, pass rate, ...

What it guarantees
- Every item gets a verdict: a score, or an explicit failure status (`timeout`, `sandbox_error`,
  `invalid_input`) that is counted in the metrics. No item is ever missing, and `verify` never hangs:
  items not finished when `batch_timeout_s` runs out get status `timeout`.
- Order is preserved: `verdicts[i]` belongs to `items[i]`.
- Cheap items never travel to an actor: a built-in verifier that offers `quick(item)` (math: the exact
  path alone, on short inputs; no model code runs) decides what it can first, and only the rest is
  shipped (`quick_in_caller`). Its verdicts are the ones an actor would return. The quick checks run in a
  small child process of the caller (rlvr_verifiers.quick_worker), never in the caller itself: each item
  gets `quick_cpu_budget_s` CPU seconds there, past which the child is killed and the item shipped, so no
  response can stall the caller (the trainer's reward worker) whatever a parser does with it.
- Size limit: a response longer than `base.MAX_RESPONSE_CHARS` is never read nor shipped: status
  `response_too_large`, score 0, counted (`responses_too_large`) like every status.
- Calls are batched: a batch is cut into chunks of up to `items_per_call` items of one verifier (a Ray
  call costs about 0.8 ms, so one item per call wastes most of the time in round trips); verifiers take
  turns, and chunks shrink toward the end of a batch so no actor carries a long tail alone.
- Backpressure: at most `max_in_flight_per_actor` calls are queued on one actor; the rest wait on the
  driver, so a slow verifier cannot pile up unbounded work in actor mailboxes.
- Per-item timeout: a call gets `item_timeout_s` per item it carries (counting the items queued ahead of
  it on the same actor). A call that overruns marks its actor as wedged: the actor is killed and
  restarted, and the call's items are retried one item per call on the other actors, so the item that
  hangs is found and gets `timeout` while its chunk mates are still scored.
- Actor death (`ray.kill`, OOM, a segfaulting verifier): the actor is recreated, and every item of every
  call it died with becomes a suspect. A suspect is retried alone: one item per call, on an actor with no
  other call of this client in flight, so a death during that call can only be its own. Only such deaths
  count against an item; one that kills `max_retries + 1` actors alone gets `sandbox_error` (a poison input
  cannot stall training), and an innocent item that shared a dying actor with it is never charged. While
  suspects wait, no new work is sent, so a busy actor drains and takes them. (Clients in other processes
  sharing the actors are not held off; a death they cause can be charged to our suspect, which then has
  its remaining retries.)

Placement: every actor asks for `cpus_per_actor` CPUs AND `resource_per_actor` of the custom resource
`resource_name` (default `rlvr_verifier`). On a cluster, CPU verifier nodes advertise that resource
(`ray start --resources='{"rlvr_verifier": 64}'`, or `rayStartParams.resources` in a KubeRay worker
group) and GPU trainer nodes do not, so verifiers never land on trainers. Locally, start Ray with the
resource declared, `ray.init(resources={"rlvr_verifier": N})` with N >= num_actors * resource_per_actor
(`rlvr score` and rlvr's local runs do this), or set `resource_name=""` to place actors on CPUs alone.

The actors look verifiers up in `rlvr_verifiers.registry` inside their own process; `imports` names extra
modules each actor imports first, so user verifiers registered there are available. An actor loads the
verifiers named in `preload` when it starts, while its process is still small: the `code` verifier's
pre-forked sandbox workers are started then, owned by the actor, and fork their job processes themselves
(never from this actor).

Actors are named `{name}-{i}` in the current Ray namespace and created with get-if-exists, so every
process of a job (verl's reward-loop workers, say) that builds a pool with the same `name` shares the
same actors.

Not covered here: isolation of the code under test (rlvr_verifiers.sandbox) and the correctness of any
verifier (its own module).
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError

from rlvr_verifiers.base import (
    AMBIGUOUS_ANSWER,
    INVALID_INPUT,
    OK,
    PARSE_ERROR,
    RESPONSE_TOO_LARGE,
    SANDBOX_ERROR,
    STATUSES,
    TIMEOUT,
    Item,
    Verdict,
    too_large,
)
from rlvr_verifiers.quick_worker import QUICK_CPU_BUDGET_S, QuickWorker

logger = logging.getLogger(__name__)

DEFAULT_RESOURCE = "rlvr_verifier"
# Seconds of quick checks between two looks at the actors (keeps them fed while this process screens).
_SCREEN_SLICE_S = 0.005


class PoolError(Exception):
    """The pool cannot run as configured (the message names the problem and the fix)."""


@dataclass
class PoolConfig:
    """How the verifier pool is sized, placed and bounded. Every field has help text."""

    name: str = field(
        default="rlvr_verifier_pool",
        metadata={"help": "Actor name prefix; processes using the same name share the same actors."},
    )
    num_actors: int = field(default=2, metadata={"help": "Number of verifier actors."})
    cpus_per_actor: float = field(
        default=1.0,
        metadata={"help": "CPUs each actor reserves (its sandbox workers run inside this share)."},
    )
    resource_name: str = field(
        default=DEFAULT_RESOURCE,
        metadata={
            "help": "Custom Ray resource each actor asks for; CPU verifier nodes advertise it, GPU trainer "
            "nodes do not. Empty string: no custom resource (local runs only)."
        },
    )
    resource_per_actor: float = field(
        default=1.0, metadata={"help": "Amount of `resource_name` each actor asks for."}
    )
    items_per_call: int = field(
        default=16, metadata={"help": "Items per actor call (a Ray round trip costs about 0.8 ms)."}
    )
    max_in_flight_per_actor: int = field(
        default=2, metadata={"help": "Backpressure: calls queued on one actor at most."}
    )
    actor_concurrency: int = field(
        default=1,
        metadata={
            "help": "Calls one actor runs at once, in threads (1: one after another; the next call already "
            "waits in the actor's mailbox, so it never idles on the driver). More than 1 only pays where "
            "verifiers wait on something other than this node's CPUs."
        },
    )
    item_timeout_s: float = field(
        default=30.0,
        metadata={"help": "Seconds one item may take inside an actor before it is declared `timeout`."},
    )
    batch_timeout_s: float = field(
        default=300.0,
        metadata={"help": "Hard bound on one verify() call; unfinished items get `timeout`."},
    )
    lazy_start: bool = field(
        default=False,
        metadata={
            "help": "Start the actors when the first item no quick check decided is to be shipped (that "
            "verify() call waits for them, its time bound extended by the wait), not when the pool is "
            "created: a run whose items the caller's quick checks all decide never starts one."
        },
    )
    quick_in_caller: bool = field(
        default=True,
        metadata={
            "help": "Let built-in verifiers with a quick check (math's exact path) decide what they can "
            "next to the calling process (in its bounded quick worker, rlvr_verifiers.quick_worker), and "
            "ship only the rest to actors."
        },
    )
    quick_cpu_budget_s: float = field(
        default=QUICK_CPU_BUDGET_S,
        metadata={
            "help": "CPU seconds a quick check may spend on one item in the quick worker; past it the "
            "worker is killed and the item shipped to an actor."
        },
    )
    max_retries: int = field(
        default=2,
        metadata={
            "help": "Actor deaths an item may cause while running alone and still be retried; the next one "
            "gives it `sandbox_error` (deaths it merely shared with other calls never count)."
        },
    )
    call_overhead_s: float = field(
        default=1.0, metadata={"help": "Slack added to every call's deadline for transport and scheduling."}
    )
    start_timeout_s: float = field(
        default=120.0, metadata={"help": "Seconds to wait for the actors to start before failing clearly."}
    )
    require_resource: bool = field(
        default=True,
        metadata={
            "help": "Fail at start when no node advertises `resource_name` (set false on an autoscaling "
            "cluster that adds verifier nodes on demand)."
        },
    )
    preload: tuple[str, ...] = field(
        default=(),
        metadata={"help": "Verifiers each actor loads at start (e.g. code: starts its sandbox workers)."},
    )
    imports: tuple[str, ...] = field(
        default=(), metadata={"help": "Modules each actor imports first (to register user verifiers)."}
    )
    env: dict[str, str] = field(
        default_factory=dict,
        metadata={
            "help": "Environment variables of each actor process (e.g. RLVR_SANDBOX_ALLOW_WEAKER_ISOLATION), "
            "set through the actor's runtime_env, over the defaults of actor_env(): RLVR_SANDBOX_WORKERS "
            "and RLVR_SYMBOLIC_WORKERS sized to the actor's CPU share."
        },
    )
    namespace: str | None = field(
        default=None, metadata={"help": "Ray namespace of the actors; None: the current job's namespace."}
    )

    def __post_init__(self) -> None:
        self.preload = tuple(self.preload)
        self.imports = tuple(self.imports)
        problems = []
        if self.num_actors < 1:
            problems.append(f"num_actors={self.num_actors} (need >= 1)")
        if self.items_per_call < 1:
            problems.append(f"items_per_call={self.items_per_call} (need >= 1)")
        if self.actor_concurrency < 1:
            problems.append(f"actor_concurrency={self.actor_concurrency} (need >= 1)")
        if self.max_in_flight_per_actor < 1:
            problems.append(f"max_in_flight_per_actor={self.max_in_flight_per_actor} (need >= 1)")
        if self.cpus_per_actor < 0 or self.resource_per_actor < 0:
            problems.append("cpus_per_actor and resource_per_actor must be >= 0")
        if not self.quick_cpu_budget_s > 0:
            problems.append(f"quick_cpu_budget_s must be > 0, got {self.quick_cpu_budget_s}")
        if not (self.item_timeout_s > 0 and self.batch_timeout_s > 0):
            problems.append("item_timeout_s and batch_timeout_s must be > 0")
        if self.max_retries < 0:
            problems.append(f"max_retries={self.max_retries} (need >= 0)")
        if problems:
            raise PoolError("invalid PoolConfig: " + "; ".join(problems))

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None) -> PoolConfig:
        """Build from a plain mapping (a Hydra/OmegaConf node); unknown keys are an error, not ignored."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise PoolError(f"unknown pool setting(s) {unknown}; known: {sorted(known)}")
        for key in ("preload", "imports"):
            if key in values and values[key] is not None:
                values[key] = tuple(values[key])
        if values.get("env") is not None:
            values["env"] = dict(values["env"])
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def actor_env(self) -> dict[str, str]:
        """Each actor's environment: its sandbox and sympy worker processes sized to its CPU share
        (ceil(cpus_per_actor x actor_concurrency), at least 1), the code verifier's per-item budget
        (RLVR_CODE_ITEM_TIMEOUT_S, 2/3 of item_timeout_s); the same variables set in this process
        (a job's env_vars, `RLVR_SANDBOX_WORKERS=4 rlvr score ...`) override that, and `env` overrides
        both. Left to their own defaults (one per core of the node), every actor would start a full set,
        and N actors on N cores would run N^2 worker processes that fight for the same cores."""
        share = str(max(1, math.ceil(self.cpus_per_actor * self.actor_concurrency)))
        env = {
            name: os.environ.get(name) or share for name in ("RLVR_SANDBOX_WORKERS", "RLVR_SYMBOLIC_WORKERS")
        }
        # The code verifier bounds each item's sandbox time below this pool's per-item timeout, so an item
        # is judged `timeout` by its verifier (and its chunk mates scored) before the actor is declared
        # wedged and killed.
        env["RLVR_CODE_ITEM_TIMEOUT_S"] = (
            os.environ.get("RLVR_CODE_ITEM_TIMEOUT_S") or f"{self.item_timeout_s * 2 / 3:g}"
        )
        env.update({str(k): str(v) for k, v in self.env.items()})
        return env


# ----------------------------------------------------------------------------------------------------
# The actor


class VerifierActor:
    """One pool member: looks verifiers up in its own process and runs chunks of one verifier."""

    def __init__(self, imports: Sequence[str], preload: Sequence[str]) -> None:
        for module in imports:
            importlib.import_module(module)
        from rlvr_verifiers import registry

        self._registry = registry
        for name in preload:
            registry.get(name)
            warm = getattr(registry.get(name), "warm_up", None)
            if callable(warm):
                warm()

    def ready(self) -> int:
        return os.getpid()

    def isolation_report(self, name: str) -> Any:
        """What the verifier says about its isolation (the code sandbox's layers), or None."""
        try:
            verifier = self._registry.get(name)
        except KeyError:
            return None
        report = getattr(verifier, "isolation_report", None)
        return report() if callable(report) else report

    def verify_chunk(self, name: str, items: list[Item]) -> list[Verdict]:
        try:
            verifier = self._registry.get(name)
        except KeyError as e:
            return [Verdict(0.0, INVALID_INPUT, _short(str(e).strip("'\""))) for _ in items]
        try:
            verdicts = verifier.verify_batch(items)
            if (
                isinstance(verdicts, list)
                and len(verdicts) == len(items)
                and all(isinstance(v, Verdict) for v in verdicts)
            ):
                return verdicts
            problem = f"verify_batch returned {type(verdicts).__name__} of wrong length or type"
        except Exception as e:  # noqa: BLE001 - a verifier bug must not take its chunk mates down
            problem = f"verify_batch raised {type(e).__name__}: {e}"
        logger.warning("verifier %s: %s; verifying item by item", name, problem)
        out = []
        for item in items:
            try:
                (verdict,) = verifier.verify_batch([item])
                if not isinstance(verdict, Verdict):
                    raise TypeError(f"returned {type(verdict).__name__}, not Verdict")
            except Exception as e:  # noqa: BLE001 - any verifier failure becomes a counted sandbox_error
                verdict = Verdict(
                    0.0, SANDBOX_ERROR, _short(f"verifier {name} failed: {type(e).__name__}: {e}")
                )
            out.append(verdict)
        return out


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------------------------------
# Metrics


def _percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return float(ordered[rank - 1])


@dataclass
class VerifierMetrics:
    """One verifier's figures for one batch."""

    count: int = 0
    statuses: dict[str, int] = field(default_factory=lambda: {s: 0 for s in STATUSES})
    score_sum: float = 0.0
    latencies_s: list[float] = field(default_factory=list, repr=False)
    retries: int = 0  # resubmissions (each item alone) after an actor died or wedged
    calls: int = 0  # actor calls made (items / calls = the batching actually achieved)
    quick: int = 0  # items decided by the caller's quick worker (never shipped)
    quick_gave_up: int = 0  # items whose quick check ran over its CPU budget (then shipped)

    @property
    def pass_rate(self) -> float:
        return self.statuses[OK] / self.count if self.count else 0.0

    @property
    def mean_score(self) -> float:
        return self.score_sum / self.count if self.count else 0.0

    def as_dict(self) -> dict[str, float]:
        out: dict[str, float] = {
            "count": float(self.count),
            "pass_rate": self.pass_rate,
            "mean_score": self.mean_score,
            "latency_p50_ms": 1000.0 * _percentile(self.latencies_s, 50),
            "latency_p99_ms": 1000.0 * _percentile(self.latencies_s, 99),
            "timeouts": float(self.statuses[TIMEOUT]),
            "parse_failures": float(self.statuses[PARSE_ERROR]),
            "sandbox_errors": float(self.statuses[SANDBOX_ERROR]),
            "invalid_inputs": float(self.statuses[INVALID_INPUT]),
            "ambiguous_answers": float(self.statuses[AMBIGUOUS_ANSWER]),
            "responses_too_large": float(self.statuses[RESPONSE_TOO_LARGE]),
            "retries": float(self.retries),
            "calls": float(self.calls),
            "quick": float(self.quick),
            "quick_gave_up": float(self.quick_gave_up),
        }
        for status, n in self.statuses.items():
            out[f"status/{status}"] = float(n)
        return out


@dataclass
class PoolResult:
    verdicts: list[Verdict]
    metrics: dict[str, VerifierMetrics]
    wall_s: float
    actor_restarts: int
    isolation: dict[str, Any] = field(default_factory=dict)  # verifier -> its sandbox isolation report
    latencies_s: list[float | None] = field(default_factory=list)  # per item, input order; None: never ran

    def flat_metrics(self, prefix: str = "rlvr") -> dict[str, float]:
        """`{prefix}/{verifier}/{metric}: value`, plus pool-wide figures, ready for a metrics logger."""
        out = {
            f"{prefix}/pool/wall_s": self.wall_s,
            f"{prefix}/pool/actor_restarts": float(self.actor_restarts),
        }
        for verifier, m in sorted(self.metrics.items()):
            for key, value in m.as_dict().items():
                out[f"{prefix}/{verifier}/{key}"] = value
        return out


# ----------------------------------------------------------------------------------------------------
# The driver side


@dataclass
class _Work:
    verifier: str
    indices: list[int]
    attempts: int = 0  # actors that died while this work ran alone (only those are its fault)
    alone: bool = False  # a suspect: one item, on an actor with nothing else of ours in flight


class _Feed:
    """A batch's not-yet-sent items, cut into calls as they are sent.

    Verifiers take turns (a mixed batch keeps every actor busy with a mix, not all math then all code),
    and calls shrink toward the end (guided self-scheduling: at most remaining / slots items, never more
    than `items_per_call`), so the last calls finish together instead of one actor carrying the tail.
    Items can be added while the batch runs (`add`); `take(unscreened)` counts items that may still come.
    """

    def __init__(self, names: Sequence[str], indices: Sequence[int], items_per_call: int, slots: int) -> None:
        self._queues: dict[str, deque[int]] = {}
        self._order: deque[str] = deque()
        self._queued = 0
        self._max, self._slots = items_per_call, max(1, slots)
        for i in indices:
            self.add(names[i], i)

    def add(self, name: str, index: int) -> None:
        if name not in self._queues:
            self._queues[name] = deque()
            self._order.append(name)
        self._queues[name].append(index)
        self._queued += 1

    def __bool__(self) -> bool:
        return self._queued > 0

    def take(self, unscreened: int = 0) -> _Work:
        while not self._queues[self._order[0]]:
            self._order.rotate(-1)
        name = self._order[0]
        self._order.rotate(-1)
        queue = self._queues[name]
        left = self._queued + unscreened
        size = min(len(queue), self._max, max(1, -(-left // self._slots)))
        self._queued -= size
        return _Work(name, [queue.popleft() for _ in range(size)])


@dataclass
class _Slot:
    index: int
    name: str
    handle: Any = None
    ready_ref: Any = None  # ObjectRef of ready(); None once ready
    in_flight: int = 0
    queued_items: int = 0
    alone: bool = False  # running a suspect: takes nothing else until that call is back
    dead_id: Any = None  # actor id of a handle known dead; the slot is revived when the name is free


@dataclass
class _Call:
    work: _Work
    slot: _Slot
    submitted: float
    deadline: float
    handle: Any


class VerifierPool:
    """Client of a set of named verifier actors; thread-safe, one instance per process is enough."""

    def __init__(self, config: PoolConfig | None = None, *, start: bool = True) -> None:
        self.config = config or PoolConfig()
        self._lock = threading.Condition(threading.RLock())
        self._slots = [_Slot(i, f"{self.config.name}-{i}") for i in range(self.config.num_actors)]
        self._restarts = 0
        self._isolation: dict[str, Any] = {}  # verifier -> its report (None: it has none)
        self._isolation_asked: dict[str, tuple[Any, float]] = {}  # verifier -> (ObjectRef, when asked)
        self._actor_cls = None
        self._started = False  # start() called: actors exist or are (re)created
        self._quick = (
            QuickWorker(cpu_budget_s=self.config.quick_cpu_budget_s) if self.config.quick_in_caller else None
        )
        if start and not self.config.lazy_start:
            self.start()

    # -- actors --------------------------------------------------------------------------------------

    def _options(self, slot: _Slot) -> dict[str, Any]:
        cfg = self.config
        opts: dict[str, Any] = {
            "name": slot.name,
            "get_if_exists": True,
            "num_cpus": cfg.cpus_per_actor,
            "max_restarts": 0,  # the pool restarts actors itself, and resubmits their work
            "max_concurrency": cfg.actor_concurrency,
        }
        if cfg.namespace is not None:
            opts["namespace"] = cfg.namespace
        if cfg.resource_name:
            opts["resources"] = {cfg.resource_name: cfg.resource_per_actor}
        opts["runtime_env"] = {"env_vars": cfg.actor_env()}
        return opts

    def _create(self, slot: _Slot) -> None:
        if self._actor_cls is None:
            self._actor_cls = ray.remote(VerifierActor)
        slot.handle = self._actor_cls.options(**self._options(slot)).remote(
            list(self.config.imports), list(self.config.preload)
        )
        slot.ready_ref = slot.handle.ready.remote()
        slot.dead_id = None

    def _check_resources(self) -> None:
        cfg = self.config
        if not cfg.resource_name or not cfg.require_resource:
            return
        total = ray.cluster_resources().get(cfg.resource_name, 0.0)
        need = cfg.resource_per_actor * cfg.num_actors
        if total < need:
            raise PoolError(
                f"the Ray cluster advertises {total:g} of resource {cfg.resource_name!r} but the pool needs "
                f"{need:g} ({cfg.num_actors} actors x {cfg.resource_per_actor:g}): start verifier nodes with "
                f"`ray start --resources='{{\"{cfg.resource_name}\": {math.ceil(need)}}}'` (locally "
                f"ray.init(resources={{'{cfg.resource_name}': {math.ceil(need)}}})), lower num_actors, "
                "or for a local run set resource_name='' to place actors on CPUs alone"
            )

    def start(self) -> None:
        """Create (or attach to) the actors and wait until they answer; PoolError if they cannot start.

        An actor that dies while starting (another client killed it, say) is recreated; one whose start
        keeps failing (a verifier that cannot load, a sandbox that refuses to run) is a PoolError with the
        actor's own error."""
        if not ray.is_initialized():
            raise PoolError("Ray is not initialised: call ray.init() (or use `rlvr score`) before the pool")
        self._check_resources()
        self._started = True
        if self._quick is not None:
            self._quick.start()  # its imports overlap the actors' start
        deadline = time.monotonic() + self.config.start_timeout_s
        failures, last_error = 0, ""
        while True:
            with self._lock:
                for slot in self._slots:
                    if slot.handle is None and slot.dead_id is None:
                        self._create(slot)
            self._revive()
            with self._lock:
                waiting = {s.ready_ref: s for s in self._slots if s.ready_ref is not None}
                if not waiting and all(s.handle is not None for s in self._slots):
                    return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PoolError(
                    f"verifier actors did not start within {self.config.start_timeout_s:g}s: the cluster lacks "
                    f"free CPUs ({self.config.cpus_per_actor:g} per actor) or resource "
                    f"{self.config.resource_name!r}; check `ray status`"
                    + (f" (last actor error: {last_error})" if last_error else "")
                )
            if not waiting:
                time.sleep(min(0.05, remaining))
                continue
            ready, _ = ray.wait(list(waiting), num_returns=len(waiting), timeout=min(remaining, 0.5))
            for ref in ready:
                slot = waiting[ref]
                try:
                    ray.get(ref)
                    with self._lock:
                        if slot.ready_ref is ref:
                            slot.ready_ref = None
                except RayError as e:
                    failures, last_error = failures + 1, _root_cause(e)
                    self._mark_dead(slot, slot.handle, kill=False)
                    if failures > 2 * self.config.num_actors:
                        raise PoolError(f"verifier actors fail to start: {last_error}") from None

    def actor_handles(self) -> list[Any]:
        with self._lock:
            return [s.handle for s in self._slots]

    def _mark_dead(self, slot: _Slot, handle: Any, kill: bool) -> None:
        """The actor behind `handle` is dead (`kill` False) or wedged (`kill` True): kill it and forget it.

        Killing a dead actor is not redundant: Ray 2.60 keeps a crashed named actor's name (get_actor and
        get_if_exists keep returning the dead actor) until it is killed explicitly; tests/verifiers/
        test_pool.py's crash tests fail if that changes the other way."""
        with self._lock:
            if slot.handle is not handle:
                return  # already replaced
            _kill(handle)
            slot.dead_id = handle._actor_id  # private: ActorHandle has no public id accessor (ray 2.60)
            slot.handle = None
            slot.ready_ref = None
            slot.in_flight = 0
            slot.queued_items = 0
            slot.alone = False
            self._restarts += 1
            self._lock.notify_all()

    def _revive(self) -> None:
        """Recreate dead actors whose name Ray has released, or adopt one another process recreated."""
        if not self._started:
            return  # a lazy pool before its first shipped item (PoolConfig.lazy_start)
        with self._lock:
            for slot in self._slots:
                if slot.handle is not None:
                    continue
                try:
                    existing = ray.get_actor(slot.name, namespace=self.config.namespace)
                except ValueError:
                    existing = None
                if existing is not None and existing._actor_id == slot.dead_id:
                    continue  # the dead actor still holds the name; try again next round
                if existing is not None:
                    slot.handle, slot.ready_ref, slot.dead_id = existing, existing.ready.remote(), None
                else:
                    self._create(slot)

    def _free_slot(self, idle: bool = False) -> _Slot | None:
        """The least loaded ready actor with room for a call (`idle`: with no call of ours at all)."""
        with self._lock:
            best = None
            for slot in self._slots:
                if slot.handle is None or slot.alone or slot.in_flight >= self.config.max_in_flight_per_actor:
                    continue
                if idle and slot.in_flight:
                    continue
                if slot.ready_ref is not None:
                    done, _ = ray.wait([slot.ready_ref], timeout=0)
                    if not done:
                        continue
                    try:
                        ray.get(done[0])
                    except RayError:
                        self._mark_dead(slot, slot.handle, kill=False)
                        continue
                    slot.ready_ref = None
                if best is None or slot.in_flight < best.in_flight:
                    best = slot
            return best

    # -- verification --------------------------------------------------------------------------------

    def verify(self, verifiers: str | Sequence[str], items: Sequence[Item]) -> PoolResult:
        """Verify `items[i]` with verifier `verifiers[i]` (or one name for all); never raises on items."""
        start = time.monotonic()
        items = list(items)
        names = [verifiers] * len(items) if isinstance(verifiers, str) else list(verifiers)
        if len(names) != len(items):
            raise ValueError(f"{len(names)} verifier names for {len(items)} items: give one per item")
        cfg = self.config
        batch_deadline = start + cfg.batch_timeout_s
        verdicts: list[Verdict | None] = [None] * len(items)
        latencies: list[float | None] = [None] * len(items)
        metrics: dict[str, VerifierMetrics] = {name: VerifierMetrics() for name in dict.fromkeys(names)}
        restarts_before = self._restarts

        suspects: deque[_Work] = deque()  # single items that were on a dying actor: each runs alone, first
        pending: deque[_Work] = deque()  # work to resend unpunished (other calls of a wedged actor)
        # Items whose verifier has a quick check are screened in this process while the actors work
        # (a slice at a time, between dispatches); the rest go to the feed at once.
        checks = {name: _quick_check(name) for name in metrics} if self._quick is not None else {}
        unscreened: deque[int] = deque()
        shipped_now: list[int] = []
        for i, name in enumerate(names):
            oversized = too_large(items[i].response)
            if oversized is not None:  # never read nor shipped (base.MAX_RESPONSE_CHARS)
                verdicts[i], latencies[i] = oversized, 0.0
            elif checks.get(name) is not None:
                unscreened.append(i)
            else:
                shipped_now.append(i)
        fresh = _Feed(names, shipped_now, cfg.items_per_call, cfg.num_actors * cfg.max_in_flight_per_actor)
        in_flight: dict[Any, _Call] = {}

        def screen(slice_s: float) -> None:
            until = time.monotonic() + slice_s
            while unscreened:
                i = unscreened.popleft()
                began = time.monotonic()
                assert self._quick is not None
                gave_up = self._quick.gave_up
                verdict = self._quick.check(names[i], items[i])  # bounded: see rlvr_verifiers.quick_worker
                metrics[names[i]].quick_gave_up += self._quick.gave_up - gave_up
                if isinstance(verdict, Verdict):
                    verdicts[i], latencies[i] = verdict, time.monotonic() - began
                    metrics[names[i]].quick += 1
                else:
                    fresh.add(names[i], i)
                if time.monotonic() >= until:
                    return

        def settle(work: _Work, status: str, detail: str, latency: float | None) -> None:
            for i in work.indices:
                verdicts[i] = Verdict(0.0, status, detail)
                latencies[i] = latency

        def suspect(work: _Work, died_alone: bool) -> None:
            """Work whose actor died, or was killed for overrunning: retry each item alone. A death while the
            work ran alone is its own (`died_alone`) and counts; any other death blames nobody yet."""
            metrics[work.verifier].retries += 1
            attempts = work.attempts + (1 if died_alone else 0)
            if attempts > cfg.max_retries:
                settle(work, SANDBOX_ERROR, f"verifier actor died {attempts} times on this item alone", None)
                return
            for i in work.indices:
                suspects.append(_Work(work.verifier, [i], attempts, alone=True))

        def release(call: _Call) -> None:
            with self._lock:
                if call.slot.handle is call.handle:
                    call.slot.in_flight -= 1
                    call.slot.queued_items -= len(call.work.indices)
                    call.slot.alone = False
                self._lock.notify_all()

        while unscreened or suspects or pending or fresh or in_flight:
            now = time.monotonic()
            if now >= batch_deadline:
                break
            if unscreened:
                screen(_SCREEN_SLICE_S)
            if (suspects or pending or fresh) and not self._started:
                began = time.monotonic()
                self.start()  # a lazy pool: the first item to ship (PoolConfig.lazy_start)
                batch_deadline += time.monotonic() - began
            # Dispatch as much as backpressure allows: suspects first, each to an idle actor; while one
            # waits for an idle actor, nothing else is sent (so the busy actors drain).
            self._revive()
            while suspects or pending or fresh:
                slot = self._free_slot(idle=bool(suspects))
                if slot is None:
                    break
                work = (
                    suspects.popleft()
                    if suspects
                    else pending.popleft()
                    if pending
                    else fresh.take(len(unscreened))
                )
                with self._lock:
                    handle = slot.handle
                    slot.alone = work.alone
                    slot.in_flight += 1
                    slot.queued_items += len(work.indices)
                    ahead_and_own = slot.queued_items
                chunk = [items[i] for i in work.indices]
                ref = handle.verify_chunk.remote(work.verifier, chunk)
                metrics[work.verifier].calls += 1
                deadline = now + cfg.item_timeout_s * ahead_and_own + cfg.call_overhead_s
                in_flight[ref] = _Call(work, slot, now, deadline, handle)
            # Wait for a result, a call deadline, or (nothing of ours in flight) a slot to free up.
            if in_flight:
                next_deadline = min(min(c.deadline for c in in_flight.values()), batch_deadline)
                waiting = suspects or pending or fresh
                wait_s = max(0.0, min(next_deadline - time.monotonic(), 0.5 if waiting else 1e9))
                if unscreened:
                    wait_s = 0.0  # collect what is done, then screen the next slice
                refs = list(in_flight)
                ready, _ = ray.wait(refs, num_returns=1, timeout=wait_s)
                if ready:  # collect everything else already done, without waiting
                    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            else:
                if not unscreened:
                    with self._lock:
                        self._lock.wait(timeout=min(0.05, max(0.0, batch_deadline - time.monotonic())))
                continue
            done_at = time.monotonic()
            for ref in ready:
                call = in_flight.pop(ref, None)
                if call is None:  # taken back already, with a dead actor's other calls
                    continue
                release(call)
                try:
                    chunk_verdicts = ray.get(ref)
                except RayActorError:
                    self._mark_dead(call.slot, call.handle, kill=False)
                    same = [(r, c) for r, c in in_flight.items() if c.handle is call.handle]
                    # Calls the actor finished before it died keep their results (left in in_flight, they
                    # are collected next round); only calls without a result are victims.
                    finished = _finished_ok(
                        [r for r, _ in same], wait_s=min(1.0, batch_deadline - time.monotonic())
                    )
                    same = [(r, c) for r, c in same if r not in finished]
                    for r, _ in same:
                        del in_flight[r]
                    victims = [call] + [c for _, c in same]
                    logger.warning(
                        "verifier actor %s died with %d call(s) of ours in flight (items %s); %s",
                        call.slot.name,
                        len(victims),
                        sorted(i for v in victims for i in v.work.indices)[:16],
                        "charging the item it ran alone" if call.work.alone else "retrying each item alone",
                    )
                    # A call that ran alone is the only victim: its actor took nothing else of ours.
                    for victim in victims:
                        suspect(victim.work, died_alone=victim.work.alone)
                    continue
                except RayError as e:  # the actor method itself failed (it catches verifier errors)
                    settle(call.work, SANDBOX_ERROR, _short(f"pool call failed: {type(e).__name__}"), None)
                    continue
                for i, verdict in zip(call.work.indices, chunk_verdicts, strict=False):  # equal lengths
                    verdicts[i] = verdict
                    latencies[i] = done_at - call.submitted
            # Calls past their deadline: the actor is wedged. Kill it; its other calls go back unpunished.
            now = time.monotonic()
            for ref, call in list(in_flight.items()):
                if call.deadline > now or ref not in in_flight:
                    continue
                wedged = call.handle
                self._mark_dead(call.slot, wedged, kill=True)
                for other_ref, other in list(in_flight.items()):
                    if other.handle is not wedged:
                        continue
                    del in_flight[other_ref]
                    if other is call and len(call.work.indices) == 1:
                        settle(
                            call.work,
                            TIMEOUT,
                            f"no verdict within {cfg.item_timeout_s:g}s",
                            now - call.submitted,
                        )
                    elif other is call:
                        suspect(other.work, died_alone=False)
                    else:
                        pending.appendleft(other.work)

        # The hard bound: whatever is left is a timeout, and actors still busy with it are restarted so
        # the next batch does not queue behind a hung item.
        now = time.monotonic()
        for call in in_flight.values():
            settle(
                call.work, TIMEOUT, f"batch deadline {cfg.batch_timeout_s:g}s reached", now - call.submitted
            )
            self._mark_dead(call.slot, call.handle, kill=True)
        while fresh:
            pending.append(fresh.take())
        pending.extend(_Work(names[i], [i]) for i in unscreened)
        for work in (*suspects, *pending):
            settle(work, TIMEOUT, f"batch deadline {cfg.batch_timeout_s:g}s reached before it ran", None)

        final: list[Verdict] = []
        for i, verdict in enumerate(verdicts):
            assert verdict is not None, "every item is settled above"
            m = metrics[names[i]]
            m.count += 1
            m.statuses[verdict.status] += 1
            m.score_sum += float(verdict.score)
            if latencies[i] is not None:
                m.latencies_s.append(latencies[i])
            final.append(verdict)
        result = PoolResult(
            final, metrics, time.monotonic() - start, self._restarts - restarts_before, latencies_s=latencies
        )
        result.isolation = self._isolation_reports(metrics)
        return result

    def _isolation_reports(self, metrics: dict[str, VerifierMetrics]) -> dict[str, Any]:
        """Each verifier's isolation report (asked once, never waited for); logged with every batch when
        it says weaker isolation was accepted."""
        out = {}
        for name in metrics:
            if name not in self._isolation:
                asked = self._isolation_asked.get(name)
                if (
                    asked is None or time.monotonic() - asked[1] > 60.0
                ):  # unanswered (actor killed?): ask again
                    handle = next((s.handle for s in self._slots if s.handle is not None), None)
                    if handle is not None:
                        self._isolation_asked[name] = (handle.isolation_report.remote(name), time.monotonic())
                    continue
                done, _ = ray.wait([asked[0]], timeout=0)
                if not done:
                    continue
                try:
                    self._isolation[name] = ray.get(done[0])
                except RayError:
                    self._isolation_asked.pop(name, None)
                    continue
            report = self._isolation[name]
            if report is None:
                continue
            out[name] = report
            if _is_weaker(report):
                logger.warning(
                    "verifier %s runs with WEAKER isolation (accepted by config): %s", name, report
                )
        return out

    def shutdown(self) -> None:
        """Kill this pool's actors (only call from the process that owns the pool's lifetime)."""
        if self._quick is not None:
            self._quick.close()
        with self._lock:
            for slot in self._slots:
                if slot.handle is not None:
                    _kill(slot.handle)
                    slot.handle = None


def _quick_check(name: str) -> Any:
    """The `quick` method of built-in verifier `name`, or None. Only built-ins: a user verifier is
    imported by the actors (`imports`) and may not exist, or differ, in this process."""
    from rlvr_verifiers import registry

    if name not in registry.BUILTIN:
        return None
    try:
        quick = getattr(registry.get(name), "quick", None)
    except Exception:  # noqa: BLE001 - cannot load it here: the actors decide everything
        return None
    return quick if callable(quick) else None


def _finished_ok(refs: list[Any], wait_s: float) -> set[Any]:
    """The refs among `refs` (calls on an actor that just died) that returned a result, not an error.

    Waits up to `wait_s` for them to resolve: a reply the actor sent just before it died may still be on
    its way, and the other calls resolve to errors quickly once Ray knows the actor is dead."""
    if not refs:
        return set()
    done, _ = ray.wait(refs, num_returns=len(refs), timeout=max(0.0, wait_s))
    out = set()
    for ref in done:
        try:
            ray.get(ref)
        except RayError:
            continue
        out.add(ref)
    return out


def _root_cause(error: Exception) -> str:
    """The last `SomethingError: message` line of a Ray error (the actor's own exception), shortened."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception", "Unavailable")) and " " not in head:
            return _short(line, 500)
    return _short(lines[-1] if lines else type(error).__name__, 500)


def _kill(handle: Any) -> None:
    try:
        ray.kill(handle, no_restart=True)
    except Exception as e:  # noqa: BLE001 - an actor already gone is what we want
        logger.debug("kill of verifier actor failed (already gone?): %s", e)


def _is_weaker(report: Any) -> bool:
    """True when an isolation report says some layer is missing and that was accepted."""
    if isinstance(report, dict):
        for key in ("weaker", "weaker_isolation", "degraded"):
            if report.get(key):
                return True
        missing = report.get("missing")
        return bool(missing)
    weaker = getattr(report, "weaker", None)
    return bool(weaker)


_POOLS: dict[str, VerifierPool] = {}
_POOLS_LOCK = threading.Lock()


def get_pool(config: PoolConfig | None = None) -> VerifierPool:
    """This process's client of the pool named `config.name` (created, or attached to, on first use)."""
    config = config or PoolConfig()
    with _POOLS_LOCK:
        pool = _POOLS.get(config.name)
        if pool is None:
            pool = _POOLS[config.name] = VerifierPool(config)
        return pool


def forget_pools(names: Iterable[str] | None = None) -> None:
    """Drop cached pool clients (after ray.shutdown); their actors are left to Ray."""
    with _POOLS_LOCK:
        for name in list(names if names is not None else _POOLS):
            _POOLS.pop(name, None)
