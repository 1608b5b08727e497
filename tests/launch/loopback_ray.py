"""A real Ray head on loopback for tests: its own free ports, temp dir, HOME and auth token.

The head runs under `ray start --head --block` as a child of the test: stopping it (SIGTERM to that
child, which then stops every process it started) touches nothing else on the machine: never a bare
`ray stop`, which would stop other people's Rays. Processes that still carry this head's temp dir in
their command line afterwards (workers, the job's driver tree) are ended by pid.

Token authentication is ON (RAY_AUTH_MODE=token), with a token made by `ray get-auth-token
--generate` in the head's private HOME, so the machine's ~/.ray/auth_token is neither read nor written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil

RAY_BIN = Path(sys.executable).with_name("ray")
START_TIMEOUT_S = 120
WORKER_PORTS = 200
# Ports are picked free and released before `ray start` binds them: another process (another xdist
# worker's Ray, a run beside the suite) can take one in between. Ray then fails to bind (its GCS exits with
# "Address already in use"); the start is retried with fresh ports, at most START_ATTEMPTS times.
START_ATTEMPTS = 3
PORT_CLASH = re.compile(
    r"Address already in use|Failed to start the grpc server|port \d+ is (?:already )?in use", re.I
)


class PortClash(RuntimeError):
    """`ray start` could not bind a port it was given (taken between the pick and the bind)."""


def _port_clash_in(root: Path) -> bool:
    """Whether the node's start log or any of its Ray logs report a port it could not bind."""
    logs = [root / "ray-start.log", *root.glob("t/session_*/logs/*")]
    for log in logs:
        try:
            if log.is_file() and PORT_CLASH.search(log.read_text(errors="replace")[-200_000:]):
                return True
        except OSError:
            continue
    return False


def _with_fresh_ports(start_once, what: str):
    """Call start_once() (which picks its own ports) until a start does not clash on a port."""
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return start_once(attempt)
        except PortClash as clash:
            if attempt == START_ATTEMPTS:
                raise RuntimeError(
                    f"{what}: every one of {START_ATTEMPTS} starts clashed on a port: {clash}"
                ) from clash


def _raise_failed_start(root: Path, what: str, attempt: int) -> None:
    """A start that failed: PortClash (retried) when a port could not be bound, else RuntimeError. The
    failed attempt's logs are kept beside the next one's (ray-start.log.N, t.N)."""
    clash = _port_clash_in(root)
    tail = (root / "ray-start.log").read_text(errors="replace")[-4000:]
    (root / "ray-start.log").rename(root / f"ray-start.log.{attempt}")
    if (root / "t").exists():
        (root / "t").rename(root / f"t.{attempt}")
    raise (PortClash if clash else RuntimeError)(f"{what}:\n{tail}")


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on loopback (held open together so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port_range(width: int) -> int:
    """First port of `width` consecutive ports that are free now (Ray's worker port range)."""
    for _ in range(200):
        start = free_ports(1)[0]
        if start + width > 65000:
            continue
        ok = True
        for port in range(start, start + width):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return start
    raise RuntimeError("no free port range")


@dataclass
class LoopbackRay:
    """One running head: its dashboard URL, token, the env a client needs, and how to stop it."""

    root: Path
    dashboard_url: str
    gcs_address: str
    token: str
    token_path: Path
    process: subprocess.Popen
    head_env: dict[str, str] = field(repr=False)

    def client_env(self, *, with_token: bool = True, home: Path | None = None) -> dict[str, str]:
        """Env for an `rlvr` CLI subprocess: a private HOME, no inherited Ray auth settings."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env["HOME"] = str(home or (self.root / "client-home"))
        Path(env["HOME"]).mkdir(parents=True, exist_ok=True)
        if with_token:
            env["RAY_AUTH_TOKEN_PATH"] = str(self.token_path)
        return env

    def stop(self) -> None:
        marker = str(self.root)
        doomed = _processes_mentioning(marker)
        for proc in list(doomed):
            try:
                doomed.extend(proc.children(recursive=True))
            except psutil.Error:
                pass
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        _end(doomed + _processes_mentioning(marker))


def _processes_mentioning(marker: str) -> list[psutil.Process]:
    found = []
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.info["pid"] != me and any(marker in part for part in (proc.info["cmdline"] or [])):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def sweep(marker: str) -> None:
    """SIGKILL every process (but this one) whose command line mentions `marker`: a test's private Ray
    temp root, so that only what the test started is killed."""
    for proc in _processes_mentioning(marker):
        try:
            proc.kill()
        except psutil.Error:
            pass


def _end(procs: list[psutil.Process]) -> None:
    alive = []
    for proc in {p.pid: p for p in procs}.values():
        try:
            proc.terminate()
            alive.append(proc)
        except psutil.Error:
            pass
    _, still = psutil.wait_procs(alive, timeout=10)
    for proc in still:
        try:
            proc.kill()
        except psutil.Error:
            pass


def _node_args(ports, worker_start, num_cpus, num_gpus, temp_dir, resources) -> list[str]:
    """`ray start` arguments every loopback node needs: its own ports, worker range, resources, temp dir."""
    node_manager, object_manager, agent_listen, agent_grpc, runtime_env_agent, metrics = ports
    args = [
        "--node-manager-port",
        str(node_manager),
        "--object-manager-port",
        str(object_manager),
        "--dashboard-agent-listen-port",
        str(agent_listen),
        "--dashboard-agent-grpc-port",
        str(agent_grpc),
        "--runtime-env-agent-port",
        str(runtime_env_agent),
        "--metrics-export-port",
        str(metrics),
        "--min-worker-port",
        str(worker_start),
        "--max-worker-port",
        str(worker_start + WORKER_PORTS - 1),
        "--num-cpus",
        str(num_cpus),
        "--num-gpus",
        str(num_gpus),
        "--temp-dir",
        str(temp_dir),
        "--disable-usage-stats",
    ]
    if resources:
        args += ["--resources", json.dumps(resources)]
    return args


def start_head(
    root: Path,
    *,
    num_cpus: int = 8,
    num_gpus: int = 1,
    resources: dict | None = None,
    env: dict[str, str] | None = None,
) -> LoopbackRay:
    """Start a head in `root` (a short path: Ray's socket paths must stay under 107 bytes). `env` is added
    to the head's environment (its workers inherit it; nodes joined with `start_node` inherit it too)."""
    home = root / "head-home"
    home.mkdir(parents=True, exist_ok=True)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    base_env["HOME"] = str(home)
    base_env["PATH"] = f"{RAY_BIN.parent}{os.pathsep}{base_env.get('PATH', '')}"
    subprocess.run(
        [str(RAY_BIN), "get-auth-token", "--generate"],
        env={**base_env, "RAY_AUTH_MODE": "token"},
        check=True,
        capture_output=True,
        timeout=120,
    )
    token_path = home / ".ray" / "auth_token"
    token = token_path.read_text().strip()
    head_env = {
        **base_env,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token_path),
        "RAY_USAGE_STATS_ENABLED": "0",
        # Keep the head small on a 2-core machine; verl's workers set their own threads.
        "OMP_NUM_THREADS": "1",
        **(env or {}),
    }

    def once(attempt: int) -> LoopbackRay:
        worker_start = free_port_range(WORKER_PORTS)
        workers = range(worker_start, worker_start + WORKER_PORTS)
        ports = [p for p in free_ports(30) if p not in workers][:9]
        (
            gcs,
            dashboard,
            client,
            node_manager,
            object_manager,
            agent_listen,
            agent_grpc,
            runtime_env_agent,
            metrics,
        ) = ports
        temp_dir = root / "t"
        cmd = [
            str(RAY_BIN),
            "start",
            "--head",
            "--block",
            "--node-ip-address",
            "127.0.0.1",
            "--port",
            str(gcs),
            "--dashboard-host",
            "127.0.0.1",
            "--dashboard-port",
            str(dashboard),
            "--include-dashboard",
            "true",
            "--ray-client-server-port",
            str(client),
        ] + _node_args(
            (node_manager, object_manager, agent_listen, agent_grpc, runtime_env_agent, metrics),
            worker_start,
            num_cpus,
            num_gpus,
            temp_dir,
            resources,
        )
        log = open(root / "ray-start.log", "wb")  # noqa: SIM115 - lives as long as the head
        # In its own directory, as on a real cluster: a job without a working_dir runs in the head's cwd,
        # which must not be this checkout (it would hide a job that cannot find its recipes).
        process = subprocess.Popen(
            cmd, env=head_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=root
        )
        ray = LoopbackRay(
            root=root,
            dashboard_url=f"http://127.0.0.1:{dashboard}",
            gcs_address=f"127.0.0.1:{gcs}",
            token=token,
            token_path=token_path,
            process=process,
            head_env=head_env,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                ray.stop()
                _raise_failed_start(root, f"ray start exited {process.returncode}", attempt)
            if _jobs_api_ready(ray):
                return ray
            time.sleep(0.5)
        ray.stop()
        _raise_failed_start(
            root, f"the Ray head did not serve its Jobs API within {START_TIMEOUT_S} s", attempt
        )

    return _with_fresh_ports(once, "the loopback head")


@dataclass
class LoopbackNode:
    """A second Ray node on this machine, joined to a LoopbackRay head; stopped by pid like the head."""

    root: Path
    process: subprocess.Popen
    resources: dict

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        _end(_processes_mentioning(str(self.root)))


def start_node(
    head: LoopbackRay,
    root: Path,
    *,
    ray_bin: Path = RAY_BIN,
    num_cpus: int = 0,
    num_gpus: int = 0,
    resources: dict | None = None,
    env: dict[str, str] | None = None,
) -> LoopbackNode:
    """Join a worker node to `head`, with its own ports and temp dir in `root` (a short path), started by
    `ray_bin` (another virtualenv's `ray` makes a node of that environment). Returns once the head lists
    it as alive with its resources."""
    root.mkdir(parents=True, exist_ok=True)

    def once(attempt: int) -> LoopbackNode:
        worker_start = free_port_range(WORKER_PORTS)
        workers = range(worker_start, worker_start + WORKER_PORTS)
        node_manager, object_manager, agent_listen, agent_grpc, runtime_env_agent, metrics = [
            p for p in free_ports(30) if p not in workers
        ][:6]
        node_env = {**head.head_env, **(env or {})}
        node_env["PATH"] = f"{ray_bin.parent}{os.pathsep}{node_env.get('PATH', '')}"
        cmd = [
            str(ray_bin),
            "start",
            "--address",
            head.gcs_address,
            "--block",
            "--node-ip-address",
            "127.0.0.1",
        ] + _node_args(
            (node_manager, object_manager, agent_listen, agent_grpc, runtime_env_agent, metrics),
            worker_start,
            num_cpus,
            num_gpus,
            root / "t",
            resources,
        )
        log = open(root / "ray-start.log", "wb")  # noqa: SIM115 - lives as long as the node
        process = subprocess.Popen(
            cmd, env=node_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=root
        )
        node = LoopbackNode(root=root, process=process, resources=dict(resources or {}))
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                node.stop()
                _raise_failed_start(root, f"ray start (node) exited {process.returncode}", attempt)
            if any(
                n["resources_total"].get("GPU", 0) == num_gpus and _carries(n, resources)
                for n in nodes(head)
                if not n.get("is_head_node")
            ):
                return node
            time.sleep(1.0)
        node.stop()
        _raise_failed_start(root, f"the node did not join the head within {START_TIMEOUT_S} s", attempt)

    return _with_fresh_ports(once, "a loopback node")


def joining_env(head: LoopbackRay, home: Path) -> dict[str, str]:
    """The environment of a client (`rlvr train --address`, `rlvr submit`) that joins `head` as a driver:
    its token, its GCS address, a HOME of its own."""
    env = head.client_env(home=home)
    env.update(
        {
            "RAY_ADDRESS": head.gcs_address,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(head.token_path),
        }
    )
    return env


def _carries(node: dict, resources: dict | None) -> bool:
    total = node["resources_total"]
    return all(total.get(k, 0) == v for k, v in (resources or {}).items())


def state_api(head: LoopbackRay, kind: str, **params: str) -> list[dict]:
    """Rows of the head's state API (`ray list KIND --detail`): nodes, actors, tasks, workers."""
    query = "&".join(f"{k}={v}" for k, v in {"detail": "1", "limit": "10000", **params}.items())
    request = urllib.request.Request(
        f"{head.dashboard_url}/api/v0/{kind}?{query}", headers={"Authorization": f"Bearer {head.token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["data"]["result"]["result"]


def nodes(head: LoopbackRay) -> list[dict]:
    return [n for n in state_api(head, "nodes") if n.get("state") == "ALIVE"]


def _jobs_api_ready(ray: LoopbackRay) -> bool:
    request = urllib.request.Request(
        f"{ray.dashboard_url}/api/jobs/", headers={"Authorization": f"Bearer {ray.token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def remove_tree(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
