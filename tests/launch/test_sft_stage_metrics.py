"""The `sft` stage's record of what it trained (issue 33 item 2): verl's file logger writes each attempt's
steps; the stage merges them into its metrics.jsonl, one row per step, and reports the SFT loss of the
first and the last step. A killed attempt's rows survive the next attempt (whose logger truncates the
file), a step redone after a resume replaces the killed attempt's row, and a line cut short is skipped."""

from __future__ import annotations

import json

from rlvr_launch.pipelines.stages import SFT_ATTEMPT_METRICS, sft_metrics


def _logged(step: int, loss: float) -> str:
    return json.dumps({"step": step, "data": {"train/loss": loss, "train/lr": 1e-3}}) + "\n"


def test_the_first_and_last_loss_of_all_attempts_and_one_row_per_step(tmp_path):
    assert sft_metrics(tmp_path) == {}  # nothing logged: no claim
    attempt = tmp_path / SFT_ATTEMPT_METRICS
    attempt.write_text(_logged(1, 5.0) + _logged(2, 4.0) + _logged(3, 3.5) + '{"step": 4, "da')  # killed
    assert sft_metrics(tmp_path) == {"loss_first": 5.0, "loss_last": 3.5}
    assert not attempt.exists()  # merged, so the next attempt's logger cannot truncate it away
    attempt.write_text(_logged(3, 3.4) + _logged(4, 3.0))  # resumed from the step-2 checkpoint
    assert sft_metrics(tmp_path) == {"loss_first": 5.0, "loss_last": 3.0}
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert rows[2]["train/loss"] == 3.4 and rows[0]["train/lr"] == 1e-3
