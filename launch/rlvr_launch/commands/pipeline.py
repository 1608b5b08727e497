"""`rlvr pipeline`: run a multi-stage pipeline (recipes/pipeline/NAME.yaml), resumably (rlvr_launch.pipelines.pipeline)."""

import argparse

from rlvr_launch.pipelines import pipeline

HELP = "run a multi-stage pipeline (recipes/pipeline/NAME.yaml), resumably"
ORDER = 90  # place in `rlvr --help`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pipeline.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return pipeline.run(args)
