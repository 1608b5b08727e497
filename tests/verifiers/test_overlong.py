"""DAPO's soft overlong punishment (rlvr_verifiers/overlong.py) matches the paper's eq. 13 and verl's
`dapo` reward manager, reads the same config keys, and refuses a ramp that does not fit the budget."""

import pytest

from rlvr_verifiers.overlong import OverlongConfig


def _cfg(**kw):
    base = {"enable": True, "buffer_len": 4, "max_resp_len": 20, "penalty_factor": 1.0}
    return OverlongConfig(**(base | kw))


def test_no_penalty_up_to_the_start_of_the_buffer():
    cfg = _cfg()
    assert [cfg.penalty(n) for n in (0, 10, 16)] == [0.0, 0.0, 0.0]


def test_linear_ramp_to_minus_one_at_the_budget():
    cfg = _cfg()
    assert [cfg.penalty(n) for n in (17, 18, 19, 20)] == [-0.25, -0.5, -0.75, -1.0]


def test_penalty_factor_scales_the_ramp():
    assert _cfg(penalty_factor=0.5).penalty(20) == -0.5


def test_matches_verls_dapo_manager_formula():
    cfg = _cfg(buffer_len=4096, max_resp_len=20480)
    for length in (0, 16384, 16385, 18000, 20480):
        expected_len = 20480 - 4096
        verl = min(-(length - expected_len) / 4096 * 1.0, 0)
        assert cfg.penalty(length) == pytest.approx(verl)


def test_reads_the_dapo_recipe_keys():
    config = {
        "reward": {
            "reward_kwargs": {
                "overlong_buffer_cfg": {"enable": True, "len": 2, "penalty_factor": 1.0, "log": True},
                "max_resp_len": 4,
            }
        }
    }
    cfg = OverlongConfig.from_verl_config(config)
    assert cfg.enable and cfg.buffer_len == 2 and cfg.max_resp_len == 4
    assert cfg.extra_info(4) == {"overlong_reward": -1.0, "overlong": 1.0}
    assert OverlongConfig.from_verl_config({"reward": {}}).penalty(10**6) == 0.0


def test_a_buffer_longer_than_the_budget_is_refused_with_the_key_to_change():
    with pytest.raises(ValueError, match="overlong_buffer_cfg.len=4096 must be below max_resp_len=4"):
        OverlongConfig(enable=True, buffer_len=4096, max_resp_len=4)
