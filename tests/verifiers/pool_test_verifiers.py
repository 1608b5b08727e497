"""Test-only verifiers for the pool tests, registered under `pool_test_*` names.

Ray actors import this module through PoolConfig.imports (the tests put this folder on PYTHONPATH before
they start Ray), so the actors' own registries know these names.

`pool_test_echo`: the response is "<int>" or a command; ok (score 1) when the int equals the ground truth,
wrong (score 0) otherwise. Commands: "sleep:<s>:<int>" sleeps s seconds first; "hang" sleeps for an hour;
"crash" ends the actor process at once (a segfault-like death); "raise" raises; "pid" answers with the
actor's pid in `detail`; "env:NAME" answers with the actor's value of NAME.
Its `quick(item)` (for rlvr_verifiers.quick_worker's tests): "spin" burns CPU forever; "pid" answers the
process's pid; "none" answers None; anything else is `verify`.
"""

from __future__ import annotations

import os
import time

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
