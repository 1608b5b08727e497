"""`rlvr filter MODEL --task NAME --k K --out DIR`: difficulty filtering of a task's training prompts, and the
`filter` stage kind that does the same between pipeline stages (issue 34).

DAPO drops the prompts whose group is all right or all wrong (no GRPO gradient); Skywork-OR1 and OLMo 3
filter by the pass rate a model has on each prompt before (and between) RL runs. Here: K responses per
prompt of the task's training split from MODEL, each verified (the machinery of `rlvr eval` / `rlvr sample`,
rlvr_launch.pipelines.generation: the same rollout servers, routing and verifiers as training), and a prompt
is kept when its pass rate (verified responses / K) lies in the band [--min-pass-rate, --max-pass-rate]
(inclusive; by default neither 0/K nor K/K: a model that never or always solves a prompt learns nothing
from it). The data to filter is the task recipe's `data.train_files` (any parquet in verl's format with
`data.train_files=FILE`; a pipeline stage's input `data`).

Written to DIR:
- `train.parquet`: the kept rows exactly as they were (same columns and values), in their order: train on it
  with `data.train_files=DIR/train.parquet`;
- `filter_report.json`: the band, counts of prompts kept and dropped per reason (`never_solved` 0/K,
  `always_solved` K/K, `below_band` / `above_band` for other rates outside the band, `not_sampled` for rows
  past --limit: never silently lost), and per domain (the row's `extra_info.domain`, else its data_source)
  the pass-rate histogram (prompts with 0, 1, ..., K of K verified), kept and dropped counts.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from rlvr_launch.errors import UserError
from rlvr_launch.pipelines.stages import Stage, stage_kind

REPORT_NAME = "filter_report.json"
NEVER, ALWAYS, BELOW, ABOVE, NOT_SAMPLED = (
    "never_solved",
    "always_solved",
    "below_band",
    "above_band",
    "not_sampled",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", help="Hugging Face folder or verl checkpoint (run dir, global_step_N, actor/)"
    )
    parser.add_argument("--task", required=True, help="task recipe name (recipes/task/NAME.yaml)")
    parser.add_argument(
        "--k", type=int, required=True, help="responses per prompt (the pass rate's denominator)"
    )
    parser.add_argument("--out", required=True, help="output folder (train.parquet, filter_report.json)")
    parser.add_argument(
        "--min-pass-rate",
        type=float,
        default=None,
        help="keep prompts whose pass rate is at least this (default 1/K: drop the never-solved ones)",
    )
    parser.add_argument(
        "--max-pass-rate",
        type=float,
        default=None,
        help="keep prompts whose pass rate is at most this (default (K-1)/K: drop the always-solved ones)",
    )
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="default: the task's max_response_length"
    )
    parser.add_argument(
        "--limit", type=int, default=None, help="only the first N prompts (the rest are dropped, counted)"
    )
    parser.add_argument("--seed", type=int, default=0)
    from rlvr_launch.pipelines.evaluate import add_rollout_arguments

    add_rollout_arguments(parser)
    parser.add_argument("overrides", nargs="*", help="recipe overrides (e.g. data.train_files=FILE)")


def band(k: int, min_pass_rate: float | None, max_pass_rate: float | None) -> tuple[float, float]:
    """The inclusive pass-rate band; defaults 1/K and (K-1)/K (neither 0/K nor K/K)."""
    if k < 1:
        raise UserError(f"--k must be >= 1, got {k}")
    low = 1 / k if min_pass_rate is None else float(min_pass_rate)
    high = (k - 1) / k if max_pass_rate is None else float(max_pass_rate)
    if not (0.0 <= low <= 1.0 and 0.0 <= high <= 1.0):
        raise UserError(
            f"pass-rate bounds must lie in [0, 1]: --min-pass-rate {low:g} --max-pass-rate {high:g}"
        )
    if low > high:
        raise UserError(
            f"the band is empty: --min-pass-rate {low:g} > --max-pass-rate {high:g}"
            + (" (with --k 1 the default band keeps nothing: raise --k)" if k == 1 else "")
        )
    return low, high


def verdict_of(passes: int, k: int, low: float, high: float) -> str | None:
    """None when a prompt with `passes` of `k` verified is kept, else why it is dropped."""
    rate = passes / k
    eps = 1e-9  # 1/3 as a bound must keep 1 of 3
    if low - eps <= rate <= high + eps:
        return None
    if passes == 0:
        return NEVER
    if passes == k:
        return ALWAYS
    return BELOW if rate < low else ABOVE


def domain_of_row(row: dict) -> str:
    info = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
    for value in (info.get("domain"), row.get("data_source")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return "unknown"


def decide(
    passes: dict[int, int], domains: list[str], k: int, low: float, high: float
) -> tuple[list[int], dict[int, str], dict]:
    """Kept row indices, {dropped index: reason}, and the report's counts. `passes`: verified responses of
    each sampled row (by index); `domains`: every row's domain (rows without a pass count: not_sampled)."""
    kept: list[int] = []
    dropped: dict[int, str] = {}
    by_domain: dict[str, dict] = {}
    for index, domain in enumerate(domains):
        d = by_domain.setdefault(domain, {"histogram": Counter(), "kept": 0, "dropped": Counter()})
        if index not in passes:
            dropped[index] = NOT_SAMPLED
        else:
            d["histogram"][f"{passes[index]}/{k}"] += 1
            reason = verdict_of(passes[index], k, low, high)
            if reason is None:
                kept.append(index)
                d["kept"] += 1
                continue
            dropped[index] = reason
        d["dropped"][dropped[index]] += 1
    counts = {
        "k": k,
        "band": {"min_pass_rate": low, "max_pass_rate": high},
        "rows": len(domains),
        "sampled": len(passes),
        "kept": len(kept),
        "dropped": dict(sorted(Counter(dropped.values()).items())),
        "by_domain": {
            domain: {
                # every passes count 0..K, so a histogram of two runs lines up
                "histogram": {f"{i}/{k}": d["histogram"][f"{i}/{k}"] for i in range(k + 1)},
                "kept": d["kept"],
                "dropped": dict(sorted(d["dropped"].items())),
            }
            for domain, d in sorted(by_domain.items())
        },
    }
    return kept, dropped, counts


def _train_table(cfg):
    """The task's training rows as one table, in the order generation.load_prompts numbers them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = cfg.data.train_files
    files = [files] if isinstance(files, str) else list(files)
    for path in files:
        if not Path(path).is_file():
            raise UserError(f"train data {path} does not exist; `rlvr data` writes a task's parquet files")
    tables = [pq.read_table(path) for path in files]
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")


def difficulty_filter(
    model: str,
    task: str,
    k: int,
    out: str | Path,
    *,
    min_pass_rate: float | None = None,
    max_pass_rate: float | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_tokens: int | None = None,
    limit: int | None = None,
    seed: int = 0,
    overrides: list[str] | None = None,
    rollout: str | None = None,
    log=None,
    verbose: bool = False,
) -> dict:
    """Sample, verify, keep the prompts in the band; write DIR/train.parquet and the report (module doc)."""
    import pyarrow.parquet as pq

    from rlvr_launch.pipelines import generation
    from rlvr_launch.pipelines.evaluate import say

    low, high = band(k, min_pass_rate, max_pass_rate)
    if limit is not None and limit < 1:
        raise UserError("--limit must be a positive number of prompts")
    out = Path(out)
    cfg = generation.task_config(task, overrides, rollout)
    table = _train_table(cfg)
    tokens = max_tokens or generation.default_max_tokens(cfg)
    sampling = generation.Sampling(k=k, temperature=temperature, top_p=top_p, max_tokens=tokens, seed=seed)
    run = generation.run_task(
        model,
        task,
        "train",
        [sampling],
        overrides,
        limit,
        rollout=rollout,
        log=log or say("filter"),
        verbose=verbose,
    )
    passes: dict[int, int] = {}
    for r in run.responses[0]:
        passes[r.prompt.index] = passes.get(r.prompt.index, 0) + int(r.accepted)
    sampled = max(passes) + 1 if passes else 0
    if sampled > table.num_rows or sampled != min(limit or table.num_rows, table.num_rows):
        raise UserError(  # generation.load_prompts numbers the same files' rows: a mismatch is a bug, not data
            f"rlvr filter: {sampled} prompts sampled but {table.num_rows} rows read from {cfg.data.train_files}"
        )
    rows = table.select([c for c in ("data_source", "extra_info") if c in table.column_names]).to_pylist()
    kept, _, counts = decide(passes, [domain_of_row(r) for r in rows], k, low, high)
    out.mkdir(parents=True, exist_ok=True)
    partial = out / "train.parquet.partial"
    pq.write_table(table.take(kept), partial)
    partial.rename(out / "train.parquet")
    report = {
        "task": task,
        "source_model": str(run.model_dir),
        "data": [
            str(f)
            for f in (
                [cfg.data.train_files] if isinstance(cfg.data.train_files, str) else cfg.data.train_files
            )
        ],
        "temperature": temperature,
        **counts,
        "generation": run.generation,
    }
    (out / REPORT_NAME).write_text(json.dumps(report, indent=2) + "\n")
    if not kept:
        (log or say("filter"))(
            f"warning: no prompt of {counts['sampled']} has a pass rate in [{low:g}, {high:g}]"
        )
    return report


def summary(report: dict, out: Path) -> str:
    lines = [
        f"rlvr filter: {report['task']}: {report['kept']} of {report['rows']} prompts kept (pass rate in "
        f"[{report['band']['min_pass_rate']:g}, {report['band']['max_pass_rate']:g}] over k={report['k']}) -> "
        f"{out / 'train.parquet'}; dropped: {report['dropped'] or 'none'}"
    ]
    for domain, d in report["by_domain"].items():
        histogram = " ".join(f"{bucket}:{n}" for bucket, n in d["histogram"].items())
        lines.append(f"  {domain}: passes {histogram}; kept {d['kept']}, dropped {d['dropped'] or 'none'}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    report = difficulty_filter(
        args.model,
        args.task,
        args.k,
        args.out,
        min_pass_rate=args.min_pass_rate,
        max_pass_rate=args.max_pass_rate,
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        limit=args.limit,
        seed=args.seed,
        overrides=list(args.overrides or []),
        rollout=args.rollout,
        verbose=args.verbose,
    )
    print(summary(report, Path(args.out)))
    print(f"  report: {Path(args.out) / REPORT_NAME}")
    return 0


@stage_kind("filter")
def run_filter(stage: Stage) -> dict:
    """Stage kind `filter`: `rlvr filter` of input `model` (args: task, k, and filter's options) on the
    task's training data, or on input `data` (a parquet from an earlier stage). Output `data`."""
    args = dict(stage.args)
    if "task" not in args:
        raise UserError(f"stage {stage.name!r} (filter) needs args.task")
    model = stage.inputs.get("model")
    if not model:
        raise UserError(
            f"stage {stage.name!r} (filter) needs input 'model' (inputs: {{model: STAGE.OUTPUT}})"
        )
    task, k = args.pop("task"), int(args.pop("k", 8))
    overrides = list(stage.overrides)
    if stage.inputs.get("data"):
        overrides.append(f"data.train_files={stage.inputs['data']}")
    out = stage.dir / "data"
    report = difficulty_filter(model, task, k, out, overrides=overrides, log=stage.log, **args)
    stage.log(summary(report, out))
    if not report["kept"]:
        raise UserError(
            f"stage {stage.name!r}: rlvr filter kept none of {report['rows']} prompts (report: {out / REPORT_NAME}), "
            "so the next stage would train on nothing: widen args.min_pass_rate/max_pass_rate or raise args.k"
        )
    metrics = {"prompts": report["rows"], "kept": report["kept"]}
    metrics.update({f"dropped_{reason}": n for reason, n in report["dropped"].items()})
    return {"outputs": {"data": str(out / "train.parquet")}, "metrics": metrics}
