"""The cpu platform's load balancer: verl's routing policy in an actor process without verl or torch.

verl instantiates it from the YAML named by `rollout.router_config_path` (its public router plugin) and
calls it through the `RequestLoadBalancer` protocol; the policy must be verl's (a request id keeps its
server, a new one goes to the least loaded), and the module must stay free of verl and torch, or the
actor is the ~0.5 GiB process it replaces.
"""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
import yaml

from rlvr_cluster.slim_router import SlimLoadBalancer


def test_a_request_id_keeps_its_server_and_new_ones_go_to_the_least_loaded():
    balancer = SlimLoadBalancer({"a": "handle-a", "b": "handle-b"})
    first, handle = balancer.acquire_server("r1")
    assert handle == f"handle-{first}"
    other = "b" if first == "a" else "a"
    # r2 must go to the idle server, r1 again to its own even though it is now the busier one
    assert balancer.acquire_server("r2")[0] == other
    assert balancer.acquire_server("r1")[0] == first
    assert balancer.get_status()["servers"] == {first: 2, other: 1}
    balancer.release_server(first)
    balancer.release_server(first)
    balancer.release_server(first)  # never below zero
    assert balancer.get_inflight_count(first) == 0
    assert balancer.acquire_server("r3")[0] == first  # now the least loaded
    assert balancer.get_total_inflight() == 2


def test_a_removed_server_loses_its_sessions_and_the_session_cache_is_bounded():
    balancer = SlimLoadBalancer({"a": 1, "b": 2}, {"max_sticky_sessions": 2})
    server, _ = balancer.acquire_server("r1")
    balancer.remove_servers([server])
    assert balancer.get_all_servers() == ["b" if server == "a" else "a"]
    assert balancer.acquire_server("r1")[0] != server
    balancer.add_servers({server: 3})
    balancer.acquire_server("r2")
    balancer.acquire_server("r3")
    assert balancer.clear_sticky_cache()["cleared_entries"] == 2  # r1 was evicted first
    with pytest.raises(RuntimeError, match="No available servers"):
        SlimLoadBalancer({}).acquire_server("r")


def test_it_answers_every_call_of_verls_load_balancer_protocol_with_the_same_parameters():
    from verl.workers.rollout.router import GlobalRequestLoadBalancer

    public = {n for n, m in vars(GlobalRequestLoadBalancer).items() if callable(m) and not n.startswith("_")}
    assert public <= set(dir(SlimLoadBalancer))
    for name in public:
        theirs = inspect.signature(getattr(GlobalRequestLoadBalancer, name)).parameters
        ours = inspect.signature(getattr(SlimLoadBalancer, name)).parameters
        assert [p for p in theirs if p != "self"] == [p for p in ours if p != "self" and p != "_fields"], name


def test_the_module_imports_neither_verl_nor_torch():
    code = (
        "import sys, rlvr_cluster.slim_router\n"
        "heavy = sorted(m for m in ('verl', 'torch', 'transformers') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_the_cpu_recipe_names_the_packaged_router_and_a_missing_file_is_refused():
    from verl.utils.import_utils import load_class_from_fqn, resolve_config_path

    from rlvr_cluster import slim_router
    from rlvr_launch.cli import UserError
    from rlvr_launch.recipes import compose

    path = compose.compose([]).actor_rollout_ref.rollout.router_config_path
    assert resolve_config_path(path) == path  # absolute: verl's TaskRunner reads it as is
    with open(path) as f:
        assert load_class_from_fqn(yaml.safe_load(f)["router_class"], "router") is slim_router.IN_PROCESS
    actor = compose.compose(["actor_rollout_ref.rollout.router_config_path=rlvr:slim_router.yaml"])
    with open(actor.actor_rollout_ref.rollout.router_config_path) as f:
        assert load_class_from_fqn(yaml.safe_load(f)["router_class"], "router") is SlimLoadBalancer
    with pytest.raises(UserError, match=r"in_process_router.yaml .*rlvr:slim_router.yaml"):
        compose.compose(
            ["actor_rollout_ref.rollout.agent.agent_loop_manager_class=null", "reward.num_workers=1"]
        )
    with pytest.raises(UserError, match="rlvr_cluster has no nope.yaml"):
        compose.compose(["actor_rollout_ref.rollout.router_config_path=rlvr:nope.yaml"])
    assert (
        compose.compose(
            ["actor_rollout_ref.rollout.router_config_path=null"]
        ).actor_rollout_ref.rollout.router_config_path
        is None
    )


def test_verls_router_plugin_builds_the_in_process_balancer_and_its_client_calls_work_without_ray():
    """verl's own factory (rollout.router_config_path) gets the in-process balancer, no actor; verl's LLM
    client's calls (awaited acquire and field declarations, fire-and-forget release) answer at once."""
    import asyncio
    import pickle
    from pathlib import Path

    import ray
    from verl.workers.rollout.router import get_router_handle

    from rlvr_cluster import slim_router

    path = Path(slim_router.__file__).with_name("in_process_router.yaml")
    lb = get_router_handle(servers={"a": "handle-a", "b": "handle-b"}, router_config_path=str(path))
    assert isinstance(lb, slim_router.InProcessLoadBalancer) and not ray.is_initialized()

    async def client():
        acquire, release = await asyncio.gather(
            lb.require_acquire_fields.remote(), lb.require_release_fields.remote()
        )
        assert acquire == release == []
        first, handle = await lb.acquire_server.remote(request_id="r1")
        assert handle == f"handle-{first}"
        second, _ = await lb.acquire_server.remote(request_id="r2")
        assert second != first  # the least loaded
        assert (await lb.acquire_server.remote(request_id="r1"))[0] == first  # sticky
        lb.release_server.remote(server_id=first)  # never awaited, as verl's client does
        return first, second

    first, second = asyncio.run(client())
    assert lb.policy.get_status()["servers"] == {first: 1, second: 1}
    with pytest.raises(TypeError, match="rlvr:slim_router.yaml"):
        pickle.dumps(lb)
