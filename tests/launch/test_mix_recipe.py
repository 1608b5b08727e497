"""A task mixture declared in the recipe (`rlvr.mix: {TASK: WEIGHT}`, issue 34): refused at composition
when it cannot be built or scored, and built by `rlvr train`'s prepare step with `rlvr data mix`'s code, so
that experiment=cpu_mix runs on its own defaults.
"""

from __future__ import annotations

from collections import Counter

import pyarrow.parquet as pq
import pytest

from rlvr_launch.cli import UserError
from rlvr_launch.recipes import compose
from rlvr_launch.runs import mix as task_mix


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rlvr.mix.addition=0", r"rlvr.mix.addition=0: a weight must be a positive finite number"),
        ("rlvr.mix.addition=-1", r"rlvr.mix.addition=-1: a weight must be a positive finite number"),
        ("rlvr.mix.ifeval=inf", r"rlvr.mix.ifeval=inf: a weight must be a positive finite number"),
        ("rlvr.mix.ifeval=nan", r"rlvr.mix.ifeval=nan: a weight must be a positive finite number"),
        ("rlvr.mix.ifeval=lots", r"rlvr.mix.ifeval=lots: a weight must be a positive finite number"),
        ("+rlvr.mix.nope=1", r"rlvr.mix.nope: unknown task 'nope'; known: addition, code, "),
        ("~rlvr.mix.ifeval", r"rlvr.mix has one task \(addition\): a mixture needs two or more"),
        ("task=addition", r"rlvr.mix is set but task=addition"),
    ],
)
def test_a_bad_mixture_is_refused_at_composition_in_one_line(override, message):
    with pytest.raises(UserError, match=message) as caught:
        compose.compose(["experiment=cpu_mix", override])
    assert "\n" not in str(caught.value)


def test_a_mixture_whose_verifier_is_not_registered_is_refused(monkeypatch):
    # a task whose rows would name a verifier nobody registered (e.g. a plugin package not installed)
    monkeypatch.setitem(task_mix.GENERATED, "sums_by_plugin", "plugin_math")
    with pytest.raises(
        UserError, match=r"rlvr.mix.sums_by_plugin needs verifier 'plugin_math', which is not"
    ):
        compose.compose(["experiment=cpu_mix", "+rlvr.mix.sums_by_plugin=1"])


def test_cpu_mix_composes_with_its_mixture_and_the_mix_task():
    cfg = compose.compose(["experiment=cpu_mix"])
    assert dict(cfg.rlvr.mix) == {"addition": 2, "ifeval": 1} and cfg.rlvr.task == "mix"
    assert str(cfg.data.train_files).endswith("/mix/train.parquet")
    task_mix.check(cfg)


def _domains(path) -> Counter:
    return Counter(r["domain"] for r in pq.read_table(path).column("extra_info").to_pylist())


def test_train_prepare_builds_the_mixture_offline_and_rebuilds_it_only_when_the_weights_change(tmp_path):
    logs: list[str] = []
    cfg = compose.compose(["experiment=cpu_mix", f"rlvr.data_dir={tmp_path}"])
    out = task_mix.prepare(cfg, log=logs.append)
    assert out == tmp_path / "mix"
    # addition (800 train / 200 test, generated) and ifeval (512 generated, a tenth held out), mixed 2:1
    train = _domains(out / "train.parquet")
    assert train["addition"] == 2 * train["ifeval"] and train["addition"] == 800
    assert _domains(out / "test.parquet") == {"addition": 200, "ifeval": 51}
    assert any("generating ifeval offline" in m for m in logs)
    built = (out / "train.parquet").stat().st_mtime_ns
    assert task_mix.prepare(cfg, log=logs.append) == out
    assert (out / "train.parquet").stat().st_mtime_ns == built, "the same mixture is not rebuilt"
    cfg = compose.compose(["experiment=cpu_mix", f"rlvr.data_dir={tmp_path}", "rlvr.mix.ifeval=2"])
    task_mix.prepare(cfg, log=logs.append)
    train = _domains(out / "train.parquet")
    assert train["addition"] == train["ifeval"], "reweighted 2:2"
    assert "rebuilding it" in logs[-2]


def test_a_part_rlvr_cannot_build_offline_names_the_rlvr_data_command(tmp_path):
    cfg = compose.compose(["experiment=cpu_mix", f"rlvr.data_dir={tmp_path}", "+rlvr.mix.gsm8k=1"])
    with pytest.raises(
        UserError, match=rf"rlvr.mix.gsm8k: no converted data at {tmp_path}/gsm8k: convert it first"
    ):
        task_mix.prepare(cfg, log=lambda m: None)


def test_a_cluster_jobs_prepare_data_leaves_a_recipes_mixture_to_the_train_prepare_step(tmp_path):
    # `rlvr submit --prepare-data` runs before training: `rlvr data mix` has no spec there (the recipe's
    # rlvr.mix is it), so the mixture is built by run_training's prepare step instead of failing here
    from rlvr_launch.jobs import driver

    cfg = compose.compose(["experiment=cpu_mix", f"rlvr.data_dir={tmp_path}"])
    assert driver.prepare_task_data(cfg) is False and not (tmp_path / "mix").exists()
