"""`rlvr sample`: rejection sampling: K responses per prompt, verified ones as SFT data (rlvr_launch.pipelines.sample)."""

import argparse

from rlvr_launch.pipelines import sample

HELP = "rejection sampling: K responses per prompt, verified ones as SFT data"
ORDER = 70  # place in `rlvr --help`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sample.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return sample.run(args)
