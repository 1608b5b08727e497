"""`rlvr eval`: pass@1 / pass@k / maj@k of a model or checkpoint on a task (rlvr_launch.pipelines.evaluate)."""

import argparse

from rlvr_launch.pipelines import evaluate

HELP = "pass@1 / pass@k / maj@k of a model or checkpoint on a task"
ORDER = 60  # place in `rlvr --help`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    evaluate.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return evaluate.run(args)
