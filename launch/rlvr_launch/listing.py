"""`rlvr ls`: the recipes of every group with their one-line purpose."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("group", nargs="?", help="only this group (experiment, algo, model, task, platform)")


def run(args: argparse.Namespace) -> int:
    from rlvr_launch import compose
    from rlvr_launch.cli import UserError

    groups = compose.GROUPS
    if args.group:
        if args.group not in groups:
            raise UserError(f"unknown recipe group {args.group!r}; groups: {', '.join(groups)}")
        groups = (args.group,)
    for group in groups:
        names = compose.group_entries(group)
        print(f"{group}s ({group}=NAME):")
        width = max((len(n) for n in names), default=0)
        for name in names:
            print(f"  {name.ljust(width)}  {compose.describe(group, name)}")
        print()
    return 0
