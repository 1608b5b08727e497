"""`rlvr logs`: logs of a job on a Ray cluster (rlvr_launch.jobs.job_control)."""

import argparse

from rlvr_launch.jobs import job_control

HELP = "logs of a job on a Ray cluster"
ORDER = 120  # place in `rlvr --help`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    job_control.add_logs_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return job_control.run_logs(args)
