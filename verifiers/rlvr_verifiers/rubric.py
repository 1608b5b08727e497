"""Composite rubrics: a weighted sum of registered verifiers per task, defined as data.

    rubric = Rubric.from_dict({
        "name": "math_r1",
        "components": [{"verifier": "math", "weight": 0.9},
                       {"verifier": "format", "weight": 0.1}],
        "logged_only": ["tool_call"],          # run and logged, never paid
    })
    registry.register("math_r1")(rubric)       # optional: a rubric is itself a verifier

- Paid score = sum(weight * component score); a component pays the verdict's score, or one of its
  metrics when `metric` is set (e.g. `{"verifier": "format", "metric": "language_consistency"}`).
- Status and detail come from the PRIMARY component (`primary`, default the first component): the
  rubric is `ok` exactly when the primary verifier is, whatever the other components add.
- `Verdict.metrics` holds, per component, `<verifier>/score` (and `<verifier>/<metric>` for every
  metric its verdict reported) plus `<verifier>/status_ok`; logged-only verifiers appear the same way
  but never enter the score. When one verifier is used twice (score and a metric), it runs once.
- Every component sees the same item; set `ground_truth_key` to hand a component `ground_truth[key]`
  when the ground truth is a dict holding several verifiers' references.
- The component verifier `routed` (ROUTED) is, per item, the verifier the sample was routed to
  (`item.extra["routed_verifier"]`, set by the rlvr reward manager when `reward.reward_kwargs.rlvr.rubric`
  names a rubric): one rubric then pays "correctness" with math on math rows and code on code rows.
  An item without a routed verifier is `invalid_input` for that component.

Built-in rubrics (`rlvr_verifiers.rubrics`, registered lazily by name like the built-in verifiers):
`r1_zero` (correctness + the R1 format) and `r1` (correctness + format + language consistency +
helpfulness/safety). Select one for training with `reward.reward_kwargs.rlvr.rubric=NAME`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rlvr_verifiers import registry
from rlvr_verifiers.base import INVALID_INPUT, Item, Verdict

ROUTED = "routed"  # component verifier: the one the item was routed to (item.extra["routed_verifier"])
ROUTED_KEY = "routed_verifier"


@dataclass(frozen=True)
class Component:
    verifier: str = field(metadata={"help": "registry name of the verifier"})
    weight: float = field(default=1.0, metadata={"help": "weight of this component in the paid score"})
    metric: str | None = field(
        default=None, metadata={"help": "pay this Verdict.metrics entry instead of the verdict's score"}
    )
    ground_truth_key: str | None = field(
        default=None, metadata={"help": "pass ground_truth[key] to this verifier (dict ground truths)"}
    )

    @property
    def key(self) -> str:
        return self.verifier if self.metric is None else f"{self.verifier}/{self.metric}"


@dataclass(frozen=True)
class Rubric:
    name: str = field(metadata={"help": "the rubric's name (its registry key if registered)"})
    components: tuple[Component, ...] = field(metadata={"help": "paid components"})
    logged_only: tuple[str, ...] = field(default=(), metadata={"help": "verifiers logged, never paid"})
    primary: str | None = field(
        default=None, metadata={"help": "verifier whose status is the rubric's status (default: first)"}
    )

    def __post_init__(self) -> None:
        if not self.components:
            raise ValueError(f"rubric {self.name!r} has no components; add at least one paid verifier")
        for comp in self.components:
            if comp.weight < 0:
                raise ValueError(f"rubric {self.name!r}: weight of {comp.key} is negative ({comp.weight})")
            if comp.verifier != ROUTED:
                registry.get(comp.verifier)  # KeyError naming the available verifiers
        for name in self.logged_only:
            if name != ROUTED:
                registry.get(name)
            if any(c.verifier == name for c in self.components):
                raise ValueError(f"rubric {self.name!r}: {name!r} is both paid and logged_only; pick one")
        primary = self.primary or self.components[0].verifier
        if not any(c.verifier == primary for c in self.components):
            raise ValueError(f"rubric {self.name!r}: primary {primary!r} is not a paid component")
        object.__setattr__(self, "primary", primary)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rubric:
        unknown = set(data) - {"name", "components", "logged_only", "primary"}
        if unknown:
            raise ValueError(
                f"unknown rubric keys {sorted(unknown)}; allowed: name, components, logged_only, primary"
            )
        comps = []
        for c in data.get("components", []):
            if isinstance(c, str):
                c = {"verifier": c}
            extra = set(c) - {"verifier", "weight", "metric", "ground_truth_key"}
            if extra:
                raise ValueError(f"unknown component keys {sorted(extra)} in rubric {data.get('name')!r}")
            comps.append(Component(**c))
        return cls(
            name=data["name"],
            components=tuple(comps),
            logged_only=tuple(data.get("logged_only", ())),
            primary=data.get("primary"),
        )

    def _items_for(self, items: list[Item], gt_key: str | None) -> list[Item]:
        if gt_key is None:
            return items
        out = []
        for it in items:
            gt = it.ground_truth.get(gt_key) if isinstance(it.ground_truth, dict) else None
            out.append(Item(it.response, gt, it.extra))
        return out

    def verify_batch(self, items: list[Item]) -> list[Verdict]:
        runs: dict[tuple[str, str | None], list[Verdict]] = {}
        for verifier in [c.verifier for c in self.components] + list(self.logged_only):
            gt_key = next((c.ground_truth_key for c in self.components if c.verifier == verifier), None)
            if (verifier, gt_key) not in runs:
                runs[(verifier, gt_key)] = _run_verifier(verifier, self._items_for(items, gt_key))
        by_name = {name: verdicts for (name, _), verdicts in runs.items()}
        out = []
        for k in range(len(items)):
            score = 0.0
            metrics: dict[str, float] = {}
            for (name, _), verdicts in runs.items():
                v = verdicts[k]
                metrics[f"{name}/score"] = float(v.score)
                metrics[f"{name}/status_ok"] = float(v.status == "ok")
                for m, value in v.metrics.items():
                    metrics[f"{name}/{m}"] = float(value)
            for comp in self.components:
                v = by_name[comp.verifier][k]
                if comp.metric is None:
                    paid = float(v.score)
                elif comp.metric in v.metrics:
                    paid = float(v.metrics[comp.metric])
                else:
                    paid = 0.0  # a metric the verdict did not report pays nothing
                score += comp.weight * paid
            primary = by_name[self.primary][k]  # type: ignore[index]
            if primary.status == INVALID_INPUT:
                score = 0.0  # a malformed item earns nothing from the side components either
            out.append(Verdict(score, primary.status, primary.detail, metrics))
        return out

    def verify(self, item: Item) -> Verdict:
        return self.verify_batch([item])[0]

    def verifier_names(self) -> list[str]:
        """Every verifier this rubric runs (paid and logged-only; `routed` stands for the routed one)."""
        return list(dict.fromkeys([c.verifier for c in self.components] + list(self.logged_only)))

    def __call__(self, items: list[Item]) -> list[Verdict]:
        return self.verify_batch(items)


def _run_verifier(name: str, items: list[Item]) -> list[Verdict]:
    """`registry.get(name).verify_batch(items)`; for ROUTED, each item's own routed verifier (grouped)."""
    if name != ROUTED:
        return registry.get(name).verify_batch(items)
    out: list[Verdict | None] = [None] * len(items)
    groups: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        routed = (item.extra or {}).get(ROUTED_KEY)
        if not isinstance(routed, str) or not routed or routed == ROUTED:
            out[i] = Verdict(
                0.0,
                INVALID_INPUT,
                f"rubric component {ROUTED!r} needs item.extra[{ROUTED_KEY!r}] (the rlvr reward manager sets "
                "it when reward.reward_kwargs.rlvr.rubric is set)",
            )
            continue
        groups.setdefault(routed, []).append(i)
    for routed, idx in groups.items():
        try:
            verifier = registry.get(routed)
        except KeyError as e:
            for i in idx:
                out[i] = Verdict(0.0, INVALID_INPUT, str(e)[:200])
            continue
        if isinstance(verifier, Rubric):
            for i in idx:
                out[i] = Verdict(
                    0.0, INVALID_INPUT, f"routed verifier {routed!r} is a rubric; route to a verifier"
                )
            continue
        for i, verdict in zip(idx, verifier.verify_batch([items[i] for i in idx]), strict=True):
            out[i] = verdict
    return out  # type: ignore[return-value]


# ---- per-step component figures (a rubric-paid training run's metrics.jsonl rows) ---------------------
#
# The rlvr reward manager adds, for a run with `reward.reward_kwargs.rlvr.rubric=NAME`, one reward column
# per paid component other than correctness (`component_columns`): `rlvr_rubric_format`,
# `rlvr_rubric_language_consistency`, `rlvr_rubric_helpfulness` for `r1`; `rlvr_rubric_format` for
# `r1_zero`. Each holds the component's unweighted value for that sample (what the rubric multiplies by
# its weight; None for a sample the rubric never scored: unroutable, or a ground truth that does not
# decode). Correctness needs no column: `acc` already is the routed verifier's score; the rubric total is
# the paid `score` minus DAPO's overlong shaping (`overlong_reward`, when logged). verl dumps the columns
# with each step's rollouts, and `rlvr train` joins `step_metrics_from_rollouts` of each dump to that
# step's metrics.jsonl row:
#
#     rubric/format/mean                 share of responses in the R1 format (the format verdict is 0/1)
#     rubric/language_consistency/mean   mean language consistency of the reasoning (r1)
#     rubric/helpfulness/mean            mean helpfulness/safety score (r1)
#     rubric/correctness/mean            mean correctness (`acc`)
#     rubric/total/mean                  mean rubric score (what the rubric paid, before overlong shaping)
#
# A plain (non-rubric) run has none of the columns and gets none of the figures.

COLUMN_PREFIX = "rlvr_rubric_"
CORRECTNESS, TOTAL = "correctness", "total"


def component_label(comp: Component) -> str:
    """What a paid component measures, as its column and metric name it: `correctness` for the routed
    verifier, the metric for a metric component (`language_consistency`), else the verifier's name."""
    if comp.metric is not None:
        return comp.metric
    return CORRECTNESS if comp.verifier == ROUTED else comp.verifier


def component_columns(rubric: Rubric) -> dict[str, Component]:
    """`{column: component}` for the paid components that get a reward column (all but correctness,
    which is `acc`), in the rubric's order."""
    out: dict[str, Component] = {}
    for comp in rubric.components:
        label = component_label(comp)
        if label != CORRECTNESS:
            out.setdefault(COLUMN_PREFIX + label, comp)
    return out


def component_values(rubric: Rubric, verdict: Verdict | None) -> dict[str, float | None]:
    """One sample's component columns from the rubric's verdict: the value each component pays before
    its weight (0.0 for a metric the verdict did not report, as the rubric pays it); None for every
    column when the rubric never scored the sample (`verdict` None, or a verdict without the rubric's
    per-component metrics: the pool gave up on the batch)."""
    out: dict[str, float | None] = {}
    for column, comp in component_columns(rubric).items():
        if verdict is None or not verdict.metrics:
            out[column] = None
            continue
        key = f"{comp.verifier}/{comp.metric or 'score'}"
        out[column] = float(verdict.metrics.get(key, 0.0))
    return out


def finite_number(value: Any) -> float | None:
    """A dumped column's value as a finite float (bools count as 0/1), else None."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def step_metrics_from_rollouts(lines: list[dict]) -> dict[str, float]:
    """The per-step component means (module comment above) of one step's rollout dump (verl's jsonl
    lines, one per response); {} when the dump has no rubric columns. Samples the rubric never scored
    (None in the columns) are left out of every figure."""
    columns = sorted({k for line in lines for k in line if k.startswith(COLUMN_PREFIX)})
    if not columns:
        return {}
    scored = [line for line in lines if all(finite_number(line.get(c)) is not None for c in columns)]
    if not scored:
        return {}
    n = len(scored)
    out = {
        f"rubric/{c[len(COLUMN_PREFIX) :]}/mean": sum(finite_number(x[c]) for x in scored) / n
        for c in columns
    }  # type: ignore[misc]
    acc = [finite_number(x.get("acc")) for x in scored]
    if all(a is not None for a in acc):
        out[f"rubric/{CORRECTNESS}/mean"] = sum(acc) / n  # type: ignore[arg-type]
    totals = [finite_number(x.get("score")) for x in scored]
    if all(t is not None for t in totals):
        shaping = [finite_number(x.get("overlong_reward")) or 0.0 for x in scored]
        out[f"rubric/{TOTAL}/mean"] = sum(t - s for t, s in zip(totals, shaping, strict=True)) / n  # type: ignore[operator]
    return out
