"""Issue 10, item 10: each validation line of the demo says what it measures and how noisy it is.
The standard error in a label is the binomial one at accuracy 0.5, sqrt(0.25 / n), for the n rows of
that data source's validation file: a label that claims a precision its set cannot give fails here."""

from __future__ import annotations

import math
import re

import pandas as pd

from rlvr_launch import compose, embedded, train


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
        stated = re.search(r"\bs\.e\. (0\.\d+)\)", labels[source])
        assert stated, f"{source}: {labels[source]!r} gives no standard error"
        assert float(stated.group(1)) == round(math.sqrt(0.25 / n), 2), (source, n, labels[source])
        assert str(n) in labels[source], f"{source}: the label names how many sums it scores"
