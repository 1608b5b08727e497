"""`rlvr resolve [experiment=NAME] [overrides]`: print the composed verl config as YAML, validated."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", help="experiment=NAME, algo=NAME, or any key=value")
    parser.add_argument("--unresolved", action="store_true", help="keep ${...} interpolations as written")


def run(args: argparse.Namespace) -> int:
    from rlvr_launch.recipes import (
        compose,
        distillation,  # noqa: F401 - registers the `distillation` composition check
    )

    cfg = compose.compose(args.overrides)
    print(compose.to_yaml(cfg, resolve=not args.unresolved), end="")
    return 0
