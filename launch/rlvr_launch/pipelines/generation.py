"""K responses per prompt of a task, each verified: the shared core of `rlvr eval` and `rlvr sample`.

- Model: a Hugging Face folder, or a verl checkpoint (a run dir, its `checkpoints/` folder, a
  `global_step_N` folder or its `actor/` folder), merged into an HF folder first by verl's own model
  merger (`python -m verl.model_merger merge --backend fsdp`).
- Prompts: the task recipe's data (`rlvr resolve task=NAME` shows the files): `data.val_files` for the
  held-out split, `data.train_files` for the training split; the embedded `addition` data is built
  when the recipe asks for it (rlvr.prepare), as `rlvr train` does.
- Generation (`--rollout`; default the platform's own: hf on the cpu platform, vllm on gpu), token-in /
  token-out through the server object verl's agent loop calls during training, never a second stack:
  - `hf`: rlvr's hf rollout server (`rlvr_cluster.hf_rollout.HFServer`), in this process. verl's hf-less
    standalone entry (`verl.trainer.main_generation_server`) cannot serve it: the hf replica runs
    colocated with a trainer only.
  - `vllm`: verl's own vLLM replica started standalone on a private Ray, with the recipe's rollout
    settings (rlvr_launch.pipelines.vllm_generation); the same `generate(prompt_ids, sampling_params,
    request_id)` on its server handle.
  Prompts are tokenised with the chat template exactly as verl's agent loop does, and responses are
  decoded as the reward manager decodes them (reasoning tags kept), identically for both.
- Verification: each row is routed and turned into an Item as the training reward manager does
  (`rlvr_verifiers.verl_bridge.route` / `make_item`, the task recipe's reasoning settings), then scored by
  the registered verifier's `verify_batch` in this process (the function the pool's actors call).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rlvr_launch.errors import UserError


@dataclass
class Prompt:
    index: int  # row number in the task's parquet file: the prompt id
    messages: list[dict]
    verifier: str
    ground_truth: Any
    data_source: str


@dataclass
class Response:
    prompt: Prompt
    sample_index: int
    text: str
    num_tokens: int
    truncated: bool  # hit the token budget without an end of turn
    score: float = 0.0
    status: str = ""
    detail: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return self.status == "ok"


def _response(prompt, sample_index, ids, tokenizer, keep, eos_ids, extra=None) -> Response:
    """A generated response: its text decoded as the bridge decodes it (reasoning tags kept), truncated
    when it hit the token budget without an end of turn."""
    from rlvr_verifiers import verl_bridge

    return Response(
        prompt=prompt,
        sample_index=sample_index,
        text=verl_bridge.decode_response(tokenizer, ids, keep),
        num_tokens=len(ids),
        truncated=not (bool(ids) and ids[-1] in eos_ids),
        extra=dict(extra or {}),
    )


# --- the model ------------------------------------------------------------------------------------


def _is_hf_dir(path: Path) -> bool:
    return (path / "config.json").is_file() and any(
        p.suffix in (".safetensors", ".bin") for p in path.iterdir() if p.is_file()
    )


def _actor_dir(path: Path) -> Path | None:
    """The folder of FSDP shards `path` designates (it holds `huggingface/`), or None. RL checkpoints
    keep them in `global_step_N/actor/`, verl's SFT trainer in `global_step_N/` itself."""
    for candidate in (path, path / "actor"):
        if (candidate / "huggingface").is_dir():
            return candidate
    for base in (path, path / "checkpoints"):
        marker = base / "latest_checkpointed_iteration.txt"
        if marker.is_file():
            step_dir = base / f"global_step_{marker.read_text().strip()}"
            for candidate in (step_dir / "actor", step_dir):
                if (candidate / "huggingface").is_dir():
                    return candidate
            return None
    return None


def resolve_model(path: str | Path, merged_dir: Path | None = None) -> Path:
    """An HF folder for `path`: itself when it is one, else verl's merger output (cached next to it)."""
    src = Path(os.path.expanduser(str(path))).resolve()
    if not src.exists():
        raise UserError(f"model {str(path)!r} does not exist; give an HF folder or a verl checkpoint")
    if src.is_dir() and _is_hf_dir(src):
        return src
    actor = _actor_dir(src) if src.is_dir() else None
    if actor is None:
        raise UserError(
            f"{src} is neither a Hugging Face model folder (config.json + weights) nor a verl checkpoint "
            "(a run dir, checkpoints/, global_step_N/ or its actor/ folder)"
        )
    target = merged_dir or (actor.parent / "merged_hf")
    if _is_hf_dir(target):
        return target
    merge_checkpoint(actor, target)
    return target


def merge_checkpoint(actor_dir: Path, target: Path) -> None:
    """verl's model merger: FSDP shards in `actor_dir` -> an HF folder at `target` (written atomically)."""
    partial = target.with_name(target.name + ".partial")
    subprocess.run(["rm", "-rf", str(partial)], check=True)
    cmd = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp"]
    cmd += ["--local_dir", str(actor_dir), "--target_dir", str(partial)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0 or not _is_hf_dir(partial):
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise UserError(f"verl's model merger failed on {actor_dir}: {' | '.join(tail)}")
    subprocess.run(["rm", "-rf", str(target)], check=True)
    partial.rename(target)


# --- the task's prompts ---------------------------------------------------------------------------


ROLLOUTS = ("hf", "vllm")


def platform_rollout(cfg) -> str:
    """The rollout a composed config generates with: `vllm` on the gpu platform or with `rollout=vllm`,
    else `hf` (the cpu platform's own)."""
    return "vllm" if str(cfg.actor_rollout_ref.rollout.name) == "vllm" else "hf"


def task_config(task: str, overrides: list[str] | None = None, rollout: str | None = None):
    """The composed config of `task=NAME` (+ overrides), with its generated data built when needed.

    With `rollout="vllm"` on a platform whose own rollout is hf (cpu), the `rollout=vllm` recipe is
    composed in, so that the vLLM server gets the settings `rlvr train rollout=vllm` runs with."""
    from rlvr_launch.recipes import compose
    from rlvr_launch.runs import embedded_model as embedded

    if task not in compose.group_entries("task"):
        raise UserError(f"unknown task {task!r}; pick one of: {', '.join(compose.group_entries('task'))}")
    if rollout is not None and rollout not in ROLLOUTS:
        raise UserError(f"--rollout must be one of {', '.join(ROLLOUTS)}, not {rollout!r}")
    overrides = list(overrides or [])
    named = [o.partition("=")[2] for o in overrides if o.lstrip("+~").startswith("rollout=")]
    if rollout is not None and named and named[-1] != rollout:
        raise UserError(f"--rollout {rollout} contradicts the override rollout={named[-1]}; give one of them")
    cfg = compose.compose([f"task={task}", *overrides], check=False)
    if rollout == "vllm" and platform_rollout(cfg) != "vllm":
        cfg = compose.compose([f"task={task}", *overrides, "rollout=vllm"], check=False)
    wanted = {name for name, on in (cfg.rlvr.get("prepare") or {}).items() if on}
    if embedded.ADDITION in wanted:  # the same data `rlvr train` prepares (train.prepare)
        embedded.ensure_addition_data(Path(cfg.rlvr.data_dir))
        embedded.ensure_addition_trained_data(Path(cfg.rlvr.data_dir))
    return cfg


def load_prompts(cfg, split: str, limit: int | None = None) -> list[Prompt]:
    import pandas as pd

    from rlvr_verifiers import verl_bridge

    key = {"test": "val_files", "train": "train_files"}.get(split)
    if key is None:
        raise UserError(f"--split must be train or test, not {split!r}")
    files = cfg.data[key]
    files = [files] if isinstance(files, str) else list(files)
    prompts: list[Prompt] = []
    routes = dict(cfg.reward.get("reward_kwargs", {}).get("rlvr", {}).get("routes", {}) or {})
    # A task may validate rows that are not held out (addition: its training sums); rlvr.held_out_sources
    # names the data sources of the held-out split.
    held_out = (cfg.get("rlvr", {}) or {}).get("held_out_sources") if split == "test" else None
    keep_sources = None if held_out is None else {str(s) for s in held_out}
    for path in files:
        if not Path(path).is_file():
            raise UserError(f"{split} data {path} does not exist; `rlvr data` writes a task's parquet files")
        frame = pd.read_parquet(path)
        for _, row in frame.iterrows():
            if keep_sources is not None and str(row.get("data_source")) not in keep_sources:
                continue
            extra_info = verl_bridge._plain(row.get("extra_info")) or {}
            reward_model = verl_bridge._plain(row.get("reward_model")) or {}
            verifier = verl_bridge.route(row.get("data_source"), row.get("ability"), extra_info, routes)
            if verifier is None:
                raise UserError(f"{path}: row {len(prompts)} has no verifier (set extra_info.verifier)")
            prompts.append(
                Prompt(
                    index=len(prompts),
                    messages=[dict(m) for m in row[cfg.data.prompt_key]],
                    verifier=verifier,
                    ground_truth=reward_model.get("ground_truth"),
                    data_source=str(row.get("data_source")),
                )
            )
            if limit is not None and len(prompts) >= limit:
                return prompts
    return prompts


def reasoning_extra(cfg) -> dict:
    """Item.extra reasoning settings of the task recipe (the reward manager passes the same)."""
    rlvr_kwargs = cfg.reward.get("reward_kwargs", {}).get("rlvr", {}) or {}
    out = {}
    for key in ("reasoning_tags", "think_prefilled"):
        if key in rlvr_kwargs:
            value = rlvr_kwargs[key]
            out[key] = list(value) if not isinstance(value, str | bool) else value
    return out


# --- generation -----------------------------------------------------------------------------------


@dataclass
class Sampling:
    k: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    seed: int = 0
    batch_size: int = 256  # prompts x samples decoded together


def encode_prompts(tokenizer, prompts: list[Prompt]) -> list[list[int]]:
    """Each prompt's chat-template ids, as verl's agent loop builds them."""
    return [
        list(
            tokenizer.apply_chat_template(
                p.messages, add_generation_prompt=True, tokenize=True, return_dict=False
            )
        )
        for p in prompts
    ]


@contextlib.contextmanager
def rollout_server(
    rollout: str,
    cfg,
    model_dir: Path,
    prompt_length: int,
    response_length: int,
    seed: int = 0,
    log=None,
    verbose: bool = False,
):
    """The server `rollout` names, started for `model_dir`, stopped on exit. Either has `generate(
    prompt_ids, sampling_params, request_id)` (verl's server-handle call), `eos_ids` and `settings`."""
    say = log or (lambda message: print(message, file=sys.stderr, flush=True))
    if rollout == "hf":
        say("generating with rlvr's hf rollout server (Hugging Face model, in this process)")
        yield load_server(model_dir, prompt_length, response_length, seed)[1]
        return
    from rlvr_launch.pipelines.vllm_generation import VLLMServer

    say("starting verl's vLLM rollout server (a standalone replica on a private Ray)")
    with VLLMServer(cfg, model_dir, prompt_length, response_length, seed, say, verbose) as server:
        say(
            f"generating with verl's vLLM rollout server ({len(server.handles)} replica(s), started in {server.start_s:.0f} s)"
        )
        yield server


def request_seed(seed: int, prompt_index: int, sample_index: int) -> int:
    """A per-request sampling seed (vLLM's SamplingParams.seed): sampled responses that do not depend on
    how the server batched them. The hf server ignores it (one seeded generator per server)."""
    return (seed * 1_000_003 + prompt_index * 1_009 + sample_index) % (2**31 - 1)


def generate(server, tokenizer, prompts: list[Prompt], sampling: Sampling, tags=None) -> list[Response]:
    """`sampling.k` responses per prompt from `server` (greedy when temperature is 0)."""
    from rlvr_verifiers import verl_bridge

    encoded = encode_prompts(tokenizer, prompts)
    params = {"temperature": sampling.temperature, "top_p": sampling.top_p, "max_tokens": sampling.max_tokens}
    jobs = [(p, ids, s) for p, ids in zip(prompts, encoded, strict=True) for s in range(sampling.k)]
    keep = verl_bridge.special_tag_ids(tokenizer, tags)

    def request(p, s) -> dict:
        if sampling.temperature > 0:
            return {**params, "seed": request_seed(sampling.seed, p.index, s)}
        return dict(params)

    async def run_chunk(chunk):
        return await asyncio.gather(
            *[server.generate(ids, request(p, s), f"{p.index}-{s}") for p, ids, s in chunk]
        )

    responses: list[Response] = []
    for start in range(0, len(jobs), max(1, sampling.batch_size)):
        chunk = jobs[start : start + sampling.batch_size]
        outputs = asyncio.run(run_chunk(chunk))
        for (prompt, _, s), out in zip(chunk, outputs, strict=True):
            responses.append(_response(prompt, s, list(out.token_ids), tokenizer, keep, server.eos_ids))
    return responses


def verify(responses: list[Response], extra: dict | None = None) -> None:
    """Score every response in place with the verifier its row routes to (never silently skipped).

    The path `rlvr score` takes without Ray (score._verify_batch_safely): the verifiers' own bounds apply
    (math's symbolic checks in killable worker processes, code in its sandbox), and a verifier that
    raises gives each of its items a counted `sandbox_error` instead of ending the run."""
    from rlvr_launch.scoring.score import _verify_batch_safely
    from rlvr_verifiers import registry, verl_bridge
    from rlvr_verifiers.base import Item

    by_verifier: dict[str, list[tuple[Response, Item]]] = {}
    for r in responses:
        item = verl_bridge.make_item(r.prompt.verifier, r.text, r.prompt.ground_truth, dict(extra or {}))
        if isinstance(item, Item):
            by_verifier.setdefault(r.prompt.verifier, []).append((r, item))
        else:
            r.score, r.status, r.detail = item.score, item.status, item.detail
    for name, pairs in by_verifier.items():
        verdicts = _verify_batch_safely(registry.get(name), name, [item for _, item in pairs])
        for (r, _), v in zip(pairs, verdicts, strict=True):
            r.score, r.status, r.detail = float(v.score), v.status, v.detail


@dataclass
class TaskRun:
    model_dir: Path
    cfg: Any
    rollout: str  # hf | vllm: which server generated
    responses: list[list[Response]]  # one list per Sampling given, in that order
    generation: dict  # rollout, server start, and per sampling: seconds, response tokens, tokens/s


def run_task(
    model: str,
    task: str,
    split: str,
    samplings: list[Sampling],
    overrides: list[str] | None = None,
    limit: int | None = None,
    merged_dir: Path | None = None,
    rollout: str | None = None,
    log=None,
    verbose: bool = False,
) -> TaskRun:
    """Resolve the model, load the task's prompts, then for each Sampling generate (one server for all)
    and verify. `rollout`: hf | vllm, None for the platform's own."""
    from transformers import AutoTokenizer

    from rlvr_verifiers import reasoning

    model_dir = resolve_model(model, merged_dir)
    cfg = task_config(task, overrides, rollout)
    rollout = rollout or platform_rollout(cfg)
    prompts = load_prompts(cfg, split, limit)
    if not prompts:
        raise UserError(f"task {task!r} has no {split} prompts")
    extra = reasoning_extra(cfg)
    try:
        tags, _ = reasoning.settings(extra.get("reasoning_tags", list(reasoning.DEFAULT_TAGS)), False)
    except ValueError as e:
        raise UserError(f"task {task!r}: reward.reward_kwargs.rlvr.reasoning_tags: {e}") from None
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    prompt_length = max((len(ids) for ids in encode_prompts(tokenizer, prompts)), default=1)
    response_length = max(s.max_tokens for s in samplings)
    seed = samplings[0].seed
    results: list[list[Response]] = []
    stats: dict = {"rollout": rollout, "runs": []}
    started = time.monotonic()
    with rollout_server(
        rollout, cfg, model_dir, prompt_length, response_length, seed, log, verbose
    ) as server:
        stats["server_start_s"] = round(time.monotonic() - started, 2)
        for sampling in samplings:
            began = time.monotonic()
            responses = generate(server, tokenizer, prompts, sampling, tags)
            seconds = time.monotonic() - began
            tokens = sum(r.num_tokens for r in responses)
            stats["runs"].append(
                {
                    "k": sampling.k,
                    "temperature": sampling.temperature,
                    "responses": len(responses),
                    "seconds": round(seconds, 2),
                    "response_tokens": tokens,
                    "tokens_per_s": round(tokens / seconds, 1) if seconds > 0 else None,
                }
            )
            results.append(responses)
    for responses in results:
        verify(responses, extra)
    return TaskRun(model_dir, cfg, rollout, results, stats)


def generation_line(stats: dict) -> str:
    """One line on what generated and how fast: `vllm: server start 41 s; greedy 20 responses ...`."""
    parts = [f"{stats['rollout']}: server start {stats.get('server_start_s', 0):.0f} s"]
    for run in stats["runs"]:
        mode = "greedy" if run["temperature"] <= 0 else f"K={run['k']} sampled"
        rate = f", {run['tokens_per_s']:.0f} tok/s" if run["tokens_per_s"] else ""
        parts.append(
            f"{mode}: {run['responses']} responses, {run['response_tokens']} tokens in {run['seconds']:.1f} s{rate}"
        )
    return "; ".join(parts)


def response_record(r: Response, extra: dict) -> dict:
    """A response as one line of the `rlvr score` input format, with its verdict and provenance."""
    return {
        "response": r.text,
        "ground_truth": r.prompt.ground_truth,
        "extra": extra,
        "verifier": r.prompt.verifier,
        "prompt_id": r.prompt.index,
        "sample_index": r.sample_index,
        "num_tokens": r.num_tokens,
        "verdict": {"score": r.score, "status": r.status, "detail": r.detail},
    }


def default_max_tokens(cfg) -> int:
    return int(cfg.data.max_response_length)


def scratch_dir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))


# --- thinking modes and the thinking budget ------------------------------------------------------


class _ServerClient:
    """What verl's LLM server client does for the agent loop: forward each request to the server, whose
    rollout.response_length caps a request that names no max_tokens."""

    def __init__(self, server, response_length: int):
        self.server, self.response_length = server, response_length

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        params = dict(sampling_params)
        params.setdefault("max_tokens", self.response_length)
        return await self.server.generate(prompt_ids, params, request_id)


def load_server(model_dir: Path, prompt_length: int, response_length: int, seed: int = 0):
    """(tokenizer, HFServer) for `model_dir`: the hf rollout backend's server, in this process."""
    from transformers import AutoTokenizer

    from rlvr_cluster.hf_rollout import HFServer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    config = SimpleNamespace(prompt_length=prompt_length, response_length=response_length, seed=seed)
    return tokenizer, HFServer(config, {"local_path": str(model_dir), "tokenizer": tokenizer}, 0, 0)


def prompt_length_of(tokenizer, prompts: list[Prompt]) -> int:
    """The longest chat prompt of `prompts` in either thinking mode (non-thinking adds the empty block)."""
    longest = 1
    for p in prompts:
        for thinking in (True, False):
            ids = tokenizer.apply_chat_template(
                p.messages,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
                enable_thinking=thinking,
            )
            longest = max(longest, len(ids))
    return longest


def generate_with_budget(
    tokenizer,
    server,
    prompts: list[Prompt],
    budget: int | None,
    enable_thinking: bool,
    response_length: int,
    sampling: Sampling,
    tags=None,
) -> list[Response]:
    """One response per prompt and sample through rlvr's `thinking_budget` agent loop (the loop RL
    rollouts run), on `server` (hf or vLLM, see rollout_server): thinking mode (`enable_thinking`) with the reasoning capped at
    `budget` tokens, or non-thinking mode (the template's empty think block; no budget applies).
    Each Response's `extra` carries the loop's thinking_budget_hit / thinking_tokens / answer_tokens."""
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from rlvr_cluster.thinking_budget import ThinkingBudgetAgentLoop
    from rlvr_verifiers import verl_bridge

    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": server.settings.prompt_length,
                    "response_length": response_length,
                    "custom": {"thinking_budget": budget},
                }
            },
            "data": {"apply_chat_template_kwargs": {"enable_thinking": enable_thinking}},
        }
    )
    client = _ServerClient(server, response_length)
    params = {"temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": -1, "logprobs": False}
    keep = verl_bridge.special_tag_ids(tokenizer, tags)
    jobs = [(p, s) for p in prompts for s in range(sampling.k)]
    # the hf server holds the model; verl's vLLM server is a Ray actor, read from the model's config
    model_type = getattr(server, "model_type", None) or getattr(
        getattr(getattr(server, "model", None), "config", None), "model_type", None
    )

    async def run_chunk(chunk):
        loop = ThinkingBudgetAgentLoop(
            trainer_config=DictConfigWrap(config),
            server_manager=client,
            tokenizer=tokenizer,
            processor=None,
            dataset_cls=None,
            data_config=DictConfigWrap(config.data),
            hf_model_type=model_type,  # as verl's worker passes it (its Continuous Token builder choice)
        )
        if not enable_thinking:
            probe = await loop.ct_build_initial_tokens(list(chunk[0][0].messages))
            if not loop._prompt_closes_block(probe):
                raise UserError(
                    f"the chat template of {server.settings.model_path} has no non-thinking mode: enable_thinking=False does not prefill an empty "
                    "<think></think> block (Qwen3's convention); evaluate thinking mode only"
                )
        return await asyncio.gather(
            *[loop.run(dict(params), raw_prompt=list(p.messages), extra_info={}) for p, _ in chunk]
        )

    responses: list[Response] = []
    for start in range(0, len(jobs), max(1, sampling.batch_size)):
        chunk = jobs[start : start + sampling.batch_size]
        outputs = asyncio.run(run_chunk(chunk))
        for (prompt, s), out in zip(chunk, outputs, strict=True):
            fields_ = out.extra_fields
            extra = {k: int(fields_[k]) for k in ("thinking_budget_hit", "thinking_tokens", "answer_tokens")}
            responses.append(
                _response(prompt, s, list(out.response_ids), tokenizer, keep, server.eos_ids, extra)
            )
    return responses
