"""reasoning-gym's procedural tasks (PyPI `reasoning-gym`) -> the `reasoning_gym` verifier.

Generated offline, by dataset name, size, seed and difficulty:
    rlvr data reasoning_gym --out DIR --source gym:basic_arithmetic --limit 2000 --seed 0
    rlvr data reasoning_gym --out DIR --source gym:chain_sum,min_terms=2,max_terms=3,min_digits=1,max_digits=2
`gym:NAME[,KEY=VALUE...]`: NAME is a reasoning-gym dataset (`reasoning_gym.factory.DATASETS`), each KEY=VALUE
a field of its config (the difficulty knobs: min_/max_ terms, digits, sizes ...; values read as YAML
scalars); --limit is the size (default 1000), --seed the generator's seed. A local .jsonl/.parquet of
entries already generated (`question`, `answer`, `metadata` with `source_dataset`) converts too.

Row: the entry's question as the user turn, with reasoning-gym's answer-tag instruction appended (the
verifier scores the last <answer>...</answer>, else the whole answer region); ground truth
{"dataset", "entry"} (rlvr_verifiers.reasoning_gym). Dropped: no question (empty_question), no answer
field (missing_answer; a null answer is kept: such puzzles are scored from their metadata), no dataset name (missing_dataset), a dataset this reasoning-gym does not have (unknown_dataset), an entry whose
own answer does not score 1 from the JSON copy the verifier reads (reference_answer_fails: arc_agi and
rearc, whose scorers compare tuple grids that JSON turns into lists; 98 of reasoning-gym 0.1.25's 106
datasets round-trip, 5 more have no single answer and are scored from metadata).
"""

from __future__ import annotations

import json
from typing import Any

from rlvr_launch.data.converters import Drop, verl_row
from rlvr_launch.errors import UserError

NAME = "reasoning_gym"
VERIFIER = "reasoning_gym"
HUB_ID = "gym:basic_arithmetic"
HUB_CONFIG = None
SPLITS = {"train": "train", "test": None}
SCHEMA = "gym:NAME[,KEY=VALUE...] (generated) | question, answer, metadata.source_dataset"
GENERATE = "gym"
GENERATE_DEFAULT_ROWS = 1000
INSTRUCTION = "Give your final answer inside <answer> </answer> tags, for example <answer>42</answer>."


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    return list(value) if hasattr(value, "__iter__") else str(value)


def _plain(value: Any) -> Any:
    """JSON-safe copy (tuples -> lists, sets -> sorted lists, numpy values -> Python)."""
    return json.loads(json.dumps(value, default=_json_default))


def convert(row: dict, split: str, index: int) -> dict:
    question, answer = row.get("question"), row.get("answer")
    metadata = row.get("metadata") or {}
    if isinstance(metadata, str):
        metadata = json.loads(metadata)
    dataset = row.get("dataset") or metadata.get("source_dataset")
    if not isinstance(question, str) or not question.strip():
        raise Drop("empty_question")
    if "answer" not in row:  # None is allowed: puzzles with many solutions are scored from metadata
        raise Drop("missing_answer")
    if not dataset:
        raise Drop("missing_dataset")
    entry = {"question": question, "answer": answer, "metadata": _plain(metadata)}
    if answer is not None:
        _self_check(dataset, entry)
    return verl_row(
        data_source=f"reasoning_gym/{dataset}",
        prompt=[{"role": "user", "content": f"{question}\n\n{INSTRUCTION}"}],
        ability="reasoning_gym",
        ground_truth={"dataset": dataset, "entry": entry},
        split=split,
        index=index,
        verifier=VERIFIER,
        extra={"dataset": dataset},
    )


def _self_check(dataset: str, entry: dict) -> None:
    """The entry's own answer must score 1 from the JSON copy the verifier will read: a scorer that needs
    what JSON loses (tuples: arc_agi, rearc compare tuple grids) drops the row instead of training on it."""
    from rlvr_verifiers import reasoning_gym as verifier

    try:
        scorer = verifier._scorer(dataset)
    except ImportError as exc:
        raise UserError(str(exc)) from None
    if scorer is None:
        raise Drop("unknown_dataset", dataset)
    try:
        score = float(scorer(str(entry["answer"]), json.loads(json.dumps(entry))))
    except Exception as exc:  # noqa: BLE001 - any scorer failure on its own answer means an unusable row
        raise Drop("reference_answer_fails", f"{dataset}: {type(exc).__name__}") from None
    if score < 1.0:
        raise Drop("reference_answer_fails", f"{dataset}: its own answer scores {score:g} after JSON")


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """`NAME[,KEY=VALUE...]` -> (name, config overrides); UserError naming the problem."""
    import yaml

    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise UserError("--source gym:NAME needs a reasoning-gym dataset name, e.g. gym:basic_arithmetic")
    config: dict[str, Any] = {}
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--source gym:{spec}: {part!r} is not KEY=VALUE")
        config[key.strip()] = yaml.safe_load(value)
    return parts[0], config


def generate(count: int, seed: int, spec: str = "") -> list[dict]:
    """`count` entries of reasoning-gym dataset `spec` (NAME[,KEY=VALUE...]) generated with `seed`."""
    try:
        import reasoning_gym
        from reasoning_gym.factory import DATASETS
    except ImportError:
        raise UserError(
            "rlvr data reasoning_gym needs reasoning-gym: pip install 'rlvr[reasoning-gym]'"
        ) from None
    name, config = parse_spec(spec)
    if name not in DATASETS:
        raise UserError(
            f"--source gym:{name}: no such reasoning-gym dataset; known: {', '.join(sorted(DATASETS))}"
        )
    try:
        dataset = reasoning_gym.create_dataset(name, size=count, seed=seed, **config)
    except (TypeError, ValueError, AssertionError) as exc:
        raise UserError(f"--source gym:{spec}: reasoning-gym refused the config: {exc}") from None
    return [
        {"question": e["question"], "answer": e["answer"], "metadata": e["metadata"], "dataset": name}
        for e in dataset
    ]
