"""The embedded default: a tiny causal LM, its tokenizer and a task with a verifiable answer, built
locally and deterministically (nothing is downloaded), cached under the rlvr cache directory.

- Tokenizer: byte-level BPE trained on the task's own text, ChatML chat template. verl needs "\\n" to
  be exactly one token and `<|im_end|>` to exist; a character-level tokenizer does not satisfy it.
  It is saved as a plain `PreTrainedTokenizerFast`: saved as Qwen2Tokenizer, transformers 5 would
  rebuild it with Qwen2's digit-splitting pre-tokenizer and disagree with the object that saved it.
- Model: a Qwen2-architecture causal LM (hidden 128, 2 layers, ~0.4M parameters), randomly
  initialised from a fixed seed.
- Task `addition`: `a+b=` for a from 0 to 99 and a single digit b (0-9); the answer is the
  decimal sum. 800 of the 1000 pairs train, the other 200 are never trained on (the validation split):
  enough that a held-out figure has a standard error of ~0.035, and a task with structure (the units
  digit and the carry), so what RL teaches on the training sums can carry over to sums never seen
  (the single-digit task before it had 100 facts, 20 held out: s.e. 0.11, and no rule to carry over).
  Validation also scores 200 of the training sums greedily, under their own data source
  `addition_trained` (a folder of its own), so the picture shows both lines on the same scale.
- Warm start (the R1 recipe's cold start, in miniature): about a minute (500 steps, one thread) of
  supervised training on the answer format until greedy accuracy on the fixed sample of training pairs
  (`validated_train_pairs`) reaches `warm_start_target` (0.5 by default). It teaches the format and half
  the sums; the RL phase is what raises the reward
  further, which is what the demo shows.

Every artefact's folder name carries a hash of everything that determines it, so a changed spec
builds anew and concurrent builders serialise on a file lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import random
import shutil
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from rlvr_launch.recipes.embedded_models import (  # the specs a recipe names; built here
    STUDENT,  # noqa: F401 - embedded_model.STUDENT, the name a recipe gives the student
    STUDENT_SPEC,
    TinySpec,
    student_model_dir,
)

ADDITION = "addition"
ADDITION_TRAINED = "addition_trained"  # the training sums, validated greedily as their own data source
# ChatML with Qwen3's two modes. Thinking mode (the default, `enable_thinking=True`, or a user turn's
# `/think` switch) renders exactly the plain ChatML prompt: the model opens its own `<think>` block.
# Non-thinking mode (`enable_thinking=False`, or `/no_think` in the latest user turn that carries a
# switch) prefills an empty block, `<think>\n\n</think>\n\n`, after the generation prompt.
# `enable_thinking=False` wins over the switches, as in Qwen3. Without either, the rendering is
# byte-identical to the template before the modes existed (the warm start and the demo see the same
# prompts).
CHAT_TEMPLATE = (
    "{% set ns = namespace(think=true) %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'user' and '/no_think' in message['content'] %}{% set ns.think = false %}"
    "{% elif message['role'] == 'user' and '/think' in message['content'] %}{% set ns.think = true %}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if enable_thinking is defined and not enable_thinking %}{% set ns.think = false %}{% endif %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if not ns.think %}{{ '<think>\n\n</think>\n\n' }}{% endif %}{% endif %}"
)
EMPTY_THINK_BLOCK = "<think>\n\n</think>\n\n"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# transformers/models/qwen2/tokenization_qwen2.py PRETOKENIZE_REGEX (transformers 5.9).
QWEN2_PRETOKENIZE_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def addition_pairs(spec: TinySpec) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    pairs = [(a, b) for a in range(spec.operand_a) for b in range(spec.operand_b)]
    random.Random(spec.seed).shuffle(pairs)
    return pairs[: spec.train_pairs], pairs[spec.train_pairs :]


def validated_train_pairs(spec: TinySpec) -> list[tuple[int, int]]:
    """The training pairs whose greedy accuracy the warm start and validation report (a fixed sample:
    scoring all 800 every validation would cost more than it tells)."""
    return addition_pairs(spec)[0][: spec.validated_train_pairs]


def addition_prompt(a: int, b: int) -> str:
    return f"{a}+{b}="


@contextmanager
def locked(path: Path):
    """An exclusive file lock around building one cached asset (concurrent `rlvr` processes build it once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _corpus(spec: TinySpec) -> list[str]:
    train, held_out = addition_pairs(spec)
    lines = []
    for a, b in train + held_out:
        lines.append(
            f"<|im_start|>user\n{addition_prompt(a, b)}<|im_end|>\n<|im_start|>assistant\n{a + b}<|im_end|>\n"
        )
    return lines * 4


def build_tokenizer(spec: TinySpec, out_dir: Path):
    """Train the byte-level BPE tokenizer and save it as a transformers fast tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    # The same normaliser and pre-tokenizer transformers 5 gives any tokenizer in a qwen2 model folder
    # (digits split one by one): whichever class loads this folder then encodes text identically.
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(spec), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out_dir)
    return fast


def check_tokenizer(tokenizer) -> None:
    """The properties verl 0.9.1 relies on (utils/tokenizer/continuous_token.py)."""
    newline = tokenizer.encode("\n", add_special_tokens=False)
    if len(newline) != 1:
        raise ValueError(f'tokenizer must encode "\\n" as one token, got {newline}')
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if im_end is None or im_end == tokenizer.unk_token_id:
        raise ValueError("tokenizer has no <|im_end|> token")
    if tokenizer.eos_token_id != im_end:
        raise ValueError("tokenizer's eos must be <|im_end|> so generation stops at the end of a turn")
    text = "<|im_start|>user\n3+4=<|im_end|>\n"
    if tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) != text:
        raise ValueError("tokenizer does not round-trip ChatML text")


def _model_config(spec: TinySpec, tokenizer):
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )


def _encode_example(tokenizer, a: int, b: int) -> tuple[list[int], list[int]]:
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": addition_prompt(a, b)}], add_generation_prompt=True, tokenize=False
    )
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    answer_ids = tokenizer.encode(str(a + b), add_special_tokens=False) + [tokenizer.eos_token_id]
    return prompt_ids, answer_ids


def greedy_continuations(model, prompts: list[list[int]], max_new_tokens: int = 4) -> list[list[int]]:
    """The greedy continuation (max_new_tokens ids) of each prompt, in the prompts' order.

    Prompts of equal length decode together, one forward pass per token for the whole group (no
    padding, so each row computes what it would alone)."""
    import torch

    groups: dict[int, list[int]] = {}
    for index, prompt in enumerate(prompts):
        groups.setdefault(len(prompt), []).append(index)
    out: list[list[int]] = [[] for _ in prompts]
    with torch.no_grad():
        for width, indices in groups.items():
            ids = torch.tensor([prompts[i] for i in indices])
            for _ in range(max_new_tokens):
                nxt = model(input_ids=ids).logits[:, -1].argmax(dim=-1, keepdim=True)
                ids = torch.cat([ids, nxt], dim=1)
            for row, index in enumerate(indices):
                out[index] = ids[row, width:].tolist()
    return out


def greedy_accuracy(model, tokenizer, pairs: list[tuple[int, int]], max_new_tokens: int = 4) -> float:
    """Share of `pairs` answered exactly by greedy decoding (up to the end of turn or max_new_tokens)
    in the chat format; a row stops at its first end of turn."""
    if not pairs:
        return 0.0
    prompts = [_encode_example(tokenizer, a, b)[0] for a, b in pairs]
    correct = 0
    for generated, (a, b) in zip(greedy_continuations(model, prompts, max_new_tokens), pairs, strict=True):
        if tokenizer.eos_token_id in generated:
            generated = generated[: generated.index(tokenizer.eos_token_id) + 1]
        correct += tokenizer.decode(generated, skip_special_tokens=True).strip() == str(a + b)
    return correct / len(pairs)


def warm_start(model, tokenizer, spec: TinySpec, log=print) -> tuple[int, float]:
    """Supervised training on answer tokens (+ end of turn) until the greedy accuracy target."""
    import torch

    train, _ = addition_pairs(spec)
    scored = validated_train_pairs(spec)
    examples = [_encode_example(tokenizer, a, b) for a, b in train]
    width = max(len(p) + len(a) for p, a in examples)
    inputs = torch.full((len(examples), width), tokenizer.pad_token_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, (p, a) in enumerate(examples):
        ids = p + a
        inputs[row, : len(ids)] = torch.tensor(ids)
        labels[row, len(p) : len(ids)] = torch.tensor(a)
        mask[row, : len(ids)] = 1
    generator = torch.Generator().manual_seed(spec.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.warm_start_lr)
    accuracy = 0.0
    step = 0
    for step in range(1, spec.warm_start_max_steps + 1):
        model.train()
        idx = torch.randperm(len(examples), generator=generator)[:32]
        out = model(input_ids=inputs[idx], attention_mask=mask[idx], labels=labels[idx])
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        if step % 10 == 0:
            model.eval()
            accuracy = greedy_accuracy(model, tokenizer, scored)
            if step % 100 == 0:
                log(
                    f"[rlvr] warm start step {step}: loss {out.loss.item():.3f}, greedy accuracy {accuracy:.2f}"
                )
            if accuracy >= spec.warm_start_target:
                break
    model.eval()
    return step, accuracy


@contextmanager
def _one_torch_thread():
    """Builds run on one thread: the result then does not depend on the machine's core count, and on a
    loaded 2-core machine two OpenMP threads spinning against other processes took 4x as long."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def build_model(spec: TinySpec, out_dir: Path, log=print) -> dict:
    """Tokenizer + randomly initialised Qwen2 + warm start, saved to `out_dir` as an HF folder."""
    with _one_torch_thread():
        return _build_model(spec, out_dir, log)


def _build_model(spec: TinySpec, out_dir: Path, log=print) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(spec.seed)
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    trained = build_tokenizer(spec, tmp)
    _model_config(spec, trained).save_pretrained(tmp)
    # From here on, the object verl itself builds from this folder, used for everything.
    tokenizer = AutoTokenizer.from_pretrained(tmp)
    for text in _corpus(spec)[:100]:
        if tokenizer.encode(text, add_special_tokens=False) != trained.encode(text, add_special_tokens=False):
            raise RuntimeError(
                f"the reloaded tokenizer ({type(tokenizer).__name__}) encodes {text!r} differently"
            )
    check_tokenizer(tokenizer)
    model = AutoModelForCausalLM.from_config(_model_config(spec, tokenizer), dtype=torch.float32)
    steps, accuracy = warm_start(model, tokenizer, spec, log=log)
    _, held_out = addition_pairs(spec)
    held_out_accuracy = greedy_accuracy(model, tokenizer, held_out)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    _save_quietly(model, tmp)
    info = {
        "spec": asdict(spec),
        "parameters": sum(p.numel() for p in model.parameters()),
        "warm_start_steps": steps,
        "warm_start_train_accuracy": accuracy,
        "warm_start_held_out_accuracy": held_out_accuracy,
    }
    (tmp / "rlvr_build.json").write_text(json.dumps(info, indent=2))
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return info


def _save_quietly(model, directory: Path) -> None:
    """save_pretrained without transformers' "Writing model shards" progress bar on the user's first
    `rlvr train`."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(directory)
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def build_addition_data(spec: TinySpec, out_dir: Path) -> None:
    """verl's parquet format: data_source, prompt (chat messages), ability, reward_model, extra_info."""
    import pandas as pd

    train, held_out = addition_pairs(spec)
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for split, pairs in (("train", train), ("test", held_out)):
        rows = [
            {
                "data_source": ADDITION,
                "prompt": [{"role": "user", "content": addition_prompt(a, b)}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                "extra_info": {"split": split, "index": i, "verifier": "math"},
            }
            for i, (a, b) in enumerate(pairs)
        ]
        pd.DataFrame(rows).to_parquet(tmp / f"{split}.parquet", index=False)
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)


def ensure_tiny_model(cache_dir: Path, spec: TinySpec = TinySpec(), log=print) -> Path:
    """Path of the cached tiny model folder, building it first if needed."""
    out = Path(cache_dir) / "models" / f"tiny-qwen2-addition-{spec.digest()}"
    with locked(out.with_name(out.name + ".lock")):
        if not (out / "rlvr_build.json").exists():
            log(f"[rlvr] building the tiny model and tokenizer in {out} (once; about a minute)")
            info = build_model(spec, out, log=log)
            log(
                f"[rlvr] warm start: {info['warm_start_steps']} steps, greedy accuracy "
                f"{info['warm_start_train_accuracy']:.2f} train / {info['warm_start_held_out_accuracy']:.2f} held out"
            )
    return out


def build_addition_trained_data(spec: TinySpec, out_dir: Path) -> None:
    """A fixed sample of the training sums as a validation file of their own data source (greedy
    accuracy on them; the warm start reports the same sample)."""
    import pandas as pd

    train = validated_train_pairs(spec)
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    rows = [
        {
            "data_source": ADDITION_TRAINED,
            "prompt": [{"role": "user", "content": addition_prompt(a, b)}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(a + b)},
            "extra_info": {"split": "train", "index": i, "verifier": "math"},
        }
        for i, (a, b) in enumerate(train)
    ]
    pd.DataFrame(rows).to_parquet(tmp / "test.parquet", index=False)
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)


def ensure_addition_trained_data(data_dir: Path, spec: TinySpec = TinySpec()) -> Path:
    out = Path(data_dir) / ADDITION_TRAINED
    marker = out / f".built-{spec.digest()}"
    with locked(Path(data_dir) / f".{ADDITION_TRAINED}.lock"):
        if not marker.exists():
            build_addition_trained_data(spec, out)
            marker.touch()
    return out


def ensure_addition_data(data_dir: Path, spec: TinySpec = TinySpec()) -> Path:
    out = Path(data_dir) / ADDITION
    marker = out / f".built-{spec.digest()}"
    with locked(Path(data_dir) / f".{ADDITION}.lock"):
        if not marker.exists():
            build_addition_data(spec, out)
            marker.touch()
    return out


# --- pipeline assets (issue 14): SFT data in verl's `messages` format, deterministic -------------------
# They leave the embedded model and its digest untouched: they are data built next to the task's.

ADDITION_LONG_COT = "addition_long_cot"
GENERAL = "general"


def long_cot_response(a: int, b: int) -> str:
    """A worked sum, R1-style: counting up from a in b unit steps inside <think>...</think>, then the answer."""
    steps = [f"{a + i}+1={a + i + 1}" for i in range(b)]
    work = f"{a}+{b}: start at {a}, add 1 {b} times. " + (", ".join(steps) if steps else f"{a}+0={a}") + "."
    return f"<think>{work} So {a}+{b}={a + b}.</think>{a + b}"


# The cold-start traces count up b unit steps from a; they are written for the training sums whose first
# operand has one digit (~80 rows): the pipelines' SFT stages size their 160-token sequences by them (a
# two-digit a makes a trace up to ~25 tokens longer), and a cold start is a small curated set in R1 too.
LONG_COT_MAX_A = 10


def long_cot_rows(spec: TinySpec) -> list[dict]:
    """Worked sums of the training pairs with a one-digit first operand; `prompt_id` is the row of the
    task's training file (the thinking stages look the prompt up there)."""
    return [
        {
            "messages": [
                {"role": "user", "content": addition_prompt(a, b)},
                {"role": "assistant", "content": long_cot_response(a, b)},
            ],
            "prompt_id": i,
        }
        for i, (a, b) in enumerate(addition_pairs(spec)[0])
        if a < LONG_COT_MAX_A
    ]


def general_rows(spec: TinySpec, count: int = 64) -> list[dict]:
    """A "general" (non-task) chat set for the SFT mix: repeat a short word, say a letter's successor."""
    rng = random.Random(spec.seed + 1)
    letters = "abcdefghijklmnopqrstuvwxyz"
    rows = []
    for i in range(count):
        if i % 2 == 0:
            word = "".join(rng.choice(letters) for _ in range(rng.randint(2, 5)))
            user, answer = f"repeat {word}", word
        else:
            j = rng.randrange(len(letters) - 1)
            user, answer = f"after {letters[j]}", letters[j + 1]
        rows.append(
            {
                "messages": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}],
                "prompt_id": i,
            }
        )
    return rows


def ensure_sft_data(data_dir: Path, name: str, spec: TinySpec = TinySpec()) -> Path:
    """DATA_DIR/NAME/train.parquet for NAME in (addition_long_cot, general), built once per spec digest."""
    import pandas as pd

    builders = {ADDITION_LONG_COT: long_cot_rows, GENERAL: general_rows}
    if name not in builders:
        raise ValueError(f"unknown embedded SFT data {name!r}; known: {', '.join(builders)}")
    out = Path(data_dir) / name
    marker = out / f".built-{spec.digest()}"
    with locked(Path(data_dir) / f".{name}.lock"):
        if not marker.exists():
            tmp = out.with_name(out.name + ".partial")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            pd.DataFrame(builders[name](spec)).to_parquet(tmp / "train.parquet", index=False)
            shutil.rmtree(out, ignore_errors=True)
            tmp.rename(out)
            marker.touch()
    return out / "train.parquet"


# ------------------------------------------------------------------------------------------ base model
# The *base* variant for R1-Zero: the same architecture and tokenizer as the tiny model, trained only on
# plain text, `a+b=s` lines of the training sums (a language model's loss on every token), so it has seen
# the task's text but never the chat format (<|im_start|> turns) nor the reasoning tags. Built next to
# the tiny model (its tokenizer is copied, so token ids agree) under its own digest.
# Plain-text LM steps (batch 32 of the 800 training lines) until the base answers BASE_TARGET of the
# validated training sums in plain text, greedy: a base that knows the text but still needs RL. A fixed
# step count is fragile: the accuracy climbs steeply (on one machine 600 steps gave ~a third, 1000 92%; on
# the next, same pins, 600 gave 17%, 900 47%, 1200 99.9%), so the build stops at a measured target, as the
# tiny model's warm start does (here: 775 steps, 0.37 on the 200, 0.38 on all 800). BASE_STEPS is the most it trains.
BASE_STEPS = 3000
BASE_TARGET = 1 / 3
BASE_CHECK_EVERY = 25
_BASE_VERSION = 2


def plain_greedy_accuracy(model, tokenizer, pairs: list[tuple[int, int]], max_new_tokens: int = 4) -> float:
    """Share of `pairs` a plain-text model completes right: greedy after the `a+b=` prompt (no chat
    format), the text up to the first newline equal to the sum."""
    if not pairs:
        return 0.0
    prompts = [tokenizer.encode(addition_prompt(a, b), add_special_tokens=False) for a, b in pairs]
    correct = 0
    for generated, (a, b) in zip(greedy_continuations(model, prompts, max_new_tokens), pairs, strict=True):
        text = tokenizer.decode(generated, skip_special_tokens=True)
        correct += text.split("\n")[0].strip() == str(a + b)
    return correct / len(pairs)


def base_corpus(spec: TinySpec) -> list[str]:
    train, _ = addition_pairs(spec)
    return [f"{addition_prompt(a, b)}{a + b}\n" for a, b in train]


def build_base_model(spec: TinySpec, tiny_dir: Path, out_dir: Path) -> dict:
    with _one_torch_thread():
        return _build_base_model(spec, tiny_dir, out_dir)


def _build_base_model(spec: TinySpec, tiny_dir: Path, out_dir: Path) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(spec.seed)
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    tokenizer.save_pretrained(tmp)
    model = AutoModelForCausalLM.from_config(_model_config(spec, tokenizer), dtype=torch.float32)
    lines = [tokenizer.encode(text, add_special_tokens=False) for text in base_corpus(spec)]
    width = max(len(ids) for ids in lines)
    inputs = torch.full((len(lines), width), tokenizer.pad_token_id, dtype=torch.long)
    labels = torch.full((len(lines), width), -100, dtype=torch.long)
    mask = torch.zeros((len(lines), width), dtype=torch.long)
    for row, ids in enumerate(lines):
        inputs[row, : len(ids)] = labels[row, : len(ids)] = torch.tensor(ids)
        mask[row, : len(ids)] = 1
    generator = torch.Generator().manual_seed(spec.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.warm_start_lr)
    scored = validated_train_pairs(spec)
    loss, accuracy, step = float("nan"), 0.0, 0
    for step in range(1, BASE_STEPS + 1):
        model.train()
        idx = torch.randperm(len(lines), generator=generator)[:32]
        out = model(input_ids=inputs[idx], attention_mask=mask[idx], labels=labels[idx])
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        loss = out.loss.item()
        if step % BASE_CHECK_EVERY == 0:
            model.eval()
            accuracy = plain_greedy_accuracy(model, tokenizer, scored)
            if accuracy >= BASE_TARGET:
                break
    model.eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    _save_quietly(model, tmp)
    info = {
        "spec": asdict(spec),
        "base_steps": step,
        "plain_greedy_accuracy": accuracy,
        "final_loss": loss,
        "text": "a+b=s lines only",
    }
    (tmp / "rlvr_build.json").write_text(json.dumps(info, indent=2))
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return info


def ensure_base_model(cache_dir: Path, spec: TinySpec = TinySpec(), log=print) -> Path:
    """Path of the cached base (plain text only, no chat format, no tags) tiny model, built if needed."""
    tiny = ensure_tiny_model(cache_dir, spec, log=log)
    digest = hashlib.sha256(
        f"{spec.digest()}:{BASE_STEPS}:{BASE_TARGET}:{_BASE_VERSION}".encode()
    ).hexdigest()[:12]
    out = Path(cache_dir) / "models" / f"tiny-qwen2-base-{digest}"
    with locked(out.with_name(out.name + ".lock")):
        if not (out / "rlvr_build.json").exists():
            log(f"[rlvr] building the base tiny model in {out} (once; about half a minute)")
            build_base_model(spec, tiny, out)
    return out


# --- distillation pair (issue 14): the embedded tiny model is the teacher, this smaller one the student -----
# Same tokenizer (the BPE is trained on the task corpus, which depends only on the seed and the split, so
# every TinySpec with the default seed/train_pairs/vocab gets byte-identical tokenizer files): the student
# reads the teacher's token ids as they are. Half the width, one layer (55k parameters vs the teacher's
# 332k), randomly initialised from the same fixed seed and NOT warm-started: everything it knows of the
# task comes from the pipeline that trains it (the teacher's verified traces, or RL on its own samples).


def ensure_student_model(cache_dir: Path, log=print) -> Path:
    """Path of the cached student model folder (built once, a second or two; digest-keyed like the teacher)."""
    out = student_model_dir(cache_dir)
    with locked(out.with_name(out.name + ".lock")):
        if not (out / "rlvr_build.json").exists():
            log(f"[rlvr] building the embedded student model in {out} (once)")
            build_model(STUDENT_SPEC, out, log=log)
    return out


# --- task `digit_sums` (issue 32): a task a real instruct model gets partly right -----------------------
# SmolLM2-135M-Instruct answers a single-digit sum asked in words about half the time greedily and a
# quarter of the time sampled at T=0.7, in prose ("To add 3 and 4, ... 3 + 4 = 7."): GRPO groups then
# carry signal, where two-digit sums (under 0.1 sampled) do not. 100 pairs x 4 phrasings; the held-out
# split is 30 pairs never trained on, in all 4 phrasings (120 prompts).

DIGIT_SUMS = "digit_sums"
DIGIT_SUMS_PHRASINGS = (
    "What is {a} + {b}?",
    "Compute {a} + {b}.",
    "What do you get when you add {a} and {b}?",
    "Add {a} and {b}. What is the sum?",
)
DIGIT_SUMS_HELD_OUT_PAIRS = 30
DIGIT_SUMS_SEED = 0
# Task `digit_sums_r1_zero`: the same sums and splits, each question followed by R1-Zero's instruction (its
# template asks for the reasoning inside <think> </think> before the answer); for the `r1_zero` rubric.
DIGIT_SUMS_R1_ZERO = "digit_sums_r1_zero"
R1_ZERO_INSTRUCTION = (
    "{question} First think about it inside <think> </think> tags, then give the answer after </think>."
)
DIGIT_SUMS_INSTRUCTIONS = {DIGIT_SUMS: "{question}", DIGIT_SUMS_R1_ZERO: R1_ZERO_INSTRUCTION}


def digit_sums_rows(name: str = DIGIT_SUMS) -> dict[str, list[dict]]:
    """verl's parquet rows of the task `name` (digit_sums or digit_sums_r1_zero), by split (train, test);
    deterministic. Both variants ask the same questions in the same order; only the instruction differs."""
    instruction = DIGIT_SUMS_INSTRUCTIONS[name]
    pairs = [(a, b) for a in range(10) for b in range(10)]
    random.Random(DIGIT_SUMS_SEED).shuffle(pairs)
    splits = {"test": pairs[:DIGIT_SUMS_HELD_OUT_PAIRS], "train": pairs[DIGIT_SUMS_HELD_OUT_PAIRS:]}
    rows = {}
    for split, chosen in splits.items():
        items = [(a, b, phrasing) for a, b in chosen for phrasing in DIGIT_SUMS_PHRASINGS]
        random.Random(f"{DIGIT_SUMS_SEED}-{split}").shuffle(items)
        rows[split] = [
            {
                "data_source": name,
                "prompt": [
                    {"role": "user", "content": instruction.format(question=phrasing.format(a=a, b=b))}
                ],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                "extra_info": {"split": split, "index": i, "verifier": "math"},
            }
            for i, (a, b, phrasing) in enumerate(items)
        ]
    return rows


def ensure_digit_sums_data(data_dir: Path, name: str = DIGIT_SUMS) -> Path:
    import pandas as pd

    out = Path(data_dir) / name
    payload = json.dumps(
        [DIGIT_SUMS_PHRASINGS, DIGIT_SUMS_HELD_OUT_PAIRS, DIGIT_SUMS_SEED, DIGIT_SUMS_INSTRUCTIONS[name]]
    )
    marker = out / f".built-{hashlib.sha256(payload.encode()).hexdigest()[:12]}"
    with locked(Path(data_dir) / f".{name}.lock"):
        if not marker.exists():
            tmp = out.with_name(out.name + ".partial")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            for split, rows in digit_sums_rows(name).items():
                pd.DataFrame(rows).to_parquet(tmp / f"{split}.parquet", index=False)
            (tmp / marker.name).touch()
            shutil.rmtree(out, ignore_errors=True)
            tmp.rename(out)
    return out
