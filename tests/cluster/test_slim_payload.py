"""The actor phases' payload (rlvr_cluster/slim_payload.py): the FSDP worker gets every tensor and
setting of the batch and none of the per-sample columns only verl's trainer reads; the trainer's batch
keeps them all. Checked through verl's real RayWorkerGroup (colocated worker class, spawn) in a
private Ray, and pinned against the verl source the worker runs."""

from __future__ import annotations

import importlib.util
import inspect
import io
import tokenize
from pathlib import Path

import numpy as np
import pytest
import torch

from rlvr_cluster.slim_payload import (
    KEEP_PER_SAMPLE_COLUMNS,
    SLIMMED_METHODS,
    per_sample_columns,
    slim,
    slim_payload_worker_group,
)

RAY_EXTRA_PYTHONPATH = Path(__file__).parent
RAY_NUM_CPUS = 2

# What the CPU demo's batch carries per sample into each actor phase besides tensors (verl's dataset
# columns, the reward's extra columns, the agent loop's turn count), all read by the trainer only.
DEMO_TRAINER_ONLY_COLUMNS = (
    "__num_turns__",
    "acc",
    "data_source",
    "extra_info",
    "reward_model",
    "rlvr_latency_ms",
    "rlvr_no_answer_region",
    "rlvr_status",
    "rlvr_verifier",
    "uid",
)
# The verl modules whose code runs inside the FSDP worker for an actor phase.
WORKER_SIDE_MODULES = (
    "verl.workers.engine_workers",
    "verl.workers.engine.base",
    "verl.workers.engine.utils",
    "verl.workers.engine.fsdp.transformer_impl",
    "verl.workers.utils.losses",
    "verl.workers.utils.padding",
    "verl.trainer.ppo.core_algos",
    "verl.utils.seqlen_balancing",
    "verl.utils.torch_functional",
    "verl.utils.model",
    "verl.utils.tensordict_utils",
)


def _demo_batch(n: int = 16):
    """A DataProto shaped like the demo's at the update: tensors, per-sample columns, per-batch meta."""
    from verl.protocol import DataProto
    from verl.utils import tensordict_utils as tu

    per_sample = {
        key: np.array([f"{key}-{i}" for i in range(n)], dtype=object) for key in DEMO_TRAINER_ONLY_COLUMNS
    }
    per_sample["multi_modal_inputs"] = np.array([{} for _ in range(n)], dtype=object)
    batch = DataProto.from_dict(
        tensors={
            "input_ids": torch.arange(n * 6).view(n, 6),
            "attention_mask": torch.ones(n, 6, dtype=torch.long),
        },
        non_tensors=per_sample,
        meta_info={"temperature": 1.0},
    )
    td = batch.to_tensordict()
    tu.assign_non_tensor(td, compute_loss=True)
    return td


def test_the_worker_gets_tensors_and_settings_but_no_trainer_only_column():
    td = _demo_batch()
    out = slim(td, KEEP_PER_SAMPLE_COLUMNS)
    assert set(out.keys()) == {
        "input_ids",
        "attention_mask",
        "multi_modal_inputs",
        "temperature",
        "compute_loss",
    }
    assert torch.equal(out["input_ids"], td["input_ids"])
    assert out.batch_size == td.batch_size
    # the trainer's own batch keeps every column
    assert set(DEMO_TRAINER_ONLY_COLUMNS) <= set(per_sample_columns(td))


def test_anything_but_a_tensordict_passes_unchanged():
    marker = object()
    assert slim(marker, KEEP_PER_SAMPLE_COLUMNS) is marker


def test_the_prefix_grouper_keeps_the_uid_it_groups_by():
    from omegaconf import OmegaConf

    plain = slim_payload_worker_group(OmegaConf.create({"actor_rollout_ref": {"actor": {}}}))
    grouped = slim_payload_worker_group(
        OmegaConf.create({"actor_rollout_ref": {"actor": {"use_prefix_grouper": True}}})
    )
    assert "uid" not in plain.keep_columns and "uid" in grouped.keep_columns
    assert "uid" in set(slim(_demo_batch(), grouped.keep_columns).keys())


def _string_literals(module_name: str) -> set[str]:
    # read, not imported: some of verl's modules import optional packages at the top
    source = Path(importlib.util.find_spec(module_name).origin).read_text()
    found = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if (
            token.type == tokenize.STRING
            and token.string[:1] in "'\""
            and not token.string.startswith(('"""', "'''"))
        ):
            found.add(token.string[1:-1])
    return found


def test_verls_worker_side_code_names_none_of_the_columns_left_behind():
    """A verl release whose worker reads one of them (`data["uid"]`, `tu.get(data, "acc")`) fails here
    before a run would meet a missing column."""
    literals = {module: _string_literals(module) for module in WORKER_SIDE_MODULES}
    for module, names in literals.items():
        assert not names & set(DEMO_TRAINER_ONLY_COLUMNS), (
            module,
            sorted(names & set(DEMO_TRAINER_ONLY_COLUMNS)),
        )
    # the scan sees a read where there is one: the engine reads multi_modal_inputs, which is kept
    assert "multi_modal_inputs" in literals["verl.workers.engine.fsdp.transformer_impl"]
    assert "uid" in _string_literals("verl.trainer.ppo.prefix_grouper_utils")


def test_verls_trainer_sends_each_actor_phase_its_batch_as_the_first_argument():
    from verl.trainer.ppo import ray_trainer

    source = inspect.getsource(ray_trainer.RayPPOTrainer)
    for call in (
        "self.actor_rollout_wg.compute_log_prob(batch_td)",
        "self.ref_policy_wg.compute_ref_log_prob(batch_td)",
        "self.actor_rollout_wg.update_actor(batch_td)",
    ):
        assert call in source, call
    assert "self.ray_worker_group_cls(" in source


@pytest.mark.slow
def test_a_spawned_colocated_group_sends_the_actor_phases_without_trainer_only_columns(private_ray):
    """verl's RayWorkerGroup builds the colocated group, spawns the role's group and rebinds its prefixed
    methods; what reaches the worker is recorded there."""
    from payload_recorder import PayloadRecorder
    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, create_colocated_worker_cls

    class_dict = {"actor_rollout_ref": RayClassWithInitArgs(cls=private_ray.remote(PayloadRecorder))}
    group_class = slim_payload_worker_group(None)
    colocated = group_class(
        resource_pool=RayResourcePool([1], use_gpu=False, max_colocate_count=1),
        ray_cls_with_init=create_colocated_worker_cls(class_dict),
        device_name="cpu",
    )
    role = colocated.spawn(prefix_set=class_dict.keys())["actor_rollout_ref"]
    td = _demo_batch()
    expected = ["attention_mask", "compute_loss", "input_ids", "multi_modal_inputs", "temperature"]
    for name in SLIMMED_METHODS:
        assert getattr(role, name)(td) == [expected], name
    assert role.update_actor(data=td) == [expected]
    # a method that is not an actor phase sends what it is given
    assert set(role.save_checkpoint(td)[0]) >= set(DEMO_TRAINER_ONLY_COLUMNS)
    assert set(DEMO_TRAINER_ONLY_COLUMNS) <= set(td.keys())


@pytest.mark.slow  # over 1 s (composes the demo): kept out of the fast set
def test_the_in_driver_task_runner_hands_verls_legacy_trainer_the_slim_group():
    """rlvr.task_runner=driver (the cpu platform): verl's TaskRunner body, its worker class unchanged,
    the slimmed group class; the v1 trainer's TaskRunner (TransferQueue batches) is verl's as it is."""
    from verl.single_controller.ray import RayWorkerGroup
    from verl.trainer.main_ppo import TaskRunnerV1
    from verl.trainer.main_ppo_v0 import TaskRunner
    from verl.workers.engine_workers import ActorRolloutRefWorker

    from rlvr_cluster import verl_private
    from rlvr_cluster.in_driver_task_runner import InDriverTaskRunner
    from rlvr_launch.recipes import compose

    cfg = compose.compose([])
    assert cfg.rlvr.task_runner == "driver"
    runner = InDriverTaskRunner(TaskRunner).body()
    worker_class, group_class = runner.add_actor_rollout_worker(cfg)
    assert worker_class is ActorRolloutRefWorker
    assert issubclass(group_class, RayWorkerGroup) and group_class is not RayWorkerGroup
    assert group_class.keep_columns == KEEP_PER_SAMPLE_COLUMNS
    assert InDriverTaskRunner(TaskRunnerV1).body is verl_private.task_runner_body(TaskRunnerV1)
