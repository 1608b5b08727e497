"""rlvr_launch: the `rlvr` command line, recipe composition, local runs, job submission, pipelines."""
