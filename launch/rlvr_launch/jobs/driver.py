"""The driver of an rlvr Ray job: `python -m rlvr_launch.jobs.driver ...`, run by Ray on the cluster's head.

Two ways in:
- `rlvr submit` ships the recipes and overrides it validated as the py_module `rlvr_jobspec` and runs
  `python -m rlvr_launch.jobs.driver --job-id ID --config-package rlvr_jobspec [--run-dir DIR]`;
- a KubeRay RayJob (cluster/k8s) or a plain `ray job submit` composes on the cluster from overrides,
  against the recipes of the job's working_dir when it has recipes/ (`ray job submit --working-dir .`
  from a checkout), else of the rlvr installed in the image:
  `python -m rlvr_launch.jobs.driver --job-id NAME experiment=NAME [overrides]`.
Either way the recipe is composed here (so ${oc.env:...} and `~` resolve in the cluster's environment) and
`train.run_training` runs verl's trainer on the cluster's Ray (RAY_ADDRESS is set by the Jobs API).
A run directory that already holds a run (config.yaml) continues its stored recipe (recipe.json) with the
job's overrides on top, as `rlvr train --run-dir` resumes; a new run stores its overrides there.

Where the recipes come from without a jobspec, first found wins: RLVR_RECIPES_DIR; the `recipes` folder
shipped as a py_module by cluster/runtime_env.yaml (`ray job submit --runtime-env cluster/runtime_env.yaml`
from a checkout: that copy of rlvr's code runs from Ray's package cache, away from any recipes/, so the
recipes travel beside it); the job's working_dir (`recipes/` in it); the project the imported rlvr_launch
belongs to; the installed rlvr distribution's source (the image's editable /opt/rlvr).

`--prepare-data` converts the recipe's task data onto the cluster (`rlvr data TASK --out
${rlvr.data_dir}/TASK`, from the hub where one is reachable, or `--data-source`) when its parquet files
are missing, before training: on KubeRay and the VM cluster RLVR_DATA_DIR=/runs/data, the shared runs
volume the trainer nodes read.

A bad recipe exits 2 with one line in the job's log, which `rlvr submit --follow` shows.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import sys
from pathlib import Path

from rlvr_launch.errors import UserError
from rlvr_launch.recipes import distillation  # noqa: F401 - registers the `distillation` composition check
from rlvr_launch.runs import mix as task_mix  # registers the `mix` composition check (rlvr.mix)

DEFAULT_RUNS_DIR = Path("~/rlvr-runs")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m rlvr_launch.jobs.driver", description=__doc__.splitlines()[0]
    )
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
    parser.add_argument(
        "--prepare-data",
        action="store_true",
        help="convert the recipe's task data into ${rlvr.data_dir}/TASK first when it is missing "
        "(`rlvr data TASK`; from the hub unless --data-source)",
    )
    parser.add_argument(
        "--data-source", default=None, help="with --prepare-data: a local file/folder or hub id to convert"
    )
    return parser.parse_args(argv)


def _recipes_under(folder: Path) -> Path | None:
    return folder if (folder / "rlvr.yaml").is_file() else None


def find_recipes() -> Path | None:
    """The recipes a job composes against when no jobspec carries them (see the module docstring)."""
    cwd = Path.cwd()
    for entry in sys.path:  # a `recipes` py_module first: it travelled with the code that runs
        if entry and Path(entry).resolve() != cwd.resolve():
            found = _recipes_under(Path(entry) / "recipes")
            if found:
                return found
    found = _recipes_under(cwd / "recipes")  # the job's working_dir
    if found:
        return found
    import rlvr_launch

    found = _recipes_under(Path(rlvr_launch.__file__).resolve().parents[2] / "recipes")
    if found:
        return found
    try:
        import importlib.metadata
        from urllib.parse import unquote, urlparse

        direct = importlib.metadata.distribution("rlvr").read_text("direct_url.json")
        url = json.loads(direct or "{}").get("url", "")
        if url.startswith("file://"):
            return _recipes_under(Path(unquote(urlparse(url).path)) / "recipes")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        pass
    return None


def prepare_task_data(cfg, source: str | None = None) -> bool:
    """Convert the recipe's task into verl's parquet under ${rlvr.data_dir}/TASK when its files are
    missing. Returns True when it converted, False when the data was there (or the task builds its own)."""
    from rlvr_launch.data import convert as data
    from rlvr_launch.data.converters import NAMES

    task = str(cfg.rlvr.get("task") or "")
    files = []
    for key in ("train_files", "val_files"):
        value = cfg.data[key]
        files += [value] if isinstance(value, str) else list(value)
    missing = [f for f in files if not Path(f).is_file()]
    if not missing:
        print(f"rlvr job: data of task {task} already in place ({', '.join(files)})", flush=True)
        return False
    if task_mix.weights(cfg):
        return False  # a recipe's mixture (rlvr.mix): train's prepare step builds it (runs/mix.py)
    if task not in NAMES:
        if (cfg.rlvr.get("prepare") or {}).get(task):
            return False  # generated by rlvr itself before training (the addition task)
        raise UserError(f"--prepare-data: task {task!r} has no converter; known: {', '.join(NAMES)}")
    out = Path(str(cfg.rlvr.data_dir)) / task
    print(f"rlvr job: preparing task {task} into {out} (missing: {', '.join(missing)})", flush=True)
    report = data.prepare(task, out, source)
    print(data.format_report(report), flush=True)
    still = [f for f in files if not Path(f).is_file()]
    if still:
        raise UserError(
            f"--prepare-data wrote {out}, but the recipe reads {', '.join(still)}: point data.train_files/"
            f"val_files (or RLVR_DATA_DIR) at {out.parent}"
        )
    return True


def load_config(args: argparse.Namespace):
    """Compose the recipe here, on the cluster: from a shipped jobspec or from the image's recipes."""
    from rlvr_launch.recipes.compose import compose

    return compose(load_overrides(args))


def load_overrides(args: argparse.Namespace) -> list[str]:
    """The job's overrides (the jobspec's, or the command line's), with RLVR_RECIPES_DIR set to the
    recipes they compose against."""
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
    elif "RLVR_RECIPES_DIR" not in os.environ:
        # `ray job submit` composes from overrides: rlvr's code may arrive as py_modules, away from any
        # recipes/ folder, so find the recipes meant (find_recipes) instead of the code's neighbours.
        recipes = find_recipes()
        if recipes is None:
            raise UserError(
                "no recipes found for this job: submit from a checkout with `--working-dir .` or "
                "`--runtime-env cluster/runtime_env.yaml` (it ships recipes/), use `rlvr submit`, or set "
                "RLVR_RECIPES_DIR in the job's env_vars"
            )
        os.environ["RLVR_RECIPES_DIR"] = str(recipes)
        print(f"rlvr job: recipes from {recipes}", flush=True)
    return overrides


def job_recipe(args: argparse.Namespace, run_dir: Path):
    """(config, overrides) the job trains: a run directory that already holds a run continues that
    run's stored recipe with the job's overrides on top, exactly as `rlvr train --run-dir` resumes
    (train.resume_recipe: printed as a diff; model/algorithm/tokenizer changes refused)."""
    from rlvr_launch.recipes.compose import compose
    from rlvr_launch.runs.rundir import RunDir
    from rlvr_launch.runs.train import resume_recipe

    overrides = load_overrides(args)
    if RunDir(run_dir).config_path.is_file():
        return resume_recipe(RunDir(run_dir), overrides)
    return compose(overrides), overrides


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
        run_dir = run_dir_for(args)
        cfg, overrides = job_recipe(args, run_dir)
        if args.prepare_data:
            prepare_task_data(cfg, args.data_source)
        print(f"rlvr job {args.job_id}: run dir {run_dir}", flush=True)
        # run_training's ray.init passes the workers' env vars (worker_env, verl's own) again; inside a
        # job Ray refuses a runtime_env that repeats the job's keys unless the driver's may override
        # them. Only same-named env vars are overridden; the job's py_modules and other env vars stay.
        os.environ["RAY_OVERRIDE_JOB_RUNTIME_ENV"] = "1"
        from rlvr_launch.runs.train import run_training

        # The overrides go to RUN_DIR/recipe.json, so that a resume (another job, or `rlvr train
        # --run-dir` on the shared volume) continues this recipe.
        status = run_training(cfg, run_dir, overrides=overrides)
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
