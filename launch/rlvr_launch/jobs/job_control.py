"""`rlvr status`, `rlvr logs`, `rlvr stop`, and the connection to a Ray cluster's Jobs API they share
with `rlvr submit`.

Covers: finding the Ray auth token (Ray 2.60 turns token authentication on by default), checking the
cluster's authentication mode before the first real request so an unreachable address, a missing
token (HTTP 401) and a wrong token (HTTP 403) each get a message that names the fix, following a
job's logs to its end, and the exit code that says how a job ended.

Does NOT cover: TLS or proxies beyond what `requests` does with the URL (the token travels in clear
over plain HTTP: reach a remote dashboard through `kubectl port-forward`, an SSH tunnel or TLS), and
never prints the token or any environment value of a job.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from rlvr_launch.errors import UserError

# How a job ended -> the exit code of `rlvr submit --follow` / `rlvr logs --follow`.
EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_STOPPED = 3
TERMINAL_STATES = ("SUCCEEDED", "FAILED", "STOPPED")
EXIT_CODE_OF_STATE = {"SUCCEEDED": EXIT_SUCCEEDED, "FAILED": EXIT_FAILED, "STOPPED": EXIT_STOPPED}
# Lines of the job's log shown under the message of a failed job.
LOG_TAIL_LINES = 40
# Seconds to wait for an answer of the dashboard before calling it unreachable.
CONNECT_TIMEOUT_S = 10.0

TOKEN_HELP = (
    "Get the token from the cluster's head (`ray get-auth-token` there) or, on KubeRay, from the Secret "
    "the operator made (`kubectl get secret <raycluster-name> -o jsonpath='{.data.auth_token}' | base64 -d`), "
    "then set RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, put it in ~/.ray/auth_token, or pass --auth-token-file"
)


@dataclass(frozen=True)
class AuthToken:
    """A Ray auth token and where it was found (the place is printed, the value never is)."""

    value: str  # the secret itself: never print or log it
    source: str  # e.g. "RAY_AUTH_TOKEN", "/home/u/.ray/auth_token"

    def __repr__(self) -> str:  # keep the value out of tracebacks and debug prints
        return f"AuthToken(source={self.source!r})"


def add_connection_arguments(parser) -> None:
    """--address and --auth-token-file, shared by submit/status/logs/stop."""
    default = os.environ.get("RAY_API_SERVER_ADDRESS") or _http_or_none(os.environ.get("RAY_ADDRESS"))
    parser.add_argument(
        "--address",
        default=default,
        help="the Ray dashboard URL, e.g. http://127.0.0.1:8265 (default: $RAY_API_SERVER_ADDRESS, "
        "or $RAY_ADDRESS when it is an http(s) URL)",
    )
    parser.add_argument(
        "--auth-token-file",
        type=Path,
        default=None,
        help="file holding the cluster's Ray auth token (default lookup: $RAY_AUTH_TOKEN, "
        "$RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token)",
    )


def _http_or_none(value: str | None) -> str | None:
    if value and value.startswith(("http://", "https://")):
        return value
    return None


def normalise_address(address: str | None) -> str:
    """`host:port` -> `http://host:port`; no trailing slash. A Ray GCS address is refused with the fix."""
    if not address:
        raise UserError(
            "no cluster address: pass --address http://HEAD:8265 (the Ray dashboard URL) "
            "or set RAY_API_SERVER_ADDRESS"
        )
    address = address.strip().rstrip("/")
    if address.startswith("ray://"):
        raise UserError(
            f"{address} is a Ray Client address; rlvr uses the Jobs API: pass the dashboard URL, "
            "http://HEAD:8265 by default"
        )
    if "://" not in address:
        address = "http://" + address
    if not address.startswith(("http://", "https://")):
        raise UserError(f"{address} is not an http(s) URL: pass the Ray dashboard URL, e.g. http://HEAD:8265")
    return address


def find_token(token_file: Path | None = None) -> AuthToken | None:
    """Ray's own lookup order (ray-auth.md): --auth-token-file, RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH,
    ~/.ray/auth_token. Returns None when there is none."""
    if token_file is not None:
        return AuthToken(_read_token_file(token_file, "--auth-token-file"), str(token_file))
    value = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if value:
        return AuthToken(value, "RAY_AUTH_TOKEN")
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return AuthToken(_read_token_file(Path(path), "RAY_AUTH_TOKEN_PATH"), path)
    default = Path.home() / ".ray" / "auth_token"
    if default.is_file():
        return AuthToken(_read_token_file(default, "~/.ray/auth_token"), str(default))
    return None


def _read_token_file(path: Path, named_by: str) -> str:
    try:
        value = path.expanduser().read_text().strip()
    except OSError as e:
        raise UserError(
            f"cannot read the Ray auth token file {path} (given by {named_by}): {e.strerror}"
        ) from None
    if not value:
        raise UserError(f"the Ray auth token file {path} (given by {named_by}) is empty. {TOKEN_HELP}")
    return value


def _get(url: str, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=CONNECT_TIMEOUT_S) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def _unreachable(address: str, reason: object) -> UserError:
    return UserError(
        f"cannot reach a Ray dashboard at {address} ({reason}). Check the URL and its port (the dashboard "
        "port, 8265 unless the head was started with --dashboard-port), that the head is running "
        "(`ray status` on it), and for a remote or Kubernetes head that the tunnel is up "
        "(e.g. `kubectl port-forward svc/rlvr-head-svc 8265:8265`)"
    )


def auth_headers(address: str, token_file: Path | None = None) -> dict[str, str]:
    """Check the cluster's authentication mode and the token; return the headers every request needs.

    `GET /api/authentication_mode` needs no token and answers "token" or "disabled" (404 on Ray
    releases without auth). The token is then proven with `GET /api/version` so that 401/403 come
    out here, as a clear message, instead of as a traceback from the SDK.
    """
    try:
        status, body = _get(f"{address}/api/authentication_mode", {})
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise _unreachable(address, getattr(e, "reason", e)) from None
    mode = "disabled"
    token: AuthToken | None = None
    if status == 200:
        try:
            mode = json.loads(body).get("authentication_mode", "disabled")
        except (ValueError, AttributeError):
            raise UserError(
                f"{address} answered, but not as a Ray dashboard: pass the dashboard URL (port 8265 by default)"
            ) from None
    elif status != 404:
        raise UserError(
            f"{address}/api/authentication_mode answered HTTP {status}: is this a Ray dashboard URL?"
        )
    headers: dict[str, str] = {}
    if mode == "token":
        token = find_token(token_file)
        if token is None:
            raise UserError(
                f"the Ray cluster at {address} requires an auth token and none was found. {TOKEN_HELP}"
            )
        headers = {"Authorization": f"Bearer {token.value}"}
    try:
        status, body = _get(f"{address}/api/version", headers)
    except (urllib.error.URLError, OSError) as e:
        raise _unreachable(address, getattr(e, "reason", e)) from None
    if status == 401:
        raise UserError(
            f"the Ray cluster at {address} refused the request: missing authentication token (401). {TOKEN_HELP}"
        )
    if status == 403:
        raise UserError(
            f"the Ray cluster at {address} rejected the auth token from "
            f"{token.source if token else 'the request'} (403 invalid token): "
            f"it is not this cluster's token. {TOKEN_HELP}"
        )
    if status != 200:
        raise UserError(f"{address}/api/version answered HTTP {status}: is this a Ray dashboard URL?")
    return headers


def connect(address: str | None, token_file: Path | None = None):
    """A JobSubmissionClient for `address`, after the reachability and auth checks above."""
    address = normalise_address(address)
    headers = auth_headers(address, token_file)
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address, headers=headers or None)
    except ConnectionError as e:
        raise _unreachable(address, e) from None


def _job_info(client, job_id: str):
    try:
        return client.get_job_info(job_id)
    except RuntimeError as e:
        if "404" in str(e) or "does not exist" in str(e):
            raise UserError(f"no job {job_id!r} on this cluster: `rlvr status` lists the jobs") from None
        raise


def log_tail(client, job_id: str, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = client.get_job_logs(job_id)
    except RuntimeError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def follow_logs(client, job_id: str, out=None) -> None:
    """Stream the job's logs to `out` until the job ends (the SDK's websocket tail)."""
    out = out or sys.stdout

    async def _tail() -> None:
        async for chunk in client.tail_job_logs(job_id):
            out.write(chunk)
            out.flush()

    asyncio.run(_tail())


def wait_until_terminal(client, job_id: str, timeout_s: float | None = None, poll_s: float = 0.5) -> str:
    """The job's final state; the log stream can close a moment before the state is recorded."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        state = str(_job_info(client, job_id).status.value)
        if state in TERMINAL_STATES:
            return state
        if deadline is not None and time.monotonic() > deadline:
            return state
        time.sleep(poll_s)


def failure_headline(message: str, log_text: str) -> str:
    """One line saying why a job failed: rlvr's own error line, else the last exception line of the
    log, else the first line of Ray's message (which otherwise repeats the whole log)."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("rlvr job: error:"):
            return line[len("rlvr job: ") :]
    for line in reversed(lines):
        if re.match(r"^([A-Za-z_][\w.]*)(Error|Exception|Interrupt|Exit)\b.*", line):
            return line[:500]
    first = (message or "").strip().splitlines()
    return first[0][:500] if first else "no message from Ray"


def report_end(client, job_id: str, state: str, show_tail: bool) -> int:
    """Say how the job ended; a failed job gets why and (show_tail) the tail of its log. Returns the exit code."""
    if state == "SUCCEEDED":
        print(f"rlvr: job {job_id} SUCCEEDED", file=sys.stderr)
    elif state == "STOPPED":
        print(f"rlvr: job {job_id} was STOPPED", file=sys.stderr)
    else:
        info = _job_info(client, job_id)
        tail = log_tail(client, job_id)
        print(f"rlvr: job {job_id} {state}: {failure_headline(info.message or '', tail)}", file=sys.stderr)
        if show_tail and tail:
            print(f"--- last {LOG_TAIL_LINES} lines of the job's log ---\n{tail}", file=sys.stderr)
        print(f"rlvr: the whole log: rlvr logs {job_id}", file=sys.stderr)
    return EXIT_CODE_OF_STATE.get(state, EXIT_FAILED)


def describe(info) -> list[str]:
    """Human lines for one job. Only the NAMES of its env vars, never their values (secrets travel there)."""
    runtime_env = info.runtime_env or {}
    metadata = info.metadata or {}
    message = (info.message or "").strip().splitlines()
    lines = [
        f"job:        {info.submission_id}",
        f"status:     {info.status.value}" + (f"  ({message[0][:200]})" if message else ""),
        f"entrypoint: {info.entrypoint}",
    ]
    if info.start_time:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.start_time / 1000))
        lines.append(f"started:    {started}")
    if info.end_time and info.start_time:
        lines.append(f"ran for:    {(info.end_time - info.start_time) / 1000:.1f} s")
    for key in sorted(metadata):
        if key.startswith("rlvr_"):
            lines.append(f"{key[5:] + ':':<11} {metadata[key]}")
    env_names = sorted(runtime_env.get("env_vars") or {})
    if env_names:
        lines.append(f"env vars:   {', '.join(env_names)} (values not shown)")
    return lines


# ---- rlvr status ------------------------------------------------------------------------------------


def add_status_arguments(parser) -> None:
    parser.add_argument("job_id", nargs="?", help="a job's submission id (default: list all jobs)")
    add_connection_arguments(parser)


def run_status(args) -> int:
    client = connect(args.address, args.auth_token_file)
    if args.job_id:
        info = _job_info(client, args.job_id)
        print("\n".join(describe(info)))
        if str(info.status.value) == "FAILED":
            tail = log_tail(client, args.job_id)
            print(f"why:        {failure_headline(info.message or '', tail)}")
            if tail:
                print(f"--- last {LOG_TAIL_LINES} lines of the job's log ---\n{tail}")
        return 0
    jobs = sorted(client.list_jobs(), key=lambda j: j.start_time or 0)
    if not jobs:
        print("no jobs on this cluster")
        return 0
    print(f"{'SUBMISSION ID':<44} {'STATUS':<10} {'EXPERIMENT':<20} STARTED")
    for job in jobs:
        started = (
            time.strftime("%m-%d %H:%M:%S", time.localtime(job.start_time / 1000)) if job.start_time else "-"
        )
        experiment = (job.metadata or {}).get("rlvr_experiment", "-")
        print(
            f"{job.submission_id or job.job_id or '-':<44} {job.status.value:<10} {experiment:<20} {started}"
        )
    return 0


# ---- rlvr logs --------------------------------------------------------------------------------------


def add_logs_arguments(parser) -> None:
    parser.add_argument("job_id", help="a job's submission id (`rlvr status` lists them)")
    parser.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="stream the logs until the job ends; the exit code then says how it ended "
        "(0 succeeded, 1 failed, 3 stopped)",
    )
    add_connection_arguments(parser)


def run_logs(args) -> int:
    client = connect(args.address, args.auth_token_file)
    _job_info(client, args.job_id)  # a clear message for an unknown id
    if not args.follow:
        sys.stdout.write(client.get_job_logs(args.job_id))
        return 0
    return follow_to_end(client, args.job_id, show_tail=True)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def is_rlvr_line(line: str) -> bool:
    """A line `rlvr train` itself prints (its progress, its errors, the run directory at the end), as
    opposed to verl's and Ray's own logs, which a job's log also holds."""
    text = _ANSI.sub("", line).strip()
    if text.startswith(("[rlvr]", "rlvr ", "rlvr:")):
        return True
    return text.startswith("/") and " " not in text  # the run directory, rlvr train's last line


class RlvrLines:
    """A stream that passes on only `is_rlvr_line` lines of what is written to it (in any chunks)."""

    def __init__(self, out) -> None:
        self.out, self.pending, self.hidden = out, "", 0

    def write(self, chunk: str) -> None:
        *lines, self.pending = (self.pending + chunk).split("\n")
        for line in lines:
            if is_rlvr_line(line):
                self.out.write(line + "\n")
            elif line.strip():
                self.hidden += 1

    def flush(self) -> None:
        self.out.flush()

    def close(self) -> None:
        if self.pending:
            self.write("\n")
        self.flush()


def follow_to_end(client, job_id: str, show_tail: bool, rlvr_lines_only: bool = False) -> int:
    """Stream logs until the job ends, then report; Ctrl-C leaves the job running and says so.

    `rlvr_lines_only` (rlvr submit --follow): show what `rlvr train` prints locally; the rest of the
    job's log (verl, Ray) stays one `rlvr logs JOB_ID` away."""
    out = RlvrLines(sys.stdout) if rlvr_lines_only else None
    try:
        follow_logs(client, job_id, out)
        if out is not None:
            out.close()
            if out.hidden:
                print(f"rlvr: {out.hidden} lines of verl's and Ray's logs not shown: rlvr logs {job_id}")
        state = wait_until_terminal(client, job_id, timeout_s=60)
    except KeyboardInterrupt:
        print(
            f"\nrlvr: stopped following; job {job_id} keeps running. "
            f"`rlvr logs {job_id} --follow` resumes, `rlvr stop {job_id}` stops it",
            file=sys.stderr,
        )
        return 130
    if state not in TERMINAL_STATES:
        print(f"rlvr: the log stream of job {job_id} closed while it is {state}", file=sys.stderr)
        return EXIT_FAILED
    return report_end(client, job_id, state, show_tail=show_tail)


# ---- rlvr stop --------------------------------------------------------------------------------------


def add_stop_arguments(parser) -> None:
    parser.add_argument("job_id", help="a job's submission id (`rlvr status` lists them)")
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="return once the stop is requested, without waiting for the job to end",
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the job to end (default 60)"
    )
    add_connection_arguments(parser)


def run_stop(args) -> int:
    client = connect(args.address, args.auth_token_file)
    state = str(_job_info(client, args.job_id).status.value)
    if state in TERMINAL_STATES:
        print(f"job {args.job_id} already ended: {state}")
        return 0
    client.stop_job(args.job_id)
    if args.no_wait:
        print(f"stop requested for job {args.job_id}")
        return 0
    state = wait_until_terminal(client, args.job_id, timeout_s=args.timeout)
    if state not in TERMINAL_STATES:
        print(
            f"job {args.job_id} is still {state} after {args.timeout:.0f} s; Ray keeps stopping it",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(f"job {args.job_id} {state}")
    return 0
