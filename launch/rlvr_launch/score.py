"""`rlvr score --verifier NAME --input IN.jsonl --output OUT.jsonl`: batch scoring through the verifier pool.

The same code path training uses (rlvr_verifiers.pool, the actors, their sandboxes). One output line per
input line, in order: `{"score": float, "status": "ok|wrong|parse_error|timeout|sandbox_error|invalid_input",
"detail": "short reason"}`. A summary (counts per status, pass rate, latency) goes to stderr.

Input lines (JSON objects):
    math, countdown   {"response": str, "ground_truth": ...}
                      (countdown: {"target": int, "numbers": [int, ...]}, or that object as a JSON string)
    code              {"response": str, "tests": {"inputs": [...], "outputs": [...], "fn_name"?: str}}
    tool_call         {"response": str, "tools": [...], "expected": ...}
    any other         {"response": str, "ground_truth"?: ...}
An optional "extra" object is passed to the verifier as Item.extra. A malformed line (bad JSON, not an
object, a missing or mistyped field) gets status `invalid_input` with the reason; the other lines are
still scored.

Reasoning blocks (rlvr_verifiers.reasoning): verifiers read only what follows the last closing tag, and
a block that never closes is `parse_error` ("unclosed reasoning block"). `--reasoning-tags OPEN,CLOSE`
sets the pair (default `<think>,</think>`), `--reasoning-tags off` reads the whole response, and
`--think-prefilled` says the chat template put OPEN into the prompt (a response without CLOSE then has no
answer). They fill in `reasoning_tags` / `think_prefilled` for every line whose "extra" does not set them.

Ray: with `--address` (or RAY_ADDRESS) the pool runs on that cluster (its verifier nodes must advertise
the pool's custom resource). Otherwise a private local Ray is started for this command (random free
ports, no dashboard, its own temp dir, the pool's resource declared) and shut down afterwards; a Ray
already initialised in this process is used as is.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

STATUS_ORDER = ("ok", "wrong", "parse_error", "timeout", "sandbox_error", "invalid_input")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--verifier", required=True, help="verifier name (see `rlvr ls`): math, code, ...")
    parser.add_argument("--input", required=True, help="JSONL file of responses to score ('-' for stdin)")
    parser.add_argument("--output", required=True, help="JSONL file written, one line per input line")
    parser.add_argument(
        "--address", default=None, help="Ray cluster address (default: RAY_ADDRESS, else private)"
    )
    parser.add_argument("--num-actors", type=int, default=None, help="verifier actors (default: CPU count)")
    parser.add_argument("--items-per-call", type=int, default=8, help="items per actor call")
    parser.add_argument("--item-timeout", type=float, default=30.0, help="seconds one item may take")
    parser.add_argument(
        "--batch-timeout", type=float, default=600.0, help="hard bound in seconds on each batch of lines"
    )
    parser.add_argument("--batch-size", type=int, default=4096, help="lines sent to the pool at once")
    parser.add_argument(
        "--reasoning-tags",
        default=None,
        metavar="OPEN,CLOSE|off",
        help="reasoning tags: only what follows the last CLOSE is read (default <think>,</think>); off: all",
    )
    parser.add_argument(
        "--think-prefilled",
        action="store_true",
        help="the chat template put OPEN into the prompt: a response without CLOSE has no answer",
    )
    parser.add_argument(
        "--resource-name",
        default=None,
        help="custom Ray resource the actors ask for (default rlvr_verifier; '' for none)",
    )


def parse_line(verifier: str, line: str, defaults: dict[str, Any] | None = None):
    """The Item for one input line, or an invalid_input Verdict naming what is wrong with it.
    `defaults` fill in Item.extra keys the line's own "extra" does not set (the reasoning settings)."""
    from rlvr_verifiers.base import INVALID_INPUT, Item, Verdict

    def invalid(reason: str) -> Verdict:
        return Verdict(0.0, INVALID_INPUT, reason[:200])

    try:
        obj = json.loads(line)
    except ValueError as e:
        return invalid(f"line is not JSON: {e}")
    if not isinstance(obj, dict):
        return invalid(f"line is a JSON {type(obj).__name__}, not an object")
    response = obj.get("response")
    if not isinstance(response, str):
        return invalid('missing "response" string' if response is None else '"response" must be a string')
    extra = obj.get("extra", {})
    if not isinstance(extra, dict):
        return invalid('"extra" must be an object')
    extra = {**(defaults or {}), **extra}
    if verifier in ("math", "countdown"):
        if "ground_truth" not in obj or obj["ground_truth"] is None:
            return invalid('missing "ground_truth"')
        ground_truth: Any = obj["ground_truth"]
    elif verifier == "code":
        tests = obj.get("tests")
        if not isinstance(tests, dict | str):
            return invalid('missing "tests" object' if tests is None else '"tests" must be an object')
        ground_truth = tests
    elif verifier == "tool_call":
        if not isinstance(obj.get("tools"), list):
            return invalid('missing "tools" list' if obj.get("tools") is None else '"tools" must be a list')
        if "expected" not in obj:
            return invalid('missing "expected"')
        ground_truth = {"tools": obj["tools"], "expected": obj["expected"]}
    else:
        ground_truth = obj.get("ground_truth")
    return Item(response=response, ground_truth=ground_truth, extra=extra)


def reasoning_defaults(args: argparse.Namespace) -> dict[str, Any]:
    """Item.extra defaults from --reasoning-tags / --think-prefilled ({} when neither is given)."""
    from rlvr_launch.cli import UserError
    from rlvr_verifiers import reasoning

    tags_value = getattr(args, "reasoning_tags", None)
    prefilled = bool(getattr(args, "think_prefilled", False))
    if tags_value is None and not prefilled:
        return {}
    try:
        tags, prefilled = reasoning.settings(
            list(reasoning.DEFAULT_TAGS) if tags_value is None else tags_value, prefilled
        )
    except ValueError as e:
        raise UserError(f"--reasoning-tags/--think-prefilled: {e}") from None
    return {"reasoning_tags": reasoning.tags_setting(tags), "think_prefilled": prefilled}


def score_lines(
    verifier: str, lines: list[str], pool, batch_size: int = 4096, defaults: dict[str, Any] | None = None
):
    """Verdicts for `lines` in order (malformed lines never reach the pool), plus the pool results."""
    parsed = [parse_line(verifier, line, defaults) for line in lines]
    from rlvr_verifiers.base import Item

    verdicts = list(parsed)
    results = []
    todo = [i for i, p in enumerate(parsed) if isinstance(p, Item)]
    for k in range(0, len(todo), batch_size):
        idx = todo[k : k + batch_size]
        result = pool.verify(verifier, [parsed[i] for i in idx])
        results.append(result)
        for i, verdict in zip(idx, result.verdicts, strict=True):
            verdicts[i] = verdict
    return verdicts, results


def _read_lines(path: str) -> list[str]:
    from rlvr_launch.cli import UserError

    if path == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise UserError(
                f"cannot read --input {path!r}: {e.strerror}; give an existing JSONL file"
            ) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline ending the last line does not start another line
    return lines


class _PrivateRay:
    """A Ray started for this command only (random free ports, no dashboard, own temp dir)."""

    def __init__(self, resource_name: str, resource_amount: float, num_cpus: int) -> None:
        self.resource_name, self.resource_amount, self.num_cpus = resource_name, resource_amount, num_cpus
        self.temp_dir: str | None = None

    def __enter__(self):
        import ray

        self.temp_dir = tempfile.mkdtemp(prefix="rlvr-score-", dir="/tmp")  # short: unix socket paths
        resources = {self.resource_name: self.resource_amount} if self.resource_name else {}
        ray.init(
            num_cpus=self.num_cpus,
            resources=resources,
            include_dashboard=False,
            _temp_dir=self.temp_dir,
            log_to_driver=False,
            configure_logging=False,
        )
        return self

    def __exit__(self, *exc) -> None:
        import ray

        ray.shutdown()
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


def _summary(verifier: str, verdicts, results, wall_s: float) -> str:
    from collections import Counter

    from rlvr_verifiers.pool import _percentile

    counts = Counter(v.status for v in verdicts)
    n = len(verdicts)
    latencies = [x for r in results for m in r.metrics.values() for x in m.latencies_s]
    parts = [f"{s}={counts.get(s, 0)}" for s in STATUS_ORDER]
    pass_rate = counts.get("ok", 0) / n if n else 0.0
    restarts = sum(r.actor_restarts for r in results)
    return (
        f"rlvr score: {verifier}: {n} lines, pass rate {pass_rate:.4f} ({' '.join(parts)}); "
        f"latency p50 {1000 * _percentile(latencies, 50):.1f} ms, p99 {1000 * _percentile(latencies, 99):.1f} ms; "
        f"{wall_s:.2f} s; actor restarts {restarts}"
    )


def run(args: argparse.Namespace) -> int:
    from rlvr_launch.cli import UserError
    from rlvr_verifiers import registry

    available = registry.names()
    if args.verifier not in available:
        raise UserError(f"unknown verifier {args.verifier!r}; pick one of: {', '.join(available)}")
    if (
        args.batch_size < 1
        or args.items_per_call < 1
        or (args.num_actors is not None and args.num_actors < 1)
    ):
        raise UserError("--batch-size, --items-per-call and --num-actors must be >= 1")
    defaults = reasoning_defaults(args)
    lines = _read_lines(args.input)
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        raise UserError(f"--output folder {out_dir!r} does not exist; create it first")

    import ray

    from rlvr_verifiers.pool import DEFAULT_RESOURCE, PoolConfig, PoolError, VerifierPool

    address = args.address or os.environ.get("RAY_ADDRESS")
    cpus = os.cpu_count() or 1
    num_actors = args.num_actors or cpus
    resource_name = DEFAULT_RESOURCE if args.resource_name is None else args.resource_name
    config = PoolConfig(
        name=f"rlvr-score-{os.getpid()}",
        num_actors=num_actors,
        cpus_per_actor=1.0 if address else min(1.0, cpus / num_actors),
        resource_name=resource_name,
        items_per_call=args.items_per_call,
        item_timeout_s=args.item_timeout,
        batch_timeout_s=args.batch_timeout,
        preload=(args.verifier,),
    )
    start = time.monotonic()
    context, connected = None, False
    if ray.is_initialized():
        pass  # a caller's Ray (a notebook, a test): use it, leave it running
    elif address:
        try:
            ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise UserError(
                f"cannot reach the Ray cluster at {address!r} ({e}); check --address/RAY_ADDRESS"
            ) from None
        connected = True
    else:
        context = _PrivateRay(resource_name, float(num_actors), cpus)
        context.__enter__()
    try:
        try:
            pool = VerifierPool(config)
        except PoolError as e:
            raise UserError(str(e)) from None
        try:
            verdicts, results = score_lines(args.verifier, lines, pool, args.batch_size, defaults)
        finally:
            pool.shutdown()
    finally:
        if context is not None:
            context.__exit__(None, None, None)
        elif connected:
            ray.shutdown()  # disconnects this driver only; the cluster keeps running
    with open(args.output, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(verdict.to_json(), ensure_ascii=False) + "\n" for verdict in verdicts)
    print(_summary(args.verifier, verdicts, results, time.monotonic() - start), file=sys.stderr)
    return 0
