"""The tests' loopback Ray head (tests/launch/loopback_ray.py) survives a port taken between its pick and
Ray's bind: the suite runs on two xdist workers beside other Rays, and a port picked free and released can
be bound by someone else before `ray start` binds it (issue 33). Real `ray start`, a real listening socket
on the port, no mock of Ray."""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

import loopback_ray
import pytest


@pytest.mark.slow  # Ray's GCS gives up on a taken port after ~45 s, then a second head starts (~10 s)
def test_a_port_taken_before_ray_binds_it_is_retried_with_fresh_ports(monkeypatch):
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    picks = []
    real_free_ports = loopback_ray.free_ports

    def first_pick_hands_out_the_taken_port(n):
        ports = real_free_ports(n)
        if n == 30:  # the head's nine ports (GCS first); the worker range is picked separately
            picks.append(ports)
            if len(picks) == 1:
                return [taken, *ports[1:]]
        return ports

    monkeypatch.setattr(loopback_ray, "free_ports", first_pick_hands_out_the_taken_port)
    root = Path(tempfile.mkdtemp(prefix="rlvr-clash-", dir="/tmp"))
    head = None
    try:
        head = loopback_ray.start_head(root, num_cpus=1, num_gpus=0)
        assert len(picks) == 2, picks  # one clash, one fresh start
        assert head.gcs_address != f"127.0.0.1:{taken}"
        assert loopback_ray._jobs_api_ready(head)
        # the failed attempt's log is kept and names the clash
        assert loopback_ray.PORT_CLASH.search((root / "ray-start.log.1").read_text(errors="replace")) or any(
            loopback_ray.PORT_CLASH.search(p.read_text(errors="replace"))
            for p in (root / "t.1").glob("session_*/logs/*")
            if p.is_file()
        )
    finally:
        squatter.close()
        if head is not None:
            head.stop()
        loopback_ray.remove_tree(root)


def test_a_start_that_fails_for_another_reason_is_not_retried(tmp_path):
    calls = []

    def start_once(attempt):
        calls.append(attempt)
        raise RuntimeError("ray start exited 1: bad flag")

    with pytest.raises(RuntimeError, match="bad flag"):
        loopback_ray._with_fresh_ports(start_once, "a head")
    assert calls == [1]


def test_every_start_clashing_gives_up_after_the_last_attempt_naming_the_clash():
    calls = []

    def start_once(attempt):
        calls.append(attempt)
        raise loopback_ray.PortClash(f"attempt {attempt}: Address already in use")

    with pytest.raises(RuntimeError, match=r"every one of 3 starts clashed on a port: attempt 3"):
        loopback_ray._with_fresh_ports(start_once, "a head")
    assert calls == [1, 2, 3]
