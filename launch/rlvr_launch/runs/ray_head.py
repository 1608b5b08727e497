"""The private single-node Ray head that `rlvr train`, `eval` and `sample` start outside a Ray job.

`ray.init(address="local")` starts, besides the GCS, the raylet and the dashboard's API server, two
Python processes a one-machine run never uses:
- the autoscaler monitor (~80 MiB RSS): there is nothing to autoscale on one machine;
- the log monitor (~80 MiB): it only forwards workers' prints to the driver, which a run without
  `--verbose` turns off anyway (`log_to_driver=False`; the worker logs stay in the temp dir, where
  `train.actor_failures` reads a failure's root cause).
ray.init has no switch for either; Ray's own `ray start` has both (`--no-monitor`, hidden, and
`--include-log-monitor`), through `RayParams`. This module builds the head node the way ray.init's
"start a new cluster" branch does (ray/_private/worker.py: token auth, usage stats off, RayParams,
`Node(head=True, shutdown_at_exit=False, spawn_reaper=True, ray_init_cluster=True)`) with those two
set, then connects the driver to it with the public `ray.init(address=...)`. Its processes are the
driver's children, as with ray.init, and die with it (the kernel's parent-death signal, or Ray's reaper
where there is none).

It is the one place rlvr touches Ray's private node API; tests/launch/test_private_ray.py fails when a
Ray upgrade changes what it relies on (the names below, the parameters, the processes it leaves out).
What it does not do: join a cluster (inside a Ray job the job's cluster is joined with plain ray.init),
or start a multi-node head (`ray start --head` is the way there).
"""

from __future__ import annotations

import atexit
import logging
from typing import Any

# The processes this head leaves out, by the script each runs (`ps` shows them as python ... <script>).
AUTOSCALER_MONITOR = "autoscaler/_private/monitor.py"
LOG_MONITOR = "_private/log_monitor.py"

_head = None  # the ray._private.node.Node started here, until stop()


def start(
    *,
    temp_dir: str,
    num_cpus: int | None,
    num_gpus: int | None,
    resources: dict[str, float],
    system_config: dict[str, Any],
    log_monitor: bool,
    runtime_env: dict,
    logging_level: int = logging.INFO,
) -> str:
    """Start the head (without the autoscaler monitor; without the log monitor unless `log_monitor`)
    and connect this driver to it. Returns the head's GCS address."""
    global _head
    import ray
    import ray._private.node
    import ray._private.parameter
    from ray._common.usage import usage_lib
    from ray._private.authentication.authentication_token_setup import (
        enable_token_auth_by_default,
        ensure_token_if_auth_enabled,
    )

    if _head is not None:
        raise RuntimeError("rlvr's private Ray head is already running in this process; stop() it first")
    # What ray.init does before it starts a new cluster: token auth on by default for a local cluster
    # (a token is created if none exists), and no usage stats. Ray's logger gets the driver's level first,
    # as ray.init sets it before this step: else a quiet run prints Ray's "token authentication is
    # enabled" warning.
    logging.getLogger("ray").setLevel(logging_level)
    enable_token_auth_by_default()
    ensure_token_if_auth_enabled(system_config, create_token_if_missing=True)
    usage_lib.set_usage_stats_enabled_via_env_var(False)
    params = ray._private.parameter.RayParams(
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        resources=resources,
        include_dashboard=False,
        temp_dir=temp_dir,
        _system_config=system_config,
        no_monitor=True,
        include_log_monitor=log_monitor,
    )
    _head = ray._private.node.Node(
        ray_params=params, head=True, shutdown_at_exit=False, spawn_reaper=True, ray_init_cluster=True
    )
    try:
        ray.init(
            address=_head.address,
            _temp_dir=temp_dir,
            runtime_env=runtime_env,
            log_to_driver=log_monitor,
            logging_level=logging_level,
        )
    except BaseException:
        stop()
        raise
    return _head.address


def running() -> bool:
    """Whether this process started a head that is not stopped yet."""
    return _head is not None


def stop() -> None:
    """Disconnect the driver and stop every process of the head this module started (a no-op if none)."""
    global _head
    import ray

    if _head is None:
        return
    head, _head = _head, None
    ray.shutdown()
    # What ray.shutdown does for a cluster ray.init started itself; waiting, so that the temp dir can be
    # removed once this returns.
    head.destroy_external_storage()
    head.kill_all_processes(check_alive=False, allow_graceful=True, wait=True)


# A driver that exits without stop() still stops its head gracefully (before Ray's own atexit shutdown,
# registered earlier at `import ray`: atexit runs last-registered first). A no-op when nothing runs.
atexit.register(stop)
