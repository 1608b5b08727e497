"""`rlvr train`: run a recipe on a local single-node Ray (no argument: the CPU demo) (rlvr_launch.runs.train)."""

import argparse

from rlvr_launch.runs import train

HELP = "run a recipe on a local single-node Ray (no argument: the CPU demo)"
ORDER = 10  # place in `rlvr --help`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    train.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return train.run(args)
