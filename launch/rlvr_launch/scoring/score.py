"""`rlvr score --verifier NAME --input IN.jsonl --output OUT.jsonl`: batch scoring through the verifier pool.

The same code path training uses (rlvr_verifiers.pool, the actors, their sandboxes). One output line per
input line, in order: `{"score": float, "status":
"ok|wrong|parse_error|timeout|sandbox_error|invalid_input|response_too_large", "detail": "short reason"}`. A summary (counts per status, pass rate, latency) goes to stderr.

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


Two paths, chosen per call (`--path auto`, the default) and named in the summary line:
- local (no Ray): up to `--local-max-lines` lines with no cluster address. The verifiers run in this
  process: math's exact path in-process, its sympy checks in the local pool of killable sympy worker
  processes (several items at once from a few threads), code in the verifier's own local sandbox
  workers; every item gets the same verdict the pool's actors would give it.
- ray (the verifier pool): more lines than that, or `--address` / RAY_ADDRESS given, or a Ray already
  initialised in this process (a notebook, a test). With an address the pool runs on that cluster (its
  verifier nodes must advertise the pool's custom resource); otherwise a private local Ray is started for
  this command (random free ports, no dashboard, its own temp dir, the pool's resource declared) and shut
  down afterwards.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from typing import Any

STATUS_ORDER = (
    "ok",
    "wrong",
    "parse_error",
    "timeout",
    "sandbox_error",
    "invalid_input",
    "response_too_large",
)
# Above this many lines `--path auto` starts the Ray pool; below, a Ray start (15-30 s on a small
# machine) costs more than it saves (bench/score_paths.py).
LOCAL_MAX_LINES = 20000


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
        "--path",
        choices=("auto", "local", "ray"),
        default="auto",
        help="local: verifiers in this process, no Ray; ray: the verifier pool; auto (default): local up to "
        "--local-max-lines lines without a cluster address, else ray",
    )
    parser.add_argument(
        "--local-max-lines",
        type=int,
        default=LOCAL_MAX_LINES,
        help=f"largest input --path auto scores without Ray (default {LOCAL_MAX_LINES})",
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
    from rlvr_launch.errors import UserError
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


def choose_path(requested: str, n_lines: int, local_max_lines: int, address: str | None) -> tuple[str, str]:
    """("local" | "ray", why) for `--path requested` on `n_lines` input lines."""
    if requested != "auto":
        return requested, f"--path {requested}"
    if address:
        return "ray", f"a cluster address is given ({address})"
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return "ray", "Ray is already initialised in this process"
    if n_lines > local_max_lines:
        return "ray", f"{n_lines} lines > --local-max-lines {local_max_lines}"
    return "local", f"{n_lines} lines <= --local-max-lines {local_max_lines}"


def _verify_batch_safely(verifier, name: str, items: list) -> list:
    """verify_batch, with every item still getting a verdict when the verifier fails (as in the pool)."""
    from rlvr_verifiers.base import SANDBOX_ERROR, Verdict

    try:
        verdicts = verifier.verify_batch(items)
        if isinstance(verdicts, list) and len(verdicts) == len(items):
            return verdicts
        problem = f"verify_batch returned {type(verdicts).__name__} of the wrong length"
    except Exception as e:  # noqa: BLE001 - a verifier failure is a counted status, never a lost line
        problem = f"verify_batch raised {type(e).__name__}: {e}"
    out = []
    for item in items:
        try:
            (verdict,) = verifier.verify_batch([item])
        except Exception as e:  # noqa: BLE001
            verdict = Verdict(0.0, SANDBOX_ERROR, f"verifier {name} failed: {type(e).__name__}: {e}"[:200])
        out.append(verdict)
    print(f"rlvr score: {name}: {problem}; verified item by item", file=sys.stderr)
    return out


def score_lines_local(
    verifier: str, lines: list[str], threads: int | None = None, defaults: dict[str, Any] | None = None
):
    """Verdicts for `lines` in order without Ray, plus per-item latencies (s) and how many the exact
    path decided in this process.

    A verifier with a `quick` check (math: the bounded exact path) decides what it can in-process; the
    rest go to `verify` from `threads` threads, whose slow part (sympy) runs in the verifier's local pool
    of worker processes. Other verifiers get one `verify_batch` call (code: its local sandbox workers run
    the tests in parallel)."""
    from concurrent.futures import ThreadPoolExecutor

    from rlvr_verifiers import registry
    from rlvr_verifiers.base import Item

    parsed = [parse_line(verifier, line, defaults) for line in lines]
    verdicts = list(parsed)
    todo = [i for i, p in enumerate(parsed) if isinstance(p, Item)]
    instance = registry.get(verifier)
    quick = getattr(instance, "quick", None) if verifier in registry.BUILTIN else None
    latencies: list[float] = []
    rest: list[int] = []
    if callable(quick):
        for i in todo:
            started = time.perf_counter()
            try:
                verdict = quick(parsed[i])
            except Exception:  # noqa: BLE001 - left to the full check
                verdict = None
            if verdict is None:
                rest.append(i)
            else:
                verdicts[i] = verdict
                latencies.append(time.perf_counter() - started)
        decided_quick = len(todo) - len(rest)

        def one(i: int):
            started = time.perf_counter()
            (verdict,) = _verify_batch_safely(instance, verifier, [parsed[i]])
            return i, verdict, time.perf_counter() - started

        if rest:
            with ThreadPoolExecutor(max_workers=threads or max(2, os.cpu_count() or 2)) as ex:
                for i, verdict, latency in ex.map(one, rest):
                    verdicts[i] = verdict
                    latencies.append(latency)
    else:
        decided_quick = None
        if todo:
            started = time.perf_counter()
            out = _verify_batch_safely(instance, verifier, [parsed[i] for i in todo])
            per_item = (time.perf_counter() - started) / len(todo)
            for i, verdict in zip(todo, out, strict=True):
                verdicts[i] = verdict
            latencies.extend([per_item] * len(todo))  # one batch: its mean, not a distribution
    return verdicts, latencies, decided_quick


def _read_lines(path: str) -> list[str]:
    from rlvr_launch.errors import UserError

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


def _percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]); 0.0 for no values. (Not the pool's: it imports Ray.)"""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(1, math.ceil(q / 100.0 * len(ordered))) - 1])


def _summary(verifier: str, verdicts, latencies: list[float], wall_s: float, path: str) -> str:
    from collections import Counter

    counts = Counter(v.status for v in verdicts)
    n = len(verdicts)
    parts = [f"{s}={counts.get(s, 0)}" for s in STATUS_ORDER]
    pass_rate = counts.get("ok", 0) / n if n else 0.0
    return (
        f"rlvr score: {verifier}: {n} lines, pass rate {pass_rate:.4f} ({' '.join(parts)}); "
        f"latency p50 {1000 * _percentile(latencies, 50):.1f} ms, p99 {1000 * _percentile(latencies, 99):.1f} ms; "
        f"{wall_s:.2f} s; {path}"
    )


def run(args: argparse.Namespace) -> int:
    from rlvr_launch.errors import UserError
    from rlvr_verifiers import registry

    available = registry.names()
    if args.verifier not in available:
        raise UserError(f"unknown verifier {args.verifier!r}; pick one of: {', '.join(available)}")
    if (
        args.batch_size < 1
        or args.items_per_call < 1
        or (args.num_actors is not None and args.num_actors < 1)
        or args.local_max_lines < 0
    ):
        raise UserError(
            "--batch-size, --items-per-call and --num-actors must be >= 1, --local-max-lines >= 0"
        )
    defaults = reasoning_defaults(args)
    lines = _read_lines(args.input)
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        raise UserError(f"--output folder {out_dir!r} does not exist; create it first")

    address = args.address or os.environ.get("RAY_ADDRESS")
    path, why = choose_path(args.path, len(lines), args.local_max_lines, address)
    start = time.monotonic()
    if path == "local":
        verdicts, latencies, quick = score_lines_local(args.verifier, lines, defaults=defaults)
        close = getattr(registry.get(args.verifier), "close", None)
        if callable(close):
            close()  # the code verifier's local sandbox workers
        exact = "" if quick is None else f"; {quick} decided by the exact path in-process"
        ran = f"path local, no Ray ({why}{exact})"
    else:
        verdicts, latencies, ran = _score_with_ray(args, lines, address, defaults)
        ran = f"{ran} ({why})"
    with open(args.output, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(verdict.to_json(), ensure_ascii=False) + "\n" for verdict in verdicts)
    print(_summary(args.verifier, verdicts, latencies, time.monotonic() - start, ran), file=sys.stderr)
    return 0


def _score_with_ray(
    args: argparse.Namespace, lines: list[str], address: str | None, defaults: dict[str, Any] | None = None
):
    """Score through the verifier pool: on `address`, on a Ray this process already has, or on a private one."""
    import ray

    from rlvr_launch.errors import UserError
    from rlvr_verifiers.pool import DEFAULT_RESOURCE, PoolConfig, PoolError, VerifierPool

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
    context, connected = None, False
    if ray.is_initialized():
        where = "the Ray of this process"  # a caller's Ray (a notebook, a test): use it, leave it running
    elif address:
        try:
            ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise UserError(
                f"cannot reach the Ray cluster at {address!r} ({e}); check --address/RAY_ADDRESS"
            ) from None
        connected, where = True, f"the Ray cluster at {address}"
    else:
        context = _PrivateRay(resource_name, float(num_actors), cpus)
        context.__enter__()
        where = "a private Ray started for this command"
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
    latencies = [x for r in results for m in r.metrics.values() for x in m.latencies_s]
    restarts = sum(r.actor_restarts for r in results)
    return (
        verdicts,
        latencies,
        f"path ray: verifier pool of {num_actors} actors on {where}; actor restarts {restarts}",
    )
