"""The driver of a pipeline Ray job: `python -m rlvr_launch.jobs.pipeline_driver ...`, run by Ray on the head.

`rlvr submit --pipeline NAME` validates the spec on the submitting machine and ships the recipes it
validated and the STAGE:key=value overrides as the py_module `rlvr_jobspec` (the same jobspec as a
single run's); this driver points RLVR_RECIPES_DIR at them and runs `rlvr pipeline NAME` into the run
directory (default $RLVR_RUNS_DIR/<job id>, else ~/rlvr-runs/<job id>). A job resubmitted with the same
--run-dir continues the pipeline there: finished stages are skipped, an interrupted `rl` stage resumes
from its checkpoint. Inside the job, RAY_ADDRESS is the cluster's, so each `rl` stage's `rlvr train`
joins it (rlvr_launch.runs.train: "inside a Ray job: joining its cluster"); `sft` (torchrun), `sample`,
`eval` and `merge` run on the node of this driver (the head), in this job's process group.

A bad spec or input exits 2 with one line in the job's log, which `rlvr submit --follow` shows.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import sys
from pathlib import Path

from rlvr_launch.errors import UserError


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m rlvr_launch.jobs.pipeline_driver", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--job-id", required=True, help="the job's name; the default run dir is named after it"
    )
    parser.add_argument("--config-package", required=True, help="rlvr submit's jobspec package")
    parser.add_argument("--pipeline", required=True, help="pipeline name (recipes/pipeline/NAME.yaml)")
    parser.add_argument("--run-dir", default=None, help="absolute pipeline run directory")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from rlvr_launch.jobs import driver as job
    from rlvr_launch.pipelines import pipeline

    try:
        args = parse_args(argv)
        try:
            package = importlib.resources.files(args.config_package)
        except ModuleNotFoundError:
            raise UserError(
                f"package {args.config_package} was not shipped with this job: submit with `rlvr submit --pipeline`"
            ) from None
        overrides = json.loads((package / "overrides.json").read_text())
        os.environ["RLVR_RECIPES_DIR"] = str(package / "recipes")  # the recipes validated by rlvr submit
        run_dir = job.run_dir_for(args)
        print(
            f"rlvr pipeline job {args.job_id}: pipeline {args.pipeline} {' '.join(overrides)} in {run_dir}",
            flush=True,
        )
        os.environ["RAY_OVERRIDE_JOB_RUNTIME_ENV"] = "1"  # rl stages' ray.init repeats the job's env vars
        # The job's env carries Ray actors' RAY_EXPERIMENTAL_NOSET_*_VISIBLE_DEVICES (the cpu platform's);
        # in a plain process (the sft stage's torchrun) verl's Worker then asks Ray's runtime context for
        # its accelerator ids and fails. rl stages give their workers these vars through their own ray.init.
        # (verl.utils.ray_utils.ray_noset_visible_devices reads a list of RAY_EXPERIMENTAL_NOSET_* vars.)
        for name in [n for n in os.environ if n.startswith("RAY_EXPERIMENTAL_NOSET_")]:
            os.environ.pop(name)
        rows = pipeline.execute(args.pipeline, Path(run_dir), overrides, log=lambda m: print(m, flush=True))
        pipeline.print_status(args.pipeline, Path(run_dir).resolve(), rows)
        sys.stdout.flush()
    except UserError as e:
        print(f"rlvr job: error: {e}", file=sys.stderr)
        return 2
    print(
        f"rlvr pipeline job {args.job_id}: finished; status: rlvr pipeline {args.pipeline} --status --run-dir {run_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
