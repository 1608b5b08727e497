"""The restart policy: which failed attempts a new attempt can cure, and how many restarts a run gets.

A run's attempt fails; `classify` decides from the exception (its whole chain: Ray's RayTaskError
carries the remote error as `.cause`) and from the attempt's own log whether a restart can cure it:

- yes: a worker or actor process died (Ray's ActorDiedError / RayActorError / WorkerCrashedError /
  ActorUnavailableError), a node or its raylet was lost (NodeDiedError, LocalRayletDiedError), an object
  was lost with its owner (ObjectLostError, OwnerDiedError, ...), a weight sync timed out or its
  receiver disconnected mid-sync (rlvr's WeightSyncTimeout, WeightSyncPeerLostError), the rollout's vLLM
  engine process died (vLLM's EngineDeadError), a collective lost its peer (gloo's "Connection closed by
  peer", NCCL's remote error: the surviving rank's report of a rank that died, which can reach the driver
  before Ray's report of the death itself), a port the run picked was taken before it bound it
  (EADDRINUSE: verl picks the trainer's rendezvous port by binding port 0 and closing it, and torch binds
  it seconds later, when the workers start; whatever on the node opens a socket in between can take it; a
  new attempt picks a new port, even where the race hit an actor's constructor). The same recipe
  from the newest checkpoint has every reason to get further.
- no: a diverged loss (NaN or inf anywhere in the error: the checkpoint holds the weights that diverged),
  an actor that failed in its constructor (a configuration error, named by `train.actor_failures`), Ray's
  out-of-memory killer (the same recipe needs the same memory), any error that is not one of the above
  (a bug or a configuration error repeats on every attempt).

`RestartPolicy` (recipe keys `rlvr.restart.max_restarts`, `rlvr.restart.window_s`) allows a restart
when fewer than max_restarts restarts started within the last window_s seconds. The count is kept in
the run directory (attempts/N.json: when each attempt started, whether it was a restart and of what,
how it ended), not in the process, so that a run whose driver is itself restarted (KubeRay's RayJob
`backoffLimit`, a person) shares one budget with the driver's own restarts.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from rlvr_launch.errors import UserError

# Ray's and rlvr's exception names a restart can cure, with what happened, in words.
RESTARTABLE = {
    "ActorDiedError": "a worker or actor process died",
    "RayActorError": "a worker or actor process died",
    "ActorUnavailableError": "a worker or actor process became unreachable",
    "WorkerCrashedError": "a worker process crashed",
    "NodeDiedError": "a node was lost",
    "LocalRayletDiedError": "the node's raylet died",
    "ObjectLostError": "an object was lost with the process that held it",
    "OwnerDiedError": "an object was lost with the process that owned it",
    "ObjectReconstructionFailedError": "an object was lost and could not be rebuilt",
    "ObjectFetchTimedOutError": "an object could not be fetched from its node",
    "WeightSyncTimeout": "a weight sync to the rollout timed out",
    "WeightSyncPeerLostError": "the rollout's side of a weight sync disconnected mid-sync",
    # vLLM's engine process (the rollout server's child that runs the model) died: the server cannot
    # generate or take weights again, and a new attempt starts a new one.
    "EngineDeadError": "the rollout's vLLM engine process died",
}
# Never restarted, whatever else the chain holds.
OUT_OF_MEMORY = ("OutOfMemoryError",)
# NaN or inf in an error message: a diverged loss or policy (torch's sampling: "probability tensor
# contains either `inf`, `nan` or element < 0"; a loss check: "loss is nan").
_DIVERGED = re.compile(r"\bnan\b|\binf\b|non-finite|not finite", re.IGNORECASE)
# The message of an actor whose constructor raised: its class or its config is wrong.
_CREATION = re.compile(r"creation task", re.IGNORECASE)
# Exception lines of a traceback in a log ("ray.exceptions.ActorDiedError: The actor died ...").
_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?([A-Za-z_]\w*(?:Error|Exception|Timeout)): (.*)$")
# A collective whose peer process went away: the rank that reports it is alive, another rank died (its
# node lost, SIGKILL, OOM) and the driver heard from the survivor first. gloo: "Connection closed by peer
# ... typically caused by a remote worker crashing"; NCCL: ncclRemoteError, "remote process exited".
PEER_LOST = "a collective lost a peer: another rank's process died"
_PEER_LOST = re.compile(
    r"Connection (?:closed|reset) by peer|remote worker crash|ncclRemoteError|remote process exited"
    r"|NCCL communicator was aborted",
    re.IGNORECASE,
)
# A port taken between being picked and being bound (torch's DistNetworkError: "... code: -98, name:
# EADDRINUSE, message: address already in use"; Python's OSError: "[Errno 98] Address already in use").
PORT_TAKEN = "a port the run picked was taken by another process before the run bound it"
_PORT_TAKEN = re.compile(r"EADDRINUSE|address already in use", re.IGNORECASE)
# Ray's words for a process that died without an exception of its own (SIGKILL, a segfault).
_DIED_IN_LOG = re.compile(
    r"The actor died unexpectedly|Worker exit type: SYSTEM_ERROR|node .* (?:has been )?marked dead"
)


@dataclass(frozen=True)
class Failure:
    """Why an attempt failed, in one line, and whether a restart can cure it."""

    cause: str
    restartable: bool
    reason: str  # what happened (restartable) or why a restart cannot cure it


def _chain(error: BaseException | None) -> list[BaseException]:
    """The error and everything it wraps: Ray's `.cause`, `__cause__`, `__context__` (each once)."""
    out: list[BaseException] = []
    todo = [error]
    while todo:
        e = todo.pop(0)
        if e is None or any(e is seen for seen in out):
            continue
        out.append(e)
        todo += [getattr(e, "cause", None), e.__cause__, e.__context__]
    return [e for e in out if isinstance(e, BaseException)]


def _names(e: BaseException) -> list[str]:
    return [t.__name__ for t in type(e).__mro__]


# Ray colours the remote function in a RayTaskError's first line (`\x1b[36mray::WorkerDict.f()\x1b[39m`).
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _first_line(e: BaseException) -> str:
    """One line for an exception; Ray's dead-actor reports (actor_id, class_name, pid, ... on lines of
    their own) become `ActorDiedError: WorkerDict (pid 123) died: its worker process has died (SYSTEM_ERROR)`."""
    message = _ANSI.sub("", str(e))
    # verl's colocated workers are `create_colocated_worker_cls.<locals>.WorkerDict`: the class is the last part.
    actor = re.search(r"class_name: (?:\S*[.>])?(\w+)", message)
    if actor:
        pid = re.search(r"\bpid: (\d+)", message)
        why = re.search(r"The actor is dead because ([^.]+)", message)
        exit_type = re.search(r"Worker exit type: (\w+)", message)
        return (
            f"{type(e).__name__}: {actor.group(1)}"
            + (f" (pid {pid.group(1)})" if pid else "")
            + " died"
            + (f": {why.group(1)}" if why else "")
            + (f" ({exit_type.group(1)})" if exit_type else "")
        )[:300]
    text = [line.strip() for line in message.splitlines() if line.strip()]
    return f"{type(e).__name__}: {text[0] if text else ''}".strip()[:300]


def classify(
    error: BaseException | None, log_text: str = "", actor_failures: list[str] | None = None
) -> Failure:
    """Decide whether a restart can cure the failure (see the module docstring for the rules).

    `log_text` is the attempt's log (attempts/N.log) or its tail: when the exception that reached the
    driver is a secondary one, Ray's report of the process that died is there. `actor_failures` are the
    constructor errors `train.actor_failures` read from the Ray session's logs."""
    chain = _chain(error)
    messages = [str(e) for e in chain]
    log_errors = [m for m in (_EXCEPTION_LINE.match(line.strip()) for line in log_text.splitlines()) if m]
    head = (
        _first_line(chain[0])
        if chain
        else (f"{log_errors[-1].group(1)}: {log_errors[-1].group(2)}" if log_errors else "unknown")
    )
    if any(_DIVERGED.search(m) for m in messages) or any(_DIVERGED.search(m.group(2)) for m in log_errors):
        return Failure(
            head, False, "a diverged loss or policy (NaN/inf): the checkpoint holds the diverged weights"
        )
    for e in chain:
        if set(_names(e)) & set(OUT_OF_MEMORY):
            return Failure(
                _first_line(e), False, "out of memory: the same recipe needs the same memory again"
            )
    # In a constructor the driver sees a dead actor; the constructor's own error names the port. The log
    # only when no exception reached the driver: a benign port retry logged earlier in a run that then
    # failed of a bug must not make the bug look curable.
    taken_in_constructor = next((f for f in actor_failures or [] if _PORT_TAKEN.search(f)), None)
    if (
        taken_in_constructor
        or any(_PORT_TAKEN.search(m) for m in messages)
        or (not chain and any(_PORT_TAKEN.search(m.group(2)) for m in log_errors))
    ):
        return Failure(taken_in_constructor or head, True, PORT_TAKEN)
    if actor_failures:
        return Failure(actor_failures[0], False, "an actor failed in its constructor: a configuration error")
    for e in chain:
        if isinstance(e, UserError):
            return Failure(_first_line(e), False, "a configuration error")
    for e in chain:
        known = [n for n in _names(e) if n in RESTARTABLE]
        if known:
            if any(_CREATION.search(m) for m in messages):
                return Failure(
                    _first_line(e), False, "an actor failed in its constructor: a configuration error"
                )
            return Failure(_first_line(e), True, RESTARTABLE[known[0]])
    if any(_PEER_LOST.search(m) for m in messages) or any(_PEER_LOST.search(m.group(2)) for m in log_errors):
        return Failure(head, True, PEER_LOST)
    for m in log_errors:
        if m.group(1) in RESTARTABLE:
            return Failure(f"{head} (after {m.group(1)}: {m.group(2)[:160]})", True, RESTARTABLE[m.group(1)])
    if _DIED_IN_LOG.search(log_text):
        return Failure(head, True, "a worker or actor process died")
    return Failure(head, False, "an error in the code or the recipe: a restart would repeat it")


# --- the policy -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int
    window_s: float
    # How long a restart on a cluster waits for the trainer's GPUs to be free again (a lost node's
    # replacement joining) before it gives up naming the shortfall.
    capacity_wait_s: float = 600.0

    @classmethod
    def from_config(cls, cfg) -> RestartPolicy:
        block = (cfg.get("rlvr") or {}).get("restart") or {}
        raw_max, raw_window = block.get("max_restarts", 0), block.get("window_s", 3600)
        raw_wait = block.get("capacity_wait_s", 600)
        try:
            max_restarts, window_s, capacity_wait_s = int(raw_max), float(raw_window), float(raw_wait)
        except (TypeError, ValueError):
            raise UserError(
                f"rlvr.restart.max_restarts={raw_max!r} / window_s={raw_window!r} / capacity_wait_s={raw_wait!r} "
                "must be numbers (e.g. rlvr.restart.max_restarts=2 rlvr.restart.window_s=3600 "
                "rlvr.restart.capacity_wait_s=600; 0 restarts: off)"
            ) from None
        if max_restarts < 0 or window_s <= 0 or capacity_wait_s < 0:
            raise UserError(
                f"rlvr.restart.max_restarts must be >= 0 (0: off), rlvr.restart.window_s > 0 and "
                f"rlvr.restart.capacity_wait_s >= 0; got {max_restarts}, {window_s} and {capacity_wait_s}"
            )
        return cls(max_restarts, window_s, capacity_wait_s)

    def restarts_in_window(self, attempts_dir: Path, now: float | None = None) -> int:
        now = time.time() if now is None else now
        return sum(
            1
            for r in attempt_records(attempts_dir)
            if r.get("restart_of") and now - float(r.get("started", 0)) < self.window_s
        )

    def allows(self, attempts_dir: Path, now: float | None = None) -> bool:
        return self.restarts_in_window(attempts_dir, now) < self.max_restarts


# --- attempt records (attempts/N.json) ------------------------------------------------------------


def attempt_records(attempts_dir: Path) -> list[dict]:
    """Every attempt's record, oldest first, with its number."""
    if not attempts_dir.is_dir():
        return []
    out = []
    for path in sorted(
        (p for p in attempts_dir.glob("*.json") if p.stem.isdigit()), key=lambda p: int(p.stem)
    ):
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            record = {}
        out.append({"attempt": int(path.stem), **record})
    return out


def _update(path: Path, **fields) -> None:
    record = json.loads(path.read_text()) if path.is_file() else {}
    record.update(fields)
    tmp = path.with_suffix(".json.partial")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)


def record_start(attempt_json: Path, restart_of: str | None = None, resumed_after: str | None = None) -> None:
    """When the attempt started and, for an automatic restart, the cause of the failure it restarts after
    (`restart_of`, counted against the budget); for a person's resume, how the previous attempt ended
    (`resumed_after`, not counted)."""
    fields: dict = {"started": time.time()}
    if restart_of:
        fields["restart_of"] = restart_of
    if resumed_after:
        fields["resumed_after"] = resumed_after
    _update(attempt_json, **fields)


# Exit statuses of an attempt stopped on purpose by a signal (128 + the signal's number, as a shell
# reports it): Ctrl-C and `kill` / Kubernetes stopping the pod / `rlvr stop`. Not failures: never counted
# against the restart budget, but named when the run is resumed.
STOPPED_BY = {130: "SIGINT (Ctrl-C)", 143: "SIGTERM"}


def record_end(attempt_json: Path, status: int, failure: Failure | None = None) -> None:
    fields: dict = {"ended": time.time(), "status": int(status)}
    if failure is not None:
        fields.update(cause=failure.cause, restartable=failure.restartable, reason=failure.reason)
    elif int(status) in STOPPED_BY:
        fields.update(
            cause=f"stopped by {STOPPED_BY[int(status)]}", restartable=False, reason="stopped on purpose"
        )
    _update(attempt_json, **fields)


def unfinished_previous(attempts_dir: Path) -> str | None:
    """The cause to record when a new attempt starts after one that never recorded its end (its driver
    was killed: SIGKILL, a lost head node) or that failed: None after a clean end or with no attempt."""
    records = attempt_records(attempts_dir)
    if not records:
        return None
    last = records[-1]
    if "ended" not in last:
        return "the previous attempt's driver died without recording an end (killed, or its node lost)"
    if int(last.get("status", 0)) not in (0, *STOPPED_BY):
        return str(last.get("cause") or f"the previous attempt failed with status {last.get('status')}")
    return None


def stopped_previous(attempts_dir: Path) -> str | None:
    """`stopped by SIGTERM` when the last attempt was stopped on purpose by a signal (its status 130 or
    143): a resume names it, but it is no failure (unfinished_previous: None). None otherwise."""
    records = attempt_records(attempts_dir)
    if not records or "ended" not in records[-1]:
        return None
    status = int(records[-1].get("status", 0))
    return f"stopped by {STOPPED_BY[status]}" if status in STOPPED_BY else None


def summary(attempts_dir: Path) -> str | None:
    """`3 attempts, 2 restarts: attempt 2 after ActorDiedError: ... (a worker or actor process died); ...`;
    None for a run of one attempt."""
    records = attempt_records(attempts_dir)
    if len(records) < 2:
        return None
    restarts = [r for r in records if r.get("restart_of")]
    resumes = [r for r in records if r.get("resumed_after")]
    text = f"{len(records)} attempts, {len(restarts)} restarts"
    parts = [f"attempt {r['attempt']} after {r['restart_of']}" for r in restarts]
    parts += [f"attempt {r['attempt']} resumed by hand after: {r['resumed_after']}" for r in resumes]
    return text + (": " + "; ".join(parts) if parts else "")


# --- a restart on a cluster waits for its capacity ------------------------------------------------


def trainer_gpus(cfg) -> int:
    """The GPUs (logical ones on the cpu platform) verl's trainer pool asks for: nnodes x n_gpus_per_node."""
    return int(cfg.trainer.nnodes) * int(cfg.trainer.n_gpus_per_node)


def wait_for_capacity(needed: int, wait_s: float, free_gpus, run_dir, log=print, poll_s: float = 2.0) -> None:
    """Before a restarted attempt on a cluster: wait until `free_gpus()` reaches `needed`.

    A node that died took its GPUs with it; on Kubernetes (a RayCluster's worker pod) or under an
    autoscaler a replacement joins within a minute or two, and verl refuses to start with fewer GPUs than
    its pool asks for (a ValueError no restart would cure). Progress every 30 s; after `wait_s` a
    UserError naming the shortfall and the command that resumes once the capacity is back."""
    deadline = time.monotonic() + wait_s
    next_note = time.monotonic()
    while True:
        free = free_gpus()
        if free >= needed:
            return
        now = time.monotonic()
        if now >= deadline:
            raise UserError(
                f"the restart needs {needed} GPUs and the cluster has {free:g} free after waiting {wait_s:.0f} s "
                f"(rlvr.restart.capacity_wait_s); once its nodes are back, `rlvr train --run-dir {run_dir}` "
                "resumes from the newest checkpoint"
            )
        if now >= next_note:
            log(
                f"waiting for the cluster's capacity: {free:g} of {needed} GPUs free (a lost node's replacement?)"
            )
            next_note = now + 30
        time.sleep(poll_s)
