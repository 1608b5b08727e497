"""`rlvr sample CHECKPOINT_OR_HF_DIR --task NAME --k K --out DIR`: rejection sampling into SFT data.

K responses per prompt of the task's training split (`--split test` for the held-out one), every one
verified (rlvr_launch.pipelines.generation: `--rollout hf` (rlvr's hf rollout server) or `vllm` (verl's vLLM
server), default the platform's own; the verifier the row routes to; the task's reasoning settings). A response is accepted when its verdict is `ok`; then, in this order:
- `--format-filter think`: only responses with a closed reasoning block (R1-style traces);
- `--min-tokens` / `--max-tokens-kept`: the length filter, in response tokens;
- `--dedup` (default on): one copy of identical (prompt, response) pairs;
- `--select all-correct` (default) keeps every survivor, `best-of-k` one per prompt (the shortest;
  the lowest sample index breaks a tie);
- `--mix FILE --mix-ratio R`: round(R x accepted) rows of a general SFT dataset (parquet or JSONL with a
  `messages` column) drawn without replacement with `--seed`, marked `source: mix`.

Written to DIR:
- `train.parquet`: verl's SFT format (`messages`: the prompt's chat messages + the assistant response,
  read by verl's MultiTurnSFTDataset) plus provenance columns: `source_model`, `task`, `prompt_id`,
  `sample_index`, `verdict`, `score`, `source` (`sample` or `mix`);
- `responses.jsonl`: every response, accepted or not, with its verdict and why it was dropped
  (`dropped`: null when kept), in the `rlvr score` input format (`response`, `ground_truth`, `extra`)
  so the same lines can be re-scored by `rlvr score`;
- `stats.json`: acceptance per task and per prompt difficulty (the prompt's pass rate over its K
  responses: 0, (0, 0.5], (0.5, 1), 1), and what each filter dropped.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

SELECT = ("all-correct", "best-of-k")
FORMAT_FILTERS = ("none", "think")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", help="Hugging Face folder or verl checkpoint (run dir, global_step_N, actor/)"
    )
    parser.add_argument("--task", required=True, help="task recipe name (recipes/task/NAME.yaml)")
    parser.add_argument("--k", type=int, required=True, help="responses per prompt")
    parser.add_argument(
        "--out", required=True, help="output folder (train.parquet, responses.jsonl, stats.json)"
    )
    parser.add_argument(
        "--split", default="train", choices=("train", "test"), help="which split (default train)"
    )
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="default: the task's max_response_length"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--select", default="all-correct", choices=SELECT)
    parser.add_argument("--no-dedup", dest="dedup", action="store_false", help="keep identical responses")
    parser.add_argument("--min-tokens", type=int, default=0, help="drop accepted responses shorter than this")
    parser.add_argument("--max-tokens-kept", type=int, default=None, help="drop accepted responses longer")
    parser.add_argument("--format-filter", default="none", choices=FORMAT_FILTERS)
    parser.add_argument(
        "--mix", default=None, help="general SFT data (parquet/JSONL with `messages`) to mix in"
    )
    parser.add_argument("--mix-ratio", type=float, default=0.0, help="mixed rows per accepted row")
    from rlvr_launch.pipelines.evaluate import add_rollout_arguments

    add_rollout_arguments(parser)
    parser.add_argument("overrides", nargs="*", help="recipe overrides (e.g. data.train_files=...)")


def difficulty_bucket(pass_rate: float) -> str:
    if pass_rate == 0:
        return "0"
    if pass_rate <= 0.5:
        return "(0,0.5]"
    if pass_rate < 1:
        return "(0.5,1)"
    return "1"


def select(
    responses, *, mode: str, dedup: bool, min_tokens: int, max_tokens: int | None, format_filter: str, tags
):
    """(kept responses, {response id: why dropped}) in prompt then sample order."""
    from rlvr_verifiers import reasoning

    dropped: dict[int, str] = {}
    survivors = []
    seen: set[tuple[int, str]] = set()
    for r in responses:
        if not r.accepted:
            dropped[id(r)] = f"verdict {r.status}"
        elif format_filter == "think" and (
            tags is None or reasoning.split(r.text, tags).state != reasoning.CLOSED
        ):
            dropped[id(r)] = "format: no closed reasoning block"
        elif r.num_tokens < min_tokens or (max_tokens is not None and r.num_tokens > max_tokens):
            dropped[id(r)] = f"length {r.num_tokens} tokens"
        elif dedup and (r.prompt.index, r.text) in seen:
            dropped[id(r)] = "duplicate"
        else:
            seen.add((r.prompt.index, r.text))
            survivors.append(r)
    if mode == "best-of-k":
        best: dict[int, object] = {}
        for r in survivors:
            cur = best.get(r.prompt.index)
            if cur is None or (r.num_tokens, r.sample_index) < (cur.num_tokens, cur.sample_index):
                best[r.prompt.index] = r
        keep = {id(r) for r in best.values()}
        for r in survivors:
            if id(r) not in keep:
                dropped[id(r)] = "best-of-k: another response of this prompt kept"
        survivors = [r for r in survivors if id(r) in keep]
    return survivors, dropped


def read_messages(path: str) -> list[list[dict]]:
    import pandas as pd

    from rlvr_launch.errors import UserError

    p = Path(path)
    if not p.is_file():
        raise UserError(f"--mix {path!r} does not exist")
    frame = pd.read_parquet(p) if p.suffix == ".parquet" else pd.read_json(p, lines=True)
    if "messages" not in frame.columns:
        raise UserError(
            f"--mix {path}: no `messages` column (verl's SFT format); columns: {list(frame.columns)}"
        )
    return [[dict(m) for m in messages] for messages in frame["messages"]]


def stats(responses, kept, dropped, task: str, k: int) -> dict:
    per_prompt: dict[int, list] = {}
    for r in responses:
        per_prompt.setdefault(r.prompt.index, []).append(r)
    kept_ids = {id(r) for r in kept}
    buckets: dict[str, Counter] = {}
    for rs in per_prompt.values():
        bucket = difficulty_bucket(sum(r.accepted for r in rs) / len(rs))
        c = buckets.setdefault(bucket, Counter())
        c["prompts"] += 1
        c["responses"] += len(rs)
        c["verified"] += sum(r.accepted for r in rs)
        c["kept"] += sum(id(r) in kept_ids for r in rs)
    reasons = Counter(
        why.split(":")[0] if why.startswith(("format", "best-of-k")) else why for why in dropped.values()
    )
    return {
        "task": task,
        "k": k,
        "prompts": len(per_prompt),
        "responses": len(responses),
        "verified": sum(r.accepted for r in responses),
        "acceptance_rate": sum(r.accepted for r in responses) / max(1, len(responses)),
        "kept": len(kept),
        "prompts_with_a_kept_response": len({r.prompt.index for r in kept}),
        "dropped": dict(sorted(reasons.items())),
        "by_difficulty": {b: dict(c) for b, c in sorted(buckets.items())},
    }


def write_dataset(out: Path, rows: list[dict]) -> None:
    import pandas as pd

    frame = pd.DataFrame(
        rows,
        columns=[
            "messages",
            "source_model",
            "task",
            "prompt_id",
            "sample_index",
            "verdict",
            "score",
            "source",
        ],
    )
    partial = out / "train.parquet.partial"
    frame.to_parquet(partial, index=False)
    partial.rename(out / "train.parquet")


def sample(
    model: str,
    task: str,
    k: int,
    out: str | Path,
    *,
    split: str = "train",
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_tokens: int | None = None,
    limit: int | None = None,
    seed: int = 0,
    mode: str = "all-correct",
    dedup: bool = True,
    min_tokens: int = 0,
    max_tokens_kept: int | None = None,
    format_filter: str = "none",
    mix: str | None = None,
    mix_ratio: float = 0.0,
    overrides: list[str] | None = None,
    rollout: str | None = None,
    log=None,
    verbose: bool = False,
) -> dict:
    from rlvr_launch.errors import UserError
    from rlvr_launch.pipelines import generation
    from rlvr_verifiers import reasoning

    if k < 1:
        raise UserError("--k must be >= 1")
    if mix_ratio < 0 or (mix_ratio > 0 and not mix):
        raise UserError("--mix-ratio must be >= 0 and needs --mix FILE")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = generation.task_config(task, overrides, rollout)
    tokens = max_tokens or generation.default_max_tokens(cfg)
    sampling = generation.Sampling(k=k, temperature=temperature, top_p=top_p, max_tokens=tokens, seed=seed)
    from rlvr_launch.pipelines.evaluate import say

    run = generation.run_task(
        model,
        task,
        split,
        [sampling],
        overrides,
        limit,
        rollout=rollout,
        log=log or say("sample"),
        verbose=verbose,
    )
    model_dir, cfg, responses = run.model_dir, run.cfg, run.responses[0]
    extra = generation.reasoning_extra(cfg)
    tags, _ = reasoning.settings(extra.get("reasoning_tags", list(reasoning.DEFAULT_TAGS)), False)
    kept, dropped = select(
        responses,
        mode=mode,
        dedup=dedup,
        min_tokens=min_tokens,
        max_tokens=max_tokens_kept,
        format_filter=format_filter,
        tags=tags,
    )
    rows = [
        {
            "messages": [*r.prompt.messages, {"role": "assistant", "content": r.text}],
            "source_model": str(model_dir),
            "task": task,
            "prompt_id": r.prompt.index,
            "sample_index": r.sample_index,
            "verdict": r.status,
            "score": r.score,
            "source": "sample",
        }
        for r in kept
    ]
    mixed = 0
    if mix and mix_ratio > 0:
        general = read_messages(mix)
        want = round(mix_ratio * len(kept))
        if want > len(general):
            raise UserError(f"--mix-ratio {mix_ratio} asks for {want} rows; {mix} has {len(general)}")
        for i in sorted(random.Random(seed).sample(range(len(general)), want)):
            rows.append(
                {
                    "messages": general[i],
                    "source_model": "",
                    "task": "",
                    "prompt_id": i,
                    "sample_index": -1,
                    "verdict": "",
                    "score": 0.0,
                    "source": "mix",
                }
            )
        mixed = want
    if not kept:
        print(f"rlvr sample: warning: no response of {len(responses)} was kept", file=sys.stderr)
    write_dataset(out, rows)
    with open(out / "responses.jsonl", "w", encoding="utf-8") as f:
        for r in responses:
            line = {**generation.response_record(r, extra), "dropped": dropped.get(id(r))}
            f.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
    report = {
        "source_model": str(model_dir),
        **stats(responses, kept, dropped, task, k),
        "mixed": mixed,
        "generation": run.generation,
    }
    (out / "stats.json").write_text(json.dumps(report, indent=2))
    return report


def run(args: argparse.Namespace) -> int:
    report = sample(
        args.model,
        args.task,
        args.k,
        args.out,
        split=args.split,
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        limit=args.limit,
        seed=args.seed,
        mode=args.select,
        dedup=args.dedup,
        min_tokens=args.min_tokens,
        max_tokens_kept=args.max_tokens_kept,
        format_filter=args.format_filter,
        mix=args.mix,
        mix_ratio=args.mix_ratio,
        overrides=list(args.overrides or []),
        rollout=args.rollout,
        verbose=args.verbose,
    )
    from rlvr_launch.pipelines.generation import generation_line

    print(
        f"rlvr sample: {report['task']}: {report['responses']} responses to {report['prompts']} prompts, "
        f"{report['verified']} verified ({report['acceptance_rate']:.1%}), {report['kept']} kept "
        f"(+{report['mixed']} mixed in) -> {args.out}/train.parquet; dropped: {report['dropped']}"
    )
    print(f"  generated by {generation_line(report['generation'])}")
    for bucket, c in report["by_difficulty"].items():
        print(f"  prompts with pass rate {bucket}: {c}")
    return 0
