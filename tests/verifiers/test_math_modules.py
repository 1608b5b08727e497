"""The `math` verifier is split by concern (issue 30): extraction, normalisation, parsing, values, the exact path
and equivalence each live in their own module, readable and importable alone, with no import cycle between
them (function-local imports included); `rlvr_verifiers.math` stays the registered verifier's module and keeps
the public names other code imports."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "verifiers" / "rlvr_verifiers"
MODULES = sorted(p.stem for p in PACKAGE.glob("math*.py"))


def _imports(module: str) -> set[str]:
    """rlvr_verifiers modules that `module` imports, anywhere in its body (function-local imports included)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("rlvr_verifiers."):
                found.add(node.module.split(".", 1)[1])
            elif node.module == "rlvr_verifiers":
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".", 1)[1] for a in node.names if a.name.startswith("rlvr_verifiers."))
    return found


def test_the_split_exists_and_no_math_module_is_a_monolith() -> None:
    assert {"math", "math_extract", "math_normalize", "math_parse", "math_values", "math_equal"} <= set(
        MODULES
    )
    for module in MODULES:
        assert len((PACKAGE / f"{module}.py").read_text().splitlines()) < 800, module


def test_no_import_cycle_between_the_math_modules() -> None:
    graph = {m: _imports(m) & set(MODULES) for m in MODULES}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for dep in sorted(graph[m]):
            assert state.get(dep) != 1, f"import cycle: {' -> '.join([*path, m, dep])}"
            if dep not in state:
                visit(dep, [*path, m])
        state[m] = 2

    for m in MODULES:
        if m not in state:
            visit(m, [])
    # Only the verifier's module depends on the others' top: extraction never imports equivalence, etc.
    assert "math" not in set().union(*(graph[m] for m in MODULES if m != "math"))


@pytest.mark.parametrize("module", MODULES)
def test_each_math_module_imports_alone(module) -> None:
    code = f"import importlib; importlib.import_module('rlvr_verifiers.{module}')"
    subprocess.run([sys.executable, "-c", code], check=True, env=None)


def test_public_names_stay_importable_from_the_verifier_module() -> None:
    math = importlib.import_module("rlvr_verifiers.math")
    for name in (
        "check",
        "extract_answer",
        "parse_expr",
        "last_boxed",
        "normalize",
        "reference_answer",
        "MathVerifier",
        "MAX_RESPONSE_CHARS",
        "QUICK_MAX_ANSWER_CHARS",
        "QUICK_MAX_RESPONSE_CHARS",
    ):
        assert hasattr(math, name), name
