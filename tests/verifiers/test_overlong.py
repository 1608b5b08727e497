"""DAPO's soft overlong punishment (rlvr_verifiers/overlong.py) matches the paper's eq. 13 and verl's
`dapo` reward manager (driven itself, on verl's own batch type), reads the same config keys, and refuses a
ramp that does not fit the budget."""

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


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from rlvr_launch.runs.embedded_model import TinySpec, build_tokenizer

    return build_tokenizer(TinySpec(), tmp_path_factory.mktemp("tok"))


def _verl_dapo_rewards(tokenizer, config: dict, lengths: list[int], score: float) -> list[tuple[float, dict]]:
    """(reward, reward_extra_info) from verl's own `dapo` reward manager (its reward-loop registry entry),
    for responses of the given token lengths that the rule scored `score`."""
    import numpy as np
    import torch
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

    manager = get_reward_manager_cls("dapo")(
        OmegaConf.create(config), tokenizer, compute_score=lambda **_: score
    )
    width = max(lengths) + 3  # right padding after the longest response
    token = tokenizer.encode("7", add_special_tokens=False)[0]
    out = []
    for n in lengths:
        data = DataProto.from_dict(
            tensors={
                "prompts": torch.tensor([[token, token]]),
                "responses": torch.tensor([[token] * n + [tokenizer.pad_token_id] * (width - n)]),
                "attention_mask": torch.tensor([[1, 1] + [1] * n + [0] * (width - n)]),
            },
            non_tensors={
                "data_source": np.array(["addition"], dtype=object),
                "reward_model": np.array([{"ground_truth": "7"}], dtype=object),
                "extra_info": np.array([{}], dtype=object),
            },
        )
        result = manager.loop.run_until_complete(manager.run_single(data))
        out.append((float(result["reward_score"]), result["reward_extra_info"]))
    return out


@pytest.mark.parametrize(("buffer_len", "max_resp_len", "factor"), [(4, 20, 1.0), (7, 12, 0.5)])
def test_matches_verls_own_dapo_reward_manager(tokenizer, buffer_len, max_resp_len, factor):
    """The same config driven through verl's `dapo` reward manager and through OverlongConfig: the same
    paid reward for every response length around the buffer (verl adds the penalty to the rule's score)."""
    config = {
        "reward": {
            "reward_kwargs": {
                "overlong_buffer_cfg": {
                    "enable": True,
                    "len": buffer_len,
                    "penalty_factor": factor,
                    "log": True,
                },
                "max_resp_len": max_resp_len,
            }
        }
    }
    ours = OverlongConfig.from_verl_config(config)
    lengths = list(range(1, max_resp_len + 1))
    theirs = _verl_dapo_rewards(tokenizer, config, lengths, score=1.0)
    for n, (reward, info) in zip(lengths, theirs, strict=True):
        assert reward == pytest.approx(1.0 + ours.penalty(n)), n
        assert float(info["overlong_reward"]) == pytest.approx(ours.extra_info(n)["overlong_reward"]), n
        assert float(info["overlong"]) == ours.extra_info(n)["overlong"], n
    assert any(r < 1.0 for r, _ in theirs) and theirs[0][0] == 1.0  # the ramp was reached, short ones free


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
