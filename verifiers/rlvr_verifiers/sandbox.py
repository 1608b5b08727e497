"""Run untrusted Python (model-written solutions) in pre-forked, layered, fail-closed sandbox workers.

    from rlvr_verifiers.sandbox import Job, Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(workers=2)) as sandbox:
        print(sandbox.isolation_report())            # which layers are in effect, and why not
        r = sandbox.run("print(int(input()) * 2)", stdin=b"21\\n", timeout_s=2)
        r.exit_code, r.stdout, r.timed_out, r.killed_reason, r.wall_s   # 0, b'42\\n', False, None, ...
        results = sandbox.run_batch([Job(src, stdin=b"1 2\\n"), ...])    # concurrent over the workers
        future = sandbox.submit(Job(...))                                # concurrent.futures.Future
        sandbox.stats(), sandbox.worker_pids(), sandbox.job_uids()       # counters, for monitoring

A `Job` runs in one of two harness modes (see rlvr_verifiers.sandbox_worker):
- `mode="script"` (default): the source runs as `__main__` with `stdin`, exactly like `python -c SOURCE`;
  the result is its exit status, stdout and stderr.
- `mode="call"`: the source is loaded as a module, then `fn_name` is called once per argument list in
  `call_args`; the harness writes one JSON line per call, tagged with the job's random `nonce`, on a
  dedicated pipe (`RunResult.harness_output`), never on stdout.  Decoding and judging those lines is the
  caller's job (rlvr_verifiers.code does it in the trusted process; expected values never enter here).

How it works
- `workers` small dedicated processes are started from the real interpreter (`os.path.realpath` of
  sys.executable, never a pyenv shim) with `-I` and an EMPTY environment, so no secret of this process
  is in their environment or memory.  Each worker (the "manager") talks to this process and, before its
  first job, forks a ZYGOTE that never holds any job's data: per job the zygote only receives the job's
  pipe fds and forks the child; the child reads its source, call arguments and stdin itself, from the head
  of its own stdin pipe, after the fork.  So a job's memory holds the zygote's (no earlier job's source,
  input, output or result lines) and its own, nothing else.  The manager, which does hold job data (it
  feeds stdin and reads the outputs), never forks a job.
- Where the kernel allows (root, as in the trainer image): the zygote is init of its own PID namespace and
  lives in its own mount, network, IPC and UTS namespaces.  Its root is a minimal read-only tmpfs holding
  only the read paths (the interpreter, its stdlib, the system libraries, a few /dev nodes) bind-mounted
  read-only at their own paths, a fresh read-only /proc of the PID namespace (hidepid), and /job: every
  job gets a fresh `noexec` tmpfs there, of `disk_limit_bytes` / `max_files` inodes.  No host file outside the read paths
  exists for a job (not even for stat() or inotify), its network namespace has no host socket and its own
  abstract unix names, and it sees no host pid.  Each worker also has a job cgroup (v1 or v2, where
  writable): memory for the job's whole process tree (memfd and tmpfs pages included), pids, and CPU
  (1 CPU, equal shares between jobs), so no job can starve a neighbour or push the host into OOM.  Each job's oom_score_adj is 1000 (set by the zygote around the fork: the cgroup's OOM killer takes a
  job, never the zygote) and cannot be lowered: the kernel would let its owner lower it to 0 where root
  lacks CAP_SYS_RESOURCE, but the jobs' /proc is read-only and Landlock allows no write outside the job dir.
- The child: its own session; the job cgroup; rlimits (AS, CPU, FSIZE, NOFILE, NPROC, CORE=0); a dedicated
  non-root uid per worker (claimed host-wide from `job_uid_base`.., when running as root) with no
  capability left; no_new_privs; Landlock (writes only in its job dir, reads only in the read paths, TCP
  bind/connect denied with ABI >= 4, signals and abstract unix sockets scoped with ABI >= 6; no EXECUTE
  right in the job dir); seccomp (socket()/socketpair() only AF_UNIX stream/seqpacket, no connect(), no
  sendmsg()/sendmmsg() so no descriptor ever travels over a socket (SCM_RIGHTS), no namespaces, mounts
  old or new (mount, fsopen, fsconfig, fsmount, fspick, open_tree, move_mount, mount_setattr), ptrace,
  process_vm_*, io_uring, bpf, keyrings, kill() of negative pids, 0 or the zygote, ...).  In call mode the
  harness serialises results with an encoder bound before the job's code runs (C-level methods of the
  builtin types, never json.JSONEncoder or a builtins name looked up at call time).
- The manager feeds stdin, reads stdout/stderr/results through pipes with byte caps (a flood is truncated
  and the job killed; `Job.stdout_limit_bytes` tightens the cap per job), and kills the job at the
  wall-clock deadline.  The zygote watches the job dir (a full tmpfs, or a host dir over its quota, is
  `disk_quota`), reaps the job, reads the cgroup's OOM and limit counters (`memory_limit`), sweeps every
  leftover process (as init of the PID namespace: kill(-1); else the job's group, the uid, the cgroup and
  the subreaper's children) and drops the job dir (unmounts the tmpfs, or removes the host dir
  iteratively: any depth, bounded, never recursing).

Fail closed.  At start every worker PROBES each layer in a real child (a layer counts only if a forbidden
action fails under it) and reports `layer -> active/missing + reason` (`isolation_report()`).  If a
layer named in `SandboxConfig.require` (default: all of them) is missing, `Sandbox.start()` raises
`SandboxUnavailable` naming the layer and the knob.  To accept weaker isolation, say so explicitly:
`require=` a smaller tuple, or `allow_weaker_isolation=True`; the missing layers are then logged at
WARNING with every batch and carried by every RunResult (`weaker_isolation`), so a pool can report them.
Where namespaces are not allowed (a non-root pod, gVisor) the report names `mount_ns`, `net_ns`, `pid_ns`,
`ipc_ns` (and `cgroup` where no controller is writable) as missing, with the reason; jobs then use host
job dirs (size polled) and the per-process limits, and RLVR_SANDBOX_REQUIRE decides whether that runs.
A job whose child cannot apply an enforced layer does not run (exit 125, `sandbox_error`).

What it covers (each has a test in tests/verifiers/test_sandbox_threats.py, test_sandbox_neighbours.py
or test_sandbox_host_view.py): CPU loops that ignore signals, memory bombs (at once, incremental, in
memfds, spread over forked children), fork bombs, filling the disk (deleted-but-open files included),
writing/deleting/reading outside the job dir (/etc/passwd included), stat() and inotify of root-only host
dirs, secrets in the environment and /proc/*/environ, TCP/UDP and abstract unix sockets to loopback,
squatting the host's abstract socket names, the host's sockets in /proc/net, probing host pids, external
network, gigabyte stdout floods, killing the parent or kill(-1), daemonized double-fork children
outliving the job, user namespaces, raw disk reads, /proc/<ppid>/mem, an earlier job's source, output or
results read from memory, 63 spinning children starving a neighbour, 1,500 nested dirs in the job dir, and
a job's leftovers reaching the next job on its worker: descriptors (memfds, sockets) parked in flight in its
own socket's queue, where they would outlive its processes, stay charged to the job cgroup and keep
abstract socket names bound (sendmsg is denied, so nothing is ever in flight, and every process of the job
is swept before the next starts), a job-written binary executed from the job dir (noexec, no Landlock
EXECUTE), a lowered oom_score_adj, and the mount-API syscalls.

What a job cannot do, by design: open sockets other than AF_UNIX stream pairs, pass descriptors over them
(`socket.send_fds`, `sendmsg`: EPERM; send/recv of data work, so asyncio's self-pipe does), write outside
its job dir (so `multiprocessing`, whose semaphores live in /dev/shm, fails), execute programs (nothing but
the read paths exists, `subprocess` of /bin tools fails, and a binary written into the job dir cannot be
executed: EACCES), write any /proc file, use SysV IPC or message queues, use more than one CPU.  Threads, `os.fork`, files in the cwd/TMPDIR, and every stdlib module work; competitive-programming
idioms (`sys.stdin.buffer`, `open(0)`, `threading.stack_size` + a main thread, deep recursion) behave as
under `python -c`.

What it does NOT cover:
- kernel exploits (the child still has the whole syscall surface that seccomp allows), CPU side
  channels (Spectre-class), timing channels, and denial of service through shared kernel resources that
  neither rlimits nor the cgroup bound (dentries, pipe buffers);
- reads of world-readable files under the read paths (the interpreter, /usr/lib, ...);
- connecting to pathname unix sockets is blocked only by seccomp (no connect()); Landlock ABI 7 has no
  rule for it (and in the minimal root no host socket path exists);
- without namespaces (non-root): stat() of host paths, /proc/net, pid probing and abstract names are
  bounded only by what Landlock and seccomp mediate, the disk quota is polled (deleted-but-open files
  escape it) and memory is bounded per process (RLIMIT_AS); the report says so;
- a hard memory bound for runtimes that reserve huge virtual memory (RLIMIT_AS breaks JVM/Go) where there
  is no cgroup;
- RLIMIT_NPROC when not running as root (the kernel ignores it for root, and a shared uid counts other
  processes): the `uid` layer is then reported missing;
- memory a job's processes leave to be freed asynchronously by other kernel paths than in-flight
  descriptors: none is known here (tmpfs job dir unmounted, SysV IPC and io_uring denied, every process
  swept), but the next job's budget is not re-measured before it starts;
- the job dir is `noexec` only with the mount namespace; without it (host job dirs) Landlock alone (no
  EXECUTE right) refuses execve there, and the /proc writes are refused by Landlock alone;
- a worker killed by SIGKILL: its zygote and jobs die with it (parent-death signal; the PID namespace
  dies with its init), and its job cgroup is removed by the next worker that starts on the host.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import queue
import secrets
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, fields
from typing import Any, Self

logger = logging.getLogger(__name__)

WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_worker.py")

# Every layer the sandbox knows, in the order they are applied or enforced.
LAYERS: tuple[str, ...] = (
    "empty_env",  # workers started with an empty environment
    "non_dumpable",  # PR_SET_DUMPABLE 0: no /proc/<worker>/mem, environ, ptrace by the jobs
    "subreaper",  # PR_SET_CHILD_SUBREAPER: double-forked daemons come back to the worker
    "session",  # setsid: the job is one killable process group
    "rlimits",  # AS, CPU, FSIZE, NOFILE, NPROC (dedicated uid only), CORE=0
    "uid",  # a dedicated non-root uid per worker (needs the verifier to run as root)
    "landlock_fs",  # Landlock: writes only in the job dir, reads only in library dirs
    "landlock_net",  # Landlock ABI >= 4: TCP bind/connect denied
    "landlock_scope",  # Landlock ABI >= 6: signals and abstract unix sockets scoped to the job
    "seccomp",  # BPF syscall filter
    "wall_clock",  # SIGKILL to the session at the deadline
    "output_cap",  # byte caps on stdout/stderr/results
    "disk_quota",  # job dir size polled, RLIMIT_FSIZE per file
    "sweep",  # every leftover process killed after each job
    "zygote",  # jobs fork from a process that never held any job's data
    "mount_ns",  # own mount namespace: a minimal read-only root (interpreter, stdlib, system libraries)
    "net_ns",  # own network namespace: no host sockets, private abstract unix names
    "pid_ns",  # own PID namespace: no host pid visible; the zygote is its init
    "ipc_ns",  # own IPC namespace
    "cgroup",  # one cgroup per worker's job: memory (memfd/tmpfs included), pids, CPU for the whole tree
)

MODES = ("script", "call")


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot provide the isolation its config requires (the message names layer and knob)."""


def _default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def _real_python() -> str:
    return os.path.realpath(sys.executable)


def _env_bool(name: str) -> bool | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    return value.strip().lower() in ("1", "true", "yes", "on")


@dataclass
class SandboxConfig:
    workers: int = field(
        default_factory=_default_workers,
        metadata={"help": "Pre-forked worker processes; each runs one job at a time (default: usable CPUs)."},
    )
    timeout_s: float = field(
        default=10.0,
        metadata={"help": "Default wall-clock limit of one job, seconds (RLIMIT_CPU = this + 1)."},
    )
    memory_mb: int = field(
        default=2048, metadata={"help": "RLIMIT_AS of a job, MiB (virtual memory, includes the interpreter)."}
    )
    stdout_limit_bytes: int = field(
        default=16 << 20,
        metadata={
            "help": "Bytes of stdout (and of harness results) kept; more kills the job (output_limit)."
        },
    )
    stderr_limit_bytes: int = field(
        default=1 << 20, metadata={"help": "Bytes of stderr kept; more kills the job (output_limit)."}
    )
    file_size_limit_bytes: int = field(
        default=64 << 20, metadata={"help": "RLIMIT_FSIZE: the largest file a job may write."}
    )
    disk_limit_bytes: int = field(
        default=256 << 20, metadata={"help": "Job dir size above which the job is killed (polled, 100 ms)."}
    )
    max_files: int = field(
        default=4096, metadata={"help": "Entries in the job dir above which the job is killed."}
    )
    max_open_files: int = field(default=256, metadata={"help": "RLIMIT_NOFILE of a job."})
    max_processes: int = field(
        default=64, metadata={"help": "RLIMIT_NPROC of a job (processes + threads of its dedicated uid)."}
    )
    job_uid_base: int | None = field(
        default=65100,
        metadata={
            "help": "Each worker (when this process is root) claims its own uid/gid in [job_uid_base, "
            "job_uid_base + job_uid_count), host-wide, through a lock file in uid_lock_dir. Use a range no "
            "real user or process uses: the sweep kills every process of a claimed uid. None: no uid switch."
        },
    )
    job_uid_count: int = field(
        default=400, metadata={"help": "Size of the job uid range (workers per host)."}
    )
    uid_lock_dir: str = field(
        default="/tmp/rlvr-sandbox-uids",
        metadata={"help": "Root-only dir of per-uid lock files shared by every sandbox on the host."},
    )
    python: str = field(
        default_factory=_real_python,
        metadata={"help": "Interpreter of the workers (a real binary, not a pyenv shim script)."},
    )
    work_dir: str = field(
        default_factory=tempfile.gettempdir, metadata={"help": "Where workers create their job dirs."}
    )
    namespaces: bool = field(
        default=True,
        metadata={
            "help": "Give jobs their own mount (minimal read-only root, tmpfs job dir), network, PID and IPC "
            "namespaces where the kernel allows. False: jobs see the host (those layers are reported missing)."
        },
    )
    cgroups: bool = field(
        default=True,
        metadata={
            "help": "Account each job's whole process tree in a cgroup (memory incl. memfd/tmpfs, pids, "
            "1 CPU) where one is writable. False: per-process limits only (the layer is reported missing)."
        },
    )
    extra_read_paths: tuple[str, ...] = field(
        default=(), metadata={"help": "More paths jobs may read (Landlock), e.g. a site-packages dir."}
    )
    require: tuple[str, ...] = field(
        default=LAYERS,
        metadata={"help": "Layers whose absence makes start() refuse (fail closed). Default: all of LAYERS."},
    )
    allow_weaker_isolation: bool = field(
        default=False,
        metadata={
            "help": "Run even when required layers are missing; they are logged with every batch and "
            "reported on every result. Off by default."
        },
    )
    start_timeout_s: float = field(
        default=30.0, metadata={"help": "Time a worker may take to start and probe."}
    )

    def __post_init__(self) -> None:
        self.require = tuple(self.require)
        self.extra_read_paths = tuple(self.extra_read_paths)
        unknown = [name for name in self.require if name not in LAYERS]
        if unknown:
            raise ValueError(
                f"SandboxConfig.require names unknown layers {unknown}; known: {', '.join(LAYERS)}"
            )
        if self.workers < 1:
            raise ValueError(f"SandboxConfig.workers must be >= 1, got {self.workers}")
        if self.timeout_s <= 0:
            raise ValueError(f"SandboxConfig.timeout_s must be > 0, got {self.timeout_s}")

    @classmethod
    def from_env(cls, **overrides: Any) -> SandboxConfig:
        """Defaults, then RLVR_SANDBOX_* environment variables, then `overrides`.

        RLVR_SANDBOX_WORKERS (int), RLVR_SANDBOX_TIMEOUT_S (float), RLVR_SANDBOX_MEMORY_MB (int),
        RLVR_SANDBOX_REQUIRE (comma-separated layers; "" = none), RLVR_SANDBOX_ALLOW_WEAKER_ISOLATION (1/0).
        """
        values: dict[str, Any] = {}
        env = os.environ
        if env.get("RLVR_SANDBOX_WORKERS"):
            values["workers"] = int(env["RLVR_SANDBOX_WORKERS"])
        if env.get("RLVR_SANDBOX_TIMEOUT_S"):
            values["timeout_s"] = float(env["RLVR_SANDBOX_TIMEOUT_S"])
        if env.get("RLVR_SANDBOX_MEMORY_MB"):
            values["memory_mb"] = int(env["RLVR_SANDBOX_MEMORY_MB"])
        if "RLVR_SANDBOX_REQUIRE" in env:
            values["require"] = tuple(x.strip() for x in env["RLVR_SANDBOX_REQUIRE"].split(",") if x.strip())
        allow = _env_bool("RLVR_SANDBOX_ALLOW_WEAKER_ISOLATION")
        if allow is not None:
            values["allow_weaker_isolation"] = allow
        values.update(overrides)
        return cls(**values)

    @staticmethod
    def help() -> dict[str, str]:
        return {f.name: f.metadata.get("help", "") for f in fields(SandboxConfig)}


@dataclass
class Job:
    """One program run. `timeout_s` None: the config default. Call mode: `fn_name` and `call_args`."""

    source: str
    stdin: bytes = b""
    timeout_s: float | None = None
    mode: str = "script"
    fn_name: str | None = None
    call_args: list[list[Any]] | None = None  # call mode: one argument list per call (JSON values only)
    nonce: str = field(default_factory=lambda: secrets.token_hex(16))
    stdout_limit_bytes: int | None = None  # a tighter stdout cap for this job (never above the config's)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"Job.mode must be one of {MODES}, got {self.mode!r}")
        if self.mode == "call" and (not self.fn_name or self.call_args is None):
            raise ValueError("a call-mode Job needs fn_name and call_args")
        if isinstance(self.stdin, str):
            self.stdin = self.stdin.encode()


@dataclass
class RunResult:
    exit_code: int | None  # None when killed by a signal (see `signal`)
    signal: int | None
    stdout: bytes
    stderr: bytes
    harness_output: bytes  # call mode: the nonce-tagged JSON lines of the harness (decode in the caller)
    timed_out: bool
    killed_reason: str | None  # timeout | output_limit | disk_quota | memory_limit | setup_failed | None
    wall_s: float
    cpu_s: float | None = None
    max_rss_kb: int | None = None
    leftovers_killed: int = 0  # processes still alive after the job's main process ended
    sandbox_error: str | None = None  # the sandbox failed (not the program): worker died, setup failed
    nonce: str = ""
    weaker_isolation: tuple[str, ...] = ()  # missing layers that the config accepted
    stdout_limit: int | None = None  # the stdout cap this job ran under (bytes)

    @property
    def ok(self) -> bool:
        """Exited 0, not killed, no sandbox error (NOT a pass: callers judge output)."""
        return self.exit_code == 0 and self.killed_reason is None and self.sandbox_error is None


def _error_result(message: str, job: Job | None = None, weaker: tuple[str, ...] = ()) -> RunResult:
    return RunResult(
        None,
        None,
        b"",
        b"",
        b"",
        False,
        None,
        0.0,
        sandbox_error=message,
        nonce=job.nonce if job else "",
        weaker_isolation=weaker,
    )


class _Worker:
    """The parent's handle on one worker process (used by one dispatcher thread at a time)."""

    def __init__(self, config: SandboxConfig, index: int) -> None:
        self.config = config
        self.index = index
        self.proc: subprocess.Popen[bytes] | None = None
        self.hello: dict[str, Any] = {}

    def start(self) -> dict[str, Any]:
        cfg = self.config
        self.proc = subprocess.Popen(
            [cfg.python, "-I", WORKER_SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            env={},  # the whole point: no secret of this process reaches the worker
            close_fds=True,
            cwd="/",
        )
        worker_config = {
            "work_dir": cfg.work_dir,
            "job_uid_base": cfg.job_uid_base,
            "job_uid_count": cfg.job_uid_count,
            "uid_lock_dir": cfg.uid_lock_dir,
            "memory_limit": cfg.memory_mb << 20,
            "stdout_limit": cfg.stdout_limit_bytes,
            "stderr_limit": cfg.stderr_limit_bytes,
            "file_size_limit": cfg.file_size_limit_bytes,
            "disk_limit": cfg.disk_limit_bytes,
            "max_files": cfg.max_files,
            "max_open_files": cfg.max_open_files,
            "max_processes": cfg.max_processes,
            "extra_read_paths": list(cfg.extra_read_paths),
            "start_timeout_s": cfg.start_timeout_s,
            "namespaces": cfg.namespaces,
            "cgroups": cfg.cgroups,
        }
        self.send({"op": "init", "config": worker_config})
        header, _ = self.receive(cfg.start_timeout_s)
        if header.get("op") != "ready":
            raise SandboxUnavailable(f"sandbox worker {self.index} did not start: {header}")
        self.hello = header
        return header

    def send(self, header: dict[str, Any], blobs: tuple[bytes, ...] = ()) -> None:
        assert self.proc and self.proc.stdin
        raw = json.dumps(dict(header, blobs=[len(b) for b in blobs])).encode()
        self.proc.stdin.write(struct.pack(">I", len(raw)) + raw)
        for blob in blobs:
            self.proc.stdin.write(blob)
        self.proc.stdin.flush()

    def receive(self, timeout_s: float) -> tuple[dict[str, Any], list[bytes]]:
        assert self.proc and self.proc.stdout
        stream = self.proc.stdout
        fd = stream.fileno()
        deadline = time.monotonic() + timeout_s

        def read_exact(n: int) -> bytes:
            chunks, got = [], 0
            while got < n:
                left = deadline - time.monotonic()
                # raw os.read on the fd only (never stream.read), so no data hides in a Python buffer
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    raise TimeoutError(f"sandbox worker {self.index} silent for {timeout_s:.0f} s")
                chunk = os.read(fd, min(n - got, 1 << 20))
                if not chunk:
                    raise EOFError(f"sandbox worker {self.index} exited (code {self.proc.poll()})")
                chunks.append(chunk)
                got += len(chunk)
            return b"".join(chunks)

        (size,) = struct.unpack(">I", read_exact(4))
        header = json.loads(read_exact(size))
        blobs = [read_exact(n) for n in header.get("blobs", [])]
        return header, blobs

    def run(self, job: Job, default_timeout: float) -> tuple[dict[str, Any], list[bytes]]:
        timeout_s = float(job.timeout_s if job.timeout_s is not None else default_timeout)
        header = {
            "op": "run",
            "mode": job.mode,
            "timeout_s": timeout_s,
            "nonce": job.nonce,
            "fn_name": job.fn_name,
            "stdout_limit": job.stdout_limit_bytes,
        }
        args = json.dumps(job.call_args, allow_nan=False).encode() if job.mode == "call" else b""
        self.send(header, (job.source.encode("utf-8", "surrogateescape"), job.stdin, args))
        # The worker kills at timeout_s; the margin covers the sweep and a slow machine.
        return self.receive(timeout_s + 30.0)

    def stop(self, wait_s: float = 5.0) -> None:
        proc = self.proc
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()  # EOF: the worker cleans its base dir and exits
        except OSError:
            pass
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
        self.proc = None


class Sandbox:
    """Pre-forked sandbox workers (see the module docstring). Thread-safe; use as a context manager."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self._workers: list[_Worker] = []
        self._threads: list[threading.Thread] = []
        self._queue: queue.Queue[tuple[Job, concurrent.futures.Future[RunResult]] | None] = queue.Queue()
        self._report: dict[str, Any] | None = None
        self._weaker: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self._closed = False
        self._started = False
        self._stats = {"jobs_started": 0, "jobs_cancelled": 0, "worker_restarts": 0}

    # ---- lifecycle

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> Sandbox:
        """Start and probe every worker; raise SandboxUnavailable when a required layer is missing."""
        with self._lock:
            if self._started:
                return self
            if self._closed:
                raise RuntimeError("this Sandbox was closed; create a new one")
            self._check_python()
            try:
                for i in range(self.config.workers):
                    worker = _Worker(self.config, i)
                    self._workers.append(worker)
                    worker.start()
                self._report = self._build_report([w.hello for w in self._workers])
                self._enforce_requirements(self._report)
            except BaseException:
                for worker in self._workers:
                    worker.stop(1.0)
                self._workers.clear()
                self._closed = True
                raise
            for worker in self._workers:
                thread = threading.Thread(
                    target=self._serve, args=(worker,), daemon=True, name=f"rlvr-sandbox-{worker.index}"
                )
                thread.start()
                self._threads.append(thread)
            self._started = True
            return self

    def close(self) -> None:
        with self._lock:
            if self._closed and not self._started:
                return
            self._closed = True
            started, self._started = self._started, False
        if started:
            for _ in self._threads:
                self._queue.put(None)
            for thread in self._threads:
                thread.join(timeout=60)
        while True:  # anything still queued gets an explicit failure, never silence
            try:
                entry = self._queue.get_nowait()
            except queue.Empty:
                break
            if entry is not None and entry[1].set_running_or_notify_cancel():
                entry[1].set_result(_error_result("sandbox closed before the job ran", entry[0]))
        for worker in self._workers:
            worker.stop()

    def _check_python(self) -> None:
        python = self.config.python
        if not os.path.isfile(python) or not os.access(python, os.X_OK):
            raise SandboxUnavailable(f"SandboxConfig.python {python!r} is not an executable file")
        with open(python, "rb") as f:
            if f.read(2) == b"#!":
                raise SandboxUnavailable(
                    f"SandboxConfig.python {python!r} is a script (a pyenv shim?), which costs ~130 ms per "
                    "start and may re-read the environment; point it at the real interpreter binary"
                )

    # ---- isolation report

    def _build_report(self, hellos: list[dict[str, Any]]) -> dict[str, Any]:
        layers: dict[str, dict[str, Any]] = {}
        for name in LAYERS:
            states = [h["layers"].get(name, {"active": False, "detail": "not reported"}) for h in hellos]
            active = all(s["active"] for s in states)
            detail = next((s["detail"] for s in states if not s["active"]), states[0]["detail"])
            layers[name] = {"active": active, "detail": detail}
        missing = [n for n in LAYERS if not layers[n]["active"]]
        first = hellos[0]
        return {
            "layers": layers,
            "missing": missing,
            "required": list(self.config.require),
            "weaker_isolation": bool(missing),
            "python": first.get("python"),
            "python_version": first.get("version"),
            "landlock_abi": first.get("landlock_abi"),
            "workers": len(hellos),
        }

    def _enforce_requirements(self, report: dict[str, Any]) -> None:
        missing_required = [n for n in report["missing"] if n in self.config.require]
        if missing_required and not self.config.allow_weaker_isolation:
            reasons = "; ".join(f"{n}: {report['layers'][n]['detail']}" for n in missing_required)
            raise SandboxUnavailable(
                f"sandbox refuses to run: required isolation layer(s) missing: {reasons}. "
                "Fix the host, or accept weaker isolation explicitly with SandboxConfig(require=<fewer layers>) "
                "or SandboxConfig(allow_weaker_isolation=True) (env: RLVR_SANDBOX_REQUIRE / "
                "RLVR_SANDBOX_ALLOW_WEAKER_ISOLATION=1)"
            )
        self._weaker = tuple(report["missing"])
        if self._weaker:
            logger.warning(
                "sandbox runs with WEAKER isolation (accepted by config): missing %s",
                {n: report["layers"][n]["detail"] for n in self._weaker},
            )

    def isolation_report(self) -> dict[str, Any]:
        """layer -> {active, detail}, plus `missing`, `required`, `weaker_isolation` (starts the sandbox)."""
        self.start()
        assert self._report is not None
        return self._report

    @property
    def weaker_isolation(self) -> tuple[str, ...]:
        return self._weaker

    def job_uids(self) -> list[int]:
        """The dedicated uid of each live worker (empty without the `uid` layer)."""
        return [
            w.hello["job_uid"]
            for w in self._workers
            if w.proc is not None and w.hello.get("job_uid") is not None
        ]

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for monitoring, and for tests that kill one)."""
        return [w.proc.pid for w in self._workers if w.proc is not None and w.proc.poll() is None]

    def stats(self) -> dict[str, int]:
        """Counters since start: jobs started on a worker, jobs cancelled before they started, restarts."""
        with self._lock:
            return dict(self._stats)

    # ---- running jobs

    def submit(self, job: Job) -> concurrent.futures.Future[RunResult]:
        """Queue one job; the future always resolves to a RunResult (failures in `sandbox_error`)."""
        self.start()
        future: concurrent.futures.Future[RunResult] = concurrent.futures.Future()
        if self._closed:
            future.set_result(_error_result("sandbox closed", job))
            return future
        self._queue.put((job, future))
        return future

    def run(self, source: str, stdin: bytes | str = b"", timeout_s: float | None = None) -> RunResult:
        """Run one script (like `python -c source`) with stdin; blocks until it ends."""
        return self.submit(Job(source, stdin=stdin, timeout_s=timeout_s)).result()

    def run_batch(self, jobs: list[Job]) -> list[RunResult]:
        """Run jobs concurrently over the workers; results in input order, one per job."""
        if self._weaker:
            logger.warning(
                "sandbox batch of %d jobs runs with WEAKER isolation: missing %s",
                len(jobs),
                ", ".join(self._weaker),
            )
        futures = [self.submit(job) for job in jobs]
        return [f.result() for f in futures]

    def _serve(self, worker: _Worker) -> None:
        while True:
            entry = self._queue.get()
            if entry is None:
                return
            job, future = entry
            if not future.set_running_or_notify_cancel():
                with self._lock:
                    self._stats["jobs_cancelled"] += 1
                continue
            with self._lock:
                self._stats["jobs_started"] += 1
            try:
                result = self._run_on(worker, job)
            except BaseException as e:  # noqa: BLE001 - a future must never be left pending
                result = _error_result(f"sandbox failure: {type(e).__name__}: {e}", job, self._weaker)
            future.set_result(result)

    def _run_on(self, worker: _Worker, job: Job) -> RunResult:
        try:
            if worker.proc is None or worker.proc.poll() is not None:
                self._restart(worker)
            header, (stdout, stderr, harness) = worker.run(job, self.config.timeout_s)
        except (OSError, EOFError, TimeoutError, ValueError) as e:
            logger.error("sandbox worker %d failed (%s); restarting it", worker.index, e)
            try:
                self._restart(worker)  # at once: the new worker's first act kills the old one's leftovers
            except Exception as restart_error:  # noqa: BLE001 - retried before the next job
                logger.error("sandbox worker %d did not restart: %s", worker.index, restart_error)
                worker.stop(1.0)
            return _error_result(f"sandbox worker died: {e}", job, self._weaker)
        killed = header.get("killed_reason")
        return RunResult(
            exit_code=header.get("exit_code"),
            signal=header.get("signal"),
            stdout=stdout,
            stderr=stderr,
            harness_output=harness,
            timed_out=bool(header.get("timed_out")),
            killed_reason=killed,
            wall_s=float(header.get("wall_s") or 0.0),
            cpu_s=header.get("cpu_s"),
            max_rss_kb=header.get("max_rss_kb"),
            leftovers_killed=int(header.get("leftovers_killed") or 0),
            sandbox_error="job could not apply an enforced isolation layer"
            if killed == "setup_failed"
            else None,
            nonce=job.nonce,
            weaker_isolation=self._weaker,
            stdout_limit=header.get("stdout_limit"),
        )

    def _restart(self, worker: _Worker) -> None:
        with self._lock:
            self._stats["worker_restarts"] += 1
        worker.stop(1.0)
        hello = worker.start()
        report = self._build_report([hello])
        lost = [n for n in report["missing"] if n not in self._weaker]
        if lost:
            worker.stop(1.0)
            raise OSError(f"restarted worker lost isolation layers {lost}")
