"""`rlvr pipeline NAME [STAGE:override ...] [--run-dir DIR] [--status]`: multi-stage runs as one command.

A pipeline is data: `recipes/pipeline/NAME.yaml` holds a list of stages, each
    {name, kind, inputs: {INPUT: STAGE.OUTPUT | path}, args: {...}, overrides: [key=value, ...]}
run in order (kinds: rlvr_launch.pipelines.stages.STAGE_KINDS). Each stage works in RUN_DIR/stages/NN-name/ (a
run directory plus manifest.json: the stage's key, its resolved inputs with their keys, its config,
status, outputs and key metrics).

A stage's key hashes its kind, args, overrides and its inputs (for an input from another stage: that
stage's key and finish time, so a change or a re-run upstream changes every key downstream; for a path:
the names, sizes and mtimes of its files). On a run:
- a `done` stage with the same key whose outputs exist is skipped;
- a stage with the same key that did not finish (killed, failed) runs again in the same folder, so an
  `rl` or `sft` stage resumes from its latest checkpoint (rlvr train's / verl's resume);
- a stage whose key changed (its config, or anything upstream) starts over in a cleared folder.

`STAGE:key=value` on the command line appends an override to that stage (part of its key);
`STAGE:args.KEY=value` sets one of the stage's args instead (the value read as YAML).
`--status` prints every stage's state (done / stale / running / interrupted / failed / pending), its
key metrics and outputs, without running anything.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from rlvr_launch.errors import UserError
from rlvr_launch.pipelines import (
    distill,  # noqa: F401 - registers the `distill` kind (on-policy distillation)
    filter,  # noqa: F401 - registers the `filter` kind (difficulty filtering, `rlvr filter`)
    thinking_stages,  # noqa: F401 - registers the Qwen3-style kinds (fusion, ...)
)

MANIFEST = "manifest.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="pipeline spec name (recipes/pipeline/NAME.yaml)")
    parser.add_argument("overrides", nargs="*", help="STAGE:key=value, appended to that stage's overrides")
    parser.add_argument("--run-dir", type=Path, default=None, help="default: runs/pipeline-NAME")
    parser.add_argument("--status", action="store_true", help="print each stage's state; run nothing")


def pipelines_dir() -> Path:
    from rlvr_launch.recipes import compose

    return compose.recipes_dir() / "pipeline"


def load_spec(name: str, overrides: list[str] | None = None) -> dict:
    import yaml

    from rlvr_launch.pipelines import stages

    path = pipelines_dir() / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in pipelines_dir().glob("*.yaml"))
        raise UserError(f"unknown pipeline {name!r}; pick one of: {', '.join(known) or '(none)'}")
    spec = yaml.safe_load(path.read_text()) or {}
    entries = spec.get("stages")
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{path}: needs a non-empty `stages:` list")
    seen: set[str] = set()
    for i, stage in enumerate(entries):
        if not isinstance(stage, dict) or not stage.get("name") or not stage.get("kind"):
            raise UserError(f"{path}: stage {i} needs a name and a kind")
        if stage["kind"] not in stages.STAGE_KINDS:
            raise UserError(
                f"{path}: stage {stage['name']!r} has unknown kind {stage['kind']!r}; "
                f"known: {', '.join(sorted(stages.STAGE_KINDS))}"
            )
        if stage["name"] in seen:
            raise UserError(f"{path}: two stages are named {stage['name']!r}")
        for key, ref in (stage.get("inputs") or {}).items():
            upstream = str(ref).split(".", 1)[0]
            if "/" not in str(ref) and upstream not in seen:
                raise UserError(
                    f"{path}: stage {stage['name']!r} input {key!r} = {ref!r} names no earlier stage "
                    "(use STAGE.OUTPUT of a stage above, or a path)"
                )
        seen.add(stage["name"])
        stage.setdefault("inputs", {})
        stage.setdefault("args", {})
        stage["overrides"] = list(stage.get("overrides") or [])
    for item in overrides or []:
        target, sep, override = item.partition(":")
        if not sep or target not in seen or "=" not in override:
            raise UserError(f"override {item!r}: write STAGE:key=value with STAGE one of {', '.join(seen)}")
        entry = next(s for s in entries if s["name"] == target)
        if override.startswith("args."):  # STAGE:args.KEY=VALUE sets one of the kind's args (YAML value)
            key, _, value = override[len("args.") :].partition("=")
            entry["args"][key] = yaml.safe_load(value)
        else:
            entry["overrides"].append(override)
    return spec


def stage_dir(run_dir: Path, index: int, name: str) -> Path:
    return run_dir / "stages" / f"{index:02d}-{name}"


def read_manifest(path: Path) -> dict | None:
    try:
        return json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def write_manifest(path: Path, manifest: dict) -> None:
    tmp = path / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, default=str))
    tmp.replace(path / MANIFEST)


def _resolve_path(value: str) -> str:
    from rlvr_launch.recipes import compose

    if value.startswith(compose.EMBEDDED_MODEL_PREFIX):
        from rlvr_launch.runs import embedded_model as embedded

        what = value[len(compose.EMBEDDED_MODEL_PREFIX) :]
        cache = Path(os.path.expanduser(os.environ.get("RLVR_CACHE_DIR", "~/.cache/rlvr")))
        if what == "tiny":
            return str(embedded.ensure_tiny_model(cache, log=lambda _m: None))
        if what == "tiny_base":  # plain text only: never the chat format nor the tags (for R1-Zero)
            return str(embedded.ensure_base_model(cache, log=lambda _m: None))
        if what == embedded.STUDENT:  # the smaller student of the distillation pair
            return str(embedded.ensure_student_model(cache, log=lambda _m: None))
        if what in (embedded.ADDITION_LONG_COT, embedded.GENERAL):
            data_dir = Path(os.path.expanduser(os.environ.get("RLVR_DATA_DIR", str(cache / "data"))))
            return str(embedded.ensure_sft_data(data_dir, what))
        raise UserError(
            f"unknown embedded asset {value!r}; known: embedded://tiny, embedded://tiny_base, "
            f"embedded://{embedded.STUDENT} (models), "
            f"embedded://{embedded.ADDITION_LONG_COT}, embedded://{embedded.GENERAL} (SFT data)"
        )
    return str(Path(os.path.expanduser(value)).resolve())


def resolve_inputs(
    stage: dict, done: dict[str, dict], recorded: dict | None = None
) -> tuple[dict[str, str], dict[str, dict]] | None:
    """(input paths, input provenance) from the finished upstream manifests; None if one is missing.

    With `recorded` (the inputs of the stage's manifest; --status, which reads and builds nothing), an
    embedded asset is the path the stage recorded when it ran, never built here: not recorded, the stage
    cannot be up to date (None)."""
    from rlvr_launch.recipes import compose

    paths: dict[str, str] = {}
    provenance: dict[str, dict] = {}
    for key, ref in stage["inputs"].items():
        ref = str(ref)
        upstream, _, output = ref.partition(".")
        if upstream in done:
            manifest = done[upstream]
            if output not in manifest.get("outputs", {}):
                raise UserError(
                    f"stage {stage['name']!r} input {key!r} = {ref!r}: stage {upstream!r} has outputs "
                    f"{sorted(manifest.get('outputs', {}))}"
                )
            paths[key] = manifest["outputs"][output]
            # The upstream's key and when it finished: an upstream that ran again hands on new outputs.
            provenance[key] = {
                "from": ref,
                "path": paths[key],
                "key": f"{manifest['key']}@{manifest.get('finished')}",
            }
        elif "/" in ref:
            if recorded is not None and ref.startswith(compose.EMBEDDED_MODEL_PREFIX):
                seen = recorded.get(key) or {}
                if seen.get("from") != ref or not seen.get("path"):
                    return None
                paths[key] = seen["path"]
            else:
                paths[key] = _resolve_path(ref)
            provenance[key] = {"from": ref, "path": paths[key], "key": _path_digest(paths[key])}
        else:
            return None
    return paths, provenance


def _path_digest(path: str) -> str:
    """Digest of a literal input: names, sizes and mtimes of the files under it (cheap, changes on rewrite)."""
    h = hashlib.sha256()
    p = Path(path)
    files = sorted(p.rglob("*")) if p.is_dir() else [p]
    for f in files:
        if f.is_file():
            st = f.stat()
            h.update(f"{f.relative_to(p) if p.is_dir() else f.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def stage_key(stage: dict, provenance: dict[str, dict]) -> str:
    payload = {
        "kind": stage["kind"],
        "args": stage["args"],
        "overrides": stage["overrides"],
        "inputs": {k: v["key"] for k, v in sorted(provenance.items())},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _outputs_exist(manifest: dict) -> bool:
    return all(Path(p).exists() for p in manifest.get("outputs", {}).values())


def _alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (OSError, TypeError, ValueError):
        return False
    return True


def states(spec: dict, run_dir: Path) -> list[dict]:
    """What --status prints: per stage its state, key metrics, outputs (read-only)."""
    done: dict[str, dict] = {}
    rows = []
    for i, stage in enumerate(spec["stages"]):
        path = stage_dir(run_dir, i, stage["name"])
        manifest = read_manifest(path)
        resolved = resolve_inputs(stage, done, recorded=(manifest or {}).get("inputs") or {})
        key = stage_key(stage, resolved[1]) if resolved is not None else None
        if manifest is None:
            state = "pending"
        elif key is None or manifest.get("key") != key:
            state = "stale"  # its config or an upstream stage changed since it ran: it will run again
        elif manifest.get("status") == "done":
            state = "done" if _outputs_exist(manifest) else "stale"
        elif manifest.get("status") == "running":
            state = "running" if _alive(manifest.get("pid")) else "interrupted"
        else:
            state = str(manifest.get("status"))
        if state == "done":
            done[stage["name"]] = manifest
        rows.append(
            {
                "index": i,
                "name": stage["name"],
                "kind": stage["kind"],
                "state": state,
                "dir": str(path),
                "metrics": (manifest or {}).get("metrics", {}),
                "outputs": (manifest or {}).get("outputs", {}),
                "error": (manifest or {}).get("error"),
            }
        )
    return rows


def print_status(name: str, run_dir: Path, rows: list[dict]) -> None:
    print(f"pipeline {name} in {run_dir}")
    for row in rows:
        metrics = ", ".join(
            f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row["metrics"].items()
        )
        print(f"  {row['index']:02d} {row['name']:<16} {row['kind']:<7} {row['state']:<12} {metrics}")
        for out, path in row["outputs"].items():
            print(f"       {out}: {path}")
        if row["error"] and row["state"] == "failed":
            print(f"       error: {row['error'].splitlines()[0]}")


def execute(name: str, run_dir: Path, overrides: list[str] | None = None, log=print) -> list[dict]:
    spec = load_spec(name, overrides)
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = open(run_dir / ".pipeline.lock", "a+")  # held until this process ends (a kill frees it)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise UserError(f"pipeline run directory {run_dir} is in use by another `rlvr pipeline`") from None
    try:
        return _execute(name, spec, run_dir, log)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _execute(name: str, spec: dict, run_dir: Path, log) -> list[dict]:
    from rlvr_launch.pipelines import stages

    (run_dir / "pipeline.json").write_text(json.dumps({"name": name, "spec": spec}, indent=2))
    done: dict[str, dict] = {}
    for i, stage in enumerate(spec["stages"]):
        path = stage_dir(run_dir, i, stage["name"])
        paths, provenance = resolve_inputs(stage, done)  # every upstream stage is done by now
        key = stage_key(stage, provenance)
        manifest = read_manifest(path)
        if (
            manifest
            and manifest.get("key") == key
            and manifest.get("status") == "done"
            and _outputs_exist(manifest)
        ):
            log(f"[rlvr] stage {i:02d} {stage['name']}: unchanged and done, skipped")
            done[stage["name"]] = manifest
            continue
        if manifest and manifest.get("key") != key:
            log(f"[rlvr] stage {i:02d} {stage['name']}: its config or an input changed; starting it over")
            shutil.rmtree(path)
        elif manifest:
            log(
                f"[rlvr] stage {i:02d} {stage['name']}: did not finish ({manifest.get('status')}); continuing it"
            )
        else:
            log(f"[rlvr] stage {i:02d} {stage['name']} ({stage['kind']})")
        path.mkdir(parents=True, exist_ok=True)
        manifest = {
            "name": stage["name"],
            "kind": stage["kind"],
            "key": key,
            "inputs": provenance,
            "config": {"args": stage["args"], "overrides": stage["overrides"]},
            "status": "running",
            "pid": os.getpid(),
            "started": time.time(),
            "outputs": {},
            "metrics": {},
        }
        write_manifest(path, manifest)
        context = stages.Stage(
            name=stage["name"],
            kind=stage["kind"],
            dir=path,
            inputs=paths,
            args=dict(stage["args"]),
            overrides=list(stage["overrides"]),
            log=log,
        )
        try:
            result = stages.STAGE_KINDS[stage["kind"]](context)
        except BaseException as e:
            manifest.update(status="failed", error=f"{type(e).__name__}: {e}", finished=time.time())
            write_manifest(path, manifest)
            if isinstance(e, UserError | KeyboardInterrupt):
                raise
            raise UserError(f"stage {i:02d} {stage['name']} ({stage['kind']}) failed: {e}") from None
        manifest.update(
            status="done",
            outputs=result.get("outputs", {}),
            metrics=result.get("metrics", {}),
            finished=time.time(),
        )
        write_manifest(path, manifest)
        done[stage["name"]] = manifest
        log(
            f"[rlvr] stage {i:02d} {stage['name']}: done in {manifest['finished'] - manifest['started']:.0f} s"
        )
    return states(spec, run_dir)


def run(args: argparse.Namespace) -> int:
    run_dir = (args.run_dir or Path("runs") / f"pipeline-{args.name}").resolve()
    if args.status:
        print_status(args.name, run_dir, states(load_spec(args.name, args.overrides), run_dir))
        return 0
    rows = execute(args.name, run_dir, args.overrides)
    print_status(args.name, run_dir, rows)
    return 0
