"""`rlvr eval` (pass@1 / unbiased pass@k / maj@k) and `rlvr sample` (rejection sampling into SFT data)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from rlvr_launch.errors import UserError
from rlvr_launch.pipelines import evaluate, generation, sample
from rlvr_verifiers import reasoning

TAGS = reasoning.default_tags()


def _responses(spec: dict[int, list[tuple[str, str]]]) -> list[generation.Response]:
    """Fixture responses: prompt index -> [(text, status), ...] (status ok means correct)."""
    out = []
    for index, items in spec.items():
        prompt = generation.Prompt(index, [{"role": "user", "content": f"q{index}"}], "math", "x", "fixture")
        for s, (text, status) in enumerate(items):
            out.append(generation.Response(prompt, s, text, len(text), False, float(status == "ok"), status))
    return out


# --- the estimators, against hand computations -----------------------------------------------------


def test_pass_at_k_is_the_codex_estimator_computed_by_hand():
    # n=5 samples, c=2 correct: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass@4 = 1 - 0 (C(3,4)=0)
    assert evaluate.pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert evaluate.pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert evaluate.pass_at_k(5, 2, 4) == 1.0
    assert evaluate.pass_at_k(5, 0, 5) == 0.0
    for n, c, k in [(8, 3, 2), (8, 1, 4), (20, 7, 5), (16, 0, 3), (16, 16, 16)]:
        exact = 1 - math.comb(n - c, k) / math.comb(n, k)
        assert evaluate.pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)
    with pytest.raises(ValueError):
        evaluate.pass_at_k(4, 2, 5)


def test_sampled_metrics_on_a_fixture_equal_the_hand_computation():
    responses = _responses(
        {
            # 4 samples, 1 correct: pass@1 1/4, pass@2 1 - C(3,2)/C(4,2) = 1/2, pass@4 1; majority "7" is wrong
            0: [("7", "wrong"), ("5", "ok"), ("7", "wrong"), ("6", "wrong")],
            # 4 samples, 3 correct (one inside a closed think block): majority "9" (3 votes) is right
            1: [("9", "ok"), ("<think>4+5</think>9", "ok"), ("8", "wrong"), (" 9 ", "ok")],
            # 4 samples, none correct, two without an answer region: no correct majority
            2: [("<think>", "parse_error"), ("<think>x", "parse_error"), ("1", "wrong"), ("2", "wrong")],
        }
    )
    m = evaluate.sampled_metrics(responses, 4, TAGS)
    assert m["mean_accuracy"] == pytest.approx(4 / 12)
    assert m["pass@1"] == pytest.approx((1 / 4 + 3 / 4 + 0) / 3)
    assert m["pass@2"] == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert m["pass@4"] == pytest.approx((1 + 1 + 0) / 3)
    assert m["maj@4"] == pytest.approx(1 / 3)
    assert evaluate.status_counts(responses) == {"math": {"ok": 4, "parse_error": 2, "wrong": 6}}


def test_majority_vote_breaks_ties_by_first_seen_and_ignores_unanswered():
    assert evaluate.majority_correct(["3", "4", "4", "3"], [True, False, False, True])  # tie: "3" seen first
    assert not evaluate.majority_correct(["4", "3", "3", "4"], [False, True, True, False])
    assert not evaluate.majority_correct([None, None], [False, False])
    assert evaluate.normalized_answer("<think>a</think>  1 2 ", TAGS) == "1 2"
    assert evaluate.normalized_answer("<think>never closed", TAGS) is None


# --- sample's selection --------------------------------------------------------------------------


def test_selection_filters_dedup_best_of_k_and_says_why_each_response_was_dropped():
    responses = _responses(
        {
            0: [
                ("<think>2+3</think>5", "ok"),
                ("5", "ok"),
                ("5", "ok"),
                ("4", "wrong"),
                ("<think>long way</think>5", "ok"),
            ],
            1: [("3", "wrong"), ("<think>", "parse_error")],
        }
    )
    kept, dropped = sample.select(
        responses,
        mode="all-correct",
        dedup=True,
        min_tokens=0,
        max_tokens=None,
        format_filter="none",
        tags=TAGS,
    )
    assert [r.text for r in kept] == ["<think>2+3</think>5", "5", "<think>long way</think>5"]
    assert sorted(dropped.values()) == ["duplicate", "verdict parse_error", "verdict wrong", "verdict wrong"]
    assert len(kept) + len(dropped) == len(responses)  # every response is kept or counted as dropped

    kept, _ = sample.select(
        responses,
        mode="all-correct",
        dedup=False,
        min_tokens=0,
        max_tokens=None,
        format_filter="think",
        tags=TAGS,
    )
    assert [r.sample_index for r in kept] == [0, 4]

    kept, dropped = sample.select(
        responses,
        mode="best-of-k",
        dedup=True,
        min_tokens=0,
        max_tokens=None,
        format_filter="think",
        tags=TAGS,
    )
    assert [(r.prompt.index, r.sample_index) for r in kept] == [(0, 0)]  # the shorter closed trace
    assert "best-of-k" in dropped[id(responses[4])]

    kept, dropped = sample.select(
        responses,
        mode="all-correct",
        dedup=False,
        min_tokens=2,
        max_tokens=20,
        format_filter="none",
        tags=TAGS,
    )
    assert [r.sample_index for r in kept] == [0]  # "5" is 1 token long here (len of text), the long one 24
    assert dropped[id(responses[1])] == "length 1 tokens"


def test_difficulty_buckets():
    assert [sample.difficulty_bucket(x) for x in (0, 0.25, 0.5, 0.75, 1.0)] == [
        "0",
        "(0,0.5]",
        "(0,0.5]",
        "(0.5,1)",
        "1",
    ]


# --- on the tiny model ----------------------------------------------------------------------------


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_eval_greedy_pass_at_1_equals_the_independent_greedy_accuracy_of_the_build(tiny_model_dir):
    """pass@1 through the hf rollout server + math verifier equals the greedy accuracy the embedded build
    measured with its own decoding loop on the same 200 held-out prompts."""
    from rlvr_launch.runs import embedded_model as embedded

    build = json.loads((tiny_model_dir / "rlvr_build.json").read_text())
    report = evaluate.evaluate(str(tiny_model_dir), "addition", k=4, temperature=1.0)
    held_out = len(embedded.addition_pairs(embedded.TinySpec())[1])
    assert report["prompts"] == held_out == 200
    assert report["pass@1"] == pytest.approx(build["warm_start_held_out_accuracy"])
    s = report["sampled"]
    assert s["pass@1"] == pytest.approx(s["mean_accuracy"])  # the estimator at k=1 is the mean
    assert s["pass@1"] <= s["pass@2"] <= s["pass@4"] <= 1.0
    assert sum(sum(c.values()) for c in s["statuses"].values()) == 4 * held_out
    assert 1 <= s["length"]["max"] <= report["max_tokens"]


def test_eval_and_sample_refuse_bad_input_with_a_clear_error(tiny_model_dir, tmp_path):
    with pytest.raises(UserError, match="unknown task"):
        evaluate.evaluate(str(tiny_model_dir), "no_such_task")
    with pytest.raises(UserError, match="neither a Hugging Face model folder"):
        evaluate.evaluate(str(tmp_path), "addition")
    with pytest.raises(UserError, match="temperature"):
        evaluate.evaluate(str(tiny_model_dir), "addition", k=4, temperature=0.0)
    with pytest.raises(UserError, match="needs --mix"):
        sample.sample(str(tiny_model_dir), "addition", 2, tmp_path / "o", mix_ratio=0.5)


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_sample_writes_verl_sft_data_with_provenance_and_a_mix(tiny_model_dir, tmp_path):
    general = tmp_path / "general.jsonl"
    with open(general, "w") as f:
        for i in range(50):
            msgs = [{"role": "user", "content": f"say {i}"}, {"role": "assistant", "content": str(i)}]
            f.write(json.dumps({"messages": msgs}) + "\n")
    out = tmp_path / "out"
    report = sample.sample(
        str(tiny_model_dir), "addition", 4, out, limit=20, dedup=False, mix=str(general), mix_ratio=0.5
    )
    frame = pd.read_parquet(out / "train.parquet")
    lines = [json.loads(line) for line in (out / "responses.jsonl").read_text().splitlines()]
    assert len(lines) == 80 and report["responses"] == 80
    ok = [x for x in lines if x["verdict"]["status"] == "ok"]
    sampled = frame[frame.source == "sample"]
    assert report["kept"] == len(ok) == len(sampled) > 0
    assert len(frame[frame.source == "mix"]) == report["mixed"] == round(0.5 * len(ok))
    for row, line in zip(sampled.to_dict("records"), ok, strict=True):
        assert (row["prompt_id"], row["sample_index"]) == (line["prompt_id"], line["sample_index"])
        assert row["messages"][-1] == {"role": "assistant", "content": line["response"]}
        assert row["messages"][0]["role"] == "user" and row["verdict"] == "ok"
        assert row["source_model"] == str(tiny_model_dir)
    buckets = report["by_difficulty"]
    assert sum(b["prompts"] for b in buckets.values()) == 20
    assert sum(b["kept"] for b in buckets.values()) == report["kept"]
    assert buckets.get("0", {"kept": 0})["kept"] == 0


def test_hf_dir_is_used_as_is(tiny_model_dir):
    assert generation.resolve_model(tiny_model_dir) == Path(tiny_model_dir).resolve()


@pytest.mark.parametrize("layout", ["rl", "sft"])
def test_a_checkpoint_is_found_from_the_run_dir_the_step_or_the_shard_folder(tmp_path, layout):
    """RL checkpoints keep the shards in global_step_N/actor/, verl's SFT trainer in global_step_N/."""
    ckpts = tmp_path / "run" / "checkpoints"
    for step in (1, 2):
        shards = ckpts / f"global_step_{step}" / ("actor" if layout == "rl" else "")
        (shards / "huggingface").mkdir(parents=True)
    (ckpts / "latest_checkpointed_iteration.txt").write_text("2")
    want = ckpts / "global_step_2" / ("actor" if layout == "rl" else "")
    for given in (tmp_path / "run", ckpts, ckpts / "global_step_2", want):
        assert generation._actor_dir(given) == want
    (ckpts / "latest_checkpointed_iteration.txt").write_text("7")
    assert generation._actor_dir(ckpts) is None


def test_a_verifier_that_raises_gives_each_of_its_responses_a_counted_failure_not_a_crash():
    """eval/sample verify as `rlvr score`'s local path does: one failing verifier costs its own
    responses a `sandbox_error` each; the other rows are still scored."""
    from rlvr_launch.pipelines import generation
    from rlvr_verifiers import registry
    from rlvr_verifiers.base import Verdict

    class Explodes:
        def verify_batch(self, items):
            if any("boom" in it.response for it in items):
                raise RuntimeError("boom")
            return [Verdict(1.0, "ok", "fine") for _ in items]

        def verify(self, item):
            return self.verify_batch([item])[0]

    if "test_explodes" not in registry.names():
        registry.register("test_explodes")(Explodes())
    bad = generation.Prompt(0, [], "test_explodes", "x", "t")
    good = generation.Prompt(1, [], "math", "7", "addition")
    responses = [
        generation.Response(bad, 0, "boom", 1, False),
        generation.Response(bad, 1, "fine", 1, False),
        generation.Response(good, 0, "7", 1, False),
    ]
    generation.verify(responses)
    assert [r.status for r in responses] == ["sandbox_error", "ok", "ok"]
    assert "RuntimeError: boom" in responses[0].detail and responses[2].score == 1.0


# --- which server generates (--rollout) ------------------------------------------------------------


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_the_rollout_defaults_to_the_platforms_own_and_vllm_gets_the_recipes_vllm_settings():
    from omegaconf import OmegaConf

    cpu = generation.task_config("addition")
    assert generation.platform_rollout(cpu) == "hf"
    gpu = generation.task_config("addition", ["platform=gpu"])
    assert generation.platform_rollout(gpu) == "vllm"
    # vLLM on the cpu platform: the settings `rlvr train rollout=vllm` runs with (recipes/rollout/vllm.yaml)
    on_cpu = generation.task_config("addition", rollout="vllm").actor_rollout_ref.rollout
    assert on_cpu.name == "vllm" and on_cpu.dtype == "float32" and on_cpu.enforce_eager
    assert not on_cpu.enable_sleep_mode and not on_cpu.free_cache_engine
    assert on_cpu.engine_kwargs.vllm.worker_extension_cls == "rlvr_cluster.vllm_cpu.CPUWorkerExtension"
    # on platform=gpu verl's own GPU settings, nothing of the CPU recipe
    on_gpu = generation.task_config("addition", ["platform=gpu"], rollout="vllm").actor_rollout_ref.rollout
    assert on_gpu.name == "vllm" and on_gpu.dtype != "float32"
    assert OmegaConf.select(on_gpu, "engine_kwargs.vllm.worker_extension_cls") is None
    # --rollout hf on any platform is the in-process hf server; the config is not changed for it
    assert (
        generation.task_config("addition", ["platform=gpu"], rollout="hf").actor_rollout_ref.rollout.name
        == "vllm"
    )
    with pytest.raises(UserError, match="contradicts the override rollout=hf"):
        generation.task_config("addition", ["rollout=hf"], rollout="vllm")


def test_eval_and_sample_take_rollout_hf_or_vllm_and_nothing_else(capsys):
    from rlvr_launch import cli

    parser = cli.build_parser()
    for command in (
        ["eval", "M", "--task", "addition"],
        ["sample", "M", "--task", "addition", "--k", "2", "--out", "o"],
    ):
        assert parser.parse_args(command).rollout is None  # the platform's own, decided after composing
        assert parser.parse_args([*command, "--rollout", "vllm"]).rollout == "vllm"
        assert parser.parse_args([*command, "--rollout", "hf"]).rollout == "hf"
        with pytest.raises(SystemExit):
            parser.parse_args([*command, "--rollout", "sglang"])
    assert "invalid choice: 'sglang'" in capsys.readouterr().err


@pytest.mark.slow  # over 1 s: kept out of the fast set (under two minutes)
def test_rollout_vllm_without_vllm_installed_is_refused_naming_the_install(
    tiny_model_dir, monkeypatch, capsys
):
    import importlib.util
    import os

    import ray

    from rlvr_launch import cli
    from rlvr_launch.pipelines import vllm_generation

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a)
    )
    environ = dict(os.environ)
    assert (
        cli.main(["eval", str(tiny_model_dir), "--task", "addition", "--rollout", "vllm", "--limit", "2"])
        == 2
    )
    err = capsys.readouterr().err
    assert "rlvr eval: error: --rollout vllm needs vLLM, which is not installed" in err
    assert vllm_generation.VLLM_CPU_INSTALL in err and "--rollout hf" in err and "Traceback" not in err
    assert not ray.is_initialized() and dict(os.environ) == environ  # refused before anything started
    assert "verl's `trainer` Docker image" not in err
    assert "trainer` Docker image" in vllm_generation.missing_vllm_message("gpu")
