"""`rlvr ls`: the recipes of every group with their one-line purpose."""

from __future__ import annotations

import argparse
import shutil
import textwrap


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("group", nargs="?", help="only this group (experiment, algo, model, task, platform)")


def run(args: argparse.Namespace) -> int:
    from rlvr_launch.errors import UserError
    from rlvr_launch.recipes import compose

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
            # Whole first sentences, wrapped under their name (never cut mid-sentence).
            print(
                textwrap.fill(
                    compose.describe(group, name),
                    width=max(60, shutil.get_terminal_size((110, 20)).columns - 1),
                    initial_indent=f"  {name.ljust(width)}  ",
                    subsequent_indent=" " * (width + 4),
                    break_on_hyphens=False,
                )
            )
        print()
    return 0
