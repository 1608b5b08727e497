"""A run directory: what one training run leaves behind, and how a resumed run continues it.

    RUN_DIR/
      config.yaml         the resolved verl config of the latest attempt
      recipe.json         the overrides the run was composed from (`rlvr train` args; a resume adds its own)
      metrics.jsonl       one JSON object per training step, keyed by verl's metric names
                          (`training/global_step`, `critic/score/mean`, `val-core/...`), merged over attempts
      reward_curve.png    mean reward per step (and validation reward where measured; per domain in a mixed run)
      checkpoints/        verl's checkpoints (trainer.default_local_dir); resume starts from the latest
      attempts/N.jsonl    raw metrics of attempt N as verl's file logger wrote them
      attempts/N.json     where attempt N started (the checkpointed step it resumed from)

Merging: an attempt that resumed from step s replaces every step after s that earlier attempts
logged (their model state was rolled back to s), so metrics.jsonl holds each step exactly once.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from rlvr_launch.errors import UserError

STEP_KEY = "training/global_step"
REWARD_KEY = "critic/score/mean"
FORMAT_KEY = "rubric/format/mean"  # rlvr_verifiers.rubric: a rubric-paid run's format rate per step


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        self._lock_handle = None

    # --- layout -------------------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.path / "config.yaml"

    @property
    def recipe_path(self) -> Path:
        return self.path / "recipe.json"

    def stored_overrides(self) -> list[str] | None:
        """The overrides this run was composed from, or None for a directory without recipe.json."""
        if not self.recipe_path.is_file():
            return None
        try:
            overrides = json.loads(self.recipe_path.read_text())["overrides"]
        except (ValueError, KeyError, TypeError):
            raise UserError(
                f'{self.recipe_path} is corrupt: expected {{"overrides": [...]}}; restore it or start another run'
            ) from None
        return [str(o) for o in overrides]

    def save_recipe(self, overrides: list[str]) -> None:
        tmp = self.recipe_path.with_suffix(".json.partial")
        tmp.write_text(json.dumps({"overrides": list(overrides)}, indent=1) + "\n")
        tmp.replace(self.recipe_path)

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def curve_path(self) -> Path:
        return self.path / "reward_curve.png"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def attempts_dir(self) -> Path:
        return self.path / "attempts"

    # --- exclusive use --------------------------------------------------------------------------
    def acquire(self) -> None:
        """One `rlvr train` per run directory: a second one fails at once instead of corrupting it."""
        self.path.mkdir(parents=True, exist_ok=True)
        handle = open(self.path / ".lock", "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise UserError(
                f"run directory {self.path} is in use by {holder}; wait for it to finish or choose "
                "another --run-dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        self._lock_handle = handle

    def release(self) -> None:
        if self._lock_handle is not None:
            fcntl.flock(self._lock_handle, fcntl.LOCK_UN)
            self._lock_handle.close()
            self._lock_handle = None

    # --- checkpoints ----------------------------------------------------------------------------
    def latest_checkpoint_step(self) -> int:
        marker = self.checkpoints / "latest_checkpointed_iteration.txt"
        if not marker.exists():
            return 0
        try:
            return int(marker.read_text().strip())
        except ValueError:
            raise UserError(f"{marker} is corrupt: expected a step number; remove it to start over") from None

    def resume_point(self) -> tuple[int, int]:
        """(step to resume from, newest checkpointed step). verl saves a step's checkpoint before it logs
        that step's metrics, so a run killed between the two leaves a checkpoint whose metrics row is never
        written; resuming there would lose the row for good. Then the newest earlier checkpoint whose row
        exists is the resume point, and the step is trained and logged again. Without such a checkpoint the
        newest is kept (its row stays missing) rather than training every step again from step 0."""
        latest = self.latest_checkpoint_step()
        if not latest:
            return 0, 0
        logged = {int(r[STEP_KEY]) for r in self.merged_metrics()}
        if latest in logged:
            return latest, latest
        complete = set(self.complete_checkpoints())
        for step in sorted(logged, reverse=True):
            if step < latest and step in complete:
                return step, latest
        return latest, latest  # no earlier checkpoint: keep the newest (its row stays missing)

    def complete_checkpoints(self) -> list[int]:
        """Steps whose checkpoint folder holds the actor's state and the dataloader's (verl writes data.pt
        after the actor's files), oldest first."""
        steps = []
        for path in self.checkpoints.glob("global_step_*"):
            suffix = path.name.removeprefix("global_step_")
            if suffix.isdigit() and (path / "actor").is_dir() and (path / "data.pt").is_file():
                steps.append(int(suffix))
        return sorted(steps)

    def prune_checkpoints(self, keep: int | None) -> list[Path]:
        """Remove what a long or restarted run would otherwise pile up, only below the tracker's step (verl
        never writes there again): folders verl's retention emptied (it deletes a checkpoint's actor/ and
        leaves the folder with data.pt, one a save_freq) and, beyond the newest `keep` complete
        checkpoints, older complete ones (verl's retention forgets the checkpoints of earlier attempts).
        `keep` None or <= 0: every complete checkpoint stays, as verl's own default."""
        latest = self.latest_checkpoint_step()
        if not latest or not self.checkpoints.is_dir():
            return []
        complete = self.complete_checkpoints()
        kept = set(complete[-keep:]) if keep and keep > 0 else set(complete)
        kept.add(latest)
        removed = []
        for path in self.checkpoints.glob("global_step_*"):
            suffix = path.name.removeprefix("global_step_")
            if suffix.isdigit() and int(suffix) < latest and int(suffix) not in kept:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        return removed

    # --- attempts -------------------------------------------------------------------------------
    def attempt_numbers(self) -> list[int]:
        if not self.attempts_dir.is_dir():
            return []
        return sorted(int(p.stem) for p in self.attempts_dir.glob("*.json") if p.stem.isdigit())

    def new_attempt(self, resume_from: int) -> Path:
        """Start attempt N+1; returns the path verl's file logger must write to."""
        self.attempts_dir.mkdir(parents=True, exist_ok=True)
        number = (self.attempt_numbers() or [0])[-1] + 1
        (self.attempts_dir / f"{number}.json").write_text(json.dumps({"resume_from": resume_from}))
        return self.attempts_dir / f"{number}.jsonl"

    @staticmethod
    def read_attempt(path: Path) -> dict[int, dict]:
        """verl's file logger lines ({"step": n, "data": {...}}) -> {step: merged metrics}."""
        steps: dict[int, dict] = {}
        if not path.exists():
            return steps
        for line in path.read_text().splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a kill; the step is redone by the next attempt
            step = int(record.get("step", record.get("data", {}).get(STEP_KEY, -1)))
            steps.setdefault(step, {}).update(record.get("data", {}))
        return steps

    def merged_metrics(self, extra: dict[int, dict] | None = None) -> list[dict]:
        merged: dict[int, dict] = {}
        for number in self.attempt_numbers():
            meta = json.loads((self.attempts_dir / f"{number}.json").read_text())
            resume_from = int(meta.get("resume_from", 0))
            merged = {s: m for s, m in merged.items() if s <= resume_from}
            for step, metrics in self.read_attempt(self.attempts_dir / f"{number}.jsonl").items():
                merged.setdefault(step, {}).update(metrics)
        rows = []
        for step in sorted(merged):
            row = {STEP_KEY: step, **merged[step], **(extra or {}).get(step, {})}
            row[STEP_KEY] = step
            rows.append(row)
        return rows

    def write_metrics(self, extra: dict[int, dict] | None = None) -> list[dict]:
        """Write metrics.jsonl; `extra` adds per-step figures (by step) to the rows verl logged."""
        rows = self.merged_metrics(extra)
        tmp = self.metrics_path.with_suffix(".jsonl.partial")
        with open(tmp, "w") as f:
            for row in rows:
                f.write(json.dumps(row, default=_json_default) + "\n")
        tmp.replace(self.metrics_path)
        return rows

    def plot_reward_curve(
        self, rows: list[dict], title: str = "", labels: dict[str, str] | None = None
    ) -> Path | None:
        """Reward per step, its moving average, one training-reward line per domain in a run over several
        (rlvr/domain/<domain>/reward_mean, runs.rollout_metrics), and one line per validation data source,
        each labelled with what it measures (`labels`: data source -> words, from the task recipe's
        rlvr.val_labels)."""
        train = [(r[STEP_KEY], r[REWARD_KEY]) for r in rows if _finite(r.get(REWARD_KEY))]
        domains = domain_reward_series(rows)
        # verl names the validation score val-core/<data_source>/<acc|reward>/mean@<n>.
        val_keys = sorted({k for r in rows for k in r if k.startswith("val-core/")})
        vals = {key: [(r[STEP_KEY], r[key]) for r in rows if _finite(r.get(key))] for key in val_keys}
        vals = {k: v for k, v in vals.items() if v}
        if not train and not vals and not domains:
            return None
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
        if train:
            xs, ys = zip(*train, strict=True)
            ax.plot(xs, ys, color="#9ab", linewidth=1, label="mean reward per step (train, sampled)")
            window = max(1, len(ys) // 10)
            smooth = [
                sum(ys[max(0, i - window + 1) : i + 1]) / len(ys[max(0, i - window + 1) : i + 1])
                for i in range(len(ys))
            ]
            ax.plot(xs, smooth, color="#1f5fa8", linewidth=2, label=f"moving average ({window} steps)")
        # a rubric-paid run (r1_zero, r1): the share of responses in the R1 format, per step
        fmt = [(r[STEP_KEY], r[FORMAT_KEY]) for r in rows if _finite(r.get(FORMAT_KEY))]
        if fmt:
            xs, ys = zip(*fmt, strict=True)
            ax.plot(
                xs, ys, color="#7f8c8d", linestyle=":", linewidth=2, label="format rate (rubric, sampled)"
            )
        # a mixed run: the training reward of each domain's responses, per step
        domain_colors = ["#16a085", "#d35400", "#2c3e50", "#f1c40f", "#7d3c98", "#a04000"]
        for i, (domain, points) in enumerate(domains.items()):
            xs, ys = zip(*points, strict=True)
            ax.plot(
                xs,
                ys,
                color=domain_colors[i % len(domain_colors)],
                linewidth=1.5,
                label=f"train reward: {domain} (sampled)",
            )
        colors = ["#c0392b", "#e67e22", "#27ae60", "#8e44ad"]
        for i, (key, points) in enumerate(vals.items()):
            xs, ys = zip(*points, strict=True)
            source = key.split("/")[1] if key.count("/") >= 2 else key
            label = (labels or {}).get(source) or key
            ax.plot(xs, ys, "o--", color=colors[i % len(colors)], label=f"validation: {label}")
        ax.set_xlabel("training step")
        ax.set_ylabel("reward")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        if domains:  # a mixed run's many lines: the legend below the axes, where it hides none of them
            fig.set_size_inches(7, 5)
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=7, frameon=False)
        else:
            ax.legend(loc="lower right", fontsize=8)
        ax.set_title(title or self.path.name, fontsize=10)
        fig.tight_layout()
        fig.savefig(self.curve_path)
        plt.close(fig)
        return self.curve_path


def domain_reward_series(rows: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """A mixed run's training reward per domain and step (rlvr/domain/<domain>/reward_mean, which
    runs.rollout_metrics derives from the rollout dumps); empty for a run with one domain."""
    from rlvr_launch.runs.rollout_metrics import split_domain_key

    keys = sorted({k for r in rows for k in r if (split_domain_key(k) or ("", ""))[1] == "reward_mean"})
    if len(keys) < 2:
        return {}
    series = {split_domain_key(k)[0]: [(r[STEP_KEY], r[k]) for r in rows if _finite(r.get(k))] for k in keys}
    return {domain: points for domain, points in series.items() if points}


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _json_default(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def iter_new_lines(path: Path, position: int) -> Iterator[tuple[int, str]]:
    """Complete lines appended to `path` after byte `position`, with the position after each."""
    if not path.exists():
        return
    with open(path, "rb") as f:
        f.seek(position)
        data = f.read()
    offset = position
    for raw in data.splitlines(keepends=True):
        if not raw.endswith(b"\n"):
            break
        offset += len(raw)
        yield offset, raw.decode(errors="replace")
