"""Issue 10, item 10: each validation line of the demo says what it measures and how noisy it is.
The standard error in a label is the binomial one at accuracy 0.5, sqrt(0.25 / n), for the n rows of
that data source's validation file: a label that claims a precision its set cannot give fails here."""

from __future__ import annotations

import math
import re

import pandas as pd

from rlvr_launch.recipes import compose
from rlvr_launch.runs import embedded_model as embedded
from rlvr_launch.runs import train


def test_each_validation_label_states_the_standard_error_of_its_own_row_count(rlvr_cache):
    labels = train.val_labels(compose.compose([]))
    data = rlvr_cache / "data"
    rows = {
        "addition": len(pd.read_parquet(embedded.ensure_addition_data(data) / "test.parquet")),
        "addition_trained": len(
            pd.read_parquet(embedded.ensure_addition_trained_data(data) / "test.parquet")
        ),
    }
    assert set(labels) == set(rows)
    for source, n in rows.items():
        stated = re.search(r"\bs\.e\. (0\.(\d+))\)", labels[source])
        assert stated, f"{source}: {labels[source]!r} gives no standard error"
        decimals = len(stated.group(2))  # compared at the precision the label gives
        assert float(stated.group(1)) == round(math.sqrt(0.25 / n), decimals), (source, n, labels[source])
        counted = re.search(r"\b(\d+)\b(?: of the \d+)? (?:held-out|training) sums", labels[source])
        assert counted and int(counted.group(1)) == n, f"{source}: the label names how many sums it scores"


def test_the_held_out_line_has_enough_prompts_to_mean_something(rlvr_cache):
    """20 held-out sums (s.e. 0.11) could end where they started while the training reward doubled: the
    default run's held-out split is large enough that a move of 0.07 (2 s.e.) is real."""
    cfg = compose.compose([])
    assert list(cfg.rlvr.held_out_sources) == ["addition"]
    n = len(pd.read_parquet(embedded.ensure_addition_data(rlvr_cache / "data") / "test.parquet"))
    assert n >= 200 and math.sqrt(0.25 / n) <= 0.036
    assert cfg.actor_rollout_ref.rollout.val_kwargs.do_sample is False, "the held-out line is greedy"
