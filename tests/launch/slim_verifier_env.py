"""A virtualenv holding exactly what the `verifier` image installs: rlvr's `dependencies` (the verifier
side of pyproject.toml: Ray, sympy, ...) and rlvr itself with --no-deps. No torch, no verl.

The dependency part is built once and cached under the test cache dir, keyed by the dependency list and
the interpreter's version (the same Python as the project's venv: Ray refuses a node on another one);
rlvr itself is installed per session into a private --target folder, so the node runs the code under
test, not a stale copy.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SlimEnv:
    venv: Path
    site: Path  # rlvr, installed --no-deps for this session

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def ray(self) -> Path:
        return self.venv / "bin" / "ray"

    def env(self) -> dict[str, str]:
        """Env for a process of this environment (rlvr importable, nothing of the project's venv)."""
        return {"PYTHONPATH": str(self.site), "VIRTUAL_ENV": str(self.venv)}


def dependencies() -> list[str]:
    return list(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])


def _pip(python: Path, *args: str, timeout: float = 900) -> None:
    out = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if out.returncode:
        raise RuntimeError(
            f"pip install {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        )


def build(cache_dir: Path, session_dir: Path) -> SlimEnv:
    deps = dependencies()
    version = ".".join(map(str, sys.version_info[:3]))
    key = hashlib.sha256("\n".join([version, *sorted(deps)]).encode()).hexdigest()[:16]
    venv = cache_dir / f"slim-verifier-venv-{key}"
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / f"slim-verifier-venv-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time across sessions; others wait, then reuse
        if not (venv / ".ready").is_file():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
            _pip(venv / "bin" / "python", *deps)
            (venv / ".ready").write_text("\n".join(deps) + "\n")
    # rlvr's wheel, built by the project's own build backend, installed --no-deps into the slim env's path.
    wheels = session_dir / "wheel"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if out.returncode:
        raise RuntimeError(f"building rlvr's wheel failed:\n{out.stderr[-3000:]}")
    site = session_dir / "rlvr-no-deps"
    _pip(venv / "bin" / "python", "--no-deps", "--target", str(site), *map(str, wheels.glob("rlvr-*.whl")))
    slim = SlimEnv(venv=venv, site=site)
    probe = subprocess.run(
        [
            str(slim.python),
            "-c",
            "import importlib.util as u, sys, rlvr_verifiers.pool, rlvr_launch;"
            "sys.exit(bool(u.find_spec('torch') or u.find_spec('verl')))",
        ],
        env={**_clean_env(), **slim.env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if probe.returncode:
        raise RuntimeError(f"the slim env is not slim or lacks rlvr: {probe.stderr[-2000:]}")
    return slim


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
