"""Diagnosis: `rlvr diagnose` reads a run directory and names the patch for what it shows.

It reads run directories (runs.rundir, runs.rollout_metrics) and composes the patched recipe (recipes);
it never imports the trainer (runs.train).
"""
