"""The shared runtime env (cluster/runtime_env.yaml) uploads every module of rlvr's packages: its excludes
keep run directories, caches and data out, and must not drop a package that shares such a name (the
`rlvr_launch.runs` package and the `runs/` pattern). Read with Ray's own packaging walk, so a job fails
here, in a second, rather than with `No module named ...` on a cluster."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _uploaded(module_dir: Path, excludes: list[str]) -> set[Path]:
    from ray._private.runtime_env.packaging import _dir_travel, _get_excludes

    found: set[Path] = set()
    _dir_travel(module_dir, [_get_excludes(module_dir, excludes)], found.add, include_gitignore=True)
    return {p.relative_to(module_dir) for p in found if p.is_file()}


def test_every_module_of_the_shipped_packages_is_uploaded_and_run_outputs_are_not(tmp_path):
    shared = yaml.safe_load((ROOT / "cluster" / "runtime_env.yaml").read_text())
    for module in shared["py_modules"]:
        if not module.startswith(("launch/", "verifiers/", "cluster/")):
            continue  # recipes: data, not a package
        module_dir = ROOT / module
        modules = {
            p.relative_to(module_dir) for p in module_dir.rglob("*.py") if "__pycache__" not in p.parts
        }
        missing = modules - _uploaded(module_dir, shared["excludes"])
        assert not missing, f"{module}: the runtime env's excludes drop {sorted(map(str, missing))}"
    # A run directory, wherever it lies in an uploaded folder, stays behind.
    (tmp_path / "runs" / "cpu_demo-1").mkdir(parents=True)
    (tmp_path / "runs" / "cpu_demo-1" / "metrics.jsonl").write_text("{}\n")
    (tmp_path / "code.py").write_text("")
    assert _uploaded(tmp_path, shared["excludes"]) == {Path("code.py")}
