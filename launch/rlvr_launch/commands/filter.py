"""`rlvr filter`: difficulty filtering: keep the prompts a model solves sometimes (rlvr_launch.pipelines.filter)."""

import argparse

from rlvr_launch.pipelines import filter as difficulty_filter

HELP = "difficulty filtering: keep the prompts whose pass rate over K samples lies in a band"
ORDER = 75  # place in `rlvr --help`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    difficulty_filter.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return difficulty_filter.run(args)
