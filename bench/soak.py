"""Soak: a long CPU-demo run, sampled once per step, and the slope of everything that could leak.

    python bench/soak.py [--steps 500] [--out bench/results/soak.json] [overrides ...]
    python bench/soak.py --analyze bench/results/soak_samples.jsonl   # re-fit samples (a run cut short)

Runs `rlvr train` (the CPU demo unless overridden) for --steps steps with validation only every
--test-freq steps (so the run is not dominated by it) and a checkpoint every --save-freq steps. A side
thread follows the attempt's metrics file and, each time a step is logged, samples:

- per process of the run's process tree (rlvr, Ray's head processes, verl's workers): resident memory
  (RSS), open file descriptors and threads, named by the process's title (`ray::WorkerDict`, `raylet`);
- the bytes of /dev/shm files the tree maps or holds open, and /dev/shm as a whole (shared with others);
- the bytes under the run's private Ray temp dir (RLVR_RAY_TMPDIR_ROOT points it at a folder of ours);
- the Ray object store's used bytes and object count (asked from the private head's raylet, as
  `ray memory --stats-only` does, without joining the cluster as a driver);
- the run directory's bytes and its checkpoint count; the step's time (verl's `timing_s/step`).

Each sample is appended to a JSONL file as it is taken (a run cut short keeps what it measured). The
report fits a least-squares line to each series over the second half of the steps (after warm-up) and
gives the slope per 100 steps with its 95% interval; a series grows when the interval lies above zero
and the slope exceeds GROWTH_FRACTION of its level per 100 steps. Step time is fitted on steps without a
validation or checkpoint. Output: a JSON summary and a PNG of every series against the step.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

STEP_KEY = "training/global_step"
# A slope counts as growth when its 95% interval excludes zero and it is at least this fraction of the
# series' mean per 100 steps (0.2%: 1 GiB over 100,000 steps for a 0.5 GiB process).
GROWTH_FRACTION = 0.002


# --- sampling -------------------------------------------------------------------------------------


def process_label(proc: psutil.Process) -> str:
    """A stable name for a process: Ray's title without the running method, else the program."""
    try:
        cmdline = proc.cmdline()
        name = proc.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"
    first = cmdline[0] if cmdline else name
    if first.startswith("ray::"):
        return first.split()[0].split(".")[0]
    joined = " ".join(cmdline)
    for known in ("raylet", "gcs_server", "dashboard", "log_monitor", "monitor.py", "runtime_env"):
        if known in joined:
            return known
    if "rlvr_launch.cli" in joined or joined.endswith("/rlvr") or " train" in joined and "rlvr" in joined:
        return "rlvr train"
    if "default_worker.py" in joined:
        return "ray worker (idle)"
    return name


def shm_of(procs: list[psutil.Process]) -> int:
    """Bytes of /dev/shm files the processes map or hold open (each file once; unlinked ones by mapping)."""
    sizes: dict[str, int] = {}
    for proc in procs:
        try:
            with open(f"/proc/{proc.pid}/maps") as f:
                for line in f:
                    parts = line.split(None, 5)
                    if len(parts) == 6 and parts[5].startswith("/dev/shm/"):
                        path = parts[5].strip()
                        lo, hi = (int(x, 16) for x in parts[0].split("-"))
                        sizes[path] = max(sizes.get(path, 0), hi - lo)
            for of in proc.open_files():
                if of.path.startswith("/dev/shm/") and of.path not in sizes:
                    try:
                        sizes[of.path] = os.stat(of.path).st_size
                    except OSError:
                        pass
        except (OSError, psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    for path in list(sizes):
        clean = path.removesuffix(" (deleted)")
        try:
            sizes[path] = max(sizes[path], os.stat(clean).st_size)
        except OSError:
            pass
    return sum(sizes.values())


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def devshm_bytes() -> int:
    st = os.statvfs("/dev/shm")
    return (st.f_blocks - st.f_bfree) * st.f_frsize


class ObjectStore:
    """The private head's object-store figures, asked from its raylet like `ray memory --stats-only`."""

    def __init__(self):
        self.state = None
        self.address = None
        self.tries = 0

    def find_addresses(self, procs: list[psutil.Process]) -> list[str]:
        """HOST:PORT candidates of the run's GCS: the ports its gcs_server process listens on."""
        for proc in procs:
            try:
                cmd = " ".join(proc.cmdline())
                if "gcs_server" not in cmd:
                    continue
                ip = re.search(r"--node[-_]ip[-_]address=([\d.]+)", cmd)
                ports = [c.laddr.port for c in proc.net_connections(kind="tcp") if c.status == "LISTEN"]
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            return [f"{ip.group(1) if ip else '127.0.0.1'}:{port}" for port in sorted(set(ports))]
        return []

    def sample(self, procs: list[psutil.Process]) -> dict:
        try:
            if self.state is None:
                self.tries += 1
                if self.tries > 3:
                    return {}
                # The private head runs with Ray's token auth (ray_head.start), its token in ~/.ray.
                os.environ.setdefault("RAY_AUTH_MODE", "token")
                from ray._private.internal_api import get_memory_info_reply, get_state_from_address

                for address in self.find_addresses(procs):
                    try:
                        state = get_state_from_address(address)
                        get_memory_info_reply(state, timeout_seconds=5)
                    except Exception:  # noqa: BLE001 - not the GCS's port (its metrics port)
                        continue
                    self.state, self.address = state, address
                    break
                if self.state is None:
                    return {}
            from ray._private.internal_api import get_memory_info_reply

            reply = get_memory_info_reply(self.state, timeout_seconds=20)
            stats = reply.store_stats
            return {
                "object_store_bytes": int(stats.object_store_bytes_used),
                "object_store_objects": int(stats.num_local_objects),
                "object_store_spilled_bytes": int(stats.spilled_bytes_total),
            }
        except Exception as e:  # noqa: BLE001 - a failed probe is a missing figure, not a failed soak
            return {"object_store_error": f"{type(e).__name__}: {e}"[:200]}


def sample(root: psutil.Process, run_dir: Path, ray_root: Path, store: ObjectStore) -> dict:
    procs = [root]
    try:
        procs += root.children(recursive=True)
    except psutil.NoSuchProcess:
        pass
    per_process: dict[str, dict] = {}
    for proc in procs:
        try:
            with proc.oneshot():
                key = f"{process_label(proc)} [{proc.pid}]"
                per_process[key] = {
                    "rss": proc.memory_info().rss,
                    "fds": proc.num_fds(),
                    "threads": proc.num_threads(),
                }
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    checkpoints = run_dir / "checkpoints"
    return {
        "time": time.time(),
        "processes": per_process,
        "process_count": len(per_process),
        "tree_rss": sum(p["rss"] for p in per_process.values()),
        "tree_fds": sum(p["fds"] for p in per_process.values()),
        "tree_threads": sum(p["threads"] for p in per_process.values()),
        "run_shm_bytes": shm_of(procs),
        "devshm_bytes": devshm_bytes(),
        "ray_temp_bytes": dir_bytes(ray_root),
        "run_dir_bytes": dir_bytes(run_dir),
        "checkpoint_dirs": len(list(checkpoints.glob("global_step_*"))) if checkpoints.is_dir() else 0,
        **store.sample(procs),
    }


class StepFollower:
    """New step rows of the run's attempt files (verl's file logger), oldest first."""

    def __init__(self, run_dir: Path):
        self.attempts = run_dir / "attempts"
        self.positions: dict[Path, int] = {}
        self.seen: set[int] = set()

    def new_steps(self) -> list[tuple[int, dict]]:
        out = []
        for path in sorted(self.attempts.glob("*.jsonl")) if self.attempts.is_dir() else []:
            with open(path) as f:
                f.seek(self.positions.get(path, 0))
                while True:
                    line = f.readline()
                    if not line.endswith("\n"):
                        break
                    self.positions[path] = f.tell()
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    step = int(record.get("step", -1))
                    data = record.get("data", {})
                    if "timing_s/step" in data and step not in self.seen:
                        self.seen.add(step)
                        out.append((step, data))
        return out


def soak(args, overrides: list[str]) -> Path:
    # in /tmp itself, not $TMPDIR: Ray's socket paths under it must stay within AF_UNIX's 107 bytes
    work = Path(tempfile.mkdtemp(prefix="rlvr-soak-", dir="/tmp"))
    run_dir, ray_root = work / "run", work / "ray"
    ray_root.mkdir()
    samples_path = Path(args.samples)
    samples_path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, RLVR_RAY_TMPDIR_ROOT=str(ray_root))
    command = [
        sys.executable,
        "-m",
        "rlvr_launch.cli",
        "train",
        f"trainer.total_training_steps={args.steps}",
        f"trainer.test_freq={args.test_freq}",
        f"trainer.save_freq={args.save_freq}",
        *overrides,
        "--run-dir",
        str(run_dir),
    ]
    print("soak:", " ".join(command[2:]), flush=True)
    log = open(work / "train.out", "w")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    root = psutil.Process(proc.pid)
    follower = StepFollower(run_dir)
    store = ObjectStore()
    meta = {
        "command": command[2:],
        "steps": args.steps,
        "test_freq": args.test_freq,
        "save_freq": args.save_freq,
        "cpus": os.cpu_count(),
        "started": time.time(),
        "loadavg_start": os.getloadavg(),
        "work_dir": str(work),
    }
    with open(samples_path, "w") as out:
        out.write(json.dumps({"meta": meta}) + "\n")
        while proc.poll() is None:
            for step, data in follower.new_steps():
                row = sample(root, run_dir, ray_root, store)
                row.update(
                    step=step,
                    step_time=data.get("timing_s/step"),
                    validated=any(k.startswith("val-") for k in data),
                    loadavg=os.getloadavg()[0],
                )
                out.write(json.dumps(row) + "\n")
                out.flush()
                if step % 25 == 0:
                    print(
                        f"step {step}: tree RSS {row['tree_rss'] / 2**30:.2f} GiB, {row['process_count']} processes, "
                        f"run dir {row['run_dir_bytes'] / 2**20:.1f} MiB, {row['step_time']:.2f} s/step, "
                        f"load {row['loadavg']:.1f}",
                        flush=True,
                    )
            time.sleep(0.5)
        for step, data in follower.new_steps():  # logged just before the run ended: no process sample
            out.write(
                json.dumps({"step": step, "step_time": data.get("timing_s/step"), "processes": {}}) + "\n"
            )
        out.write(json.dumps({"end": {"returncode": proc.returncode, "time": time.time()}}) + "\n")
    log.close()
    after = {
        "returncode": proc.returncode,
        "processes_left": [p.pid for p in psutil.process_iter() if _in_work(p, work)],
        "ray_temp_left_bytes": dir_bytes(ray_root),
    }
    print("train output:", work / "train.out", "| after:", after, flush=True)
    with open(samples_path, "a") as out:
        out.write(json.dumps({"after": after}) + "\n")
    return samples_path


def _in_work(proc: psutil.Process, work: Path) -> bool:
    try:
        return str(work) in " ".join(proc.cmdline()) or any(str(work) in v for v in proc.environ().values())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


# --- analysis -------------------------------------------------------------------------------------


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t (Cornish-Fisher expansion; within 0.1% of the table for df >= 5)."""
    z = 1.959963985
    if df <= 0:
        return float("inf")
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / df + g2 / df**2 + g3 / df**3


def fit(xs: list[float], ys: list[float]) -> dict | None:
    """Least-squares slope per 100 steps, its 95% interval, and the series' mean."""
    n = len(xs)
    if n < 5:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    resid = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys, strict=True))
    se = math.sqrt(resid / (n - 2) / sxx) if n > 2 else float("inf")
    half = t_quantile_975(n - 2) * se
    per100 = 100 * slope
    lo, hi = per100 - 100 * half, per100 + 100 * half
    grows = lo > 0 and per100 > GROWTH_FRACTION * abs(my) if my else lo > 0
    return {
        "mean": my,
        "first": ys[0],
        "last": ys[-1],
        "slope_per_100_steps": per100,
        "ci95": [lo, hi],
        "n": n,
        "grows": bool(grows),
    }


SERIES = (
    "tree_rss",
    "tree_fds",
    "tree_threads",
    "process_count",
    "run_shm_bytes",
    "devshm_bytes",
    "ray_temp_bytes",
    "object_store_bytes",
    "object_store_objects",
    "run_dir_bytes",
    "checkpoint_dirs",
)


def analyze(samples_path: Path, out_json: Path, out_png: Path | None) -> dict:
    rows, meta, end, after = [], {}, {}, {}
    for line in samples_path.read_text().splitlines():
        record = json.loads(line)
        if "meta" in record:
            meta = record["meta"]
        elif "end" in record:
            end = record["end"]
        elif "after" in record:
            after = record["after"]
        else:
            rows.append(record)
    rows.sort(key=lambda r: r["step"])
    if not rows:
        raise SystemExit(f"{samples_path} has no samples")
    # A sample taken while the run shuts down (its last step's row arrives as its processes exit) has
    # fewer processes than the run had: it measures the shutdown, not the run.
    counts = [r.get("process_count") for r in rows if r.get("processes")]
    usual = max(set(counts), key=counts.count) if counts else None
    shutdown = [
        r["step"]
        for r in rows
        if r.get("processes")
        and r["step"] > rows[-1]["step"] - 3
        and (r.get("process_count") != usual or any(p["rss"] == 0 for p in r["processes"].values()))
    ]
    rows = [r for r in rows if r["step"] not in shutdown]
    last_step = rows[-1]["step"]
    half = [r for r in rows if r["step"] > last_step / 2 and r["processes"]]
    report: dict = {
        "meta": meta,
        "end": end,
        "after": after,
        "steps_sampled": len(rows),
        "last_step": last_step,
        "shutdown_samples_left_out": shutdown,
    }
    fits: dict = {}
    for key in SERIES:
        pts = [(r["step"], r[key]) for r in half if isinstance(r.get(key), (int, float))]
        if pts:
            fits[key] = fit([p[0] for p in pts], [float(p[1]) for p in pts])
    save_freq = int(meta.get("save_freq") or 0)
    plain = [
        r
        for r in half
        if r.get("step_time") is not None
        and not r.get("validated")
        and not (save_freq and r["step"] % save_freq == 0)
    ]
    fits["step_time"] = fit([r["step"] for r in plain], [r["step_time"] for r in plain])
    # Per process: those sampled in at least 90% of the second half's rows (a sample taken while the run
    # shuts down can miss one), fitted over the rows that have it.
    per_process: dict = {}
    names = {name for r in half for name in r["processes"]}
    for name in sorted(names):
        present = [r for r in half if name in r["processes"] and r["processes"][name]["rss"] > 0]
        if len(present) < 0.9 * len(half):
            continue
        for field in ("rss", "fds", "threads"):
            f = fit([r["step"] for r in present], [float(r["processes"][name][field]) for r in present])
            if f:
                per_process.setdefault(name, {})[field] = f
    # The machine's load over each half: a step time that grows with the load is not the run's doing.
    first = [r["loadavg"] for r in rows if "loadavg" in r and r["step"] <= last_step / 2]
    second = [r["loadavg"] for r in half if "loadavg" in r]
    report["loadavg_halves"] = [
        sum(first) / len(first) if first else None,
        sum(second) / len(second) if second else None,
    ]
    report["fits"] = fits
    report["per_process"] = per_process
    report["growing"] = [k for k, f in fits.items() if f and f["grows"]] + [
        f"{name} {field}" for name, d in per_process.items() for field, f in d.items() if f["grows"]
    ]
    loads = [r["loadavg"] for r in rows if "loadavg" in r]
    report["loadavg_mean"] = sum(loads) / len(loads) if loads else None
    times = [r["step_time"] for r in rows if r.get("step_time")]
    report["median_step_time"] = sorted(times)[len(times) // 2] if times else None
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(report, indent=1) + "\n")
    if out_png:
        plot(rows, report, out_png)
    print_report(report)
    return report


def print_report(report: dict) -> None:
    print(
        f"{report['steps_sampled']} steps sampled (last {report['last_step']}), mean load {report['loadavg_mean']}, "
        f"median step {report['median_step_time']} s"
    )
    print(f"{'series (second half)':<32}{'mean':>14}{'slope/100 steps':>18}{'95% interval':>30}  grows")
    rows = list(report["fits"].items()) + [
        (f"{n} {fld}", f) for n, d in report["per_process"].items() for fld, f in d.items()
    ]
    for key, f in rows:
        if not f:
            continue
        lo, hi = f["ci95"]
        print(
            f"{key[:32]:<32}{f['mean']:>14.4g}{f['slope_per_100_steps']:>18.4g}{f'[{lo:.4g}, {hi:.4g}]':>30}  "
            f"{'GROWS' if f['grows'] else 'no'}"
        )
    print("growing:", report["growing"] or "nothing")


def plot(rows: list[dict], report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("tree_rss", "process-tree RSS (GiB)", 2**30),
        ("tree_fds", "open fds (tree)", 1),
        ("tree_threads", "threads (tree)", 1),
        ("run_shm_bytes", "/dev/shm held by the run (MiB)", 2**20),
        ("ray_temp_bytes", "Ray temp dir (MiB)", 2**20),
        ("object_store_bytes", "Ray object store used (MiB)", 2**20),
        ("run_dir_bytes", "run directory (MiB)", 2**20),
        ("step_time", "step time (s)", 1),
    ]
    fig, axes = plt.subplots(4, 2, figsize=(12, 12), sharex=True)
    for ax, (key, title, scale) in zip(axes.flat, panels, strict=True):
        pts = [(r["step"], r[key] / scale) for r in rows if isinstance(r.get(key), (int, float))]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=0.8)
        f = report["fits"].get(key)
        if f:
            lo, hi = f["ci95"]
            ax.set_title(
                f"{title}\nslope/100 steps {f['slope_per_100_steps'] / scale:.3g} [{lo / scale:.3g}, {hi / scale:.3g}]",
                fontsize=9,
            )
        else:
            ax.set_title(title, fontsize=9)
        ax.set_xlabel("step")
    fig.suptitle(
        f"rlvr soak: {report['last_step']} steps of the CPU demo (fit over the second half; mean load "
        f"{report['loadavg_mean'] or 0:.1f} on {report['meta'].get('cpus')} cores)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--test-freq", type=int, default=250, help="validation every N steps (-1: none)")
    parser.add_argument("--save-freq", type=int, default=20, help="a checkpoint every N steps")
    parser.add_argument("--samples", default="bench/results/soak_samples.jsonl")
    parser.add_argument("--out", default="bench/results/soak.json")
    parser.add_argument("--png", default="bench/results/soak.png")
    parser.add_argument("--analyze", default=None, help="only fit an existing samples file")
    args, overrides = parser.parse_known_args()
    samples = Path(args.analyze) if args.analyze else soak(args, overrides)
    analyze(samples, Path(args.out), Path(args.png) if args.png else None)


if __name__ == "__main__":
    main()
