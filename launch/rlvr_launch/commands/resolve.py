"""`rlvr resolve`: print and validate the composed verl config (rlvr_launch.recipes.resolve)."""

import argparse

from rlvr_launch.recipes import resolve

HELP = "print and validate the composed verl config"
ORDER = 20  # place in `rlvr --help`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    resolve.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return resolve.run(args)
