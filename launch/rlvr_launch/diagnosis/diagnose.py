"""`rlvr diagnose RUN_DIR`: read a run's metrics and say which GRPO-family patch addresses what it shows.

Inputs (whatever the run has):
- RUN_DIR/metrics.jsonl, one row per training step with verl's metric names (`critic/score/mean`,
  `response_length/mean`, `response_length/clip_ratio`, `actor/entropy`, `actor/grad_norm`,
  `actor/pg_clipfrac`, ...) and rlvr's (`rlvr/<verifier>/pass_rate`, `rlvr/<verifier>/parse_failures`,
  `rlvr/<verifier>/count`, `training/filter_groups/*`);
- RUN_DIR/rollouts/<step>.jsonl, verl's per-step rollout dumps (`trainer.rollout_data_dir`): the only
  place where a step's GROUPS are visible. From them `step_metrics_from_rollouts` derives what verl does
  not log: the share of groups whose responses all got the same reward (all right / all wrong), the
  within-step correlation of reward with response length, the mean response length in characters,
  and, where the reward manager wrote rlvr's columns, per-verifier pass and answer rates.
  `write_derived_metrics(run_dir)` stores them as RUN_DIR/derived_metrics.jsonl (rlvr/... keys).

Findings (thresholds are the documented fields of `Thresholds`; each finding prints the numbers behind
it and the patch):
  zero_variance_groups     many groups carry no signal       -> algo=dapo (dynamic sampling, sec. 3.2)
  entropy_collapse         policy entropy falls steeply while the reward stalls -> clip-higher (DAPO sec. 3.1)
                           (falling entropy with a rising reward is the policy learning, not a finding)
  length_drift             mean response length drifts       -> algo=dr_grpo (length-unbiased loss)
  length_reward_coupling   reward tracks length              -> algo=dr_grpo
  unstable_long_responses  update spikes with long/truncated responses -> algo=gspo (sequence ratios)
  reward_hacking           reward rises while the verifier's pass rate or the answer rate falls
A healthy run yields no finding. Early vs late compares the first and last `window` fraction of steps.
Each patch is checked against the run's own recipe (RUN_DIR/recipe.json): `rlvr diagnose` prints the
whole `rlvr train` command of the patched run, composed and validated, or says why it does not compose.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from rlvr_launch.errors import UserError
from rlvr_launch.runs.rollout_metrics import (  # what `rlvr train` derives too; diagnosis reads it
    ALL_RIGHT,
    ALL_WRONG,
    DERIVED_NAME,
    LEN_CORR,
    ZERO_VAR,
    _finite,
    _pearson,
    derived_metrics,
    step_metrics_from_rollouts,  # noqa: F401 - diagnose.step_metrics_from_rollouts, as before the move
    write_derived_metrics,  # noqa: F401 - diagnose.write_derived_metrics, as before the move
)

STEP = "training/global_step"
SCORE = "critic/score/mean"
LENGTH = "response_length/mean"
CLIP = "response_length/clip_ratio"
ENTROPY = "actor/entropy"
# The policy's entropy as the update computed it (verl logs it when `actor.calculate_entropy` is on):
# the trend source when old log-probs come from the rollout (verl's bypass mode, the CPU demo), where
# verl skips the recomputation that logs ENTROPY.
ENTROPY_IN_UPDATE = "actor/entropy_loss"
GRAD_NORM = "actor/grad_norm"
PPO_KL = "actor/ppo_kl"


@dataclass
class Thresholds:
    window: float = field(
        default=0.25, metadata={"help": "fraction of steps forming the early and the late window"}
    )
    min_steps: int = field(
        default=6, metadata={"help": "fewer logged steps than this: trends are not judged"}
    )
    zero_variance_share: float = field(
        default=0.5,
        metadata={"help": "mean share of zero-reward-variance groups (late window) above which to flag"},
    )
    entropy_ratio: float = field(
        default=0.5, metadata={"help": "late / early mean entropy below this is a collapse"}
    )
    length_drift: float = field(
        default=0.5, metadata={"help": "|late - early| / early mean response length above this is a drift"}
    )
    length_reward_corr: float = field(
        default=0.6,
        metadata={"help": "|Pearson r| of reward and length (across steps, or mean within steps) above this"},
    )
    length_reward_min_change: float = field(
        default=0.2,
        metadata={"help": "across-step coupling needs length to move by this relative amount too"},
    )
    truncation_share: float = field(
        default=0.2,
        metadata={"help": "share of responses cut at max_response_length (late window) that counts as long"},
    )
    spike_factor: float = field(
        default=5.0,
        metadata={"help": "a step whose grad norm (or ppo_kl) exceeds this x the run's median is a spike"},
    )
    reward_rise: float = field(
        default=0.1, metadata={"help": "late - early mean reward above this is a rise"}
    )
    rate_fall: float = field(
        default=0.1, metadata={"help": "early - late pass rate or answer rate above this is a fall"}
    )


@dataclass
class Finding:
    name: str
    summary: str
    numbers: dict
    patch: str
    # The patch as command-line overrides (empty when it is not a recipe change).
    overrides: list[str] = field(default_factory=list)
    # The patched run's whole command for this run's recipe, once checked (runnable_patches).
    command: str = ""

    def render(self) -> str:
        nums = ", ".join(f"{k}={_fmt(v)}" for k, v in self.numbers.items())
        text = f"[{self.name}] {self.summary}\n    numbers: {nums}\n    patch:   {self.patch}"
        return text + (f"\n    run:     {self.command}" if self.command else "")


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


# ---- reading ------------------------------------------------------------------------------------------


def read_metrics(run_dir: Path) -> list[dict]:
    """Rows of metrics.jsonl, flat, sorted by step (verl's {"step", "data"} lines are flattened)."""
    path = run_dir / "metrics.jsonl" if run_dir.is_dir() else run_dir
    if not path.is_file():
        raise UserError(f"{path} not found: point rlvr diagnose at a run directory written by `rlvr train`")
    rows = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        if isinstance(row.get("data"), dict):
            row = {"step": row.get("step"), **row["data"]}
        if row.get("step") is None and row.get(STEP) is not None:
            row["step"] = row[STEP]  # `rlvr train`'s metrics.jsonl keys steps by verl's training/global_step
        rows.append(row)
    rows.sort(key=lambda r: (r.get("step") is None, r.get("step") or 0))
    return rows


def merged_rows(run_dir: Path, rollout_dir: Path | None = None) -> list[dict]:
    rows = read_metrics(run_dir)
    derived = derived_metrics(rollout_dir or run_dir / "rollouts")
    if not derived and (run_dir / DERIVED_NAME).is_file():
        derived = {r["step"]: r for r in read_metrics(run_dir / DERIVED_NAME)}
    for row in rows:
        extra = derived.get(row.get("step"))
        if extra:
            for key, value in extra.items():
                row.setdefault(key, value)
    return rows


# ---- findings -----------------------------------------------------------------------------------------


def _series(rows: list[dict], key: str) -> list[float]:
    return [float(r[key]) for r in rows if _finite(r.get(key))]


def _windows(values: list[float], frac: float) -> tuple[float, float] | None:
    if len(values) < 2:
        return None
    k = max(1, int(len(values) * frac))
    return sum(values[:k]) / k, sum(values[-k:]) / k


def _median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _rate_series(rows: list[dict], kind: str) -> dict[str, list[float]]:
    """Per-verifier pass rates ("pass") or answer rates ("answer" = 1 - parse failures / count)."""
    out: dict[str, list[float]] = {}
    verifiers = sorted(
        {k.split("/")[1] for r in rows for k in r if k.startswith("rlvr/") and k.endswith("/pass_rate")}
    )
    for v in verifiers:
        values = []
        for r in rows:
            if kind == "pass" and _finite(r.get(f"rlvr/{v}/pass_rate")):
                values.append(float(r[f"rlvr/{v}/pass_rate"]))
            elif (
                kind == "answer"
                and _finite(r.get(f"rlvr/{v}/parse_failures"))
                and _finite(r.get(f"rlvr/{v}/count"))
                and r[f"rlvr/{v}/count"] > 0
            ):
                values.append(1.0 - float(r[f"rlvr/{v}/parse_failures"]) / float(r[f"rlvr/{v}/count"]))
        if values:
            out[v] = values
    return out


def diagnose(rows: list[dict], t: Thresholds | None = None) -> list[Finding]:
    t = t or Thresholds()
    findings: list[Finding] = []
    n = len([r for r in rows if _finite(r.get(SCORE))])
    if n == 0:
        raise UserError("the run has no training step with critic/score/mean: nothing to diagnose yet")
    trends = n >= t.min_steps

    zero = _series(rows, ZERO_VAR)
    evicted = _series(rows, "training/filter_groups/evicted_samples")
    if zero:
        w = _windows(zero, t.window) or (zero[0], zero[0])
        late = w[1]
        if late > t.zero_variance_share:
            right = _windows(_series(rows, ALL_RIGHT), t.window)
            wrong = _windows(_series(rows, ALL_WRONG), t.window)
            findings.append(
                Finding(
                    "zero_variance_groups",
                    f"{late:.0%} of prompt groups (late steps) got the same reward for every response: zero advantage, "
                    "no gradient, wasted generation",
                    {
                        "zero_variance_share_late": late,
                        "zero_variance_share_early": w[0],
                        "all_max_share_late": right[1] if right else float("nan"),
                        "all_min_share_late": wrong[1] if wrong else float("nan"),
                        "steps": len(zero),
                    },
                    "rlvr train ... algo=dapo  (dynamic sampling drops all-right / all-wrong groups and refills the "
                    "batch, arXiv:2503.14476 sec. 3.2); if most groups are all-right the task is too easy, all-wrong "
                    "too hard: change the data mix too",
                    ["algo=dapo"],
                )
            )
    elif evicted:
        pass  # dynamic sampling already on: verl counts the evicted groups itself

    if trends:
        ent = _series(rows, ENTROPY) or _series(rows, ENTROPY_IN_UPDATE)
        w = _windows(ent, t.window)
        rw = _windows(_series(rows, SCORE), t.window)
        # Falling entropy is what learning looks like on a task with one right answer; it is a collapse
        # only when it comes with the stall it would explain: reward flat or falling.
        stalled = rw is not None and rw[1] - rw[0] <= t.reward_rise
        if w and w[0] > 0 and w[1] / w[0] < t.entropy_ratio and stalled:
            findings.append(
                Finding(
                    "entropy_collapse",
                    f"policy entropy fell to {w[1] / w[0]:.0%} of its early level while the reward stalled "
                    f"({rw[0]:.3f} -> {rw[1]:.3f}): the policy stopped exploring before it learned",
                    {
                        "entropy_early": w[0],
                        "entropy_late": w[1],
                        "ratio": w[1] / w[0],
                        "reward_early": rw[0],
                        "reward_late": rw[1],
                    },
                    "raise the upper clip bound (clip-higher, arXiv:2503.14476 sec. 3.1): "
                    "actor_rollout_ref.actor.clip_ratio_high=0.28, or algo=dapo",
                    ["actor_rollout_ref.actor.clip_ratio_high=0.28"],
                )
            )

        lengths = _series(rows, LENGTH)
        scores = _series(rows, SCORE)
        w = _windows(lengths, t.window)
        drift = abs(w[1] - w[0]) / w[0] if w and w[0] > 0 else 0.0
        if w and drift > t.length_drift:
            findings.append(
                Finding(
                    "length_drift",
                    f"mean response length went from {w[0]:.1f} to {w[1]:.1f} tokens ({(w[1] - w[0]) / w[0]:+.0%})",
                    {"length_early": w[0], "length_late": w[1], "relative_change": (w[1] - w[0]) / w[0]},
                    "algo=dr_grpo: sums tokens over a constant normaliser and drops the std division, removing GRPO's "
                    "length bias (arXiv:2503.20783 sec. 3.1-3.2)",
                    ["algo=dr_grpo"],
                )
            )
        paired = [
            (float(r[SCORE]), float(r[LENGTH]))
            for r in rows
            if _finite(r.get(SCORE)) and _finite(r.get(LENGTH))
        ]
        across = _pearson([p[0] for p in paired], [p[1] for p in paired])
        within = _series(rows, LEN_CORR)
        within_mean = sum(within) / len(within) if within else None
        coupled_across = (
            across is not None and abs(across) > t.length_reward_corr and drift > t.length_reward_min_change
        )
        coupled_within = within_mean is not None and abs(within_mean) > t.length_reward_corr
        if coupled_across or coupled_within:
            findings.append(
                Finding(
                    "length_reward_coupling",
                    "reward moves with response length: the policy can raise reward by changing length rather than "
                    "correctness",
                    {
                        "corr_across_steps": across if across is not None else float("nan"),
                        "corr_within_steps_mean": within_mean if within_mean is not None else float("nan"),
                        "length_relative_change": drift,
                    },
                    "algo=dr_grpo (length-unbiased aggregation, arXiv:2503.20783 sec. 3.1); check the verifier does not "
                    "pay for length",
                    ["algo=dr_grpo"],
                )
            )

        clip = _series(rows, CLIP)
        clip_late = (_windows(clip, t.window) or (0.0, 0.0))[1] if clip else 0.0
        spikes = {}
        for key in (GRAD_NORM, PPO_KL):
            values = _series(rows, key)
            if len(values) >= t.min_steps:
                med = _median([abs(v) for v in values])
                if med > 0:
                    count = sum(1 for v in values if abs(v) > t.spike_factor * med)
                    if count:
                        spikes[key] = (count, max(abs(v) for v in values) / med)
        long_lengths = bool(lengths) and w is not None and w[1] >= _median(lengths)
        if spikes and (clip_late > t.truncation_share or long_lengths and drift > t.length_reward_min_change):
            nums = {f"{k.split('/')[-1]}_spikes": c for k, (c, _) in spikes.items()}
            nums.update({f"{k.split('/')[-1]}_max_over_median": r for k, (_, r) in spikes.items()})
            nums["truncated_share_late"] = clip_late
            findings.append(
                Finding(
                    "unstable_long_responses",
                    "the update spikes while responses are long or truncated: token-level importance ratios are noisy "
                    "over long sequences",
                    nums,
                    "algo=gspo (one length-normalised importance ratio per sequence, arXiv:2507.18071 sec. 4); if many "
                    "responses hit max_response_length, raise it or use DAPO's overlong shaping (sec. 3.4)",
                    ["algo=gspo"],
                )
            )

        rw = _windows(scores, t.window)
        if rw and rw[1] - rw[0] > t.reward_rise:
            for kind, label in (("pass", "pass rate"), ("answer", "answer rate")):
                for verifier, series in _rate_series(rows, kind).items():
                    pw = _windows(series, t.window)
                    if pw and pw[0] - pw[1] > t.rate_fall:
                        findings.append(
                            Finding(
                                "reward_hacking",
                                f"reward rose while the {verifier} verifier's {label} fell: the reward pays for something "
                                "other than verified correctness",
                                {
                                    "reward_early": rw[0],
                                    "reward_late": rw[1],
                                    f"{kind}_rate_early": pw[0],
                                    f"{kind}_rate_late": pw[1],
                                    "verifier": verifier,
                                },
                                "inspect the rollouts of the late steps; remove what the reward pays beyond the verifier "
                                "(format/length bonuses, partial credit) or harden the verifier; see shared reward-hacking "
                                "tests in tests/verifiers",
                            )
                        )
    return findings


# ---- patches that run on this experiment ---------------------------------------------------------------

# DAPO's overlong shaping needs a buffer shorter than the response budget; on short-answer tasks (the
# CPU demo's 4 tokens) there is nothing to shape, and the buffer would not even fit.
OVERLONG = "reward.reward_kwargs.overlong_buffer_cfg"


def runnable_patch(run_dir: Path, overrides: list[str]) -> str:
    """The `rlvr train` command of the patched run for this run's recipe, composed and validated here;
    or why the patch does not compose on it. A patch changes the algorithm, so it is a new run."""

    from rlvr_launch.recipes import (
        compose,
        distillation,  # noqa: F401 - registers the `distillation` composition check
    )
    from rlvr_launch.runs.rundir import RunDir

    stored = RunDir(run_dir).stored_overrides()
    if stored is None:
        return ""
    merged = compose.merge_overrides(stored, overrides)
    try:
        # rlvr_launch.recipes.recipe_checks sizes DAPO's overlong buffer to the recipe's response length
        compose.compose(merged)
    except UserError as e:
        return f"(does not compose on this run's recipe: {e})"
    return "rlvr train " + " ".join(merged) + " --run-dir NEW_DIR  (composes and validates for this run)"


def runnable_patches(run_dir: Path, findings: list[Finding]) -> None:
    done: dict[tuple[str, ...], str] = {}
    for finding in findings:
        if finding.overrides:
            key = tuple(finding.overrides)
            if key not in done:
                done[key] = runnable_patch(run_dir, finding.overrides)
            finding.command = done[key]


# ---- command ------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dir", type=Path, help="a run directory written by `rlvr train` (or a metrics.jsonl)"
    )
    parser.add_argument(
        "--rollouts", type=Path, default=None, help="rollout dumps (default: RUN_DIR/rollouts)"
    )
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    for f in fields(Thresholds):
        parser.add_argument(
            f"--{f.name.replace('_', '-')}",
            type=type(f.default),
            default=f.default,
            help=f.metadata["help"] + f" (default {f.default})",
        )


def run(args: argparse.Namespace) -> int:
    thresholds = Thresholds(**{f.name: getattr(args, f.name) for f in fields(Thresholds)})
    run_dir = args.run_dir
    rows = (
        merged_rows(run_dir if run_dir.is_dir() else run_dir.parent, args.rollouts)
        if run_dir.is_dir()
        else read_metrics(run_dir)
    )
    findings = diagnose(rows, thresholds)
    if run_dir.is_dir():
        runnable_patches(run_dir, findings)
    if args.json:
        print(
            json.dumps(
                {
                    "steps": len(rows),
                    "thresholds": asdict(thresholds),
                    "findings": [asdict(f) for f in findings],
                },
                indent=2,
            )
        )
        return 0
    steps = [r.get("step") for r in rows]
    print(f"rlvr diagnose {run_dir}: {len(rows)} steps ({steps[0]}..{steps[-1]})")
    if not any(ZERO_VAR in r for r in rows):
        print(
            "  (no group-level data: run with trainer.rollout_data_dir=RUN_DIR/rollouts to judge zero-variance groups)"
        )
    if not findings:
        print("no finding: nothing here calls for a patch")
    for f in findings:
        print(f.render())
    return 0
