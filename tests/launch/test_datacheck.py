"""A missing or malformed dataset names the file and the row or column at fault."""

from __future__ import annotations

import pandas as pd
import pytest

from rlvr_launch.cli import UserError
from rlvr_launch.runs.datacheck import check_parquet


def _row(i=0, truth="7", prompt=None):
    return {
        "data_source": "addition",
        "prompt": prompt if prompt is not None else [{"role": "user", "content": "3+4="}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": truth},
        "extra_info": {"index": i},
    }


def _write(tmp_path, rows, name="train.parquet"):
    path = tmp_path / name
    pd.DataFrame(rows).to_parquet(path, index=False)
    return path


def test_a_well_formed_file_passes_with_its_row_count(tmp_path):
    assert check_parquet(_write(tmp_path, [_row(i) for i in range(5)])) == 5


def test_missing_file_names_the_file_and_how_to_create_it(tmp_path):
    with pytest.raises(UserError) as err:
        check_parquet(tmp_path / "gsm8k" / "train.parquet", task="gsm8k")
    assert "train.parquet does not exist" in str(err.value)
    assert "rlvr data gsm8k --out" in str(err.value)


def test_a_row_without_ground_truth_is_named(tmp_path):
    path = _write(tmp_path, [_row(0), _row(1), _row(2, truth="")])
    with pytest.raises(UserError, match=r"row 2, column 'reward_model.ground_truth'"):
        check_parquet(path)


def test_a_missing_column_is_named(tmp_path):
    rows = [{k: v for k, v in _row().items() if k != "reward_model"}]
    with pytest.raises(UserError, match=r"column 'reward_model': missing"):
        check_parquet(_write(tmp_path, rows))


def test_a_prompt_that_is_not_chat_messages_is_named(tmp_path):
    rows = [_row(0), {**_row(1), "prompt": [{"content": "no role"}]}]
    with pytest.raises(UserError, match=r"row 1, column 'prompt'"):
        check_parquet(_write(tmp_path, rows))


def test_a_file_that_is_not_parquet_is_named(tmp_path):
    path = tmp_path / "train.parquet"
    path.write_text("question,answer\n1+1,2\n")
    with pytest.raises(UserError, match="not a readable parquet file"):
        check_parquet(path)
