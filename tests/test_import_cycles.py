"""No import cycles between the modules of rlvr's packages, and no import of an rlvr module that is not there.

Every module of rlvr_launch, rlvr_verifiers and rlvr_cluster is parsed (ast, nothing is imported): every
`import` / `from ... import` anywhere in it (function-local and TYPE_CHECKING ones included) and every
`importlib.import_module("literal")` / `__import__("literal")` is an edge of the module graph. Relative
imports are resolved; `from pkg import name` is an edge to the module pkg.name when that is a module, else
to pkg (its __init__). A cycle fails the test, named module by module.

The same reading fails on an rlvr import that resolves to no module file, and on a dotted rlvr name in a
string (a `python -m` entrypoint, a verl class path, `_target_`) or in the YAML, Dockerfile and CI files
that names neither a module nor a top-level name of one: a stale path after a move fails here, in a second,
not in a slow cluster test.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "rlvr_launch": ROOT / "launch",
    "rlvr_verifiers": ROOT / "verifiers",
    "rlvr_cluster": ROOT / "cluster",
}
# Text files that name rlvr modules (entrypoints, class paths, comments pointing at code).
TEXT_GLOBS = ("recipes/**/*.yaml", "cluster/**/*.yaml", "Dockerfile", ".ci/run", "pyproject.toml")


def module_files(packages: dict[str, Path]) -> dict[str, Path]:
    """Module name -> file, for every .py file of the packages (a package is its __init__.py)."""
    files = {}
    for package, parent in packages.items():
        for path in sorted((parent / package).rglob("*.py")):
            parts = list(path.relative_to(parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


def _is_package(module: str, files: dict[str, Path]) -> bool:
    return files[module].name == "__init__.py"


def _imports(module: str, tree: ast.AST, files: dict[str, Path]) -> list[tuple[int, str, list[str]]]:
    """(line, module imported, names taken from it) for every import in the tree, relative ones resolved."""
    found = []
    here = module if _is_package(module, files) else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value, []))
    return found


def import_graph(packages: dict[str, Path]) -> tuple[dict[str, set[str]], list[str]]:
    """The module graph of the packages, and the rlvr imports that resolve to no module file."""
    files = module_files(packages)
    graph: dict[str, set[str]] = {m: set() for m in files}
    unresolved = []
    for module, path in files.items():
        tree = _parse(path)
        for line, target, names in _imports(module, tree, files):
            if target.partition(".")[0] not in packages:
                continue  # another project's module
            where = f"{path.relative_to(packages[module.partition('.')[0]])}:{line}"
            if target not in files:
                unresolved.append(f"{where}: imports {target}, which is no module")
                continue
            for name in names or [""]:
                sub = f"{target}.{name}"
                graph[module].add(sub if name and sub in files else target)
        graph[module].discard(module)
    return graph, unresolved


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a -> ... -> a) per strongly connected group of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(start: str) -> None:  # Tarjan's algorithm, iterative
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    cycles = []
    for group in groups:  # a shortest way round from the group's first module back to it
        first = min(group)
        paths = {first: [first]}
        frontier = [first]
        cycle = None
        while frontier and cycle is None:
            nxt = []
            for node in frontier:
                for child in sorted(graph[node] & group):
                    if child == first:
                        cycle = paths[node] + [first]
                        break
                    if child not in paths:
                        paths[child] = paths[node] + [child]
                        nxt.append(child)
                if cycle:
                    break
            frontier = nxt
        cycles.append(cycle)
    return cycles


def _parse(path: Path) -> ast.Module:
    return _parse_text(path, path.read_text())


@functools.cache
def _parse_text(path: Path, text: str) -> ast.Module:  # keyed by the text: a rewritten file is read anew
    return ast.parse(text, filename=str(path))


@functools.cache
def _top_level_names(path: Path) -> set[str]:
    names = set()
    for node in _parse(path).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).partition(".")[0] for a in node.names}
    return names


def stale_dotted_names(packages: dict[str, Path], texts: list[Path]) -> list[str]:
    """Dotted rlvr names in string constants and text files that are neither a module nor MODULE.NAME."""
    files = module_files(packages)
    dotted = re.compile(rf"\b(?:{'|'.join(packages)})(?:\.[A-Za-z_]\w*)+")
    sources = [
        (path, [n.value for n in ast.walk(_parse(path)) if isinstance(n, ast.Constant)])
        for path in files.values()
    ]
    sources += [(path, [path.read_text()]) for path in texts]
    stale = []
    for path, strings in sources:
        for text in strings:
            if not isinstance(text, str):
                continue
            for name in dotted.findall(text):
                module, _, attr = name.rpartition(".")
                if name in files or (module in files and attr in _top_level_names(files[module])):
                    continue
                stale.append(f"{path}: {name}")
    return sorted(set(stale))


def test_no_import_cycles_between_rlvr_modules():
    graph, _ = import_graph(PACKAGES)
    assert {"rlvr_launch.cli", "rlvr_verifiers.pool", "rlvr_cluster.plugin"} <= set(graph)  # all three read
    cycles = find_cycles(graph)
    assert not cycles, "import cycles (function-local imports count):\n" + "\n".join(
        " -> ".join(c) for c in cycles
    )


# rlvr_launch/__init__.py's dependency direction: a package imports only packages of a lower rank.
LAYERS = {
    "rlvr_verifiers": 0,
    "rlvr_cluster": 1,
    "rlvr_launch": 2,  # the package's own __init__ (its docstring)
    "rlvr_launch.errors": 2,
    "rlvr_launch.recipes": 3,
    "rlvr_launch.data": 3,
    "rlvr_launch.scoring": 3,
    "rlvr_launch.runs": 4,
    "rlvr_launch.diagnosis": 5,
    "rlvr_launch.pipelines": 5,
    "rlvr_launch.jobs": 6,
    "rlvr_launch.commands": 7,
    "rlvr_launch.cli": 8,
}


def _layer(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "rlvr_launch" and len(parts) > 1 else parts[0]


def test_packages_import_only_downwards_and_diagnosis_never_the_trainer():
    graph, _ = import_graph(PACKAGES)
    unplaced = sorted({_layer(m) for m in graph} - set(LAYERS))
    assert not unplaced, f"packages/modules with no place in the dependency direction (LAYERS): {unplaced}"
    upward = [
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if _layer(a) != _layer(b) and LAYERS[_layer(b)] >= LAYERS[_layer(a)]
    ]
    assert not upward, "imports against the dependency direction (rlvr_launch/__init__.py):\n" + "\n".join(
        upward
    )
    diagnosis = [m for m in graph if _layer(m) == "rlvr_launch.diagnosis"]
    assert diagnosis and not any("rlvr_launch.runs.train" in graph[m] for m in diagnosis)


def test_every_rlvr_import_names_a_module_that_exists():
    _, unresolved = import_graph(PACKAGES)
    assert not unresolved, "\n".join(unresolved)


def stale_file_paths(packages: dict[str, Path], texts: list[Path]) -> list[str]:
    """`rlvr_launch/runs/train.py`-style paths (in comments, docstrings, YAML, docs) naming no file."""
    pattern = re.compile(rf"\b(?:{'|'.join(packages)})/[\w/]+\.py\b")
    stale = []
    for path in texts:
        for name in pattern.findall(path.read_text()):
            if not (packages[name.partition("/")[0]] / name).is_file():
                stale.append(f"{path}: {name}")
    return sorted(set(stale))


def test_every_rlvr_file_path_in_code_docs_and_config_exists():
    texts = [*module_files(PACKAGES).values(), *ROOT.glob("tests/**/*.py"), *ROOT.glob("bench/*.py")]
    texts += [
        p for pattern in (*TEXT_GLOBS, "*.md", "docs/**/*.md", "bench/*.md") for p in ROOT.glob(pattern)
    ]
    stale = stale_file_paths(PACKAGES, sorted({p for p in texts if p.is_file()}))
    assert not stale, "paths of rlvr files that do not exist (moved?):\n" + "\n".join(stale)


def test_every_dotted_rlvr_name_in_code_and_config_exists():
    texts = sorted({p for pattern in TEXT_GLOBS for p in ROOT.glob(pattern) if p.is_file()})
    stale = stale_dotted_names(PACKAGES, texts)
    assert not stale, "names of rlvr modules that do not exist (moved?):\n" + "\n".join(stale)


def _tree(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return {"rlvr_fake": root}


def test_a_cycle_through_a_function_local_or_relative_import_is_found_and_named(tmp_path):
    packages = _tree(
        tmp_path,
        {
            "rlvr_fake/__init__.py": "",
            "rlvr_fake/sub/__init__.py": "",
            "rlvr_fake/a.py": "from rlvr_fake.sub import b\n",
            "rlvr_fake/sub/b.py": "from . import c\n",
            "rlvr_fake/sub/c.py": "def f():\n    from ..a import x\n",
            "rlvr_fake/d.py": "import rlvr_fake.a\nimport os\n",
        },
    )
    graph, unresolved = import_graph(packages)
    assert unresolved == []
    assert graph["rlvr_fake.a"] == {"rlvr_fake.sub.b"}
    assert graph["rlvr_fake.sub.b"] == {"rlvr_fake.sub.c"}
    assert graph["rlvr_fake.sub.c"] == {"rlvr_fake.a"}
    assert find_cycles(graph) == [["rlvr_fake.a", "rlvr_fake.sub.b", "rlvr_fake.sub.c", "rlvr_fake.a"]]
    # Without the function-local import there is none.
    (tmp_path / "rlvr_fake/sub/c.py").write_text("def f():\n    import json\n")
    assert find_cycles(import_graph(packages)[0]) == []


def test_a_cycle_through_import_module_or_a_package_init_is_found(tmp_path):
    packages = _tree(
        tmp_path,
        {
            "rlvr_fake/__init__.py": "from rlvr_fake.b import y\n",
            "rlvr_fake/b.py": "import importlib\nm = importlib.import_module('rlvr_fake')\n",
            "rlvr_fake/c.py": "import importlib\nm = importlib.import_module(f'rlvr_fake.{x}')\n",
        },
    )
    graph, _ = import_graph(packages)
    assert graph["rlvr_fake.c"] == set()  # a computed name is no edge
    assert find_cycles(graph) == [["rlvr_fake", "rlvr_fake.b", "rlvr_fake"]]


def test_an_import_or_a_dotted_name_of_a_missing_module_is_reported(tmp_path):
    packages = _tree(
        tmp_path,
        {
            "rlvr_fake/__init__.py": "",
            "rlvr_fake/a.py": "X = 1\n",
            "rlvr_fake/b.py": "def f():\n    from rlvr_fake.gone import X\n",
        },
    )
    _, unresolved = import_graph(packages)
    assert len(unresolved) == 1 and "imports rlvr_fake.gone, which is no module" in unresolved[0]
    assert "rlvr_fake/b.py:2" in unresolved[0]
    texts = [tmp_path / "job.yaml"]
    texts[0].write_text(
        "entrypoint: python -m rlvr_fake.a --x\nold: python -m rlvr_fake.job\ncls: rlvr_fake.a.X\n"
    )
    (tmp_path / "rlvr_fake/c.py").write_text('CMD = ["-m", "rlvr_fake.a"]\nOLD = "rlvr_fake.b.Missing"\n')
    stale = stale_dotted_names(packages, texts)
    assert sorted(s.rpartition(": ")[2] for s in stale) == ["rlvr_fake.b.Missing", "rlvr_fake.job"]
    (tmp_path / "notes.md").write_text("see rlvr_fake/a.py and rlvr_fake/old.py\n")
    assert [s.rpartition(": ")[2] for s in stale_file_paths(packages, [tmp_path / "notes.md"])] == [
        "rlvr_fake/old.py"
    ]
