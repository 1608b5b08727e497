"""`rlvr diagnose`: read a run's metrics and say which patch addresses what it shows (rlvr_launch.diagnosis.diagnose)."""

import argparse

from rlvr_launch.diagnosis import diagnose

HELP = "read a run's metrics and say which patch addresses what it shows"
ORDER = 80  # place in `rlvr --help`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    diagnose.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return diagnose.run(args)
