"""The pool's quick worker: quick checks run in a child of the caller, each bounded by a CPU budget.

No verifier work runs in the caller's process (the trainer's reward worker): a check that spins is killed
once the child has spent its CPU budget on it, the item is answered None (the pool ships it to an actor),
and the caller's own CPU time stays a small fraction of that budget. CPU time, not wall time, is what is
counted, so a loaded machine changes nothing here.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rlvr_verifiers.base import OK, WRONG, Item
from rlvr_verifiers.quick_worker import QuickWorker

TESTS_DIR = str(Path(__file__).resolve().parent)  # pool_test_verifiers lives here
BUDGET_S = 0.25


@pytest.fixture
def worker(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([TESTS_DIR, os.environ.get("PYTHONPATH", "")]))
    w = QuickWorker(imports=("pool_test_verifiers",), cpu_budget_s=BUDGET_S)
    w.start()
    yield w
    w.close()


def test_quick_checks_run_in_a_child_and_answer_what_verify_answers(worker):
    assert worker.check("pool_test_echo", Item("7", 7)).status == OK
    assert worker.check("pool_test_echo", Item("7", 8)).status == WRONG
    assert worker.check("pool_test_echo", Item("none", 0)) is None
    child = worker.check("pool_test_echo", Item("pid", 0))
    assert child.status == OK and int(child.detail) == worker.pid != os.getpid()
    assert worker.gave_up == 0


def test_a_quick_check_over_its_cpu_budget_is_given_up_without_costing_the_caller(worker):
    assert worker.check("pool_test_echo", Item("7", 7)).status == OK  # started and loaded
    first_pid = worker.pid
    caller_cpu = time.process_time()
    assert worker.check("pool_test_echo", Item("spin", 0)) is None  # would never return in-process
    caller_cpu = time.process_time() - caller_cpu
    assert worker.gave_up == 1 and worker.pid is None  # killed
    assert caller_cpu < BUDGET_S / 2, caller_cpu  # the caller only waited and polled
    # the next check gets a fresh child and its full budget
    assert worker.check("pool_test_echo", Item("3", 3)).status == OK
    assert worker.pid not in (None, first_pid) and worker.gave_up == 1


def test_a_child_that_dies_is_replaced(worker):
    assert worker.check("pool_test_echo", Item("crash", 0)) is None  # os._exit in the child
    assert worker.gave_up == 1
    assert worker.check("pool_test_echo", Item("5", 5)).status == OK


def test_callers_in_several_threads_each_get_their_own_verdict(worker):
    import threading

    got: dict[int, list[bool]] = {}

    def caller(k: int) -> None:
        got[k] = [
            worker.check("pool_test_echo", Item(str(k * 100 + i), k * 100 + i)).status == OK
            for i in range(30)
        ]

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {k: [True] * 30 for k in range(4)} and worker.gave_up == 0


def test_close_all_stops_every_running_child_and_a_later_check_starts_a_fresh_one(worker):
    from rlvr_verifiers import quick_worker

    other = QuickWorker(preload=("math",))
    other.start()
    assert worker.check("pool_test_echo", Item("7", 7)).status == OK
    children = [worker.pid, other.pid]
    assert None not in children
    assert quick_worker.close_all() >= 2  # (and any other worker this test process left running)
    assert worker.pid is None and other.pid is None
    for pid in children:  # gone (reaped), not only signalled
        assert not Path(f"/proc/{pid}").exists()
    assert worker.check("pool_test_echo", Item("3", 3)).status == OK
    assert worker.pid not in (None, *children)
    assert quick_worker.close_all() >= 1 and quick_worker.close_all() == 0
