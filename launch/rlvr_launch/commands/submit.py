"""`rlvr submit`: submit a recipe to a Ray cluster through the Jobs API (rlvr_launch.jobs.submit)."""

import argparse

from rlvr_launch.jobs import submit

HELP = "submit a recipe to a Ray cluster through the Jobs API"
ORDER = 100  # place in `rlvr --help`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    submit.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return submit.run(args)
