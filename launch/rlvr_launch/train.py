"""`rlvr train [experiment=NAME] [overrides] [--run-dir PATH]`: a recipe on a single-node Ray.

With no argument it trains the default experiment (the CPU demo). The composed config goes to
verl's own PPO entry (`verl.trainer.main_ppo.run_ppo` with verl's TaskRunner) unchanged but for the
run directory's paths; rlvr adds what verl leaves to the user: building the embedded assets, checking
the dataset first, a private Ray per run, live progress, metrics.jsonl + reward_curve.png, and resume
from the run directory's latest checkpoint when the same --run-dir is given again.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from rlvr_launch.cli import UserError
from rlvr_launch.rundir import REWARD_KEY, STEP_KEY, RunDir, iter_new_lines

DEFAULT_RUNS_DIR = Path("runs")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", help="experiment=NAME, algo=NAME, or any verl key=value")
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="where the run's outputs go (default: a new folder under ./runs); an existing one is resumed",
    )
    parser.add_argument("--verbose", action="store_true", help="show verl's and Ray's own logs")


def run(args: argparse.Namespace) -> int:
    from rlvr_launch import compose

    cfg = compose.compose(args.overrides)
    run_dir = args.run_dir or default_run_dir(str(cfg.trainer.experiment_name))
    return run_training(cfg, run_dir, verbose=args.verbose)


def default_run_dir(experiment: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return DEFAULT_RUNS_DIR / f"{experiment}-{stamp}-{os.getpid()}"


def log(message: str) -> None:
    print(f"[rlvr] {message}", flush=True)


# --- preparation ---------------------------------------------------------------------------------


def prepare(cfg) -> None:
    """Build the embedded assets the recipe asks for, then check every dataset file."""
    from rlvr_launch import datacheck, embedded

    wanted = {name for name, on in (cfg.rlvr.get("prepare") or {}).items() if on}
    unknown = wanted - {"tiny_model", embedded.ADDITION}
    if unknown:
        raise UserError(f"rlvr.prepare names unknown assets {sorted(unknown)}; known: tiny_model, addition")
    if "tiny_model" in wanted:
        built = embedded.ensure_tiny_model(Path(cfg.rlvr.cache_dir), log=lambda m: print(m, flush=True))
        if str(built) != str(cfg.actor_rollout_ref.model.path):
            log(
                f"note: the recipe's model path is {cfg.actor_rollout_ref.model.path}, not the embedded build"
            )
    if embedded.ADDITION in wanted:
        embedded.ensure_addition_data(Path(cfg.rlvr.data_dir))
    task = str(cfg.rlvr.get("task") or "")
    for key in ("train_files", "val_files"):
        files = cfg.data[key]
        for path in [files] if isinstance(files, str) else list(files):
            rows = datacheck.check_parquet(path, prompt_key=str(cfg.data.prompt_key), task=task)
            log(f"{key.split('_')[0]} data: {path} ({rows} rows)")
    model_path = Path(os.path.expanduser(str(cfg.actor_rollout_ref.model.path)))
    if str(cfg.trainer.device) == "cpu" and not model_path.exists():
        raise UserError(
            f"model {cfg.actor_rollout_ref.model.path} is not a local folder; nothing can be downloaded on this "
            "machine: point actor_rollout_ref.model.path at a local Hugging Face folder"
        )


# --- Ray ------------------------------------------------------------------------------------------


def _start_ray(cfg, env: dict[str, str], verbose: bool) -> bool:
    """Join RAY_ADDRESS when set (a Ray job), else start a private single-node Ray. Returns True if started."""
    import ray
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    runtime_env = OmegaConf.to_container(OmegaConf.create(get_ppo_ray_runtime_env(cfg)))
    user_env = cfg.ray_kwargs.get("ray_init", {}).get("runtime_env", {}) or {}
    runtime_env = OmegaConf.to_container(OmegaConf.merge(runtime_env, user_env))
    runtime_env.setdefault("env_vars", {}).update(env)
    if ray.is_initialized():
        return False
    if os.environ.get("RAY_ADDRESS"):
        log(f"joining the Ray cluster at {os.environ['RAY_ADDRESS']}")
        ray.init(address=os.environ["RAY_ADDRESS"], runtime_env=runtime_env, log_to_driver=True)
        return False
    local = cfg.rlvr.local_ray
    kwargs = {
        "address": "local",
        "include_dashboard": False,
        "runtime_env": runtime_env,
        "log_to_driver": verbose,
        # A short private temp dir: Ray's unix sockets have a path-length limit, and another Ray on
        # this machine keeps its own.
        "_temp_dir": tempfile.mkdtemp(prefix="rlvr-ray-", dir=os.environ.get("RLVR_RAY_TMPDIR_ROOT", "/tmp")),
        "resources": {str(local.verifier_resource): float(local.verifier_slots)},
    }
    if int(local.num_cpus):
        kwargs["num_cpus"] = int(local.num_cpus)
    if int(local.num_gpus):
        kwargs["num_gpus"] = int(local.num_gpus)
    ray.init(**kwargs)
    return True


# --- progress -------------------------------------------------------------------------------------


class Progress(threading.Thread):
    """Follows verl's metrics file and prints one line per step."""

    def __init__(self, path: Path, total_steps: int, resume_from: int):
        super().__init__(daemon=True)
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
                text = ", ".join(f"{v:.3f}" for v in val.values())
                log(f"validation at step {step}: held-out {', '.join(val)} = {text}")
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


def _root_cause(error: BaseException) -> str:
    cause = getattr(error, "cause", None) or error.__cause__ or error
    text = str(cause).strip().splitlines()
    tail = [line for line in text if line.strip()][-6:]
    return f"{type(cause).__name__}: " + "\n  ".join(tail)


def finalize(run_dir: RunDir, title: str) -> list[dict]:
    from rlvr_launch import diagnose

    # Group-level figures verl does not log, derived from its rollout dumps, join each step's row.
    extra = diagnose.derived_metrics(run_dir.path / "rollouts")
    if extra:
        diagnose.write_derived_metrics(run_dir.path)
    rows = run_dir.write_metrics(extra=extra)
    run_dir.plot_reward_curve(rows, title=title)
    return rows


def summarize(rows: list[dict]) -> None:
    rewards = [(r[STEP_KEY], r[REWARD_KEY]) for r in rows if REWARD_KEY in r]
    if not rewards:
        return
    k = min(10, max(1, len(rewards) // 2))
    first = sum(v for _, v in rewards[:k]) / k
    last = sum(v for _, v in rewards[-k:]) / k
    log(f"mean reward: first {k} steps {first:.3f} -> last {k} steps {last:.3f} over {len(rewards)} steps")


def run_training(cfg, run_dir: Path | str, *, verbose: bool = False) -> int:
    """Train `cfg` (a composed, validated config) with verl, leaving everything in `run_dir`."""
    from omegaconf import OmegaConf, open_dict

    from rlvr_cluster.env import worker_env

    rd = RunDir(Path(run_dir))
    rd.acquire()
    started_ray = False
    progress = None
    status = 1
    started = time.time()
    try:
        prepare(cfg)
        resume_from = rd.latest_checkpoint_step()
        total = int(cfg.trainer.total_training_steps or 0)
        if total and resume_from >= total:
            log(f"run already complete: the latest checkpoint is step {resume_from} of {total}")
            status = 0
            return status
        if resume_from:
            log(f"resuming from the checkpoint at step {resume_from}")
        attempt_log = rd.new_attempt(resume_from)
        with open_dict(cfg):
            cfg.trainer.default_local_dir = str(rd.checkpoints)
            cfg.trainer.resume_mode = "auto"
            loggers = (
                list(cfg.trainer.logger) if not isinstance(cfg.trainer.logger, str) else [cfg.trainer.logger]
            )
            if "file" not in loggers:
                loggers.append("file")
            cfg.trainer.logger = loggers
            if cfg.rlvr.get("dump_rollouts") and not cfg.trainer.get("rollout_data_dir"):
                cfg.trainer.rollout_data_dir = str(rd.path / "rollouts")
        OmegaConf.save(cfg, rd.config_path, resolve=True)
        env = worker_env(cfg)
        env["VERL_FILE_LOGGER_PATH"] = str(attempt_log)
        if "wandb" in loggers:
            # Offline unless the user configured wandb: an unreachable server must never block a run.
            env["WANDB_MODE"] = os.environ.get("WANDB_MODE") or (
                "online" if os.environ.get("WANDB_API_KEY") else "offline"
            )
            env["WANDB_DIR"] = str(rd.path)
        os.environ.update(env)
        started_ray = _start_ray(cfg, env, verbose)
        log(f"training {cfg.trainer.experiment_name}: {total or '?'} steps, run directory {rd.path}")
        progress = Progress(attempt_log, total, resume_from)
        progress.start()
        from verl.trainer.main_ppo import run_ppo

        try:
            run_ppo(cfg, task_runner_class=_verl_task_runner(cfg))
        except KeyboardInterrupt:
            log(
                "interrupted; the next `rlvr train --run-dir` with this directory resumes from its latest checkpoint"
            )
            status = 130
            return status
        except Exception as e:  # noqa: BLE001 - verl's errors arrive wrapped by Ray; show the cause
            log(f"training failed: {_root_cause(e)}")
            log(
                "rerun with --verbose for verl's full logs; the same --run-dir resumes from the latest checkpoint"
            )
            status = 1
            return status
        status = 0
        return status
    finally:
        if progress is not None:
            progress.stop_event.set()
            progress.join(timeout=5)
        if started_ray:
            import ray

            from rlvr_cluster import shm

            segments = shm.held_segments()  # vLLM's queues, verl's weight buffers: SIGKILL leaves them
            ray.shutdown()
            if removed := shm.remove_segments(segments):
                log(f"removed {len(removed)} shared-memory segments the run left in /dev/shm")
        try:
            if rd.attempt_numbers():
                rows = finalize(rd, title=f"{cfg.trainer.experiment_name} ({cfg.algorithm.adv_estimator})")
                summarize(rows)
        finally:
            rd.release()
        if status == 0:
            log(
                f"done in {time.time() - started:.0f} s: metrics.jsonl, reward_curve.png, config.yaml, checkpoints/"
            )
        print(rd.path, flush=True)
