"""A mixture of already-converted tasks -> one parquet whose rows keep their own verifiers.

    rlvr data mix --out DIR --source mix:addition=1,ifeval=2 [--limit N] [--seed S]
    rlvr data mix --out DIR --source mix:/path/to/countdown=1,/path/to/ifeval=1

`mix:PART=WEIGHT,...`: each PART is a task name (its converted folder ${RLVR_DATA_DIR:-~/.cache/rlvr/data}/
PART, from `rlvr data PART`) or a folder holding train.parquet (and test.parquet); WEIGHT > 0 is its share of
the mixture's train rows (--limit rows in all, default: as many as the parts hold at these weights without
repeating a row). Each part's test rows all go to the mixture's test split (validation per domain: verl
averages validation per data_source). Every row keeps its verifier (extra_info.verifier, routed per sample
by the rlvr reward manager) and gains extra_info.domain = PART's name. The parts' extra_info columns are
unified (a key one part lacks is null), which verl's dataset loader needs to concatenate them: listing the
parts' files in data.train_files fails in verl when their columns differ.

Refused (one line naming the problem): an unknown part (no such task folder), a weight that is not a positive
finite number, a row whose verifier is not registered (a domain whose verifier does not exist).

A recipe declares the same mixture as `rlvr.mix: {TASK: WEIGHT, ...}`; `rlvr train` checks it at composition
and builds it with this converter (rlvr_launch/runs/mix.py).
"""

from __future__ import annotations

import math
import os
import random
from pathlib import Path

from rlvr_launch.data.converters import Drop
from rlvr_launch.errors import UserError

NAME = "mix"
VERIFIER = None  # not one verifier: every row names its own (extra_info.verifier)
HUB_ID = "mix:"
HUB_CONFIG = None
SPLITS = {"train": "train", "test": "test"}
SCHEMA = "mix:PART=WEIGHT,... (parts: converted task folders)"
GENERATE = "mix"
GENERATE_DEFAULT_ROWS = 0  # 0: as many as the parts hold at the weights


def _data_dir() -> Path:
    root = os.environ.get("RLVR_DATA_DIR") or str(
        Path(os.environ.get("RLVR_CACHE_DIR", "~/.cache/rlvr")) / "data"
    )
    return Path(root).expanduser()


def parse_spec(spec: str) -> list[tuple[str, Path, float]]:
    parts = []
    for item in [p.strip() for p in spec.split(",") if p.strip()]:
        name, sep, weight_text = item.rpartition("=")
        if not sep or not name:
            raise UserError(f"--source mix:{spec}: {item!r} is not PART=WEIGHT")
        try:
            weight = float(weight_text)
        except ValueError:
            raise UserError(
                f"--source mix:{spec}: weight {weight_text!r} of {name} is not a number"
            ) from None
        if not (weight > 0 and math.isfinite(weight)):
            raise UserError(
                f"--source mix:{spec}: weight of {name} must be positive and finite, got {weight_text}"
            )
        folder = Path(name).expanduser() if ("/" in name or name.startswith(".")) else _data_dir() / name
        if not (folder / "train.parquet").is_file():
            raise UserError(
                f"--source mix: unknown part {name!r}: no {folder / 'train.parquet'}; "
                f"convert it first (rlvr data {Path(name).name} --out {folder})"
            )
        parts.append((Path(name).name, folder, weight))
    if len(parts) < 2:
        raise UserError("--source mix: needs at least two parts, e.g. mix:addition=1,ifeval=1")
    return parts


def _read(path: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist() if path.is_file() else []


def generate(count: int, seed: int, spec: str = "", split: str = "train") -> list[dict]:
    """The mixture's `split` rows (the same seed gives the same mixture for every split)."""
    from rlvr_verifiers import registry

    parts = parse_spec(spec)
    rng = random.Random(seed)
    loaded = []
    for name, folder, weight in parts:
        train, test = _read(folder / "train.parquet"), _read(folder / "test.parquet")
        for row in train + test:
            verifier = (row.get("extra_info") or {}).get("verifier")
            if verifier not in registry.names():
                raise UserError(
                    f"--source mix: part {name} has rows for verifier {verifier!r}, which does not exist; "
                    f"known: {', '.join(registry.names())}"
                )
        loaded.append((name, weight, train, test))
    total_weight = sum(w for _, w, _, _ in loaded)
    if count <= 0:  # as many as the scarcest part allows at its weight, no row repeated
        count = int(min(len(train) * total_weight / w for _, w, train, _ in loaded))
    rows = []
    for name, weight, train, test in loaded:
        take = round(count * weight / total_weight)
        picked = rng.sample(train, take) if take <= len(train) else [rng.choice(train) for _ in range(take)]
        rows += [dict(r, _split="train", _domain=name) for r in picked]
        rows += [dict(r, _split="test", _domain=name) for r in test]
    keys = sorted({k for r in rows for k in (r.get("extra_info") or {})} | {"domain"})
    out = []
    for r in rows:
        info = dict(r.get("extra_info") or {}, domain=r["_domain"])
        info = {k: (None if info.get(k) is None else info[k] if k == "index" else str(info[k])) for k in keys}
        rest = {k: v for k, v in r.items() if k not in ("extra_info", "_domain")}
        out.append({**rest, "extra_info": info})
    rng.shuffle(out)
    return [r for r in out if r.pop("_split") == split]


def convert(row: dict, split: str, index: int) -> dict:
    if not isinstance(row.get("extra_info"), dict) or not row["extra_info"].get("verifier"):
        raise Drop("no_verifier")
    return dict(row, extra_info=dict(row["extra_info"], split=split))
