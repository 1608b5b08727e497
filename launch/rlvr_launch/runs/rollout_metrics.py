"""Figures verl does not log, derived from a run's per-step rollout dumps (RUN_DIR/rollouts/<step>.jsonl,
`trainer.rollout_data_dir`): the only place where a step's GROUPS are visible.

`step_metrics_from_rollouts` gives the share of groups whose responses all got the same reward (all right
/ all wrong), the within-step correlation of reward with response length, the mean response length in
characters, and, where the reward manager wrote rlvr's columns, per-verifier pass and answer rates.
A run over several domains (a mixture: rows keyed by the reward manager's `rlvr_domain` column, i.e.
`extra_info.domain`, else the data_source; dumps without it by `rlvr_verifier`) also gets, per step and per
domain, `rlvr/domain/<domain>/{count, reward_mean, pass_rate, response_chars_mean}` and one count per
verdict status other than ok (`.../wrong`, `.../parse_error`, `.../timeout`, ...: rlvr_verifiers.base.
STATUSES); a domain the step did not sample has count 0 and no means. A run with one domain gets none of
these (its per-verifier figures already say it). `write_derived_metrics(run_dir)` stores them as
RUN_DIR/derived_metrics.jsonl (rlvr/... keys).
`rlvr train` writes them at the end of a run; `rlvr diagnose` (rlvr_launch.diagnosis) reads them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from rlvr_cluster import thinking_metrics
from rlvr_verifiers import rubric
from rlvr_verifiers.base import OK, STATUSES

ZERO_VAR = "rlvr/groups/zero_variance_share"
ALL_RIGHT = "rlvr/groups/all_max_share"
ALL_WRONG = "rlvr/groups/all_min_share"
LEN_CORR = "rlvr/reward_length_corr"
DOMAIN_PREFIX = "rlvr/domain"  # rlvr/domain/<domain>/<figure>; a domain may contain "/", a figure never
DOMAIN_COLUMN = "rlvr_domain"  # == rlvr_verifiers.verl_bridge.DOMAIN (the bridge imports verl; this does not)
FAILURE_STATUSES = tuple(s for s in STATUSES if s != OK)
DERIVED_NAME = "derived_metrics.jsonl"


def _pearson(xs: list[float], ys: list[float]) -> float | None:
    pairs = [(x, y) for x, y in zip(xs, ys, strict=False) if _finite(x) and _finite(y)]
    if len(pairs) < 3:
        return None
    mx = sum(p[0] for p in pairs) / len(pairs)
    my = sum(p[1] for p in pairs) / len(pairs)
    sxx = sum((p[0] - mx) ** 2 for p in pairs)
    syy = sum((p[1] - my) ** 2 for p in pairs)
    if sxx == 0 or syy == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in pairs) / math.sqrt(sxx * syy)


def _finite(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def domain_of_line(line: dict) -> str | None:
    """A dumped response's domain: the reward manager's `rlvr_domain`, else its verifier (older dumps)."""
    for key in (DOMAIN_COLUMN, "rlvr_verifier"):
        value = line.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def domains_of(lines: list[dict]) -> list[str]:
    return sorted({d for d in map(domain_of_line, lines) if d is not None})


def domain_key(domain: str, figure: str) -> str:
    return f"{DOMAIN_PREFIX}/{domain}/{figure}"


def split_domain_key(key: str) -> tuple[str, str] | None:
    """`rlvr/domain/<domain>/<figure>` -> (domain, figure); None for any other key."""
    if not key.startswith(DOMAIN_PREFIX + "/"):
        return None
    domain, _, figure = key[len(DOMAIN_PREFIX) + 1 :].rpartition("/")
    return (domain, figure) if domain and figure else None


def domain_metrics(lines: list[dict], domains: list[str] | None = None, minimum: int = 2) -> dict[str, float]:
    """Per-domain figures of one step's dumped responses (module doc). `domains`: the run's domains (so
    that a domain this step did not sample still gets its count 0); default the step's own. Empty when
    fewer than `minimum` domains."""
    domains = sorted(set(domains if domains is not None else domains_of(lines)))
    if not domains or len(domains) < minimum:
        return {}
    by_domain: dict[str, list[dict]] = {d: [] for d in domains}
    for line in lines:
        domain = domain_of_line(line)
        if domain is not None:
            by_domain.setdefault(domain, []).append(line)
    out: dict[str, float] = {}
    for domain, group in sorted(by_domain.items()):
        n = len(group)
        out[domain_key(domain, "count")] = float(n)
        statuses = [str(x.get("rlvr_status")) for x in group]
        for status in FAILURE_STATUSES:
            out[domain_key(domain, status)] = float(sum(s == status for s in statuses))
        if not n:
            continue
        scores = [float(x["score"]) for x in group if _finite(x.get("score"))]
        if scores:
            out[domain_key(domain, "reward_mean")] = sum(scores) / len(scores)
        if any("rlvr_status" in x for x in group):
            out[domain_key(domain, "pass_rate")] = sum(s == OK for s in statuses) / n
        out[domain_key(domain, "response_chars_mean")] = sum(len(str(x.get("output", ""))) for x in group) / n
    return out


def step_metrics_from_rollouts(lines: list[dict], domains: list[str] | None = None) -> dict[str, float]:
    """Per-step figures verl does not log, from one step's rollout dump (see module doc). `domains`: the
    run's domains (derived_metrics passes them), default this step's."""
    groups: dict[str, list[dict]] = {}
    for line in lines:
        uid = line.get("uid")
        key = (
            str(uid).rsplit("_", 2)[0]
            if uid
            else json.dumps([line.get("input"), line.get("gts")], default=str)
        )
        groups.setdefault(key, []).append(line)
    out: dict[str, float] = {}
    multi = [g for g in groups.values() if len(g) > 1]
    if multi:
        scores_all = [float(x["score"]) for x in lines if _finite(x.get("score"))]
        top, bottom = (max(scores_all), min(scores_all)) if scores_all else (None, None)
        zero = [g for g in multi if len({float(x["score"]) for x in g}) == 1]
        out[ZERO_VAR] = len(zero) / len(multi)
        spread = top is not None and top > bottom

        def all_right(score: float) -> bool:
            # Full marks, or the step's best score when the step has a spread; a group at a batch
            # maximum of 0 (every reward 0) is not "all right".
            return score >= 1.0 or (spread and score == top and score > 0.0)

        def all_wrong(score: float) -> bool:
            return not all_right(score) and (score <= 0.0 or (spread and score == bottom))

        out[ALL_RIGHT] = sum(1 for g in zero if all_right(float(g[0]["score"]))) / len(multi)
        out[ALL_WRONG] = sum(1 for g in zero if all_wrong(float(g[0]["score"]))) / len(multi)
        out["rlvr/groups/count"] = float(len(multi))
    lengths = [float(len(str(x.get("output", "")))) for x in lines]
    scores = [float(x["score"]) if _finite(x.get("score")) else float("nan") for x in lines]
    if lengths:
        out["rlvr/response_chars/mean"] = sum(lengths) / len(lengths)
    corr = _pearson(scores, lengths)
    if corr is not None:
        out[LEN_CORR] = corr
    # rlvr's reward-manager columns (legacy trainer dumps carry reward_extra_info)
    if lines and "rlvr_status" in lines[0]:
        by_verifier: dict[str, list[str]] = {}
        for x in lines:
            by_verifier.setdefault(str(x.get("rlvr_verifier", "all")), []).append(str(x.get("rlvr_status")))
        for verifier, statuses in by_verifier.items():
            n = len(statuses)
            out[f"rlvr/{verifier}/count"] = float(n)
            out[f"rlvr/{verifier}/pass_rate"] = sum(s == "ok" for s in statuses) / n
            out[f"rlvr/{verifier}/parse_failures"] = float(sum(s == "parse_error" for s in statuses))
        # responses whose reasoning block never closes (truncated reasoning): no answer region, never paid
        out["rlvr/no_answer_region"] = float(sum(float(x.get("rlvr_no_answer_region") or 0.0) for x in lines))
    # a mixed run's figures per domain (reward, pass rate, count, length, failure statuses)
    out.update(domain_metrics(lines, domains))
    # the thinking budget's figures (hit rate, thinking/answer lengths, accuracy by hit), where dumped
    out.update(thinking_metrics.step_metrics_from_rollouts(lines))
    # a rubric-paid run's component means (format rate, language consistency, ...), where dumped
    out.update(rubric.step_metrics_from_rollouts(lines))
    return out


def derived_metrics(rollout_dir: Path) -> dict[int, dict[str, float]]:
    steps: dict[int, dict[str, float]] = {}
    per_domain: dict[int, dict[str, float]] = {}
    if not rollout_dir.is_dir():
        return steps
    for path in rollout_dir.glob("*.jsonl"):
        if not path.stem.isdigit():
            continue
        lines = []
        for raw in path.read_text().splitlines():
            try:
                lines.append(json.loads(raw))
            except json.JSONDecodeError:
                continue
        if lines:
            step = int(path.stem)
            # the domain figures are decided over the whole run (below): a mixed run's step that sampled
            # one domain still gets them, and a count 0 for the domains it did not sample
            steps[step] = step_metrics_from_rollouts(lines, domains=[])
            per_domain[step] = domain_metrics(lines, minimum=1)
    domains = sorted({split_domain_key(k)[0] for m in per_domain.values() for k in m})
    if len(domains) > 1:
        for step, figures in per_domain.items():
            steps[step].update(figures)
            for domain in domains:
                if domain_key(domain, "count") not in figures:
                    steps[step].update(domain_metrics([], [domain], minimum=1))
    return dict(sorted(steps.items()))


def write_derived_metrics(run_dir: Path, rollout_dir: Path | None = None) -> Path:
    """RUN_DIR/derived_metrics.jsonl: one {"step", rlvr/...} row per dumped step."""
    steps = derived_metrics(rollout_dir or run_dir / "rollouts")
    path = run_dir / DERIVED_NAME
    path.write_text("".join(json.dumps({"step": s, **m}) + "\n" for s, m in steps.items()))
    return path
