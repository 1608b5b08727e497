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
