"""Check a task's parquet files before verl reads them, so a bad dataset fails with the file, row and
column at fault instead of a stack trace from deep inside a Ray worker.

The format is verl's: `data_source` (str), the prompt column (chat messages: a list of
{"role", "content"}), `reward_model.ground_truth` (non-empty), optional `ability` and `extra_info`.
"""

from __future__ import annotations

from pathlib import Path

from rlvr_launch.errors import UserError

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


def load_recipe_tokenizer(cfg):
    """The tokenizer verl will use (model.tokenizer_path, else model.path), from local files only;
    None when it is not on this machine (a hub name on a machine without it: the check is skipped)."""
    from omegaconf import OmegaConf

    model = cfg.actor_rollout_ref.model
    source = OmegaConf.select(cfg, "data.tokenizer") or model.get("tokenizer_path") or model.path
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(
            str(source), local_files_only=True, trust_remote_code=bool(model.get("trust_remote_code", False))
        )
    except Exception:  # noqa: BLE001 - not available here: verl loads it on the cluster
        return None


def prompt_lengths(path: str | Path, tokenizer, prompt_key: str = "prompt", chat_kwargs=None) -> list[int]:
    """Token count of every row's prompt as verl's dataset measures it (chat template with the
    generation prompt; verl/utils/dataset/rl_dataset.py, doc2len)."""
    import pyarrow.parquet as pq

    kwargs = {
        k: v
        for k, v in dict(chat_kwargs or {}).items()
        if k not in ("tokenize", "return_dict", "return_tensors")
    }
    lengths = []
    for messages in pq.read_table(path, columns=[prompt_key]).column(prompt_key).to_pylist():
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **kwargs)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        lengths.append(len(ids))
    return lengths


def check_prompt_lengths(
    path: str | Path, lengths: list[int], max_prompt_length: int, filter_overlong: bool, truncation: str
) -> str | None:
    """Refuse a dataset whose prompts verl would drop entirely or refuse; describe a partial drop.

    Returns a line to show (None when every prompt fits); raises UserError naming the setting to change."""
    over = [n for n in lengths if n > max_prompt_length]
    if not over:
        return None
    longest = max(lengths)
    fix = f"set data.max_prompt_length={longest} (the longest prompt) or shorten the prompts"
    if filter_overlong and len(over) == len(lengths):
        raise UserError(
            f"dataset {path}: all {len(lengths)} prompts are longer than data.max_prompt_length={max_prompt_length} "
            f"tokens with the recipe's tokenizer ({min(lengths)}-{longest} tokens): verl would drop every row "
            f"and stop with num_samples=0. {fix[0].upper() + fix[1:]}"
        )
    if not filter_overlong and truncation == "error":
        raise UserError(
            f"dataset {path}: {len(over)} of {len(lengths)} prompts are longer than data.max_prompt_length="
            f"{max_prompt_length} tokens (longest {longest}) and data.truncation=error stops verl on the first; "
            f"{fix}, or set data.filter_overlong_prompts=true to drop them"
        )
    if filter_overlong:
        return (
            f"{len(over)} of {len(lengths)} prompts are longer than data.max_prompt_length={max_prompt_length} "
            f"tokens (longest {longest}): verl drops them; to keep them {fix}"
        )
    return (
        f"{len(over)} of {len(lengths)} prompts are longer than data.max_prompt_length={max_prompt_length} tokens "
        f"(longest {longest}): verl truncates them (data.truncation={truncation})"
    )
