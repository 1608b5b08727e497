"""What a real cluster needs from the two images, read from the Dockerfile (no Docker engine here):

- ONE Python: Ray refuses a node whose Python differs from the head's down to the patch level, so a
  verifier image on another Python than the trainer image never joins the cluster;
- what verl's GPU path loads: flash-attn (verl's default attn_implementation on a GPU is
  flash_attention_2, and rlvr's gpu platform keeps it), at the version verl 0.9.1's own extra pins;
- what Ray's and KubeRay's machinery runs inside the containers: rsync (the cluster launcher's docker
  runner syncs file_mounts with it), wget (KubeRay 1.5's exec health probes), boto3 in the head's image
  (the autoscaler of cluster/ray-cluster.yaml runs there).
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest
from dockerfile_text import global_args, installed, instructions

ROOT = Path(__file__).resolve().parents[2]
# python3 of each Ubuntu release (Ubuntu keeps the patch level for a release's lifetime).
UBUNTU_PYTHON = {"22.04": "3.10.12", "24.04": "3.12.3"}


def _stages() -> dict[str, dict]:
    """name -> {"image": resolved base image, "args": ARG names, "run": [RUN texts]}."""
    args = global_args()
    stages: dict[str, dict] = {}
    current = None
    for keyword, rest in instructions():
        if keyword == "FROM":
            words = rest.split()
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], words[0])
            current = words[words.index("AS") + 1] if "AS" in words else words[0]
            stages[current] = {"image": image, "args": set(), "run": []}
        elif current and keyword == "ARG":
            stages[current]["args"].add(rest.partition("=")[0])
        elif current and keyword == "RUN":
            stages[current]["run"].append(rest)
    return stages


def _ubuntu_release(image: str) -> str | None:
    match = re.search(r"(?:^ubuntu:|-ubuntu)(\d\d\.\d\d)$", image)
    return match.group(1) if match else None


def _apt_packages(stage: dict) -> set[str]:
    return {word.split("=")[0] for word in installed(stage["run"], ["apt-get", "install"])}


@pytest.fixture(scope="module")
def stages() -> dict[str, dict]:
    return _stages()


def test_both_targets_run_the_same_python(stages):
    """Same base Ubuntu release, python3 from its apt, and a build-time check against one PYTHON_VERSION."""
    version = global_args().get("PYTHON_VERSION")
    assert version and re.fullmatch(r"\d+\.\d+\.\d+", version), "a global ARG PYTHON_VERSION=X.Y.Z"
    releases = {}
    for target in ("trainer", "verifier"):
        stage = stages[target]
        release = _ubuntu_release(stage["image"])
        assert release, f"{target}: base {stage['image']} is not an Ubuntu release (python3 from its apt)"
        releases[target] = release
        assert "python3" in _apt_packages(stage), f"{target} takes its Python from another source"
        assert not re.search(r"deadsnakes|uv python|pyenv|conda", " ".join(stage["run"]))
        assert "PYTHON_VERSION" in stage["args"], f"{target} does not check PYTHON_VERSION"
        assert any("sys.version_info[:3]" in r and "${PYTHON_VERSION}" in r for r in stage["run"]), (
            f"{target} does not fail its build when its Python is not PYTHON_VERSION"
        )
    assert releases["trainer"] == releases["verifier"], releases
    assert UBUNTU_PYTHON[releases["trainer"]] == version, (
        f"Ubuntu {releases['trainer']}'s python3 is {UBUNTU_PYTHON[releases['trainer']]}, not {version}"
    )


def test_a_python_image_for_one_target_is_caught(stages):
    """The check above is not vacuous: a verifier on python:3.11 (today's bug) differs from the trainer."""
    assert _ubuntu_release("python:3.11.13-slim-bookworm") is None
    assert _ubuntu_release(stages["trainer"]["image"]) == _ubuntu_release(stages["verifier"]["image"])


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_trainer_has_flash_attention_at_verls_pin(stages):
    from rlvr_launch.recipes.compose import compose

    pins = {}
    for req in importlib.metadata.requires("verl") or []:
        if 'extra == "flash-attn-cu130torch211"' in req:
            name, _, version = req.split(";")[0].partition("==")
            pins[name.strip().lower()] = version.strip()
    assert pins.get("flash-attn"), "verl 0.9.1 pins flash-attn in its flash-attn-cu130torch211 extra"
    trainer_runs = " ".join(stages["trainer"]["run"])
    assert f'"flash-attn=={pins["flash-attn"]}"' in trainer_runs
    assert "--no-build-isolation" in trainer_runs  # it builds against the image's torch
    assert "flash-attn" not in " ".join(stages["verifier"]["run"])
    # The gpu platform keeps verl's flash_attention_2 (and padding-free batches), which needs it.
    cfg = compose(["platform=gpu", "model=qwen2_5_0_5b_instruct", "task=gsm8k"])
    override = cfg.actor_rollout_ref.model.get("override_config") or {}
    assert override.get("attn_implementation", "flash_attention_2") == "flash_attention_2"
    assert cfg.actor_rollout_ref.model.use_remove_padding


def test_every_image_has_rsync_and_wget(stages):
    for target in ("trainer", "verifier"):
        missing = {"rsync", "wget"} - _apt_packages(stages[target])
        assert not missing, f"{target} lacks {missing}"


def test_head_image_has_the_aws_sdk_for_the_autoscaler(stages):
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(r.startswith("boto3==") for r in extras["aws"])
    installs = " ".join(stages["trainer"]["run"])
    match = re.search(r'pip install -e "/opt/rlvr\[([\w,]+)\]"', installs)
    assert match and {"train", "aws"} <= set(match.group(1).split(",")), installs
