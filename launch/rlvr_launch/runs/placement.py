"""Where the verifier pool runs on a Ray cluster, and how big it is, decided before anything expensive
starts: at `rlvr submit` time from the cluster's node list (the dashboard's state API), and again when
the job's driver has joined the cluster (`ray.nodes()`), before verl loads a model.

The pool's actors ask for the custom resource `rlvr_verifier` (reward.reward_kwargs.rlvr.pool.resource_name)
and no generic CPUs (recipes/rlvr.yaml: cpus_per_actor 0): only verifier nodes advertise that resource,
and they advertise `num-cpus 0`, so verl, which spreads its agent-loop and reward-loop workers over every
node with CPUs (verl/experimental/agent_loop/agent_loop.py, reward_loop/reward_loop.py) and asks a CPU
for each of its actors, never places anything there (the verifier image holds neither torch nor verl).

On a cluster (not on a private local Ray):
- pool size: `num_actors` defaults to the cluster's `rlvr_verifier` total / resource_per_actor (one actor
  per verifier slot); a num_actors set in the recipe is kept, and refused when it cannot fit;
- no node carries the resource (a cluster not built from cluster/k8s or cluster/ray-cluster.yaml):
  `rlvr.verifier_placement: require` (the default) fails with the fix in one line; `any_cpu` runs the
  pool on the cluster's general CPU nodes (one CPU per actor, 2 actors unless num_actors is set) and
  says so in a warning.
"""

from __future__ import annotations

import json
import math
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from rlvr_launch.errors import UserError

POOL_KEY = "reward.reward_kwargs.rlvr.pool"
DEFAULT_RESOURCE = "rlvr_verifier"  # == rlvr_verifiers.pool.DEFAULT_RESOURCE (a test checks)
FALLBACK_ACTORS = 2  # the pool's own default, for `any_cpu`
# A head that has just started lists no node for a few seconds.
NODES_WAIT_S = 30.0


@dataclass(frozen=True)
class Placement:
    num_actors: int
    resource_name: str  # "" = on generic CPUs (the any_cpu fallback)
    cpus_per_actor: float
    slots: float  # the cluster's total of the resource
    verifier_nodes: int
    fallback: bool = False

    def describe(self) -> str:
        if self.fallback:
            return (
                f"verifier pool: {self.num_actors} actors on the cluster's general CPU nodes "
                "(rlvr.verifier_placement=any_cpu: no node carries the pool's resource)"
            )
        return (
            f"verifier pool: {self.num_actors} actors on resource {self.resource_name!r} "
            f"({self.slots:g} slots on {self.verifier_nodes} node(s))"
        )


def _pool_settings(cfg) -> dict:
    from omegaconf import OmegaConf

    node = OmegaConf.select(cfg, POOL_KEY, default=None)
    return dict(OmegaConf.to_container(node, resolve=True)) if node is not None else {}


def uses_pool(cfg) -> bool:
    from omegaconf import OmegaConf

    return str(OmegaConf.select(cfg, "reward.reward_manager.name", default="")) == "rlvr"


def plan(cfg, nodes: list[dict]) -> Placement | None:
    """The pool's placement on a cluster whose alive nodes have these total resources; None when the
    recipe does not use the pool or places it on generic CPUs itself (resource_name='')."""
    from omegaconf import OmegaConf

    if not uses_pool(cfg):
        return None
    pool = _pool_settings(cfg)
    resource = str(pool.get("resource_name", DEFAULT_RESOURCE))
    if not resource:
        return None
    per_actor = float(pool.get("resource_per_actor", 1.0))
    wanted = pool.get("num_actors")
    carrying = [n for n in nodes if float(n.get(resource, 0) or 0) > 0]
    slots = sum(float(n.get(resource, 0) or 0) for n in carrying)
    if slots >= per_actor > 0:
        fits = int(math.floor(slots / per_actor + 1e-9))
        if wanted is not None and int(wanted) > fits:
            raise UserError(
                f"{POOL_KEY}.num_actors={wanted} needs {int(wanted) * per_actor:g} of resource {resource!r}, "
                f"and this cluster has {slots:g} on {len(carrying)} node(s): lower num_actors to {fits} "
                "(or leave it unset: rlvr sizes the pool to the cluster) or add verifier nodes"
            )
        return Placement(
            num_actors=int(wanted) if wanted is not None else fits,
            resource_name=resource,
            cpus_per_actor=float(pool.get("cpus_per_actor", 0.0)),
            slots=slots,
            verifier_nodes=len(carrying),
        )
    policy = str(OmegaConf.select(cfg, "rlvr.verifier_placement", default="require"))
    if policy != "any_cpu":
        raise UserError(
            f"no node of this Ray cluster carries the verifier pool's resource {resource!r}: add CPU verifier "
            f"nodes started with `ray start --num-cpus 0 --resources '{{\"{resource}\": N}}'` (cluster/k8s and "
            "cluster/ray-cluster.yaml do), or pass rlvr.verifier_placement=any_cpu to run the pool on the "
            "cluster's general CPU nodes"
        )
    return Placement(
        num_actors=int(wanted) if wanted is not None else FALLBACK_ACTORS,
        resource_name="",
        cpus_per_actor=1.0,
        slots=0.0,
        verifier_nodes=0,
        fallback=True,
    )


def apply(cfg, placement: Placement | None) -> None:
    """Write the placement into the recipe's pool settings (what the reward manager builds the pool from)."""
    from omegaconf import OmegaConf, open_dict

    if placement is None:
        return
    with open_dict(cfg):
        if OmegaConf.select(cfg, POOL_KEY, default=None) is None:
            OmegaConf.update(cfg, POOL_KEY, {}, force_add=True)
        pool = OmegaConf.select(cfg, POOL_KEY)
        pool.num_actors = placement.num_actors
        pool.resource_name = placement.resource_name
        pool.cpus_per_actor = placement.cpus_per_actor


def warn_or_log(placement: Placement | None, log=print) -> None:
    if placement is None:
        return
    if placement.fallback:
        print(
            "rlvr: WARNING: no node of this cluster carries the verifier pool's resource; the pool runs on "
            "its general CPU nodes (rlvr.verifier_placement=any_cpu), beside verl's workers, and the code "
            "under test with them",
            file=sys.stderr,
            flush=True,
        )
    log(placement.describe())


# ---- the cluster's nodes ---------------------------------------------------------------------------


def nodes_from_ray() -> list[dict]:
    """Total resources of each alive node of the Ray this process is connected to."""
    import ray

    return [dict(n.get("Resources") or {}) for n in ray.nodes() if n.get("Alive")]


def nodes_from_dashboard(address: str, headers: dict[str, str], wait_s: float = NODES_WAIT_S) -> list[dict]:
    """Total resources of each alive node, through the dashboard's state API (`ray list nodes` reads the
    same endpoint); waits up to `wait_s` for a head that has just started and lists no node yet."""
    deadline = time.monotonic() + wait_s
    url = f"{address}/api/v0/nodes?detail=1&limit=10000"
    while True:
        request = urllib.request.Request(url, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                body = json.loads(response.read().decode("utf-8", "replace"))
            rows = body["data"]["result"]["result"]
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as e:
            raise UserError(
                f"cannot list the nodes of the Ray cluster at {address} ({e}); the verifier pool's placement "
                "is checked before submitting"
            ) from None
        alive = [dict(r.get("resources_total") or {}) for r in rows if r.get("state") == "ALIVE"]
        if alive or time.monotonic() > deadline:
            return alive
        time.sleep(1.0)


def on_joined_cluster(cfg, *, joined: bool, log=print) -> Placement | None:
    """At job start, after ray.init: check and size the pool on the cluster the driver joined. A private
    local Ray (joined=False) declares the resource itself; nothing to decide there."""
    if not joined:
        return None
    placement = plan(cfg, nodes_from_ray())
    apply(cfg, placement)
    warn_or_log(placement, log=log)
    return placement
