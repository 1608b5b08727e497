"""Test-only verifiers for the pool tests, registered under `pool_test_*` names.

Ray actors import this module through PoolConfig.imports (the tests put this folder on PYTHONPATH before
they start Ray), so the actors' own registries know these names.

`pool_test_echo`: the response is "<int>" or a command; ok (score 1) when the int equals the ground truth,
wrong (score 0) otherwise. Commands: "sleep:<s>:<int>" sleeps s seconds first; "hang" sleeps for an hour;
"crash" ends the actor process at once (a segfault-like death); "raise" raises; "pid" answers with the
actor's pid in `detail`; "env:NAME" answers with the actor's value of NAME.
Its `quick(item)` (for rlvr_verifiers.quick_worker's tests): "spin" burns CPU forever; "pid" answers the
process's pid; "none" answers None; anything else is `verify`.

A crash that certainly has company, through marker files in DIR: "crash_shared:DIR" the first time (no
DIR/crashed) announces itself (DIR/<pid>.pending), waits until another call of ours is in flight on the
same actor process (DIR/<pid>.<thread>.hanging), then marks DIR/crashed and ends the actor; later (retried
alone) it ends the actor at once. "share:DIR:<int>" is an innocent "<int>" that, on an actor where such a
crash waits, marks itself hanging and never returns (it dies with the actor); while such a crash waits on
another actor it waits too (until DIR/crashed), so the only calls that end are on the crash's actor and the
pool's next call must go there; with no crash waiting it answers at once.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from rlvr_verifiers import registry
from rlvr_verifiers.base import OK, PARSE_ERROR, WRONG, Item, Verdict


@registry.register("pool_test_echo")
class EchoVerifier(registry.Verifier):
    name = "pool_test_echo"

    def quick(self, item: Item) -> Verdict | None:
        if item.response == "spin":
            while True:
                pass
        if item.response == "none":
            return None
        return self.verify(item)

    def verify(self, item: Item) -> Verdict:
        response = item.response
        if response == "hang":
            time.sleep(3600)
        if response == "crash":
            os._exit(17)
        if response == "raise":
            raise RuntimeError("deliberate verifier bug")
        if response == "pid":
            return Verdict(1.0, OK, str(os.getpid()))
        if response.startswith("env:"):
            return Verdict(1.0, OK, os.environ.get(response[4:], "<unset>"))
        if response.startswith("crash_shared:"):
            _crash_in_company(Path(response.split(":", 1)[1]))
        if response.startswith("share:"):
            _, folder, response = response.split(":", 2)
            _hang_beside_a_waiting_crash(Path(folder))
        if response.startswith("sleep:"):
            _, seconds, response = response.split(":", 2)
            time.sleep(float(seconds))
        try:
            value = int(response)
        except ValueError:
            return Verdict(0.0, PARSE_ERROR, "not an integer")
        if value == int(item.ground_truth):
            return Verdict(1.0, OK, "equal")
        return Verdict(0.0, WRONG, f"{value} != {item.ground_truth}")


def _crash_in_company(folder: Path) -> None:
    pid = os.getpid()
    if not (folder / "crashed").exists():
        (folder / f"{pid}.pending").touch()
        deadline = time.monotonic() + 20  # then end alone: the test sees no company and fails
        while time.monotonic() < deadline and not any(folder.glob(f"{pid}.*.hanging")):
            time.sleep(0.01)
        (folder / "crashed").touch()
    os._exit(17)


def _hang_beside_a_waiting_crash(folder: Path) -> None:
    # Without the wait, innocents on the other actor answered at once, the pool (least loaded first) kept
    # sending there, and the crash could end alone after its 20 s (seen once in CI). Blocking them fills
    # the other actor's slots, so the next call lands beside the crash. No deadlock: a waiting crash always
    # ends within its own 20 s, and with none waiting nobody blocks.
    pid = os.getpid()
    deadline = time.monotonic() + 60
    while not (folder / "crashed").exists() and time.monotonic() < deadline:
        if (folder / f"{pid}.pending").exists():
            (folder / f"{pid}.{threading.get_ident()}.hanging").touch()
            time.sleep(3600)
        if not any(folder.glob("*.pending")):
            return
        time.sleep(0.01)
