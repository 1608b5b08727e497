"""Check a task's parquet files before verl reads them, so a bad dataset fails with the file, row and
column at fault instead of a stack trace from deep inside a Ray worker.

The format is verl's: `data_source` (str), the prompt column (chat messages: a list of
{"role", "content"}), `reward_model.ground_truth` (non-empty), optional `ability` and `extra_info`.
"""

from __future__ import annotations

from pathlib import Path

from rlvr_launch.cli import UserError

REQUIRED_COLUMNS = ("data_source", "reward_model")


def _fail(path: Path, where: str, problem: str, fix: str) -> UserError:
    return UserError(f"dataset {path}: {where}: {problem}. {fix}")


def check_parquet(path: str | Path, prompt_key: str = "prompt", task: str = "") -> int:
    """Validate every row; return the row count."""
    path = Path(path)
    prepare_hint = (
        f"Create it with `rlvr data {task} --out {path.parent}`" if task else "Point data.train_files at it"
    )
    if not path.exists():
        raise UserError(f"dataset {path} does not exist. {prepare_hint}.")
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(path)
    except Exception as e:  # noqa: BLE001 - any reader failure means the file is not usable parquet
        raise UserError(
            f"dataset {path} is not a readable parquet file ({type(e).__name__}: {e}). {prepare_hint}."
        ) from None
    columns = set(table.column_names)
    for column in (prompt_key, *REQUIRED_COLUMNS):
        if column not in columns:
            raise _fail(
                path,
                f"column {column!r}",
                f"missing (columns present: {', '.join(sorted(columns)) or 'none'})",
                "verl's format needs data_source, the prompt column (data.prompt_key), reward_model.ground_truth",
            )
    if table.num_rows == 0:
        raise _fail(path, "rows", "the file has no rows", prepare_hint)
    prompts = table.column(prompt_key).to_pylist()
    rewards = table.column("reward_model").to_pylist()
    sources = table.column("data_source").to_pylist()
    for row, (prompt, reward, source) in enumerate(zip(prompts, rewards, sources, strict=True)):
        if not isinstance(source, str) or not source:
            raise _fail(
                path,
                f"row {row}, column 'data_source'",
                f"expected a non-empty string, got {source!r}",
                "Every row names its data source",
            )
        if not isinstance(prompt, list) or not prompt:
            raise _fail(
                path,
                f"row {row}, column {prompt_key!r}",
                f"expected a non-empty list of chat messages, got {type(prompt).__name__}",
                'Write prompts as [{"role": "user", "content": "..."}]',
            )
        for message in prompt:
            if (
                not isinstance(message, dict)
                or not isinstance(message.get("content"), str)
                or not isinstance(message.get("role"), str)
                or not message["role"]
            ):
                raise _fail(
                    path,
                    f"row {row}, column {prompt_key!r}",
                    f"message {message!r} is not a {{role, content}} dict",
                    'Write prompts as [{"role": "user", "content": "..."}]',
                )
        truth = reward.get("ground_truth") if isinstance(reward, dict) else None
        if truth is None or (isinstance(truth, str) and not truth.strip()):
            raise _fail(
                path,
                f"row {row}, column 'reward_model.ground_truth'",
                "missing or empty ground truth",
                "Every row needs the reference answer the verifier checks against; drop or fix the row",
            )
    return table.num_rows
