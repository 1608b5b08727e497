"""Runs: `rlvr train` on a local (or joined) Ray, and what a run leaves behind.

train (the run and its resume), rundir (the run directory: metrics, attempts, plots), rollout_metrics
(figures derived from the run's rollout dumps), ray_head (the private Ray head), placement (verifier
actors on a joined cluster's nodes), datacheck (the data a recipe reads), embedded_model (building the
embedded tiny models). Imports recipes, never pipelines, jobs, diagnosis or the commands.
"""
