"""The `rlvr` reward manager: registered in verl's reward-loop registry, routing each sample to its
verifier, and scoring through the pool exactly as verl's RewardLoopWorker drives it.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

# No importorskip: verl is in the `train` extra CI installs; without it these tests must fail, not vanish.
from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
from verl.experimental.reward_loop.reward_manager import registry as verl_registry

from rlvr_verifiers import verl_bridge
from rlvr_verifiers.base import INVALID_INPUT, OK, STATUSES, WRONG, Item, Verdict
from rlvr_verifiers.verl_bridge import (
    EXTRA_KEYS,
    BridgeConfig,
    RlvrRewardManager,
    make_item,
    route,
    step_metrics,
)


def test_manager_is_registered_under_rlvr_after_importing_the_bridge():
    assert get_reward_manager_cls("rlvr") is RlvrRewardManager


def test_importing_the_bridge_a_second_time_keeps_one_registration():
    spec = importlib.util.spec_from_file_location("rlvr_verifiers.verl_bridge", verl_bridge.__file__)
    second = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(second)  # a second copy of the module, as a double import makes
    assert second.RlvrRewardManager is not RlvrRewardManager
    assert get_reward_manager_cls("rlvr") is RlvrRewardManager


def test_a_different_class_claiming_the_name_rlvr_is_an_error():
    class Impostor(RlvrRewardManager):
        pass

    with pytest.raises(ValueError, match="already been registered"):
        verl_registry.register("rlvr")(Impostor)
    assert get_reward_manager_cls("rlvr") is RlvrRewardManager


@pytest.mark.parametrize(
    ("data_source", "ability", "extra_info", "expected"),
    [
        ("openai/gsm8k", None, None, "math"),
        ("DigitalLearningGmbH/MATH-lighteval", "math", None, "math"),
        ("aime2024", None, None, "math"),
        ("countdown", "math", None, "countdown"),  # TinyZero labels countdown's ability "math"
        ("codecontests", "code", None, "code"),
        ("likaixin/TACO-verified", None, None, "code"),
        ("livecodebench/v5", None, None, "code"),
        ("glaive_tool_use", None, None, "tool_call"),
        ("my_private_set", "math", None, "math"),  # data_source unknown: ability decides
        ("openai/gsm8k", "math", {"verifier": "format"}, "format"),  # extra_info.verifier wins
        ("mystery", "riddles", None, None),  # unroutable
    ],
)
def test_routing_order_extra_info_then_data_source_then_ability(data_source, ability, extra_info, expected):
    assert route(data_source, ability, extra_info) == expected


def test_configured_routes_come_before_the_built_in_table():
    assert route("acme/math-code-mix", None, None, {"acme": "code"}) == "code"


def test_json_ground_truth_is_decoded_and_bad_ground_truth_is_invalid_input():
    item = make_item("countdown", "1+2", json.dumps({"target": 3, "numbers": [1, 2]}))
    assert isinstance(item, Item) and item.ground_truth == {"target": 3, "numbers": [1, 2]}
    assert make_item("math", r"\boxed{4}", "4").ground_truth == "4"
    bad = make_item("code", "print(1)", "{not json")
    assert isinstance(bad, Verdict) and bad.status == INVALID_INPUT and "not JSON" in bad.detail
    assert make_item("tool_call", "x", "[1, 2]").status == INVALID_INPUT
    assert make_item("math", "x", None).status == INVALID_INPUT


def test_bridge_config_rejects_unknown_keys():
    with pytest.raises(ValueError, match="micro_batch"):
        BridgeConfig.from_verl_config({"reward": {"reward_kwargs": {"rlvr": {"micro_batch": 3}}}})
    with pytest.raises(Exception, match="num_actor"):
        BridgeConfig.from_verl_config({"reward": {"reward_kwargs": {"rlvr": {"pool": {"num_actor": 3}}}}})
    assert BridgeConfig.from_verl_config({"reward": {}}).micro_batch_size == 256


def test_step_metrics_count_per_verifier():
    infos = {"acc": [], "rlvr_verifier": [], "rlvr_status": [], "rlvr_latency_ms": []}
    for verifier, status, score, latency in [
        ("math", OK, 1.0, 10.0),
        ("math", WRONG, 0.0, 20.0),
        ("math", "timeout", 0.0, 3000.0),
        ("code", "sandbox_error", 0.0, None),
    ]:
        infos["acc"].append(score)
        infos["rlvr_verifier"].append(verifier)
        infos["rlvr_status"].append(status)
        infos["rlvr_latency_ms"].append(latency)
    m = step_metrics(infos)
    assert m["rlvr/math/count"] == 3 and m["rlvr/math/pass_rate"] == pytest.approx(1 / 3)
    assert m["rlvr/math/timeouts"] == 1 and m["rlvr/math/latency_p99_ms"] == 3000.0
    assert m["rlvr/math/latency_p50_ms"] == 20.0
    assert m["rlvr/code/sandbox_errors"] == 1 and m["rlvr/code/latency_p50_ms"] == 0.0
    assert step_metrics({}) == {}


# ---------------------------------------------------------------------------------------------------
# Driven as verl drives it: a composed verl config, a real tokenizer, verl's own RewardLoopWorker.


RAY_NUM_CPUS = 2
RAY_VERIFIER_SLOTS = 4


@pytest.fixture(scope="module")
def local_ray(private_ray):
    return private_ray


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from rlvr_launch.runs.embedded_model import TinySpec, build_tokenizer

    out = tmp_path_factory.mktemp("tok")
    build_tokenizer(TinySpec(), out)
    return out


def verl_config(tokenizer_dir: Path, pool_name: str):
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(
            "ppo_trainer",
            overrides=[
                "reward.reward_manager.name=rlvr",
                f"actor_rollout_ref.model.path={tokenizer_dir}",
                "+reward.reward_kwargs={rlvr:{pool:{name:" + pool_name + ",num_actors:2,items_per_call:4},"
                "micro_batch_wait_ms:50}}",
            ],
        )


def data_proto(tokenizer, samples, response_len: int = 48):
    """A batch shaped like verl's: left-padded prompts, right-padded responses, one mask over both."""
    import numpy as np
    import torch
    from verl import DataProto

    prompt_len = 8
    prompts, responses, masks = [], [], []
    for s in samples:
        p = tokenizer.encode("Q:", add_special_tokens=False)[-prompt_len:]
        r = tokenizer.encode(s["response"], add_special_tokens=False)[:response_len]
        assert len(r) < response_len, "test response too long for the batch"
        pad = tokenizer.pad_token_id
        prompts.append([pad] * (prompt_len - len(p)) + p)
        responses.append(r + [pad] * (response_len - len(r)))
        masks.append(
            [0] * (prompt_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (response_len - len(r))
        )
    tensors = {
        "prompts": torch.tensor(prompts),
        "responses": torch.tensor(responses),
        "attention_mask": torch.tensor(masks),
    }
    non_tensors = {
        "data_source": np.array([s["data_source"] for s in samples], dtype=object),
        "ability": np.array([s.get("ability", "") for s in samples], dtype=object),
        "reward_model": np.array([{"ground_truth": s["ground_truth"]} for s in samples], dtype=object),
        "extra_info": np.array([s.get("extra_info", {}) for s in samples], dtype=object),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


@pytest.mark.slow
def test_reward_loop_worker_scores_right_and_wrong_math_answers_through_the_pool(local_ray, tokenizer_dir):
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    config = verl_config(tokenizer_dir, "t-bridge")
    worker = RewardLoopWorker(config)  # verl's worker: builds the manager from reward.reward_manager.name
    assert isinstance(worker.reward_manager, RlvrRewardManager)
    samples = [
        {"data_source": "openai/gsm8k", "response": r"so the total is \boxed{72}", "ground_truth": "72"},
        {"data_source": "openai/gsm8k", "response": r"so the total is \boxed{27}", "ground_truth": "72"},
        {
            "data_source": "lighteval/MATH",
            "response": r"The answer is \boxed{\frac{1}{2}}",
            "ground_truth": "0.5",
        },
        {"data_source": "mystery", "ability": "riddles", "response": "42", "ground_truth": "42"},
        {
            "data_source": "codecontests",
            "response": "```python\nprint(int(input()) * 2)\n```",
            "ground_truth": json.dumps({"inputs": ["21\n"], "outputs": ["42\n"]}),
        },
        {
            "data_source": "countdown",
            "response": "<answer>(3+5)*2</answer>",
            "ground_truth": json.dumps({"target": 16, "numbers": [2, 3, 5]}),
        },
    ]
    data = data_proto(worker.input_tokenizer, samples)
    outputs = worker.loop.run_until_complete(
        worker.compute_score_batch(data)
    )  # what the reward-loop manager calls remotely

    scores = [o["reward_score"] for o in outputs]
    statuses = [o["reward_extra_info"]["rlvr_status"] for o in outputs]
    assert scores == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    assert statuses == [OK, WRONG, OK, INVALID_INPUT, OK, OK]
    assert [o["reward_extra_info"]["rlvr_verifier"] for o in outputs] == [
        "math",
        "math",
        "math",
        "unrouted",
        "code",
        "countdown",
    ]
    # verl stacks reward_extra_info by the first sample's keys: every sample must carry the same keys.
    assert all(tuple(o["reward_extra_info"]) == EXTRA_KEYS for o in outputs)
    # each response's domain (per-domain step figures): no row names one here, so its data source
    assert [o["reward_extra_info"]["rlvr_domain"] for o in outputs] == [s["data_source"] for s in samples]
    # The per-status indicators are opt-in (each is a column shipped to the actor every step), and
    # derivable from rlvr_status.
    derived = verl_bridge.status_indicators_of(statuses)
    assert all(sum(derived[f"rlvr_{s}"][i] for s in STATUSES) == 1.0 for i in range(len(statuses)))
    assert derived["rlvr_invalid_input"] == [0.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert outputs[0]["reward_extra_info"]["rlvr_latency_ms"] > 0
    assert outputs[3]["reward_extra_info"]["rlvr_latency_ms"] is None  # never sent to the pool
    # The five routable run_single calls reached the pool in fewer calls than samples (micro-batched).
    batcher = worker.reward_manager._batcher
    assert batcher.items_sent == 5 and batcher.batches_sent < 5
    m = step_metrics({k: [o["reward_extra_info"][k] for o in outputs] for k in EXTRA_KEYS})
    assert m["rlvr/math/pass_rate"] == pytest.approx(2 / 3) and m["rlvr/unrouted/invalid_inputs"] == 1.0


@pytest.mark.slow
def test_a_long_response_decoded_off_the_event_loop_gets_the_short_ones_verdict(local_ray, tokenizer_dir):
    """Responses up to INLINE_DECODE_MAX_TOKENS are decoded on the event loop, longer ones in a thread:
    the same answer after a long preamble gets the same verdict either way."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    worker = RewardLoopWorker(verl_config(tokenizer_dir, "t-bridge"))
    tokenizer = worker.input_tokenizer
    preamble = "Adding the tens first, then the units, and checking the carry once more. " * 40
    long_tokens = len(tokenizer.encode(preamble, add_special_tokens=False))
    assert long_tokens > verl_bridge.INLINE_DECODE_MAX_TOKENS  # else the thread path is not exercised
    samples = [
        {"data_source": "openai/gsm8k", "response": r"so the total is \boxed{72}", "ground_truth": "72"},
        {
            "data_source": "openai/gsm8k",
            "response": preamble + r"so the total is \boxed{72}",
            "ground_truth": "72",
        },
        {
            "data_source": "openai/gsm8k",
            "response": preamble + r"so the total is \boxed{27}",
            "ground_truth": "72",
        },
    ]
    data = data_proto(tokenizer, samples, response_len=long_tokens + 32)
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    assert [o["reward_score"] for o in outputs] == [1.0, 1.0, 0.0]
    assert [o["reward_extra_info"]["rlvr_status"] for o in outputs] == [OK, OK, WRONG]


@pytest.mark.slow
def test_overlong_shaping_lowers_the_paid_reward_but_not_the_verdict(local_ray, tokenizer_dir):
    """DAPO sec. 3.4: past L_max - L_cache tokens the reward ramps down; `acc` stays the verdict."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    config = verl_config(tokenizer_dir, "t-bridge")  # the module's pool: local_ray has CPUs for one
    from omegaconf import open_dict

    with open_dict(config):
        config.reward.reward_kwargs.overlong_buffer_cfg = {
            "enable": True,
            "len": 20,
            "penalty_factor": 1.0,
            "log": True,
        }
        config.reward.reward_kwargs.max_resp_len = 40
    worker = RewardLoopWorker(config)
    short = r"\boxed{72}"
    long = "so the total is " + short
    samples = [
        {"data_source": "openai/gsm8k", "response": short, "ground_truth": "72"},
        {"data_source": "openai/gsm8k", "response": long, "ground_truth": "72"},
        {"data_source": "mystery", "response": long, "ground_truth": "72"},
    ]
    data = data_proto(worker.input_tokenizer, samples)
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    tokens = [len(worker.input_tokenizer.encode(s["response"], add_special_tokens=False)) for s in samples]
    assert tokens[0] <= 20 < tokens[1] <= 40, tokens
    expected_penalty = -(tokens[1] - 20) / 20
    assert outputs[0]["reward_score"] == 1.0
    assert outputs[1]["reward_score"] == pytest.approx(1.0 + expected_penalty)
    assert outputs[1]["reward_extra_info"]["acc"] == 1.0, "the verdict is not shaped"
    assert outputs[1]["reward_extra_info"]["overlong"] == 1.0
    # every sample carries the same columns, unrouted ones included
    assert all("overlong_reward" in o["reward_extra_info"] for o in outputs)
    assert outputs[2]["reward_score"] == pytest.approx(expected_penalty)


# ---------------------------------------------------------------------------------------------------
# Reasoning blocks (rlvr_verifiers.reasoning): the task's tags reach every item; responses without an
# answer region are counted per sample, per step and in the log.


def test_bridge_config_carries_the_reasoning_settings_and_rejects_bad_ones():
    def config(**rlvr):
        return BridgeConfig.from_verl_config({"reward": {"reward_kwargs": {"rlvr": rlvr}}})

    tags, prefilled = config().reasoning_settings()
    assert (tags.open, tags.close, prefilled) == ("<think>", "</think>", False)
    tags, prefilled = config(
        reasoning_tags=["<reasoning>", "</reasoning>"], think_prefilled=True
    ).reasoning_settings()
    assert (tags.open, prefilled) == ("<reasoning>", True)
    assert config(reasoning_tags=False).reasoning_settings() == (None, False)  # YAML `off` is false
    with pytest.raises(ValueError, match=r"reward\.reward_kwargs\.rlvr\.reasoning_tags.*delimiter"):
        config(reasoning_tags=["think", "/think"])
    with pytest.raises(ValueError, match="think_prefilled is set but reasoning tags are off"):
        config(reasoning_tags="off", think_prefilled=True)


def test_status_indicator_columns_are_returned_only_when_asked():
    verdict = Verdict(0.0, "timeout")
    default = verl_bridge.extra_info_for("math", verdict, 0.5)
    assert tuple(default) == EXTRA_KEYS and not set(default) & set(verl_bridge.STATUS_INDICATOR_KEYS)
    asked = verl_bridge.extra_info_for("math", verdict, 0.5, status_indicators=True)
    assert tuple(asked) == EXTRA_KEYS + verl_bridge.STATUS_INDICATOR_KEYS
    assert {k: asked[k] for k in verl_bridge.STATUS_INDICATOR_KEYS} == {
        k: v[0] for k, v in verl_bridge.status_indicators_of(["timeout"]).items()
    }
    assert asked["rlvr_timeout"] == 1.0 and asked["rlvr_ok"] == 0.0
    cfg = {"reward": {"reward_kwargs": {"rlvr": {"status_indicators": True}}}}
    assert verl_bridge.BridgeConfig.from_verl_config(cfg).status_indicators is True
    assert verl_bridge.BridgeConfig.from_verl_config({}).status_indicators is False


def test_step_metrics_count_responses_without_an_answer_region():
    infos = {k: [] for k in EXTRA_KEYS}
    for verifier, status, no_region in [
        ("math", OK, 0.0),
        ("math", "parse_error", 1.0),
        ("code", WRONG, 0.0),
    ]:
        info = verl_bridge.extra_info_for(
            verifier, Verdict(float(status == OK), status), 0.01, bool(no_region)
        )
        for k in EXTRA_KEYS:
            infos[k].append(info[k])
    m = step_metrics(infos)
    assert m["rlvr/no_answer_region"] == 1.0 and m["rlvr/math/no_answer_region"] == 1.0
    assert m["rlvr/code/no_answer_region"] == 0.0


def test_reasoning_tags_that_the_tokenizer_marks_special_survive_decoding(tokenizer_dir):
    """skip_special_tokens would delete special-token tags and turn the reasoning into answer text."""
    from transformers import AutoTokenizer

    from rlvr_verifiers import reasoning, registry

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    assert verl_bridge.special_tag_ids(tok, reasoning.default_tags()) == {}  # plain text tags: plain decode
    tok.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})
    ids = tok.encode("<think>\\boxed{12}</think> 13", add_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=True) == "\\boxed{12} 13"  # the hazard: the guess is answer
    keep = verl_bridge.special_tag_ids(tok, reasoning.default_tags())
    assert sorted(keep.values()) == ["</think>", "<think>"]
    eos = [tok.convert_tokens_to_ids("<|im_end|>")]
    text = verl_bridge.decode_response(tok, ids + eos, keep)  # other special tokens are still skipped
    assert text == "<think>\\boxed{12}</think> 13"
    assert registry.get("math").verify(Item(text, "12")).status == WRONG


@pytest.mark.slow
def test_task_reasoning_tags_reach_the_verifiers_and_unclosed_blocks_are_counted(
    local_ray, tokenizer_dir, caplog
):
    from omegaconf import open_dict
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    config = verl_config(tokenizer_dir, "t-bridge")  # the module's pool
    with open_dict(config):
        config.reward.reward_kwargs.rlvr.reasoning_tags = ["<reasoning>", "</reasoning>"]
    worker = RewardLoopWorker(config)
    math = {"data_source": "openai/gsm8k", "ground_truth": "72"}
    samples = [
        {**math, "response": "<reasoning>\\boxed{72}</reasoning> so 27"},  # guess inside, wrong after
        {**math, "response": "<reasoning>12 * 6</reasoning> \\boxed{72}"},  # answer after
        {**math, "response": "<reasoning>12 * 6 = \\boxed{72} and"},  # cut off mid-reasoning
        {**math, "response": "<think>\\boxed{72}"},  # not this task's tags: plain text
        {"data_source": "mystery", "response": "<reasoning>42", "ground_truth": "42"},
    ]
    with caplog.at_level("INFO", logger="rlvr_verifiers.verl_bridge"):
        outputs = worker.loop.run_until_complete(
            worker.compute_score_batch(data_proto(worker.input_tokenizer, samples))
        )
    infos = [o["reward_extra_info"] for o in outputs]
    assert [o["reward_score"] for o in outputs] == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert [i["rlvr_status"] for i in infos] == [WRONG, OK, "parse_error", OK, INVALID_INPUT]
    assert [i["rlvr_no_answer_region"] for i in infos] == [0.0, 0.0, 1.0, 0.0, 1.0]
    assert all(tuple(i) == EXTRA_KEYS for i in infos)
    m = step_metrics({k: [i[k] for i in infos] for k in EXTRA_KEYS})
    assert m["rlvr/no_answer_region"] == 2.0 and m["rlvr/math/no_answer_region"] == 1.0
    logged = [r.getMessage() for r in caplog.records if "without an answer region" in r.getMessage()]
    assert logged and sum(int(msg.split("(")[1].split()[0]) for msg in logged) == 1  # the routed one
    assert any("no answer region" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)
