"""Per-step thinking-budget figures (no verl import: `rlvr train` and `rlvr diagnose` read them cheaply).

The `thinking_budget` agent loop (rlvr_cluster.thinking_budget) records, per sample,
`thinking_budget_hit`, `thinking_tokens` and `answer_tokens`; rlvr's reward manager
(rlvr_verifiers.verl_bridge) copies them into its reward columns `rlvr_thinking_budget_hit`,
`rlvr_thinking_tokens`, `rlvr_answer_tokens`, which verl dumps with each step's rollouts
(`trainer.rollout_data_dir`, `rlvr.dump_rollouts: true`). From a step's dump `step_metrics_from_rollouts`
computes the figures that `rlvr train` joins to that step's row of metrics.jsonl:

    thinking/budget_hit_rate            share of responses whose reasoning hit the budget
    thinking/thinking_tokens/mean, p90  reasoning length in tokens (the budget B on a hit)
    thinking/answer_tokens/mean         generated tokens after the reasoning block
    thinking/accuracy/hit, not_hit      verifier accuracy (acc > 0) of each split; a split without
                                        samples is left out, never reported as 0 or NaN
"""

from __future__ import annotations

import math

from rlvr_verifiers.rubric import finite_number

HIT, THINKING, ANSWER = "rlvr_thinking_budget_hit", "rlvr_thinking_tokens", "rlvr_answer_tokens"


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def step_metrics(
    hits: list[int], thinking_tokens: list[int], answer_tokens: list[int], scores: list[float]
) -> dict[str, float]:
    """Per-step figures of one batch; accuracy = share of samples with score > 0. NaN-free: a split
    with no samples is left out rather than reported as 0."""
    n = len(hits)
    if not (n == len(thinking_tokens) == len(answer_tokens) == len(scores)) or n == 0:
        raise ValueError(
            "step_metrics needs one hit flag, thinking length, answer length and score per sample"
        )
    out = {
        "thinking/budget_hit_rate": sum(hits) / n,
        "thinking/thinking_tokens/mean": sum(thinking_tokens) / n,
        "thinking/thinking_tokens/p90": _quantile([float(t) for t in thinking_tokens], 0.9),
        "thinking/answer_tokens/mean": sum(answer_tokens) / n,
    }
    for label, flag in (("hit", 1), ("not_hit", 0)):
        group = [s for h, s in zip(hits, scores, strict=True) if int(h) == flag]
        if group:
            out[f"thinking/accuracy/{label}"] = sum(float(s) > 0 for s in group) / len(group)
    return out


def step_metrics_from_rollouts(lines: list[dict]) -> dict[str, float]:
    """`step_metrics` of one step's rollout dump (verl's jsonl lines); {} when the dump has no budget
    columns. Samples of another agent loop (None in the columns) are left out; accuracy is the
    verifier's verdict (`acc`), else the paid score."""
    rows = []
    for line in lines:
        hit, thinking, answer = (finite_number(line.get(k)) for k in (HIT, THINKING, ANSWER))
        score = finite_number(line.get("acc", line.get("score")))
        if None not in (hit, thinking, answer, score):
            rows.append((int(hit), thinking, answer, score))
    if not rows:
        return {}
    hits, thinking, answer, scores = (list(c) for c in zip(*rows, strict=True))
    return step_metrics(hits, thinking, answer, scores)
