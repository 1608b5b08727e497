"""`rlvr data NAME --out DIR`: convert a real dataset into verl's parquet format for task NAME.

    rlvr data gsm8k --out ~/.cache/rlvr/data/gsm8k                      # from the hub (openai/gsm8k)
    rlvr data gsm8k --out DIR --source /path/to/gsm8k_train.jsonl       # from a local file
    rlvr data countdown --out DIR --source ./countdown/ --limit 1000    # a folder of split files

Sources: a hub id (read with the `datasets` library; needs network access and `pip install datasets`),
or a local path: one .jsonl/.json/.parquet file (the source's train split; the other splits are carved
from it, `--test-size`), or a folder holding `<split>.jsonl|json|parquet` per source split.
Output: DIR/<split>.parquet for each split (train, test) and DIR/conversion_report.json.

Never silent: every source row is either written or dropped with a reason (per converter, see
rlvr_launch/data/converters/<NAME>.py), and the per-split, per-reason counts are printed and written to the
report. A malformed source line (bad JSON) is a drop with reason `malformed_source_row`. A split whose
rows are all dropped is an error.
"""

from __future__ import annotations

import argparse
import inspect
import json
import random
from collections import Counter
from pathlib import Path

from rlvr_launch.data.converters import NAMES, Drop, Notes, load
from rlvr_launch.errors import UserError

LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet")
REPORT_NAME = "conversion_report.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=NAMES, help="task to prepare (== recipes/task/NAME.yaml)")
    parser.add_argument("--out", type=Path, required=True, help="output folder (train.parquet, test.parquet)")
    parser.add_argument(
        "--source",
        default=None,
        help="hub id (default: the task's usual dataset) or a local .jsonl/.json/.parquet file or folder",
    )
    parser.add_argument("--split", default=None, help="comma-separated splits to write (default: train,test)")
    parser.add_argument("--limit", type=int, default=None, help="read at most N source rows per split")
    parser.add_argument(
        "--test-size",
        type=float,
        default=0.1,
        help="rows held out as `test` when the source has no test split: a fraction (<1) or a count (default 0.1)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the held-out carve (deterministic)")


# ---- reading ------------------------------------------------------------------------------------------


class SourceRows:
    """Rows of one source split, plus the count of source rows that could not even be parsed."""

    def __init__(self, rows: list[dict], malformed: int = 0):
        self.rows = rows
        self.malformed = malformed


def read_local_file(path: Path, limit: int | None = None) -> SourceRows:
    suffix = path.suffix.lower()
    rows: list[dict] = []
    malformed = 0
    if suffix == ".jsonl":
        with path.open(encoding="utf-8") as f:
            for line in f:
                if limit is not None and len(rows) + malformed >= limit:
                    break
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError:
                    malformed += 1
                    continue
                if isinstance(value, dict):
                    rows.append(value)
                else:
                    malformed += 1
    elif suffix == ".json":
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise UserError(
                f"{path} is not valid JSON ({e.msg} at line {e.lineno}); use one object per line (.jsonl)"
            ) from None
        if isinstance(value, dict):
            value = value.get("data", value.get("rows", [value]))
        if not isinstance(value, list):
            raise UserError(f'{path}: expected a JSON list of rows (or {{"data": [...]}})')
        for item in value[:limit] if limit is not None else value:
            if isinstance(item, dict):
                rows.append(item)
            else:
                malformed += 1
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as e:  # noqa: BLE001 - any reader failure means an unusable file
            raise UserError(f"{path} is not a readable parquet file ({type(e).__name__}: {e})") from None
        rows = table.to_pylist()[:limit] if limit is not None else table.to_pylist()
    else:
        raise UserError(f"{path}: unsupported file type {suffix!r}; use .jsonl, .json or .parquet")
    return SourceRows(rows, malformed)


def _split_file(folder: Path, split: str) -> Path | None:
    for suffix in LOCAL_SUFFIXES:
        candidate = folder / f"{split}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def read_hub(hub_id: str, config: str | None, split: str, limit: int | None) -> SourceRows:
    local_hint = "download it where a hub is reachable and pass --source /path/to/local.jsonl (or .parquet)"
    try:
        import datasets
    except ModuleNotFoundError:
        raise UserError(
            f"reading {hub_id!r} from the hub needs the `datasets` library (pip install datasets); "
            f"or {local_hint}"
        ) from None
    try:
        dataset = datasets.load_dataset(hub_id, config, split=split)
    except Exception as e:  # noqa: BLE001 - offline, unknown id, auth: all mean the same fix
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(
            f"cannot read {hub_id!r} (split {split!r}) from the hub: {reason[:300]}. Instead, {local_hint}"
        ) from None
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    return SourceRows([dict(row) for row in dataset])


def read_source(converter, source: str | None, source_split: str, limit: int | None) -> SourceRows | None:
    """Rows of `source_split`, or None when a local source has no such split."""
    source = source or converter.HUB_ID
    path = Path(source).expanduser()
    if path.exists():
        if path.is_file():
            return read_local_file(path, limit) if source_split == "train" else None
        found = _split_file(path, source_split)
        return read_local_file(found, limit) if found else None
    if source.startswith((".", "/", "~")) or Path(source).suffix.lower() in LOCAL_SUFFIXES:
        raise UserError(f"--source {source}: no such file or folder")
    return read_hub(source, getattr(converter, "HUB_CONFIG", None), source_split, limit)


# ---- converting ---------------------------------------------------------------------------------------


def convert_rows(converter, rows: list[dict], split: str) -> tuple[list[dict], Counter, dict, dict]:
    """(written rows, drop counts per reason, note counts, first example of each drop reason)."""
    notes = Notes()
    takes_note = "note" in inspect.signature(converter.convert).parameters
    written, dropped, examples = [], Counter(), {}
    for index, row in enumerate(rows):
        try:
            out = (
                converter.convert(row, split, index, note=notes)
                if takes_note
                else converter.convert(row, split, index)
            )
        except Drop as drop:
            dropped[drop.reason] += 1
            examples.setdefault(drop.reason, {"source_index": index, "detail": drop.detail[:200]})
            continue
        written.append(out)
    return written, dropped, notes.counts, examples


def _carve(rows: list[dict], test_size: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Hold out `test_size` rows (a fraction < 1 or a count), deterministically; train keeps at least one."""
    if test_size <= 0:
        raise UserError("--test-size must be > 0 when the source has no test split")
    if len(rows) < 2:
        return rows, []
    count = round(len(rows) * test_size) if test_size < 1 else int(test_size)
    count = max(1, min(count, len(rows) - 1))
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    held = set(order[:count])
    return [r for i, r in enumerate(rows) if i not in held], [r for i, r in enumerate(rows) if i in held]


def write_parquet(rows: list[dict], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)


def prepare(
    name: str,
    out: Path,
    source: str | None = None,
    splits: list[str] | None = None,
    limit: int | None = None,
    test_size: float = 0.1,
    seed: int = 0,
) -> dict:
    """Convert and write; return the report (also written to out/conversion_report.json)."""
    converter = load(name)
    splits = splits or list(converter.SPLITS)
    unknown = [s for s in splits if s not in converter.SPLITS]
    if unknown:
        raise UserError(f"unknown split(s) {unknown} for {name}; available: {', '.join(converter.SPLITS)}")
    if limit is not None and limit <= 0:
        raise UserError("--limit must be a positive number of rows")

    # Convert each split the source has; splits it lacks are carved from train's CONVERTED rows, so a
    # held-out row is always a usable one and every drop is counted once, under the split it was read for.
    results: dict[str, dict] = {}
    carved: list[str] = []
    for split in ["train"] + [s for s in splits if s != "train"]:
        source_split = converter.SPLITS[split]
        src = read_source(converter, source, source_split, limit) if source_split else None
        if src is None:
            if split == "train":
                raise UserError(
                    f"--source {source}: no train split found (expected train.jsonl|json|parquet)"
                )
            carved.append(split)
            continue
        written, dropped, notes, examples = convert_rows(converter, src.rows, split)
        if src.malformed:
            dropped["malformed_source_row"] += src.malformed
        results[split] = {
            "source_split": source_split,
            "read": len(src.rows) + src.malformed,
            "rows": written,
            "dropped": dict(sorted(dropped.items())),
            "notes": dict(sorted(notes.items())),
            "drop_examples": examples,
        }
    for split in carved:
        train = results["train"]
        keep, held = _carve(train["rows"], test_size, seed)
        if not held and train["rows"]:
            raise UserError(f"too few usable train rows ({len(train['rows'])}) to hold out a {split} split")
        train["rows"] = keep
        train["held_out"] = train.get("held_out", 0) + len(held)
        for row in held:
            row["extra_info"]["split"] = split
        results[split] = {
            "source_split": f"carved from the source's train split ({len(held)} converted rows)",
            "read": len(held),
            "rows": held,
            "dropped": {},
            "notes": {},
            "drop_examples": {},
        }

    out.mkdir(parents=True, exist_ok=True)
    report = {
        "task": name,
        "verifier": converter.VERIFIER,
        "source": str(source or converter.HUB_ID),
        "splits": {},
    }
    empty = []
    for split in splits:
        info = results[split]
        rows = info.pop("rows")
        info["written"] = len(rows)
        info["file"] = str(out / f"{split}.parquet")
        report["splits"][split] = info
        if rows:
            write_parquet(rows, out / f"{split}.parquet")
        else:
            empty.append(split)
    (out / REPORT_NAME).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    if empty:
        reasons = {s: report["splits"][s]["dropped"] for s in empty}
        raise UserError(
            f"no usable rows for split(s) {empty} (drops: {reasons}); check that --source has the "
            f"{name} schema ({converter.SCHEMA}); details in {out / REPORT_NAME}"
        )
    return report


def format_report(report: dict) -> str:
    lines = [f"rlvr data {report['task']}: {report['source']} -> verifier {report['verifier']}"]
    lines.append(f"{'split':<8}{'read':>8}{'written':>9}{'dropped':>9}  reasons")
    for split, info in report["splits"].items():
        dropped = sum(info["dropped"].values())
        reasons = ", ".join(f"{k}={v}" for k, v in info["dropped"].items()) or "-"
        lines.append(f"{split:<8}{info['read']:>8}{info['written']:>9}{dropped:>9}  {reasons}")
        if info.get("held_out"):
            lines.append(f"{'':<8}held out as test: {info['held_out']} converted rows")
        if info["notes"]:
            lines.append(f"{'':<8}notes: " + ", ".join(f"{k}={v}" for k, v in info["notes"].items()))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    splits = [s.strip() for s in args.split.split(",") if s.strip()] if args.split else None
    report = prepare(args.name, args.out, args.source, splits, args.limit, args.test_size, args.seed)
    print(format_report(report))
    print(
        f"wrote {', '.join(info['file'] for info in report['splits'].values())} and {args.out / REPORT_NAME}"
    )
    return 0
