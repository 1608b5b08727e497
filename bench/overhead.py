"""What rlvr's layer costs per training step: `rlvr train` vs verl's own entry point, same config.

    python bench/overhead.py [--steps 8] [--rounds 2] [--out FILE] [overrides ...]
    python bench/overhead.py --report bench/results/overhead.json   # the table of a recorded run

Both runs train the same resolved config (the CPU demo by default) for the same steps on this
machine, alternating which goes first each round. verl's entry point is `python -m
verl.trainer.main_ppo --config-path DIR --config-name config` on the config.yaml that `rlvr train`
resolved (its paths pointed at the baseline's own directory). The figure is verl's own
`timing_s/step`, median over the steps after the first (which includes start-up), and the ratio
rlvr / verl; rlvr's layer (progress thread, file logger, private Ray) should cost nothing measurable.
The figures are saved (--out, default bench/results/overhead.json); `--report FILE` prints a saved
run's table without training.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _saved import save  # bench/ is the script's folder: on sys.path

ROOT = Path(__file__).resolve().parents[1]
SMALL_DEFAULT = ["trainer.val_before_train=false", "trainer.test_freq=-1", "trainer.save_freq=-1"]


def _step_times(metrics_file: Path, step_key: str = "timing_s/step") -> list[float]:
    times = {}
    for line in metrics_file.read_text().splitlines():
        record = json.loads(line)
        data = record.get("data", record)
        step = record.get("step", data.get("training/global_step"))
        if step_key in data:
            times[int(step)] = float(data[step_key])
    return [times[s] for s in sorted(times)]


def run_rlvr(work: Path, overrides: list[str]) -> tuple[list[float], float]:
    run_dir = work / "rlvr"
    started = time.time()
    out = subprocess.run(
        [sys.executable, "-m", "rlvr_launch.cli", "train", *overrides, "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        cwd=work,
    )
    if out.returncode != 0:
        raise SystemExit(f"rlvr train failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return _step_times(run_dir / "metrics.jsonl"), time.time() - started


def run_verl(work: Path, rlvr_config: Path) -> tuple[list[float], float]:
    """verl's own entry point on the config rlvr resolved, with the baseline's own paths."""
    from rlvr_cluster.env import worker_env

    base = work / "verl"
    base.mkdir(parents=True, exist_ok=True)
    cfg = yaml.safe_load(rlvr_config.read_text())
    cfg["trainer"]["default_local_dir"] = str(base / "checkpoints")
    cfg["trainer"]["logger"] = ["file"]
    local = cfg["rlvr"]["local_ray"]
    ray_init = cfg.setdefault("ray_kwargs", {}).setdefault("ray_init", {})
    ray_init["num_cpus"] = int(local["num_cpus"]) or None
    (base / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, **worker_env(_Namespace(cfg)), "VERL_FILE_LOGGER_PATH": str(base / "metrics.jsonl")}
    overrides = [
        f"+ray_kwargs.ray_init.num_gpus={int(local['num_gpus'])}",
        f"+ray_kwargs.ray_init.resources={{{local['verifier_resource']}:{float(local['verifier_slots'])}}}",
        "+ray_kwargs.ray_init.include_dashboard=false",
        f"+ray_kwargs.ray_init._temp_dir={tempfile.mkdtemp(prefix='rlvr-bench-', dir='/tmp')}",
        "+ray_kwargs.ray_init.address=local",
    ]
    started = time.time()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "verl.trainer.main_ppo",
            f"--config-path={base}",
            "--config-name=config",
            *overrides,
        ],
        capture_output=True,
        text=True,
        cwd=base,
        env=env,
    )
    if out.returncode != 0:
        raise SystemExit(f"verl main_ppo failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return _step_times(base / "metrics.jsonl"), time.time() - started


class _Namespace:
    """Attribute access over the plain dict config (worker_env reads cfg.trainer.device)."""

    def __init__(self, data):
        self._data = data

    def __getattr__(self, name):
        value = self._data[name]
        return _Namespace(value) if isinstance(value, dict) else value


def report(saved: dict) -> None:
    """The side-by-side table of one saved run (`main`'s result, or a recorded file)."""
    per_tool, wall = saved["per_step_s"], saved["wall_s"]
    med = {k: statistics.median(v) for k, v in per_tool.items()}
    print()
    print(f"{'':<28}{'rlvr train':>14}{'verl main_ppo':>16}{'ratio':>9}")
    print(
        f"{'median s/step (after step 1)':<28}{med['rlvr']:>14.3f}{med['verl']:>16.3f}{med['rlvr'] / med['verl']:>9.3f}"
    )
    mw = {k: statistics.median(v) for k, v in wall.items()}
    print(
        f"{'median wall s per run':<28}{mw['rlvr']:>14.1f}{mw['verl']:>16.1f}{mw['rlvr'] / mw['verl']:>9.3f}"
    )
    print(
        f"steps per tool: {len(per_tool['rlvr'])} vs {len(per_tool['verl'])}; rounds: {saved['rounds']}; "
        f"overrides: {' '.join(saved['overrides']) or '(none)'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench/results/overhead.json"))
    parser.add_argument("--report", type=Path, default=None, help="only print the table of a saved run")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    if args.report:
        report(json.loads(args.report.read_text()))
        return
    overrides = [*SMALL_DEFAULT, f"trainer.total_training_steps={args.steps}", *args.overrides]

    per_tool: dict[str, list[float]] = {"rlvr": [], "verl": []}
    wall: dict[str, list[float]] = {"rlvr": [], "verl": []}
    with tempfile.TemporaryDirectory(prefix="rlvr-overhead-") as tmp:
        config = None  # the config rlvr resolved: the baseline's input
        for round_ in range(args.rounds):
            # Alternate which goes first; the first round must start with rlvr to have a config.
            order = ["rlvr", "verl"] if round_ % 2 == 0 else ["verl", "rlvr"]
            for tool in order:
                work = Path(tmp) / f"{tool}-{round_}"
                work.mkdir()
                if tool == "rlvr":
                    times, seconds = run_rlvr(work, overrides)
                    config = work / "rlvr" / "config.yaml"
                else:
                    times, seconds = run_verl(work, config)
                per_tool[tool] += times[1:]
                wall[tool].append(seconds)
                print(
                    f"round {round_ + 1} {tool}: {statistics.median(times[1:]):.3f} s/step "
                    f"({len(times)} steps, {seconds:.0f} s wall)",
                    flush=True,
                )
    saved = save(
        args.out,
        {
            "steps": args.steps,
            "rounds": args.rounds,
            "overrides": args.overrides,
            "per_step_s": per_tool,
            "wall_s": wall,
        },
    )
    report(saved)
    print(f"saved: {args.out}")


if __name__ == "__main__":
    main()
