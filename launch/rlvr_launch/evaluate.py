"""`rlvr eval CHECKPOINT_OR_HF_DIR --task NAME [--k K]`: how well a model does a task's held-out split.

- pass@1: greedy decoding (temperature 0), one response per prompt: the accuracy training's validation
  logs for the same prompts (verl validates greedily unless `val_kwargs.do_sample`).
- with K > 1, K sampled responses per prompt (`--temperature`, default 1.0), and over them:
  mean accuracy (the sampled pass@1), pass@k for k = 1, 2, 4, ... K with the unbiased estimator of the
  Codex paper (Chen et al. 2021: 1 - C(n-c, k) / C(n, k) per prompt, averaged), and maj@K (majority vote
  over the answer regions of the K responses, correct when the most frequent answer is).
- per-verifier status counts (ok / wrong / parse_error / ...), response lengths in tokens
  (mean, p50, max, share truncated at the token budget).

A JSON report goes to `--out FILE` (or stdout with `--json`), a table to stdout. Generation and
verification: rlvr_launch.generation.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", help="Hugging Face folder or verl checkpoint (run dir, global_step_N, actor/)"
    )
    parser.add_argument("--task", required=True, help="task recipe name (recipes/task/NAME.yaml)")
    parser.add_argument("--k", type=int, default=1, help="sampled responses per prompt (1: greedy only)")
    parser.add_argument(
        "--split", default="test", choices=("test", "train"), help="which split (default test)"
    )
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature for K > 1")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="default: the task's max_response_length"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="write the JSON report to this file")
    parser.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    parser.add_argument("overrides", nargs="*", help="recipe overrides (e.g. data.val_files=...)")


# --- estimators -----------------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one prompt with n samples of which c are correct (Chen et al. 2021, fig. 3):
    1 - C(n-c, k) / C(n, k), computed as a product to stay exact for large n."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def ks_up_to(k: int) -> list[int]:
    out, x = [], 1
    while x < k:
        out.append(x)
        x *= 2
    return [*out, k]


def normalized_answer(text: str, tags) -> str | None:
    """The answer region with whitespace collapsed; None when there is none (unclosed block)."""
    from rlvr_verifiers import reasoning

    region = reasoning.split(text, tags).answer
    if region is None:
        return None
    return " ".join(region.split())


def majority_correct(answers: list[str | None], correct: list[bool]) -> bool:
    """maj@k of one prompt: the most frequent answer (first seen wins a tie) is a correct one."""
    votes = Counter(a for a in answers if a is not None)
    if not votes:
        return False
    top = max(votes.values())
    winner = next(a for a in answers if a is not None and votes[a] == top)
    return any(ok for a, ok in zip(answers, correct, strict=True) if a == winner)


def length_stats(responses) -> dict:
    lengths = [r.num_tokens for r in responses]
    if not lengths:
        return {"mean": 0.0, "p50": 0.0, "max": 0, "truncated_rate": 0.0}
    return {
        "mean": statistics.fmean(lengths),
        "p50": float(statistics.median(lengths)),
        "max": max(lengths),
        "truncated_rate": sum(r.truncated for r in responses) / len(lengths),
    }


def status_counts(responses) -> dict[str, dict[str, int]]:
    out: dict[str, Counter] = {}
    for r in responses:
        out.setdefault(r.prompt.verifier, Counter())[r.status] += 1
    return {v: dict(sorted(c.items())) for v, c in sorted(out.items())}


def sampled_metrics(responses, k: int, tags) -> dict:
    """Mean accuracy, pass@k for k = 1, 2, 4, ... K and maj@K over K responses per prompt."""
    per_prompt: dict[int, list] = {}
    for r in responses:
        per_prompt.setdefault(r.prompt.index, []).append(r)
    out: dict = {"mean_accuracy": sum(r.accepted for r in responses) / max(1, len(responses))}
    for j in ks_up_to(k):
        values = [pass_at_k(len(rs), sum(r.accepted for r in rs), j) for rs in per_prompt.values()]
        out[f"pass@{j}"] = sum(values) / len(values)
    maj = [
        majority_correct([normalized_answer(r.text, tags) for r in rs], [r.accepted for r in rs])
        for rs in per_prompt.values()
    ]
    out[f"maj@{k}"] = sum(maj) / len(maj)
    return out


# --- the command ----------------------------------------------------------------------------------


def evaluate(
    model: str,
    task: str,
    k: int = 1,
    split: str = "test",
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_tokens: int | None = None,
    limit: int | None = None,
    seed: int = 0,
    overrides: list[str] | None = None,
) -> dict:
    from rlvr_launch import generation
    from rlvr_launch.errors import UserError
    from rlvr_verifiers import reasoning

    if k < 1:
        raise UserError("--k must be >= 1")
    if k > 1 and temperature <= 0:
        raise UserError("--k > 1 needs --temperature > 0 (greedy decoding gives K identical responses)")
    cfg = generation.task_config(task, overrides)
    tokens = max_tokens or generation.default_max_tokens(cfg)
    greedy = generation.Sampling(k=1, temperature=0.0, max_tokens=tokens, seed=seed)
    model_dir, cfg, responses = generation.run_task(model, task, split, greedy, overrides, limit)
    report: dict = {
        "model": str(model_dir),
        "task": task,
        "split": split,
        "prompts": len(responses),
        "max_tokens": tokens,
        "pass@1": sum(r.accepted for r in responses) / len(responses),
        "greedy": {"statuses": status_counts(responses), "length": length_stats(responses)},
    }
    if k > 1:
        sampling = generation.Sampling(
            k=k, temperature=temperature, top_p=top_p, max_tokens=tokens, seed=seed
        )
        _, _, sampled = generation.run_task(str(model_dir), task, split, sampling, overrides, limit)
        extra = generation.reasoning_extra(cfg)
        tags, _ = reasoning.settings(extra.get("reasoning_tags", list(reasoning.DEFAULT_TAGS)), False)
        report["sampled"] = {
            "k": k,
            "temperature": temperature,
            "top_p": top_p,
            **sampled_metrics(sampled, k, tags),
            "statuses": status_counts(sampled),
            "length": length_stats(sampled),
        }
    return report


def table(report: dict) -> str:
    lines = [
        f"rlvr eval: {report['task']} ({report['split']} split, {report['prompts']} prompts) on {report['model']}",
        f"  {'pass@1 (greedy)':<22} {report['pass@1']:.4f}",
    ]
    sampled = report.get("sampled")
    if sampled:
        lines.append(f"  sampled: K={sampled['k']} temperature={sampled['temperature']}")
        for key, value in sampled.items():
            if key == "mean_accuracy" or key.startswith(("pass@", "maj@")):
                lines.append(f"  {key:<22} {value:.4f}")
    for name, block in (("greedy", report["greedy"]), ("sampled", sampled)):
        if not block:
            continue
        for verifier, counts in block["statuses"].items():
            parts = " ".join(f"{s}={n}" for s, n in counts.items())
            lines.append(f"  {name} {verifier} statuses: {parts}")
        length = block["length"]
        lines.append(
            f"  {name} response tokens: mean {length['mean']:.1f}, p50 {length['p50']:.0f}, "
            f"max {length['max']}, truncated {length['truncated_rate']:.1%}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    report = evaluate(
        args.model,
        args.task,
        k=args.k,
        split=args.split,
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        limit=args.limit,
        seed=args.seed,
        overrides=list(args.overrides or []),
    )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2, default=_finite))
    if args.json:
        json.dump(report, sys.stdout, indent=2, default=_finite)
        print()
    else:
        print(table(report))
    return 0


def _finite(value):
    return None if isinstance(value, float) and not math.isfinite(value) else str(value)
