"""The `rlvr` command: one entry point, one module per subcommand.

Each subcommand module exposes ``add_arguments(parser)`` and ``run(args) -> int`` (or
``add_<cmd>_arguments`` / ``run_<cmd>`` when one module serves several commands). Modules are imported
to build the parser, so they keep heavy imports (torch, verl, ray) inside ``run``: `rlvr score` on a
slim verifier node must never import torch or verl.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Re-exported: subcommand modules raise `rlvr_launch.cli.UserError`. It lives in its own module so
# `python -m rlvr_launch.cli` (a second copy of this module as __main__) still catches it.
from rlvr_launch.errors import UserError

# subcommand -> (module, one-line help). The module name says what the command is.
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("rlvr_launch.train", "run a recipe on a local single-node Ray (no argument: the CPU demo)"),
    "resolve": ("rlvr_launch.resolve", "print and validate the composed verl config"),
    "ls": ("rlvr_launch.listing", "list experiments, algorithms, models, tasks"),
    "score": ("rlvr_launch.score", "score a JSONL file through the verifier pool"),
    "data": ("rlvr_launch.data", "convert a dataset into verl's parquet format"),
    "eval": ("rlvr_launch.evaluate", "pass@1 / pass@k / maj@k of a model or checkpoint on a task"),
    "sample": ("rlvr_launch.sample", "rejection sampling: K responses per prompt, verified ones as SFT data"),
    "diagnose": ("rlvr_launch.diagnose", "read a run's metrics and say which patch addresses what it shows"),
    "pipeline": (
        "rlvr_launch.pipeline",
        "run a multi-stage pipeline (recipes/pipeline/NAME.yaml), resumably",
    ),
    "submit": ("rlvr_launch.submit", "submit a recipe to a Ray cluster through the Jobs API"),
    "status": ("rlvr_launch.jobs", "status of jobs on a Ray cluster"),
    "logs": ("rlvr_launch.jobs", "logs of a job on a Ray cluster"),
    "stop": ("rlvr_launch.jobs", "stop a job on a Ray cluster"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr", description="RL with verifiable rewards on verl.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:
                raise
            continue
        adder = getattr(module, f"add_{name}_arguments", None) or module.add_arguments
        adder(p)
        p.set_defaults(_module=module_name)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    module_name = getattr(args, "_module", None)
    if module_name is None:
        parser.error(f"`rlvr {args.command}` is not available in this installation")
    module = importlib.import_module(module_name)
    runner = getattr(module, f"run_{args.command}", None) or module.run
    try:
        return int(runner(args) or 0)
    except UserError as e:
        print(f"rlvr {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rlvr {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
