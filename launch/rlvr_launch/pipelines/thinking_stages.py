"""Stage kinds of the Qwen3-style pipeline (recipes/pipeline/qwen3.yaml): one model, two thinking modes.

Registered in `rlvr_launch.pipelines.stages.STAGE_KINDS` on import (rlvr_launch.pipelines.pipeline imports this module):

- `fusion`:        thinking-mode fusion (Qwen3 sec. 4.3): from SFT data with reasoning traces (input
                   `data`: a `sample` stage with `format_filter: think`, or embedded://addition_long_cot),
                   an SFT set where each prompt appears twice: in thinking mode (user turn + ` /think`, its verified trace)
                   and in non-thinking mode (user turn + ` /no_think`, the empty block
                   `<think>\\n\\n</think>\\n\\n` + the trace's answer region). Both halves are verified again
                   with the task's verifier against the prompt's ground truth; a prompt keeps its first
                   trace whose two halves pass. Then verl's SFT trainer (the `sft` kind) on it from input
                   `model`. args: task (+ sft's platform). Outputs `checkpoint`, `data`.
- `mixed_mode_rl`: general RL on a mixed-mode dataset with the `thinking_budget` agent loop: the task's
                   training prompts, alternately flagged ` /think` and ` /no_think` (shuffled with
                   args.seed), as `data.train_files`; thinking prompts get args.thinking_budget (if set,
                   as each row's extra_info.thinking_budget; else the recipe's rollout.custom value),
                   non-thinking ones none (their block is prefilled closed). Then the `rl` kind (`rlvr
                   train` with the stage's overrides, rollouts dumped so metrics.jsonl carries the
                   thinking/* budget figures). Input `model`. Output `checkpoint`.
- `budget_eval`:   `rlvr eval --thinking-budget` of input `model` (args: task, budgets, limit,
                   max_tokens, rollout). Outputs `report` (JSON) and `plot` (PNG); metrics pass@1 per budget and
                   in non-thinking mode.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

from rlvr_launch.errors import UserError
from rlvr_launch.pipelines import stages
from rlvr_launch.pipelines.stages import Stage, stage_kind

THINK_SWITCH, NO_THINK_SWITCH = " /think", " /no_think"
EMPTY_THINK_BLOCK = (
    "<think>\n\n</think>\n\n"  # == rlvr_launch.runs.embedded_model.EMPTY_THINK_BLOCK (Qwen3's)
)


def _write_parquet(out_dir: Path, rows: list[dict], columns: list[str]) -> Path:
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    partial = out_dir / "train.parquet.partial"
    pd.DataFrame(rows, columns=columns).to_parquet(partial, index=False)
    partial.replace(out_dir / "train.parquet")
    return out_dir / "train.parquet"


def _with_switch(messages: list[dict], switch: str) -> list[dict]:
    """The messages with `switch` appended to the last user turn (Qwen3's soft switches)."""
    out = [dict(m) for m in messages]
    last = max((i for i, m in enumerate(out) if m.get("role") == "user"), default=None)
    if last is None:
        raise UserError("a prompt without a user turn cannot carry a /think or /no_think switch")
    out[last]["content"] = str(out[last]["content"]) + switch
    return out


def fusion_rows(frame, task: str, overrides: list[str] | None = None) -> tuple[list[dict], dict]:
    """(rows, stats): per prompt of `frame` (verl SFT rows with a `prompt_id` into the task's training
    split), one thinking-mode and one non-thinking-mode row, both verified against the ground truth."""
    from rlvr_launch.pipelines import generation
    from rlvr_verifiers import reasoning

    cfg = generation.task_config(task, overrides)
    prompts = generation.load_prompts(cfg, "train")
    extra = generation.reasoning_extra(cfg)
    tags, _ = reasoning.settings(extra.get("reasoning_tags", list(reasoning.DEFAULT_TAGS)), False)
    if tags is None:
        raise UserError(f"fusion: task {task!r} reads no reasoning block (reasoning_tags off)")
    if "prompt_id" not in frame.columns or "messages" not in frame.columns:
        raise UserError(
            "fusion: input data needs `messages` and `prompt_id` columns (a `sample` stage's data, embedded://addition_long_cot)"
        )
    candidates: list[tuple[int, list[dict], str, str]] = []  # prompt id, prompt messages, trace, answer
    no_block = 0
    for _, row in frame.iterrows():
        pid = int(row["prompt_id"])
        if not 0 <= pid < len(prompts):
            raise UserError(f"fusion: prompt_id {pid} is not a row of task {task!r}'s training split")
        messages = [dict(m) for m in row["messages"]]
        if not messages or messages[-1].get("role") != "assistant":
            raise UserError(f"fusion: prompt {pid}'s messages do not end with the assistant's response")
        trace = str(messages[-1]["content"])
        split = reasoning.split(trace, tags)
        if split.state != reasoning.CLOSED or split.answer is None or not split.answer.strip():
            no_block += 1
            continue
        candidates.append((pid, messages[:-1], trace, split.answer.strip()))
    responses = []
    for pid, _, trace, answer in candidates:
        prompt = prompts[pid]
        for text in (trace, EMPTY_THINK_BLOCK + answer):
            responses.append(generation.Response(prompt, len(responses), text, 0, False))
    generation.verify(responses, extra)
    rows, done = [], set()
    for i, (pid, prompt_messages, trace, answer) in enumerate(candidates):
        thinking_ok, direct_ok = responses[2 * i].accepted, responses[2 * i + 1].accepted
        if pid in done or not (thinking_ok and direct_ok):
            continue
        done.add(pid)
        for mode, switch, content in (
            ("thinking", THINK_SWITCH, trace),
            ("non_thinking", NO_THINK_SWITCH, EMPTY_THINK_BLOCK + answer),
        ):
            rows.append(
                {
                    "messages": [
                        *_with_switch(prompt_messages, switch),
                        {"role": "assistant", "content": content},
                    ],
                    "task": task,
                    "prompt_id": pid,
                    "mode": mode,
                    "source": "fusion",
                }
            )
    stats = {
        "input_rows": len(frame),
        "without_closed_block": no_block,
        "failed_verification": sum(
            1
            for i in range(len(candidates))
            if not (responses[2 * i].accepted and responses[2 * i + 1].accepted)
        ),
        "prompts": len(done),
        "rows": len(rows),
    }
    return rows, stats


@stage_kind("fusion")
def run_fusion(stage: Stage) -> dict:
    import pandas as pd

    args = dict(stage.args)
    if "task" not in args:
        raise UserError(f"stage {stage.name!r} (fusion) needs args.task")
    data = Path(stages._need(stage, "data"))
    data = data / "train.parquet" if data.is_dir() else data
    rows, stats = fusion_rows(pd.read_parquet(data), args["task"])
    if not rows:
        raise UserError(
            f"stage {stage.name!r}: no prompt of {data} has a verified trace whose answer also verifies "
            f"directly ({stats}); the fusion set would be empty"
        )
    path = _write_parquet(stage.dir / "data", rows, ["messages", "task", "prompt_id", "mode", "source"])
    (stage.dir / "data" / "stats.json").write_text(json.dumps(stats, indent=2))
    stage.log(f"  fusion data: {stats}")
    sft_stage = replace(stage, inputs={"model": stages._need(stage, "model"), "data": str(path)})
    sft_stage.args = {k: v for k, v in args.items() if k != "task"}
    result = stages.run_sft(sft_stage)
    result["outputs"]["data"] = str(path)
    result["metrics"].update({"fusion_prompts": stats["prompts"], "fusion_rows": stats["rows"]})
    return result


def mixed_mode_rows(
    task: str, seed: int = 0, budget: int | None = None, overrides=None
) -> tuple[list[dict], Path]:
    """The task's training rows, half flagged /think (with the budget) and half /no_think."""
    import pandas as pd

    from rlvr_launch.pipelines import generation

    cfg = generation.task_config(task, overrides)
    train = cfg.data.train_files
    path = Path(train if isinstance(train, str) else list(train)[0])
    frame = pd.read_parquet(path)
    order = list(range(len(frame)))
    random.Random(seed).shuffle(order)
    no_think = set(order[: len(order) // 2])
    rows = []
    for i, row in enumerate(frame.to_dict("records")):
        thinking = i not in no_think
        row[cfg.data.prompt_key] = _with_switch(
            list(row[cfg.data.prompt_key]), THINK_SWITCH if thinking else NO_THINK_SWITCH
        )
        info = dict(row.get("extra_info") or {})
        info["thinking_mode"] = "thinking" if thinking else "non_thinking"
        if thinking and budget is not None:
            info["thinking_budget"] = int(budget)
        row["extra_info"] = info
        rows.append(row)
    return rows, path


@stage_kind("mixed_mode_rl")
def run_mixed_mode_rl(stage: Stage) -> dict:
    import pandas as pd

    args = dict(stage.args)
    if "task" not in args:
        raise UserError(f"stage {stage.name!r} (mixed_mode_rl) needs args.task")
    rows, source = mixed_mode_rows(args["task"], int(args.get("seed", 0)), args.get("thinking_budget"))
    out = stage.dir / "mixed_data"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "train.parquet"
    pd.DataFrame(rows).to_parquet(path, index=False)
    rl_stage = replace(
        stage,
        overrides=[
            *stage.overrides,
            f"data.train_files={path}",
            "actor_rollout_ref.rollout.agent.default_agent_loop=thinking_budget",
            "rlvr.dump_rollouts=true",
        ],
    )
    result = stages.run_rl(rl_stage)
    last = _last_thinking_metrics(stage.dir / "metrics.jsonl")
    result["metrics"].update(last)
    result["outputs"]["data"] = str(path)
    return result


def _last_thinking_metrics(path: Path) -> dict:
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    last = next((r for r in reversed(rows) if "thinking/budget_hit_rate" in r), {})
    return {
        k.replace("thinking/", "thinking_").replace("/", "_"): v
        for k, v in last.items()
        if k.startswith("thinking/")
    }


@stage_kind("budget_eval")
def run_budget_eval(stage: Stage) -> dict:
    from rlvr_launch.pipelines import evaluate

    args = dict(stage.args)
    if "task" not in args:
        raise UserError(f"stage {stage.name!r} (budget_eval) needs args.task")
    budgets = args.get("budgets", [0, 16, 64])
    budgets = evaluate.parse_budgets(
        ",".join(str(b) for b in budgets) if isinstance(budgets, list) else budgets
    )
    report = evaluate.budget_sweep(
        stages._need(stage, "model"),
        args["task"],
        budgets,
        max_tokens=args.get("max_tokens"),
        limit=args.get("limit"),
        overrides=stage.overrides,
        rollout=args.get("rollout"),  # hf | vllm, as `rlvr eval --rollout`; unset: the platform's own
        log=stage.log,
    )
    report["plot"] = str(evaluate.plot_budget_curve(report, stage.dir / "thinking_budget.png"))
    path = stage.dir / "budget_eval.json"
    path.write_text(json.dumps(report, indent=2))
    stage.log(evaluate.budget_table(report))
    metrics = {f"pass@1_budget_{r['budget']}": r["pass@1"] for r in report["thinking"]}
    metrics["pass@1_non_thinking"] = report["non_thinking"]["pass@1"]
    return {"outputs": {"report": str(path), "plot": report["plot"]}, "metrics": metrics}
