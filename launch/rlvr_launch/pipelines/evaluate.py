"""`rlvr eval CHECKPOINT_OR_HF_DIR --task NAME [--k K]`: how well a model does a task's held-out split.

- pass@1: greedy decoding (temperature 0), one response per prompt: the accuracy training's validation
  logs for the same prompts (verl validates greedily unless `val_kwargs.do_sample`).
- with K > 1, K sampled responses per prompt (`--temperature`, default 1.0), and over them:
  mean accuracy (the sampled pass@1), pass@k for k = 1, 2, 4, ... K with the unbiased estimator of the
  Codex paper (Chen et al. 2021: 1 - C(n-c, k) / C(n, k) per prompt, averaged), and maj@K (majority vote
  over the answer regions of the K responses, correct when the most frequent answer is).
- per-verifier status counts (ok / wrong / parse_error / ...), response lengths in tokens
  (mean, p50, max, share truncated at the token budget).

A JSON report goes to `--out FILE` (or stdout with `--json`), a table to stdout; `--responses FILE`
writes every response with its verdict (the `rlvr score` input format). Generation and verification:
rlvr_launch.pipelines.generation; `--rollout hf|vllm` picks the server (default the platform's own: hf on
platform=cpu, vllm on platform=gpu), and the report's `generation` block says which ran and how fast.

`--thinking-budget 0,16,64,...` evaluates instead how accuracy trades against the thinking budget: for
each budget B, greedy pass@1 in thinking mode with the reasoning capped at B tokens by rlvr's
`thinking_budget` agent loop (the loop RL rollouts use: on a hit, Qwen3's early-stop phrase closes the
block and the model answers), and once in non-thinking mode (`enable_thinking=False`: the template's
empty think block, no budget); per row the mean total response tokens (reasoning + inserted phrase +
answer), the mean reasoning tokens and the budget-hit rate. `--max-tokens` is then the room for the
answer after the block. A table, and a PNG (`--plot`, default next to `--out`): accuracy vs budget with
non-thinking accuracy as a line, and the tokens each budget costs.
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
    add_rollout_arguments(parser)
    parser.add_argument(
        "--responses", default=None, help="write every response with its verdict to this JSONL file"
    )
    parser.add_argument(
        "--thinking-budget",
        default=None,
        metavar="B1,B2,...",
        help="accuracy vs thinking budget (comma-separated token budgets, e.g. 0,16,64) in thinking and "
        "non-thinking mode, instead of the pass@k report",
    )
    parser.add_argument(
        "--plot", default=None, help="PNG of accuracy vs budget (default: --out with .png, else ./)"
    )
    parser.add_argument("overrides", nargs="*", help="recipe overrides (e.g. data.val_files=...)")


def add_rollout_arguments(parser: argparse.ArgumentParser) -> None:
    """--rollout and --verbose, shared by `rlvr eval` and `rlvr sample`."""
    parser.add_argument(
        "--rollout",
        default=None,
        choices=("hf", "vllm"),
        help="which server generates: hf (rlvr's hf rollout, in this process) or vllm (verl's vLLM server "
        "on a private Ray); default: the platform's own (hf on platform=cpu, vllm on platform=gpu)",
    )
    parser.add_argument("--verbose", action="store_true", help="show vLLM's and Ray's own logs")


def say(command: str):
    """Progress lines of `command` on stderr (stdout carries the table or the JSON)."""
    return lambda message: print(f"rlvr {command}: {message}", file=sys.stderr, flush=True)


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
    rollout: str | None = None,
    responses_path: str | Path | None = None,
    log=None,
    verbose: bool = False,
) -> dict:
    """The pass@k report. `rollout`: hf | vllm (None: the platform's own); `responses_path`: every
    response with its verdict as JSONL (the `rlvr score` input format plus `mode`: greedy / sampled)."""
    from rlvr_launch.errors import UserError
    from rlvr_launch.pipelines import generation
    from rlvr_verifiers import reasoning

    if k < 1:
        raise UserError("--k must be >= 1")
    if k > 1 and temperature <= 0:
        raise UserError("--k > 1 needs --temperature > 0 (greedy decoding gives K identical responses)")
    cfg = generation.task_config(task, overrides, rollout)
    tokens = max_tokens or generation.default_max_tokens(cfg)
    samplings = [generation.Sampling(k=1, temperature=0.0, max_tokens=tokens, seed=seed)]
    if k > 1:
        samplings.append(
            generation.Sampling(k=k, temperature=temperature, top_p=top_p, max_tokens=tokens, seed=seed)
        )
    run = generation.run_task(
        model,
        task,
        split,
        samplings,
        overrides,
        limit,
        rollout=rollout,
        log=log or say("eval"),
        verbose=verbose,
    )
    responses = run.responses[0]
    report: dict = {
        "model": str(run.model_dir),
        "task": task,
        "split": split,
        "prompts": len(responses),
        "max_tokens": tokens,
        "pass@1": sum(r.accepted for r in responses) / len(responses),
        "greedy": {"statuses": status_counts(responses), "length": length_stats(responses)},
        "generation": run.generation,
    }
    extra = generation.reasoning_extra(run.cfg)
    if k > 1:
        sampled = run.responses[1]
        tags, _ = reasoning.settings(extra.get("reasoning_tags", list(reasoning.DEFAULT_TAGS)), False)
        report["sampled"] = {
            "k": k,
            "temperature": temperature,
            "top_p": top_p,
            **sampled_metrics(sampled, k, tags),
            "statuses": status_counts(sampled),
            "length": length_stats(sampled),
        }
    if responses_path:
        path = Path(responses_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            for mode, group in zip(("greedy", "sampled"), run.responses, strict=False):
                for r in group:
                    line = {**generation.response_record(r, extra), "mode": mode}
                    f.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
    return report


def parse_budgets(text: str) -> list[int]:
    from rlvr_launch.errors import UserError

    try:
        budgets = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        budgets = []
    if not budgets or any(b < 0 for b in budgets):
        raise UserError(
            f"--thinking-budget wants comma-separated non-negative token counts, e.g. 0,16,64; got {text!r}"
        )
    return sorted(set(budgets))


def _mode_row(responses, budget: int | None) -> dict:
    n = len(responses)
    return {
        "budget": budget,
        "pass@1": sum(r.accepted for r in responses) / n,
        "mean_total_tokens": statistics.fmean(r.num_tokens for r in responses),
        "mean_thinking_tokens": statistics.fmean(r.extra["thinking_tokens"] for r in responses),
        "mean_answer_tokens": statistics.fmean(r.extra["answer_tokens"] for r in responses),
        "budget_hit_rate": sum(r.extra["thinking_budget_hit"] for r in responses) / n,
        "truncated_rate": sum(r.truncated for r in responses) / n,
    }


def budget_sweep(
    model: str,
    task: str,
    budgets: list[int],
    split: str = "test",
    max_tokens: int | None = None,
    limit: int | None = None,
    seed: int = 0,
    overrides: list[str] | None = None,
    rollout: str | None = None,
    log=None,
    verbose: bool = False,
) -> dict:
    """Greedy pass@1 and token cost per thinking budget (thinking mode) and in non-thinking mode, on one
    server (`rollout`: hf | vllm, None for the platform's own)."""
    from rlvr_cluster.thinking_budget import EARLY_STOP_PHRASE
    from rlvr_launch.errors import UserError
    from rlvr_launch.pipelines import generation
    from rlvr_verifiers import reasoning

    model_dir = generation.resolve_model(model)
    cfg = generation.task_config(task, overrides, rollout)
    rollout = rollout or generation.platform_rollout(cfg)
    prompts = generation.load_prompts(cfg, split, limit)
    if not prompts:
        raise UserError(f"task {task!r} has no {split} prompts")
    extra = generation.reasoning_extra(cfg)
    try:
        tags, _ = reasoning.settings(extra.get("reasoning_tags", list(reasoning.DEFAULT_TAGS)), False)
    except ValueError as e:
        raise UserError(f"task {task!r}: reward.reward_kwargs.rlvr.reasoning_tags: {e}") from None
    answer = max_tokens or generation.default_max_tokens(cfg)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    phrase = len(tokenizer.encode(EARLY_STOP_PHRASE, add_special_tokens=False))
    longest = max(budgets) + phrase + answer
    greedy = generation.Sampling(k=1, temperature=0.0, max_tokens=answer, seed=seed)
    report: dict = {
        "model": str(model_dir),
        "task": task,
        "split": split,
        "prompts": len(prompts),
        "answer_tokens": answer,
        "early_stop_tokens": phrase,
        "rollout": rollout,
        "thinking": [],
    }
    prompt_length = generation.prompt_length_of(tokenizer, prompts)
    with generation.rollout_server(
        rollout, cfg, model_dir, prompt_length, longest, seed, log or say("eval"), verbose
    ) as server:
        runs = [
            generation.generate_with_budget(
                tokenizer, server, prompts, budget, True, budget + phrase + answer, greedy, tags
            )
            for budget in budgets
        ]
        plain = generation.generate_with_budget(tokenizer, server, prompts, None, False, answer, greedy, tags)
    for budget, responses in zip(budgets, runs, strict=True):
        generation.verify(responses, extra)
        report["thinking"].append(_mode_row(responses, budget))
    generation.verify(plain, extra)
    report["non_thinking"] = _mode_row(plain, None)
    return report


def budget_table(report: dict) -> str:
    lines = [
        f"rlvr eval --thinking-budget: {report['task']} ({report['split']} split, {report['prompts']} prompts) "
        f"on {report['model']}, {report['rollout']} rollout",
        f"  greedy; answer room {report['answer_tokens']} tokens; early-stop phrase "
        f"{report['early_stop_tokens']} tokens",
        f"  {'mode':<14} {'budget':>6} {'pass@1':>7} {'total tok':>9} {'think tok':>9} {'hit rate':>8}",
    ]
    rows = [("thinking", r) for r in report["thinking"]] + [("non-thinking", report["non_thinking"])]
    for mode, r in rows:
        budget = "-" if r["budget"] is None else str(r["budget"])
        lines.append(
            f"  {mode:<14} {budget:>6} {r['pass@1']:>7.4f} {r['mean_total_tokens']:>9.1f} "
            f"{r['mean_thinking_tokens']:>9.1f} {r['budget_hit_rate']:>8.2f}"
        )
    return "\n".join(lines)


def plot_budget_curve(report: dict, path: Path) -> Path:
    """Accuracy vs thinking budget (thinking mode), non-thinking accuracy as a line; tokens per budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = [r["budget"] for r in report["thinking"]]
    fig, (acc, cost) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    acc.plot(budgets, [r["pass@1"] for r in report["thinking"]], "o-", color="#1f5fa8", label="thinking mode")
    acc.axhline(report["non_thinking"]["pass@1"], color="#c0392b", linestyle="--", label="non-thinking mode")
    acc.set(xlabel="thinking budget (tokens)", ylabel="pass@1 (greedy)", ylim=(-0.02, 1.02))
    acc.set_title(f"{report['task']}: accuracy vs thinking budget", fontsize=10)
    cost.plot(
        budgets, [r["mean_total_tokens"] for r in report["thinking"]], "o-", color="#1f5fa8", label="thinking"
    )
    cost.axhline(
        report["non_thinking"]["mean_total_tokens"], color="#c0392b", linestyle="--", label="non-thinking"
    )
    cost.set(xlabel="thinking budget (tokens)", ylabel="mean response tokens (total)")
    cost.set_title("what each budget costs", fontsize=10)
    positive = [b for b in budgets if b > 0]
    for ax in (acc, cost):
        if len(positive) > 1 and max(positive) >= 8 * min(positive):  # budgets spread over magnitudes
            ax.set_xscale("symlog", linthresh=min(positive))
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def table(report: dict) -> str:
    lines = [
        f"rlvr eval: {report['task']} ({report['split']} split, {report['prompts']} prompts) on {report['model']}",
        f"  {'pass@1 (greedy)':<22} {report['pass@1']:.4f}",
    ]
    if report.get("generation"):
        from rlvr_launch.pipelines.generation import generation_line

        lines.insert(1, f"  generated by {generation_line(report['generation'])}")
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
    if args.thinking_budget is not None:
        return run_budget_sweep(args)
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
        rollout=args.rollout,
        responses_path=args.responses,
        verbose=args.verbose,
    )
    return _emit(report, args, table(report))


def run_budget_sweep(args: argparse.Namespace) -> int:
    from rlvr_launch.errors import UserError

    if args.k != 1:
        raise UserError("--thinking-budget evaluates greedy pass@1; leave --k at 1")
    if args.responses:
        raise UserError("--responses writes the pass@k report's responses; --thinking-budget has none")
    report = budget_sweep(
        args.model,
        args.task,
        parse_budgets(args.thinking_budget),
        split=args.split,
        max_tokens=args.max_tokens,
        limit=args.limit,
        seed=args.seed,
        overrides=list(args.overrides or []),
        rollout=args.rollout,
        verbose=args.verbose,
    )
    plot = Path(args.plot) if args.plot else (Path(args.out).with_suffix(".png") if args.out else None)
    plot = plot or Path("rlvr_eval_thinking_budget.png")
    report["plot"] = str(plot_budget_curve(report, plot))
    return _emit(report, args, f"{budget_table(report)}\n  plot: {report['plot']}")


def _emit(report: dict, args: argparse.Namespace, text: str) -> int:
    """Write the report to --out (JSON), then print it: JSON with --json, else `text` (its table)."""
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2, default=_finite))
    if args.json:
        json.dump(report, sys.stdout, indent=2, default=_finite)
        print()
    else:
        print(text)
    return 0


def _finite(value):
    return None if isinstance(value, float) and not math.isfinite(value) else str(value)
