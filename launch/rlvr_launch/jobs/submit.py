"""`rlvr submit --address URL [experiment=NAME] [overrides]`: run a recipe as a Ray job on a cluster.

The recipe is composed and validated here, on the submitting machine, so a typo fails in a second
instead of after the cluster has scheduled a job. The recipes it was validated against and the
overrides travel with the code (the py_module `rlvr_jobspec`); the job's driver,
`python -m rlvr_launch.jobs.driver`, composes them again on the cluster (so ${oc.env:...} and `~` resolve
there) and calls `train.run_training` on the cluster's Ray.

What the job's runtime_env carries (built by `build_runtime_env`, starting from cluster/runtime_env.yaml):
- rlvr's three packages and the recipe (recipes/ + overrides) as py_modules (never runs/, caches, checkpoints, data);
- the user's own working_dir, untouched, when given (--working-dir or --runtime-env);
- the env vars the workers need (rlvr_cluster.env.worker_env(cfg): the verl plugin selection among them),
  plain `--env KEY=VALUE` pairs, and secrets by reference (`--secret-env NAME` copies NAME from this
  environment; its value is never printed, logged or put in the job's metadata);
- with --pip-install, rlvr's Python requirements (for images that do not already hold them).

Before submitting, the verifier pool's placement is checked against the cluster's node list (a cluster
where no node carries `rlvr_verifier` fails here, in one line, not after every model has loaded:
rlvr_launch/runs/placement.py); a just-started head's "No available agent to submit job" is retried for a
minute; `--prepare-data` makes the job convert the task's data on the cluster first.

Does NOT cover: keeping secrets from people who can read the cluster's job list (Ray shows a job's
runtime_env, env var values included, to anyone holding the dashboard token): on Kubernetes put
secrets in the pod spec (secretKeyRef, cluster/k8s) instead, and the job inherits them.
"""

from __future__ import annotations

import copy
import os
import re
import secrets
import shlex
import sys
import tempfile
import time
from pathlib import Path

from rlvr_launch.errors import UserError
from rlvr_launch.jobs import job_control as jobs
from rlvr_launch.recipes import distillation  # noqa: F401 - registers the `distillation` composition check

PROJECT_ROOT = Path(__file__).resolve().parents[3]  # launch/rlvr_launch/jobs/submit.py -> project root
SHARED_RUNTIME_ENV = PROJECT_ROOT / "cluster" / "runtime_env.yaml"
# The py_module that carries one job's composed recipe; rlvr_launch.jobs.driver reads it back.
JOBSPEC_PACKAGE = "rlvr_jobspec"
JOBSPEC_RECIPES = "recipes"
JOBSPEC_OVERRIDES = "overrides.json"
JOBSPEC_SUBMITTED = "config.submitted.yaml"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Keys of the runtime_env that rlvr fills itself, merged with (never replacing) the user's.
MERGED_KEYS = ("py_modules", "env_vars", "excludes")


def add_arguments(parser) -> None:
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="OVERRIDE",
        help="Hydra overrides, e.g. experiment=cpu_demo trainer.total_training_steps=2",
    )
    jobs.add_connection_arguments(parser)
    parser.add_argument(
        "--pipeline",
        default=None,
        metavar="NAME",
        help="run the pipeline recipes/pipeline/NAME.yaml as the job (`rlvr pipeline` on the cluster); "
        "the overrides are then STAGE:key=value; a job resubmitted with the same --run-dir continues it",
    )
    parser.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="stream the job's logs until it ends; the exit code says how (0 succeeded, 1 failed, 3 stopped)",
    )
    parser.add_argument(
        "--run-dir",
        default=None,
        help="ABSOLUTE directory on the cluster for metrics, plots, config (written by the job's driver on "
        "the head) and checkpoints (written by the trainer nodes: use a shared filesystem on multi-node "
        "clusters) (default there: $RLVR_RUNS_DIR/<job id>, else ~/rlvr-runs/<job id>)",
    )
    parser.add_argument(
        "--job-id", default=None, help="the submission id (default: rlvr-<experiment>-<time>-<random>)"
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an env var for the job's driver and every worker (repeatable; printed, so no secrets here)",
    )
    parser.add_argument(
        "--secret-env",
        action="append",
        default=[],
        metavar="NAME",
        help="copy env var NAME from this shell into the job without printing it (repeatable), "
        "e.g. --secret-env WANDB_API_KEY",
    )
    parser.add_argument(
        "--working-dir",
        default=None,
        help="your own code directory for the job (kept as the job's working_dir; rlvr's code travels separately)",
    )
    parser.add_argument(
        "--runtime-env",
        type=Path,
        default=None,
        help="a YAML runtime_env of yours, merged over cluster/runtime_env.yaml (its working_dir is kept as is)",
    )
    parser.add_argument(
        "--pip-install",
        action="store_true",
        help="the cluster's image lacks rlvr's Python requirements: install them into the job's runtime_env "
        "(pip, from pyproject.toml's pins; torch must already be in the image)",
    )
    parser.add_argument(
        "--prepare-data",
        action="store_true",
        help="the job converts the recipe's task data onto the cluster first when it is missing "
        "(`rlvr data TASK --out ${rlvr.data_dir}/TASK` there, from the hub); RLVR_DATA_DIR on the cluster "
        "(/runs/data on cluster/k8s and cluster/ray-cluster.yaml) must be shared with the trainer nodes",
    )
    parser.add_argument(
        "--entrypoint-num-cpus",
        type=float,
        default=None,
        help="CPUs reserved for the job's driver on the cluster (default: none, as `ray job submit`)",
    )


def parse_env_pairs(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not ENV_NAME.match(key):
            raise UserError(
                f"--env {pair!r} is not KEY=VALUE with a valid variable name, e.g. --env HF_HUB_OFFLINE=1"
            )
        out[key] = value
    return out


def secret_env(names: list[str], environ=os.environ) -> dict[str, str]:
    """Values of the named secrets from this environment; a missing one is an error naming the variable."""
    out: dict[str, str] = {}
    for name in names:
        if not ENV_NAME.match(name):
            raise UserError(f"--secret-env {name!r} is not an env var name: pass the NAME, never the value")
        if not environ.get(name):
            raise UserError(
                f"--secret-env {name}: {name} is not set in this shell; export it first (rlvr copies it into "
                "the job without printing it)"
            )
        out[name] = environ[name]
    return out


def load_yaml_mapping(path: Path, what: str) -> dict:
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as e:
        raise UserError(f"cannot read {what} {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise UserError(f"{what} {path} is not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise UserError(
            f"{what} {path} must be a YAML mapping of runtime_env keys (env_vars, pip, working_dir, ...)"
        )
    return data


def pip_requirements(pyproject: Path = PROJECT_ROOT / "pyproject.toml") -> list[str]:
    """rlvr's verifier-side dependencies plus the `train` extra, exactly as pinned in pyproject.toml."""
    import tomllib

    project = tomllib.loads(pyproject.read_text())["project"]
    return list(project["dependencies"]) + list(project["optional-dependencies"]["train"])


def build_runtime_env(
    *,
    shared: dict,
    user: dict | None,
    worker_env: dict[str, str],
    plain_env: dict[str, str],
    secrets_env: dict[str, str],
    jobspec_dir: Path,
    working_dir: str | None,
    pip_install: bool,
    project_root: Path = PROJECT_ROOT,
) -> dict:
    """The job's runtime_env: shared file < worker env < user's runtime_env < --env < --secret-env.

    rlvr's code and the jobspec go in py_modules (absolute paths, ours first so they shadow an older
    rlvr in the image); the user's working_dir, py_modules and excludes are kept, never replaced.
    """
    env = copy.deepcopy(user or {})
    if working_dir is not None:
        if env.get("working_dir") not in (None, working_dir):
            raise UserError("--working-dir and the working_dir in --runtime-env disagree: give one of them")
        env["working_dir"] = working_dir
    # The shared file's `recipes` module is for plain `ray job submit`; here the jobspec carries them.
    code = [p for p in shared.get("py_modules", []) if Path(p).name != JOBSPEC_RECIPES]
    ours = [str((project_root / p).resolve()) for p in code] + [str(jobspec_dir)]
    env["py_modules"] = ours + [m for m in env.get("py_modules", []) if m not in ours]
    excludes = list(shared.get("excludes", []))
    env["excludes"] = excludes + [e for e in env.get("excludes", []) if e not in excludes]
    merged: dict[str, str] = {}
    for layer in (
        shared.get("env_vars") or {},
        worker_env,
        env.get("env_vars") or {},
        plain_env,
        secrets_env,
    ):
        merged.update({str(k): str(v) for k, v in layer.items()})
    env["env_vars"] = merged
    for key, value in shared.items():
        if key not in MERGED_KEYS and key not in env:
            env[key] = copy.deepcopy(value)
    if pip_install:
        if "pip" in env or "uv" in env or "conda" in env:
            raise UserError("--pip-install and a pip/uv/conda entry in --runtime-env: keep one of them")
        env["pip"] = {"packages": pip_requirements(project_root / "pyproject.toml"), "pip_check": False}
    return env


def new_job_id(experiment: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", experiment).strip("-") or "run"
    return f"rlvr-{slug}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def write_jobspec(cfg, overrides: list[str], directory: Path, recipes: Path) -> Path:
    """A tiny package with what the job needs to compose the same recipe on the cluster.

    It holds the exact recipes/ tree validated here and the overrides (the driver composes them again
    there, so ${oc.env:...} and `~` resolve in the cluster's environment, not this machine's), plus
    the config composed here, for the record (`config.submitted.yaml`).
    """
    import json
    import shutil

    from omegaconf import OmegaConf

    package = directory / JOBSPEC_PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        '"""One rlvr job\'s recipe, written by `rlvr submit`; read by rlvr_launch.jobs.driver."""\n'
    )
    shutil.copytree(recipes, package / JOBSPEC_RECIPES, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (package / JOBSPEC_OVERRIDES).write_text(json.dumps(list(overrides)) + "\n")
    (package / JOBSPEC_SUBMITTED).write_text(OmegaConf.to_yaml(cfg))
    return package


def entrypoint(job_id: str, run_dir: str | None, prepare_data: bool = False) -> str:
    parts = [
        "python",
        "-m",
        "rlvr_launch.jobs.driver",
        "--job-id",
        job_id,
        "--config-package",
        JOBSPEC_PACKAGE,
    ]
    if run_dir:
        parts += ["--run-dir", run_dir]
    if prepare_data:
        parts += ["--prepare-data"]
    return " ".join(shlex.quote(p) for p in parts)


# A head that has just started answers the Jobs API before its job agent is up.
AGENT_NOT_READY = "No available agent to submit job"
SUBMIT_RETRY_S = 60.0


def submit_with_retry(client, *, retry_s: float = SUBMIT_RETRY_S, poll_s: float = 2.0, **job) -> str:
    """client.submit_job(**job), retried while the head says it has no job agent yet (a transient state
    of a just-started head), up to `retry_s` seconds; any other refusal is raised at once."""
    deadline = time.monotonic() + retry_s
    told = False
    while True:
        try:
            return client.submit_job(**job)
        except RuntimeError as e:
            if AGENT_NOT_READY not in str(e) or time.monotonic() > deadline:
                raise
            if not told:
                print("the cluster's job agent is not up yet (a just-started head); retrying", flush=True)
                told = True
            time.sleep(poll_s)


def check_placement(cfg, address: str, token_file) -> None:
    """The verifier pool's placement on the target cluster, checked before anything is submitted."""
    from rlvr_launch.runs import placement

    if not placement.uses_pool(cfg):
        return
    headers = jobs.auth_headers(jobs.normalise_address(address), token_file)
    nodes = placement.nodes_from_dashboard(jobs.normalise_address(address), headers)
    planned = placement.plan(cfg, nodes)
    if planned is not None:
        placement.warn_or_log(planned, log=lambda m: print(f"  {m} (sized again at job start)"))


def _worker_env(cfg) -> dict[str, str]:
    from rlvr_cluster.env import worker_env

    return {str(k): str(v) for k, v in worker_env(cfg).items()}


def run(args) -> int:
    if args.run_dir is not None and not Path(args.run_dir).is_absolute():
        raise UserError(
            f"--run-dir {args.run_dir} is relative: the job runs in a temporary directory on the cluster; "
            "pass an absolute path there, e.g. --run-dir /shared/rlvr-runs/NAME"
        )
    plain_env = parse_env_pairs(args.env)
    secrets_env = secret_env(args.secret_env)
    clash = sorted(set(plain_env) & set(secrets_env))
    if clash:
        raise UserError(f"{', '.join(clash)} given both with --env and --secret-env: keep --secret-env")
    if not SHARED_RUNTIME_ENV.is_file():
        raise UserError(f"{SHARED_RUNTIME_ENV} is missing: `rlvr submit` runs from an rlvr source checkout")
    shared = load_yaml_mapping(SHARED_RUNTIME_ENV, "the shared runtime_env")
    user = load_yaml_mapping(args.runtime_env, "--runtime-env") if args.runtime_env else None

    from rlvr_launch.recipes.compose import compose, recipes_dir

    if args.pipeline:
        return run_pipeline_job(args, shared, user, plain_env, secrets_env)
    cfg = compose(list(args.overrides))  # validated here, before anything reaches the cluster
    client = jobs.connect(args.address, args.auth_token_file)
    check_placement(cfg, args.address, args.auth_token_file)  # before models load, not after
    experiment = str(cfg.trainer.experiment_name)  # the composed name, also when no experiment= was given
    job_id = args.job_id or new_job_id(experiment)

    with tempfile.TemporaryDirectory(prefix="rlvr-jobspec-") as tmp:
        jobspec = write_jobspec(cfg, list(args.overrides), Path(tmp), recipes_dir())
        runtime_env = build_runtime_env(
            shared=shared,
            user=user,
            worker_env=_worker_env(cfg),
            plain_env=plain_env,
            secrets_env=secrets_env,
            jobspec_dir=jobspec,
            working_dir=args.working_dir,
            pip_install=args.pip_install,
        )
        metadata = {
            "rlvr_experiment": experiment,
            "rlvr_overrides": " ".join(args.overrides),
            "rlvr_run_dir": args.run_dir or "(cluster default)/" + job_id,
        }
        command = entrypoint(job_id, args.run_dir, args.prepare_data)
        elapsed = _submit(client, args, job_id, command, runtime_env, metadata)
    names = sorted(runtime_env["env_vars"])
    extra = [
        f"env vars: {', '.join(n + ('=<from your environment>' if n in secrets_env else '') for n in names)}"
    ]
    if args.working_dir or (user or {}).get("working_dir"):
        extra.append(f"working_dir: {runtime_env['working_dir']} (yours, unchanged)")
    return _report_and_follow(client, args, job_id, metadata, elapsed, extra)


def _submit(client, args, job_id: str, command: str, runtime_env: dict, metadata: dict) -> float:
    """Submit the job (retrying what Ray's client retries); seconds it took. A refusal is the user's error."""
    started = time.monotonic()
    try:
        submit_with_retry(
            client,
            entrypoint=command,
            submission_id=job_id,
            runtime_env=runtime_env,
            metadata=metadata,
            entrypoint_num_cpus=args.entrypoint_num_cpus,
        )
    except RuntimeError as e:
        raise UserError(f"the cluster refused the job: {e}") from None
    return time.monotonic() - started


def _report_and_follow(client, args, job_id: str, metadata: dict, elapsed: float, extra=()) -> int:
    """Print what was submitted (and `extra` lines), then follow the job to its end with --follow."""
    print(f"submitted job {job_id} to {jobs.normalise_address(args.address)} in {elapsed:.1f} s")
    for key, value in metadata.items():
        print(f"  {key[5:]}: {value}")
    for line in extra:
        print(f"  {line}")
    sys.stdout.flush()
    if not args.follow:
        print(f"follow it: rlvr logs {job_id} --follow --address {args.address}")
        return 0
    return jobs.follow_to_end(client, job_id, show_tail=False, rlvr_lines_only=True)


# --- `rlvr submit --pipeline NAME` (issue 14) ----------------------------------------------------------
PIPELINE_JOB_MODULE = "rlvr_launch.jobs.pipeline_driver"


def pipeline_entrypoint(job_id: str, name: str, run_dir: str | None) -> str:
    parts = ["python", "-m", PIPELINE_JOB_MODULE, "--job-id", job_id, "--config-package", JOBSPEC_PACKAGE]
    parts += ["--pipeline", name]
    if run_dir:
        parts += ["--run-dir", run_dir]
    return " ".join(shlex.quote(p) for p in parts)


def _pipeline_rl_config(spec: dict):
    """The composed recipe of the pipeline's first `rl` stage (its worker env vars go to the job), or None."""
    from rlvr_launch.recipes.compose import compose

    for stage in spec["stages"]:
        if stage["kind"] == "rl":
            return compose(list(stage["overrides"]))
    return None


def run_pipeline_job(args, shared: dict, user: dict | None, plain_env: dict, secrets_env: dict) -> int:
    """The pipeline spec and its STAGE:key=value overrides are validated here; the recipes travel in the
    jobspec and `python -m rlvr_launch.jobs.pipeline_driver` runs `rlvr pipeline` in the job (its `rl` stages'
    `rlvr train` join the job's cluster; sft/sample/eval/merge run beside the driver)."""
    from rlvr_launch.pipelines import pipeline
    from rlvr_launch.recipes.compose import recipes_dir

    if args.prepare_data:
        raise UserError("--prepare-data is for a single recipe; a pipeline's stages build their own inputs")
    spec = pipeline.load_spec(args.pipeline, list(args.overrides))  # a typo fails here, not on the cluster
    rl_cfg = _pipeline_rl_config(spec)
    client = jobs.connect(args.address, args.auth_token_file)
    if rl_cfg is not None:
        check_placement(rl_cfg, args.address, args.auth_token_file)
    job_id = args.job_id or new_job_id(f"pipeline-{args.pipeline}")
    with tempfile.TemporaryDirectory(prefix="rlvr-jobspec-") as tmp:
        from omegaconf import OmegaConf

        jobspec = write_jobspec(
            OmegaConf.create({"pipeline": spec}), list(args.overrides), Path(tmp), recipes_dir()
        )
        runtime_env = build_runtime_env(
            shared=shared,
            user=user,
            worker_env=_worker_env(rl_cfg) if rl_cfg is not None else {},
            plain_env=plain_env,
            secrets_env=secrets_env,
            jobspec_dir=jobspec,
            working_dir=args.working_dir,
            pip_install=args.pip_install,
        )
        metadata = {
            "rlvr_pipeline": args.pipeline,
            "rlvr_overrides": " ".join(args.overrides),
            "rlvr_run_dir": args.run_dir or "(cluster default)/" + job_id,
        }
        command = pipeline_entrypoint(job_id, args.pipeline, args.run_dir)
        elapsed = _submit(client, args, job_id, command, runtime_env, metadata)
    return _report_and_follow(client, args, job_id, metadata, elapsed)
