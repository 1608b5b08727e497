"""verl's actor update on the real model vs plain torch on the same shapes (the floor), one run.

    python bench/update_floor.py [--steps 4] [--threads 1] [--out bench/results/update_floor.json] [overrides ...]

What an rlvr training step of `experiment=smollm2_cpu_sums` spends in verl's actor update
(`timing_s/update_actor`: FSDP2 on one CPU rank, dynamic micro-batches of <= 2048 tokens, each padded to
its own longest sequence, entropy computed, one AdamW step), against the least plain PyTorch can do for
the same work: the same converted model folder (fp32, eager attention, the recipe's settings), the same
threads (the FSDP worker runs one: OMP_NUM_THREADS=1), and each recorded step's own samples - prompt
length from the dataset row the step drew, response length re-tokenised from the step's rollout dump
(checked against verl's `response_length/mean`) - micro-batched as verl does (token budget, balanced
partition). The floor's phases are timed apiece: forward, log-probs + entropy from the logits, the PPO
loss and backward, grad clip + AdamW; and once more with the output layer applied only where a response
token is predicted (as TRL does with `logits_to_keep`), to price verl's full-width logits. The first rlvr step (warm-up) and the first floor step are left out
of the medians. Both run on this machine in this one invocation; the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "smollm2_cpu_sums"
# full: verl's work in plain torch; response: the output layer only where a response token is predicted;
# fsdp2: "full" on the model wrapped as verl wraps it (FSDP2 per decoder layer and the root, one gloo rank)
SCOPES = ("full", "response", "fsdp2")
RUN_OVERRIDES = [
    f"experiment={EXPERIMENT}",
    "rollout=hf",  # the rollout does not change the update; hf needs no vLLM install
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
]


def _metric_rows(run_dir: Path) -> dict[int, dict]:
    rows = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        data = record.get("data", record)
        step = record.get("step", data.get("training/global_step"))
        if "timing_s/update_actor" in data:
            rows[int(step)] = data
    return rows


def run_rlvr(steps: int, work: Path, overrides: list[str]) -> Path:
    run_dir = work / "run"
    ray_root = tempfile.mkdtemp(prefix="rlvr-uf-", dir="/tmp")  # short: Ray's socket paths
    cmd = [
        sys.executable, "-m", "rlvr_launch.cli", "train", *RUN_OVERRIDES,
        f"trainer.total_training_steps={steps}", *overrides, "--run-dir", str(run_dir),
    ]  # fmt: skip
    print("rlvr:", " ".join(cmd[2:]), flush=True)
    try:
        out = subprocess.run(cmd, env=dict(os.environ, RLVR_RAY_TMPDIR_ROOT=ray_root, WANDB_MODE="disabled"))
    finally:
        shutil.rmtree(ray_root, ignore_errors=True)
    if out.returncode != 0:
        raise SystemExit(f"update_floor: the rlvr run failed (exit {out.returncode}); see its output above")
    return run_dir


def step_shapes(run_dir: Path, tokenizer) -> dict[int, list[tuple[int, int]]]:
    """Per step: (prompt tokens, response tokens) of each sample, from the dataset and the rollout dump."""
    import pyarrow.parquet as pq

    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    response_cap = int(cfg["data"]["max_response_length"])
    files = cfg["data"]["train_files"]
    files = files if isinstance(files, list) else [files]
    prompt_len: dict[str, int] = {}  # the dump's input text (special tokens skipped) -> prompt tokens
    for f in files:
        for messages in pq.read_table(f, columns=["prompt"]).column("prompt").to_pylist():
            text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            prompt_len[tokenizer.decode(ids, skip_special_tokens=True)] = len(ids)
    shapes: dict[int, list[tuple[int, int]]] = {}
    for dump in sorted((run_dir / "rollouts").glob("*.jsonl")):
        for line in dump.read_text().splitlines():
            row = json.loads(line)
            if row["input"] not in prompt_len:
                raise SystemExit(f"update_floor: a dumped prompt is not in {files}: {row['input']!r}")
            n = len(tokenizer.encode(row["output"], add_special_tokens=False))
            n = min(n + 1, response_cap)  # + the end-of-turn token the model stopped on (cut at the cap)
            shapes.setdefault(int(row["step"]), []).append((prompt_len[row["input"]], n))
    return shapes


def micro_batches(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """verl's dynamic batching: ceil(total / budget) micro-batches balanced by tokens (largest first)."""
    k = max(1, math.ceil(sum(lengths) / max_tokens))
    bins: list[list[int]] = [[] for _ in range(k)]
    loads = [0] * k
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        j = loads.index(min(loads))
        bins[j].append(i)
        loads[j] += lengths[i]
    return [b for b in bins if b]


def floor_step(model, optimizer, shapes, max_tokens, temperature, clip, vocab, generator, scope="full"):
    """One update on plain torch. scope "full": logits, log-probs and entropy at every position, as verl's
    padded path computes them; "response": the output layer and softmax only where a response token is
    predicted (TRL's `logits_to_keep`), the rest of the work the same."""
    import torch

    phases = dict.fromkeys(("forward", "log_probs_entropy", "loss_backward", "clip_adamw"), 0.0)
    lengths = [p + r for p, r in shapes]
    total_response = sum(r for _, r in shapes)
    for mb in micro_batches(lengths, max_tokens):
        width = max(lengths[i] for i in mb)
        ids = torch.randint(0, vocab, (len(mb), width), generator=generator)
        mask = torch.zeros(len(mb), width, dtype=torch.long)
        resp = torch.zeros(len(mb), width, dtype=torch.bool)
        for row, i in enumerate(mb):
            p, r = shapes[i]
            mask[row, : p + r] = 1
            resp[row, p : p + r] = True
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        start = 0 if scope == "full" else min(shapes[i][0] for i in mb) - 1
        t0 = time.perf_counter()
        if scope == "full":
            logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, :-1]
        else:
            hidden = model.model(input_ids=ids, attention_mask=mask, position_ids=positions).last_hidden_state
            logits = model.lm_head(hidden[:, start:-1])
        t1 = time.perf_counter()
        logits = logits.float() / temperature
        targets = ids[:, start + 1 :]
        logp_all = torch.log_softmax(logits, dim=-1)
        log_probs = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)  # computed as verl does when calculate_entropy
        t2 = time.perf_counter()
        keep = resp[:, start + 1 :]
        old = log_probs.detach()
        advantages = torch.randn(log_probs.shape, generator=generator)
        ratio = torch.exp(log_probs - old)
        pg = torch.maximum(-advantages * ratio, -advantages * ratio.clamp(1 - clip, 1 + clip))
        # seq-mean-token-mean, this micro-batch's share of the mini-batch
        per_seq = (pg * keep).sum(-1) / keep.sum(-1).clamp(min=1)
        loss = per_seq.sum() / len(shapes)
        loss.backward()
        _ = (entropy.detach() * keep).sum() / max(1, total_response)
        t3 = time.perf_counter()
        phases["forward"] += t1 - t0
        phases["log_probs_entropy"] += t2 - t1
        phases["loss_backward"] += t3 - t2
    t4 = time.perf_counter()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    phases["clip_adamw"] += time.perf_counter() - t4
    return phases


def fsdp2_copy(model_dir: str, optim: dict):
    """The model as verl's FSDP2 engine holds it on one CPU rank: each decoder layer and then the root
    `fully_shard`-ed (fp32 parameters and reductions), in a one-process gloo group."""
    import socket

    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if not dist.is_initialized():
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    model = _load_model(model_dir)
    policy = MixedPrecisionPolicy(
        param_dtype=torch.float32, reduce_dtype=torch.float32, cast_forward_inputs=True
    )
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=policy, reshard_after_forward=True)
    fully_shard(model, mp_policy=policy, reshard_after_forward=True)
    return model, _adamw(model, optim)


def _load_model(model_dir: str):
    """The converted folder as the recipe's actor holds it: fp32, eager attention, training mode."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    model.train()
    return model


def _adamw(model, optim: dict):
    import torch

    return torch.optim.AdamW(
        model.parameters(), lr=float(optim["lr"]), weight_decay=float(optim.get("weight_decay", 0.01))
    )


def run_floor(run_dir: Path, threads: int) -> dict:
    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(threads)
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    arr = cfg["actor_rollout_ref"]
    model_dir = arr["model"]["path"]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    shapes = step_shapes(run_dir, tokenizer)
    model = _load_model(model_dir)
    optim = arr["actor"]["optim"]
    optimizer = _adamw(model, optim)
    max_tokens = int(arr["actor"]["ppo_max_token_len_per_gpu"])
    temperature = float(arr["rollout"]["temperature"])
    clip = float(arr["actor"].get("clip_ratio", 0.2))
    wrapped, wrapped_optimizer = fsdp2_copy(model_dir, optim)
    generator = torch.Generator().manual_seed(0)
    steps = []
    for step in sorted(shapes):
        timed = {}
        for scope in SCOPES:
            m, o = (wrapped, wrapped_optimizer) if scope == "fsdp2" else (model, optimizer)
            started = time.perf_counter()
            phases = floor_step(m, o, shapes[step], max_tokens, temperature, clip,
                                model.config.vocab_size, generator, "full" if scope == "fsdp2" else scope)  # fmt: skip
            timed[scope] = (time.perf_counter() - started, phases)
        lengths = [p + r for p, r in shapes[step]]
        mbs = micro_batches(lengths, max_tokens)
        steps.append(
            {
                "step": step,
                "seconds": timed["full"][0],
                "phases": timed["full"][1],
                "seconds_response_logits": timed["response"][0],
                "phases_response_logits": timed["response"][1],
                "seconds_fsdp2": timed["fsdp2"][0],
                "phases_fsdp2": timed["fsdp2"][1],
                "samples": len(lengths),
                "tokens": sum(lengths),
                "padded_tokens": sum(len(mb) * max(lengths[i] for i in mb) for mb in mbs),
                "micro_batches": len(mbs),
                "response_mean": statistics.fmean(r for _, r in shapes[step]),
                "prompt_mean": statistics.fmean(p for p, _ in shapes[step]),
            }
        )
        print(f"floor step {step}: {steps[-1]['seconds']:.1f} s (response-only logits "
              f"{steps[-1]['seconds_response_logits']:.1f} s, FSDP2 {steps[-1]['seconds_fsdp2']:.1f} s), "
              f"{len(mbs)} micro-batches, "
              f"{steps[-1]['tokens']} tokens ({steps[-1]['padded_tokens']} padded)", flush=True)  # fmt: skip
    return {"threads": torch.get_num_threads(), "steps": steps}


def report(result: dict) -> None:
    rlvr = {int(k): v for k, v in result["rlvr_update_s"].items()}
    floor = {s["step"]: s for s in result["floor"]["steps"]}
    later = [s for s in sorted(rlvr) if s in floor and s > min(rlvr)]
    if not later:
        raise SystemExit("update_floor: needs at least 2 steps (the first is warm-up)")
    ours = statistics.median(rlvr[s] for s in later)
    base = statistics.median(floor[s]["seconds"] for s in later)
    print(f"\nload average (1 min) at start {result['load'][0]:.1f}, end {result['load'][1]:.1f}; "
          f"threads: FSDP worker 1, floor {result['floor']['threads']}")  # fmt: skip
    print(f"{'step':>4} {'response':>8} {'verl update s':>14} {'floor s':>8} {'ratio':>6}")
    for s in sorted(rlvr):
        if s in floor:
            print(f"{s:>4} {floor[s]['response_mean']:>8.1f} {rlvr[s]:>14.1f} {floor[s]['seconds']:>8.1f} "
                  f"{rlvr[s] / floor[s]['seconds']:>6.2f}")  # fmt: skip
    print(f"median over steps {later[0]}-{later[-1]}: verl update {ours:.1f} s, plain-torch floor {base:.1f} s, "
          f"ratio {ours / base:.2f}")  # fmt: skip
    variants = (
        ("", "seconds", "phases", None),
        ("response-only", "seconds_response_logits", "phases_response_logits",
         "floor with the output layer on response positions only: {v:.1f} s "
         "({r:.2f} of the full-width floor; verl update / it {o:.2f})"),
        ("FSDP2", "seconds_fsdp2", "phases_fsdp2",
         "floor with the model wrapped in FSDP2 as verl wraps it: {v:.1f} s ({r:.2f} of the floor; "
         "verl update / it {o:.2f})"),
    )  # fmt: skip
    for label, seconds, phases, headline in variants:
        total = statistics.median(floor[s][seconds] for s in later)
        if headline:
            print(headline.format(v=total, r=total / base, o=ours / total))
        for phase in ("forward", "log_probs_entropy", "loss_backward", "clip_adamw"):
            v = statistics.median(floor[s][phases][phase] for s in later)
            share = f"  ({v / base:.0%})" if not label else ""
            print(f"  {label or 'floor'} {phase:<18} {v:6.1f} s{share}")
    for name in ("prompt", "response"):
        check = [
            (s, result[f"verl_{name}_mean"].get(str(s)), floor[s][f"{name}_mean"]) for s in sorted(floor)
        ]
        print(f"{name} length, verl's metric / this bench's shapes: "
              + ", ".join(f"step {s} {a:.1f}/{b:.1f}" for s, a, b in check if a is not None))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=4, help="rlvr training steps (the first is warm-up)")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads of the floor (the FSDP worker: 1)"
    )
    parser.add_argument("--out", default="bench/results/update_floor.json")
    parser.add_argument("--report", default=None, help="only print the report of a recorded result")
    parser.add_argument("--keep", default=None, help="keep the rlvr run's folder here")
    parser.add_argument("--from-run", default=None, help="time the floor against this finished run directory")
    args, overrides = parser.parse_known_args()
    if args.report:
        report(json.loads(Path(args.report).read_text()))
        return
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="rlvr-update-floor-"))
    load0 = os.getloadavg()[0]
    run_dir = Path(args.from_run) if args.from_run else run_rlvr(args.steps, work, overrides)
    rows = _metric_rows(run_dir)
    floor = run_floor(run_dir, args.threads)
    result = {
        "experiment": EXPERIMENT,
        "overrides": [*RUN_OVERRIDES, *overrides],
        "rlvr_update_s": {str(s): r["timing_s/update_actor"] for s, r in rows.items()},
        "verl_response_mean": {str(s): r.get("response_length/mean") for s, r in rows.items()},
        "verl_prompt_mean": {str(s): r.get("prompt_length/mean") for s, r in rows.items()},
        "floor": floor,
        "load": [load0, os.getloadavg()[0]],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    report(result)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
