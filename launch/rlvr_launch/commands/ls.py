"""`rlvr ls`: list experiments, algorithms, models, tasks (rlvr_launch.recipes.listing)."""

import argparse

from rlvr_launch.recipes import listing

HELP = "list experiments, algorithms, models, tasks"
ORDER = 30  # place in `rlvr --help`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    listing.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return listing.run(args)
