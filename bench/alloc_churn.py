"""What the CPU workers' allocator costs on a training step's allocation pattern: glibc's malloc (rlvr's
default), jemalloc with its defaults (`rlvr.cpu_allocator: jemalloc`), and jemalloc that never returns freed
pages to the kernel (`MALLOC_CONF=dirty_decay_ms:-1`: no faults, but a real run's memory grew until it was
killed; not offered).

    python bench/alloc_churn.py [--tokens 2560] [--vocab 49152] [--hidden 576] [--micro-batches 4] [--rounds 3]

Each variant is a fresh process (the allocator is chosen at exec: LD_PRELOAD, MALLOC_CONF) running the same
work, one torch thread: per micro-batch, hidden states times an output layer (tokens x vocab fp32 logits,
~500 MB at the defaults, SmolLM2-135M's 16 x 160 micro-batch), log-softmax over them, then freed. That is
what an actor update allocates and frees over and over; how many pages the kernel must fault in afresh
for it is what separates the allocators. Printed per variant: minor page faults, system and wall seconds,
and the wall ratio to glibc's. Needs Debian's libjemalloc2 (`apt-get install libjemalloc2`) for the
jemalloc rows; without it only glibc's row is printed, with a note.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from rlvr_cluster.env import JEMALLOC_INSTALL, find_jemalloc

NO_DECAY = "dirty_decay_ms:-1,muzzy_decay_ms:-1"

WORK = r"""
import json, resource, sys, time, torch
tokens, vocab, hidden, micro, rounds = (int(a) for a in sys.argv[1:6])
torch.set_num_threads(1)
torch.manual_seed(0)
w = torch.randn(hidden, vocab)
before, t = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
for _ in range(rounds):
    for _ in range(micro):
        h = torch.randn(tokens, hidden)
        logits = h @ w
        logp = torch.log_softmax(logits, -1)
        del h, logits, logp
after = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"faults": after.ru_minflt - before.ru_minflt, "sys_s": after.ru_stime - before.ru_stime,
                  "wall_s": time.perf_counter() - t}))
"""


def variants(jemalloc: str | None) -> list[tuple[str, dict[str, str]]]:
    out = [("glibc malloc", {})]
    if jemalloc:
        out.append(("jemalloc, its defaults (rlvr.cpu_allocator=jemalloc)", {"LD_PRELOAD": jemalloc}))
        out.append((f"jemalloc, no decay ({NO_DECAY})", {"LD_PRELOAD": jemalloc, "MALLOC_CONF": NO_DECAY}))
    return out


def measure(env: dict[str, str], args: argparse.Namespace) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MALLOC_CONF")}
    sizes = [args.tokens, args.vocab, args.hidden, args.micro_batches, args.rounds]
    out = subprocess.run(
        [sys.executable, "-c", WORK, *map(str, sizes)],
        env={**base, "OMP_NUM_THREADS": "1", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=2560, help="tokens per micro-batch (16 x 160)")
    parser.add_argument("--vocab", type=int, default=49152, help="output layer width (SmolLM2's vocabulary)")
    parser.add_argument("--hidden", type=int, default=576, help="hidden size (SmolLM2-135M's)")
    parser.add_argument("--micro-batches", type=int, default=4, help="micro-batches per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (updates) measured")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args()
    jemalloc = find_jemalloc()
    mb = args.tokens * args.vocab * 4 / 2**20
    print(
        f"{args.rounds} x {args.micro_batches} micro-batches of {args.tokens} x {args.vocab} fp32 logits ({mb:.0f} MiB each)"
    )
    rows = []
    for name, env in variants(jemalloc):
        rows.append({"allocator": name, **measure(env, args)})
    glibc = rows[0]["wall_s"]
    print(f"{'allocator':<58} {'page faults':>12} {'system s':>9} {'wall s':>8} {'/ glibc':>8}")
    for row in rows:
        print(
            f"{row['allocator']:<58} {row['faults']:>12,} {row['sys_s']:>9.2f} {row['wall_s']:>8.2f} "
            f"{row['wall_s'] / glibc:>8.2f}"
        )
    if not jemalloc:
        print(f"jemalloc is not installed here ({JEMALLOC_INSTALL}): only glibc's row")
    if args.out:
        args.out.write_text(json.dumps({"sizes": vars(args) | {"out": None}, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
