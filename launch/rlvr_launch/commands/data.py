"""`rlvr data`: convert a dataset into verl's parquet format (rlvr_launch.data.convert)."""

import argparse

from rlvr_launch.data import convert

HELP = "convert a dataset into verl's parquet format"
ORDER = 50  # place in `rlvr --help`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    convert.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return convert.run(args)
