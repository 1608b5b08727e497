"""The driver of an rlvr Ray job: `python -m rlvr_launch.job ...`, run by Ray on the cluster's head.

Two ways in:
- `rlvr submit` ships the recipes and overrides it validated as the py_module `rlvr_jobspec` and runs
  `python -m rlvr_launch.job --job-id ID --config-package rlvr_jobspec [--run-dir DIR]`;
- a KubeRay RayJob (cluster/k8s) or a plain `ray job submit` composes on the cluster from overrides,
  against the recipes of the job's working_dir when it has recipes/ (`ray job submit --working-dir .`
  from a checkout), else of the rlvr installed in the image:
  `python -m rlvr_launch.job --job-id NAME experiment=NAME [overrides]`.
Either way the recipe is composed here (so ${oc.env:...} and `~` resolve in the cluster's environment) and
`train.run_training` runs verl's trainer on the cluster's Ray (RAY_ADDRESS is set by the Jobs API).

A bad recipe exits 2 with one line in the job's log, which `rlvr submit --follow` shows.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import sys
from pathlib import Path

from rlvr_launch.cli import UserError

DEFAULT_RUNS_DIR = Path("~/rlvr-runs")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rlvr_launch.job", description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (when no --config-package)")
    parser.add_argument(
        "--job-id", required=True, help="the job's name; the default run dir is named after it"
    )
    parser.add_argument(
        "--config-package",
        default=None,
        help="package holding recipes/ and overrides.json (rlvr submit's jobspec)",
    )
    parser.add_argument(
        "--run-dir",
        default=None,
        help="absolute run directory (default: $RLVR_RUNS_DIR/<job id>, else ~/rlvr-runs/<job id>)",
    )
    return parser.parse_args(argv)


def load_config(args: argparse.Namespace):
    """Compose the recipe here, on the cluster: from a shipped jobspec or from the image's recipes."""
    overrides = list(args.overrides)
    if args.config_package:
        if overrides:
            raise UserError("--config-package carries the overrides; give them to `rlvr submit`, not here")
        try:
            package = importlib.resources.files(args.config_package)
        except ModuleNotFoundError:
            raise UserError(
                f"package {args.config_package} was not shipped with this job: submit with `rlvr submit`"
            ) from None
        overrides = json.loads((package / "overrides.json").read_text())
        # compose() reads RLVR_RECIPES_DIR: the recipes validated on the submitting machine.
        os.environ["RLVR_RECIPES_DIR"] = str(package / "recipes")
        print(f"rlvr job: recipe overrides {' '.join(overrides) or '(none)'}", flush=True)
    elif "RLVR_RECIPES_DIR" not in os.environ and (Path.cwd() / "recipes" / "rlvr.yaml").is_file():
        # `ray job submit --working-dir .` from a checkout: the job runs in that copy, whose recipes
        # are the ones meant (rlvr's code may arrive as py_modules, away from any recipes/ folder).
        os.environ["RLVR_RECIPES_DIR"] = str(Path.cwd() / "recipes")
    from rlvr_launch.compose import compose

    return compose(overrides)


def run_dir_for(args: argparse.Namespace) -> Path:
    if args.run_dir:
        run_dir = Path(args.run_dir)
        if not run_dir.is_absolute():
            raise UserError(f"--run-dir {run_dir} is relative; the job's working directory is temporary")
        return run_dir
    runs = Path(os.environ.get("RLVR_RUNS_DIR") or DEFAULT_RUNS_DIR).expanduser()
    return runs / args.job_id


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        cfg = load_config(args)
        run_dir = run_dir_for(args)
        print(f"rlvr job {args.job_id}: run dir {run_dir}", flush=True)
        # run_training's ray.init passes the workers' env vars (worker_env, verl's own) again; inside a
        # job Ray refuses a runtime_env that repeats the job's keys unless the driver's may override
        # them. Only same-named env vars are overridden; the job's py_modules and other env vars stay.
        os.environ["RAY_OVERRIDE_JOB_RUNTIME_ENV"] = "1"
        from rlvr_launch.train import run_training

        status = run_training(cfg, run_dir)
    except UserError as e:
        print(f"rlvr job: error: {e}", file=sys.stderr)
        return 2
    if status:
        print(f"rlvr job {args.job_id}: training ended with status {status}", file=sys.stderr, flush=True)
        return int(status)
    print(f"rlvr job {args.job_id}: finished; metrics in {run_dir / 'metrics.jsonl'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
