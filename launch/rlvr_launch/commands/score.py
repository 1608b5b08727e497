"""`rlvr score`: score a JSONL file through the verifier pool (rlvr_launch.scoring.score)."""

import argparse

from rlvr_launch.scoring import score

HELP = "score a JSONL file through the verifier pool"
ORDER = 40  # place in `rlvr --help`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    score.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return score.run(args)
