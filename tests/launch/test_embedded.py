"""The embedded tiny model and tokenizer: the properties verl relies on, and determinism."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
from transformers import AutoTokenizer

from rlvr_launch.runs import embedded_model as embedded


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    # AutoTokenizer on the folder is exactly what verl does.
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_newline_is_exactly_one_token(tokenizer):
    assert len(tokenizer.encode("\n", add_special_tokens=False)) == 1


def test_end_of_turn_token_exists_and_is_eos(tokenizer):
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert isinstance(im_end, int)
    assert tokenizer.eos_token_id == im_end
    assert tokenizer.pad_token_id not in (None, im_end)


def test_chat_template_renders_chatml_with_a_generation_prompt(tokenizer):
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "3+4="}], add_generation_prompt=True, tokenize=False
    )
    assert text == "<|im_start|>user\n3+4=<|im_end|>\n<|im_start|>assistant\n"


def test_text_round_trips_through_the_tokenizer(tokenizer):
    for text in ("<|im_start|>user\n12+9=<|im_end|>\n", "The answer is 17.\n\n", "héllo wörld 3.14"):
        assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_the_class_transformers_rebuilds_encodes_like_the_trained_tokenizer(tokenizer, tmp_path):
    """transformers 5 rebuilds any tokenizer in a qwen2 folder with Qwen2's pre-tokenizer."""
    trained = embedded.build_tokenizer(embedded.TinySpec(), tmp_path)
    for a, b in embedded.addition_pairs(embedded.TinySpec())[0][:20]:
        text = f"<|im_start|>user\n{a}+{b}=<|im_end|>\n<|im_start|>assistant\n{a + b}<|im_end|>\n"
        assert tokenizer.encode(text, add_special_tokens=False) == trained.encode(
            text, add_special_tokens=False
        )


def test_check_tokenizer_rejects_a_tokenizer_verl_cannot_use(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # Character-level: "\n" is a token, but there is no <|im_end|>.
    tok = Tokenizer(models.WordLevel({"a": 0, "\n": 1, "[UNK]": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    with pytest.raises(ValueError, match="im_end"):
        embedded.check_tokenizer(fast)


def test_the_task_data_is_in_verls_format_with_held_out_pairs_never_trained(rlvr_cache):
    data = embedded.ensure_addition_data(rlvr_cache / "data")
    train = pd.read_parquet(data / "train.parquet")
    test = pd.read_parquet(data / "test.parquet")
    spec = embedded.TinySpec()
    assert len(train) == spec.train_pairs == 800 and len(test) == 200
    row = train.iloc[0]
    assert row["data_source"] == "addition"
    assert list(row["prompt"][0].keys()) == ["role", "content"]
    a, b = map(int, row["prompt"][0]["content"].rstrip("=").split("+"))
    assert row["reward_model"]["ground_truth"] == str(a + b)
    assert row["extra_info"]["verifier"] == "math"
    prompts = lambda df: {m[0]["content"] for m in df["prompt"]}  # noqa: E731
    assert not prompts(train) & prompts(test)


def test_every_held_out_sum_is_computed_by_steps_the_training_sums_also_take():
    """The held-out line can show RL carrying over only if the task has a rule to carry: each held-out
    a+b shares its units-digit step (a's units digit, b) and its tens digit with training sums."""
    train, held_out = embedded.addition_pairs(embedded.TinySpec())
    units_steps = {(a % 10, b) for a, b in train}
    tens_digits = {a // 10 for a, _ in train}
    assert all((a % 10, b) in units_steps and a // 10 in tens_digits for a, b in held_out)
    assert len({(a % 10, b) for a, b in held_out}) > 50, "held-out sums cover many units-digit steps"


def test_the_warm_start_reaches_its_target_and_leaves_room_for_rl(tiny_model_dir, tokenizer, rlvr_cache):
    """Recomputed here, not read from what the builder wrote: greedy answers (transformers' generate) of
    the saved model to the training prompts verl will see, against their ground truth."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    data_dir = rlvr_cache / "data"
    train = pd.read_parquet(embedded.ensure_addition_data(data_dir) / "train.parquet")
    scored = pd.read_parquet(embedded.ensure_addition_trained_data(data_dir) / "test.parquet")
    held_out = pd.read_parquet(embedded.ensure_addition_data(data_dir) / "test.parquet")

    def accuracy(frame) -> float:
        texts = [
            tokenizer.apply_chat_template(list(p), add_generation_prompt=True, tokenize=False)
            for p in frame["prompt"]
        ]
        batch = tokenizer(
            texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False
        )
        with torch.no_grad():
            out = model.generate(
                **batch, do_sample=False, max_new_tokens=4, pad_token_id=tokenizer.pad_token_id
            )
        answers = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        truth = [r["ground_truth"] for r in frame["reward_model"]]
        return sum(a.strip() == t for a, t in zip(answers, truth, strict=True)) / len(frame)

    # The warm start stops on the fixed sample of training sums that validation scores too.
    on_sample = accuracy(scored)
    assert on_sample >= embedded.TinySpec().warm_start_target
    assert accuracy(train) < 0.9, "a warm start this good would leave RL nothing to show"
    info = json.loads((tiny_model_dir / "rlvr_build.json").read_text())
    assert info["warm_start_train_accuracy"] == pytest.approx(on_sample, abs=1 / len(scored)), (
        "the record is true"
    )
    assert info["warm_start_held_out_accuracy"] == pytest.approx(accuracy(held_out), abs=1 / len(held_out))
    assert sum(p.numel() for p in model.parameters()) == info["parameters"]
    assert 300_000 < info["parameters"] < 500_000


@pytest.mark.slow
def test_the_build_is_deterministic(tmp_path, tiny_model_dir, capfd):
    rebuilt = embedded.ensure_tiny_model(tmp_path, log=lambda _m: None)
    assert "Writing model shards" not in capfd.readouterr().err, "a first run prints rlvr's lines only"
    assert rebuilt.name == tiny_model_dir.name, "the folder name is the spec's digest"
    for name in ("tokenizer.json", "model.safetensors"):
        digest = [hashlib.sha256((d / name).read_bytes()).hexdigest() for d in (rebuilt, tiny_model_dir)]
        assert digest[0] == digest[1], f"{name} differs between two builds of the same spec"


def test_validation_also_scores_a_fixed_sample_of_the_training_sums_under_their_own_data_source(rlvr_cache):
    """The held-out line and the training sums' line on the same scale: 200 of the training sums, scored
    greedily as `addition_trained` (the first 200 rows of the training file)."""
    trained = pd.read_parquet(embedded.ensure_addition_trained_data(rlvr_cache / "data") / "test.parquet")
    train = pd.read_parquet(embedded.ensure_addition_data(rlvr_cache / "data") / "train.parquet")
    assert len(trained) == 200 and set(trained["data_source"]) == {"addition_trained"}
    prompts = lambda df: [m[0]["content"] for m in df["prompt"]]  # noqa: E731
    assert prompts(trained) == prompts(train)[:200]
    assert list(trained["reward_model"]) == list(train["reward_model"])[:200]


USER = [{"role": "user", "content": "3+4="}]
PLAIN = "<|im_start|>user\n3+4=<|im_end|>\n<|im_start|>assistant\n"


def _render(tokenizer, messages, **kwargs):
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kwargs)


def test_thinking_mode_renders_the_plain_prompt_and_non_thinking_mode_prefills_an_empty_block(tokenizer):
    assert _render(tokenizer, USER) == PLAIN, "the default rendering must not change (warm start, demo)"
    assert _render(tokenizer, USER, enable_thinking=True) == PLAIN
    assert _render(tokenizer, USER, enable_thinking=False) == PLAIN + "<think>\n\n</think>\n\n"
    assert embedded.EMPTY_THINK_BLOCK == "<think>\n\n</think>\n\n"


def test_no_think_switch_yields_an_empty_block_and_the_latest_switch_wins(tokenizer):
    no_think = [{"role": "user", "content": "3+4= /no_think"}]
    assert _render(tokenizer, no_think).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert _render(tokenizer, [{"role": "user", "content": "3+4= /think"}]).endswith(
        "<|im_start|>assistant\n"
    )
    turns = [
        {"role": "user", "content": "1+1= /no_think"},
        {"role": "assistant", "content": "2"},
        {"role": "user", "content": "3+4= /think"},
    ]
    assert _render(tokenizer, turns).endswith("<|im_start|>assistant\n")
    assert _render(tokenizer, turns[:2] + [{"role": "user", "content": "3+4="}]).endswith("</think>\n\n")
    # enable_thinking=False wins over a /think switch, as in Qwen3
    assert _render(tokenizer, turns, enable_thinking=False).endswith("</think>\n\n")
    # the empty block is ordinary text: it tokenises and round-trips
    text = _render(tokenizer, no_think)
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text
