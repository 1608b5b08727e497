"""Negative control for tests/launch/test_cluster_loopback.py: FSDP2 ranks that never reduce their gradients.

Test-only code, never imported by rlvr. A run loads it into verl's worker processes through verl's own hook
for user code, `actor_rollout_ref.model.external_lib=skip_gradient_reduction` (verl imports the module
wherever it builds the model config), with this folder on the workers' PYTHONPATH and
RLVR_SKIP_GRAD_REDUCTION_MARKS naming a directory.

On import it replaces FSDP2's reduce-scatter of gradients (`DefaultReduceScatter`, the communication FSDP2
uses unless told otherwise) with a copy of this rank's own slice of its own, unreduced gradient: each rank
then steps its shard of the parameters with the gradient of its part of the batch alone, which is what a
cross-node gradient reduction that never happened computes. Everything else stays real: the parameter
all-gathers, the all-reduce of the gradient norm and of the metrics, the weight sync to the rollout.

The first time a process takes that path it writes `rank<R>-pid<P>.json` (rank, world size, Ray node)
into the marks directory, so the test can tell that the control ran on both ranks without reduction.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch.distributed as dist
from torch.distributed.fsdp._fully_shard import _fsdp_collectives

MARKS_ENV = "RLVR_SKIP_GRAD_REDUCTION_MARKS"

_marks = os.environ.get(MARKS_ENV)
if not _marks:
    raise RuntimeError(
        f"skip_gradient_reduction is a test's negative control: set {MARKS_ENV} to a directory for its marks"
    )
_marked = False


def _mark(rank: int, world_size: int) -> None:
    global _marked
    if _marked:
        return
    try:
        import ray

        node_id = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except Exception:  # outside a Ray worker: the mark says so
        node_id = None
    mark = {"rank": rank, "world_size": world_size, "pid": os.getpid(), "node_id": node_id}
    Path(_marks, f"rank{rank}-pid{os.getpid()}.json").write_text(json.dumps(mark))
    _marked = True


def _own_slice_only(self, output_tensor, input_tensor, group, op, async_op=False):
    """FSDP2's reduce-scatter without the reduction: `input_tensor` holds this rank's unsharded gradients,
    laid out as one slice per rank (FSDP2's copy-in); keep this rank's slice as it is."""
    world_size = dist.get_world_size(group)
    rank = dist.get_rank(group)
    output_tensor.copy_(input_tensor.view(world_size, -1)[rank])
    _mark(rank, world_size)
    return None


_fsdp_collectives.DefaultReduceScatter.__call__ = _own_slice_only
