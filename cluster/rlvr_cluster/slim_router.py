"""A load balancer for verl's rollout servers whose Ray actor imports neither verl nor torch.

    actor_rollout_ref.rollout.router_config_path: rlvr:slim_router.yaml   (recipes/platform/cpu.yaml)

verl routes every generate request through one load-balancer actor (`GlobalRequestLoadBalancer`, in
verl/workers/rollout/router.py): sticky sessions (a request id keeps its server) and least in-flight
requests. Its class lives in a verl module, so its actor process imports verl, torch and transformers
(~0.5 GiB resident) to count in-flight requests. `SlimLoadBalancer` is the same policy in a module that
imports only the standard library, plugged in through verl's public router plugin: a YAML file named by
`rollout.router_config_path` whose `router_class` verl instantiates as a Ray actor with `(servers,
yaml_config)`. rlvr's composition turns `rlvr:<file>` into the path of that file in this package
(rlvr_launch/recipes/recipe_checks.py). The methods are verl's `RequestLoadBalancer` protocol.

`InProcessLoadBalancer` (in_process_router.yaml, the cpu platform's choice) is the same policy without an
actor at all, in the process whose in-process agent loop sends the requests; this module then also
imports ray (for the plugin's class check, verl_private.py item 13). Its handles to rlvr's `hf` servers
coalesce: the generate requests the agent loop makes in one turn of its event loop reach a server as one
Ray call (`CoalescedGenerate`, item 13b).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Any

DEFAULT_MAX_STICKY = 10000  # verl's DEFAULT_ROUTING_CACHE_SIZE


class SlimLoadBalancer:
    """Sticky-session + least-in-flight routing over `{server_id: actor_handle}` (verl's default policy)."""

    def __init__(self, servers: dict[str, Any], config: dict | None = None):
        config = config or {}
        self._servers: dict[str, Any] = dict(servers)
        self._inflight: dict[str, int] = {sid: 0 for sid in servers}
        self._sticky: OrderedDict[str, str] = OrderedDict()
        self._max_sticky = int(config.get("max_sticky_sessions", DEFAULT_MAX_STICKY))

    def acquire_server(self, request_id: str, **_fields: Any) -> tuple[str, Any]:
        server_id = self._sticky.get(request_id)
        if server_id is not None and server_id in self._inflight:
            self._sticky.move_to_end(request_id)
        else:
            if not self._inflight:
                raise RuntimeError("No available servers in load balancer")
            least = min(self._inflight.values())
            server_id = random.choice([sid for sid, count in self._inflight.items() if count == least])
            self._sticky[request_id] = server_id
            while len(self._sticky) > self._max_sticky:
                self._sticky.popitem(last=False)
        self._inflight[server_id] += 1
        return server_id, self._servers[server_id]

    def release_server(self, server_id: str, request_id: str | None = None) -> None:
        if self._inflight.get(server_id, 0) > 0:
            self._inflight[server_id] -= 1

    def require_acquire_fields(self) -> list[str]:
        return []

    def require_release_fields(self) -> list[str]:
        return []

    def add_servers(self, servers: dict[str, Any]) -> None:
        for sid, handle in servers.items():
            self._inflight[sid] = 0
            self._servers[sid] = handle

    def remove_servers(self, server_ids: list[str]) -> None:
        for sid in server_ids:
            self._inflight.pop(sid, None)
            self._servers.pop(sid, None)

    def get_inflight_count(self, server_id: str) -> int:
        return self._inflight.get(server_id, 0)

    def get_all_servers(self) -> list[str]:
        return list(self._inflight)

    def clear_sticky_cache(self) -> dict:
        cleared = len(self._sticky)
        self._sticky.clear()
        return {"cleared_entries": cleared, "server_loads": dict(self._inflight)}

    def get_status(self) -> dict:
        return {
            "servers": dict(self._inflight),
            "total_inflight": sum(self._inflight.values()),
            "active_servers": len(self._inflight),
            "registered_handles": list(self._servers),
        }

    def get_total_inflight(self) -> int:
        return sum(self._inflight.values())


# --- the same policy in the trainer's process (cpu platform: in_process_router.yaml) -----------------


class _Resolved:
    """What an in-process method's `.remote()` returns: the result, already computed, to await (verl's
    client awaits acquire_server and its field declarations, and never awaits release_server)."""

    def __init__(self, value: Any):
        self.value = value

    def __await__(self):
        return self.value
        yield  # noqa: B901 - a generator: `await` gets the value at once


class _LocalMethod:
    def __init__(self, router: InProcessLoadBalancer, name: str):
        self._router, self._name = router, name

    def remote(self, *args: Any, **kwargs: Any) -> _Resolved:
        with self._router.lock:
            return _Resolved(getattr(self._router.policy, self._name)(*args, **kwargs))


class CoalescedGenerate:
    """`server.generate.remote(**request)` as verl's LLM client calls it, for a server that also answers
    `generate_many` (rlvr's `hf` server): the requests made in one turn of the caller's event loop go to
    the server as one `generate_many` Ray call. verl's agent loop sends one request per sample (256 on a
    demo step); one Ray call each cost ~0.28 s a step on this 2-core machine against ~0.01 s for the same
    256 in one call (an echo actor, load 1.4). The server batches what it receives for decoding anyway.
    Each caller awaits its own request's outcome, a failure included."""

    def __init__(self, handle: Any):
        self._handle = handle
        self._pending: dict[Any, list[tuple[dict, Any]]] = {}  # per event loop
        # asyncio keeps only a weak reference to a task: a delivery nobody held could be collected while
        # it waits, leaving its callers waiting forever
        self._deliveries: set = set()
        self.calls = 0  # generate_many calls sent
        self.requests = 0  # requests they carried

    def remote(self, **request: Any):
        import asyncio

        loop = asyncio.get_running_loop()
        future = loop.create_future()
        pending = self._pending.setdefault(loop, [])
        if not pending:
            loop.call_soon(self._flush, loop)
        pending.append((request, future))
        return future

    def _flush(self, loop) -> None:
        batch = self._pending.pop(loop, [])
        if not batch:
            return
        self.calls += 1
        self.requests += len(batch)
        futures = [future for _, future in batch]
        try:
            ref = self._handle.generate_many.remote([request for request, _ in batch])
        except Exception as e:  # e.g. a dead actor: every caller learns why, none hangs
            _fail(futures, e)
            return
        task = loop.create_task(self._deliver(ref, futures))
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    @staticmethod
    async def _deliver(ref: Any, futures: list) -> None:
        try:
            results = await ref
        except Exception as e:
            _fail(futures, e)
            return
        for future, result in zip(futures, results, strict=True):
            if future.done():  # its caller gave up (cancelled)
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)


def _fail(futures: list, error: BaseException) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(error)


class CoalescingServer:
    """A server's actor handle whose `generate` is coalesced (CoalescedGenerate); every other attribute is
    the handle's own."""

    def __init__(self, handle: Any):
        self.handle = handle
        self.generate = CoalescedGenerate(handle)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)


def coalescing(handle: Any) -> Any:
    """The handle as CoalescingServer when its server answers `generate_many`, else the handle itself
    (verl's vLLM and SGLang servers)."""
    return CoalescingServer(handle) if hasattr(handle, "generate_many") else handle


class CoalescingLoadBalancer(SlimLoadBalancer):
    """The policy whose `hf` server handles coalesce their generate requests (`coalescing`), the servers it
    starts with and those added later alike."""

    def __init__(self, servers: dict[str, Any], config: dict | None = None):
        super().__init__({}, config)
        self.add_servers(servers)

    def add_servers(self, servers: dict[str, Any]) -> None:
        super().add_servers({sid: coalescing(handle) for sid, handle in servers.items()})


class InProcessLoadBalancer:
    """`SlimLoadBalancer` held in the process that builds verl's LLM server manager, called like its Ray
    actor handle (`lb.acquire_server.remote(...)`): each generate request's acquire and release are two
    method calls instead of two Ray round trips to a load-balancer actor (256 requests a demo step: ~0.45 s
    through the actor on 2 loaded cores, ~0.5 ms here), and one Ray worker process (~0.14 GiB) fewer.
    Only for verl's agent loop in the same process (rlvr_cluster/in_process_agent_loop.py): the handle
    cannot be sent to another process."""

    def __init__(self, servers: dict[str, Any], config: dict | None = None):
        import threading

        self.policy = CoalescingLoadBalancer(servers, config)
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> _LocalMethod:
        if name.startswith("_") or not callable(getattr(SlimLoadBalancer, name, None)):
            raise AttributeError(name)
        return _LocalMethod(self, name)

    def __reduce__(self):
        raise TypeError(
            "the in-process load balancer (rollout.router_config_path: rlvr:in_process_router.yaml) serves "
            "verl's agent loop in the trainer's process only; with agent-loop workers in Ray actors use "
            "rlvr:slim_router.yaml"
        )


def _in_process_router_class():
    """verl's router plugin starts `router_class` as a Ray actor unless it already is a Ray actor class, whose
    `.remote(servers, yaml_config)` it then calls (verl_private.py, item 13): an object of that type whose
    `remote` builds the in-process load balancer instead."""
    import ray

    class InProcessRouterClass(ray.actor.ActorClass):
        def __init__(self):  # not ActorClass's: this is no decorated class
            pass

        def remote(self, servers: dict[str, Any], config: dict | None = None) -> InProcessLoadBalancer:
            return InProcessLoadBalancer(servers, config)

    return InProcessRouterClass()


IN_PROCESS = _in_process_router_class()
