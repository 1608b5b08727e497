"""rlvr_launch: the `rlvr` command line, recipe composition, local runs, job submission, pipelines.

One subpackage per concern; dependencies point one way, top to bottom, and never back up:

    cli -> commands                     the `rlvr` entry point; one module per subcommand, found by listing
      -> jobs                           submit, status/logs/stop, the Ray job drivers
      -> pipelines                      pipeline runner, stage kinds, generation, eval, sample
      -> diagnosis                      `rlvr diagnose` (reads run directories; never the trainer)
      -> runs                           `rlvr train`, run directories, the private Ray head, the embedded model
      -> recipes, data, scoring         composition and its checks; dataset converters; `rlvr score`
      -> errors                         UserError
      -> rlvr_cluster -> rlvr_verifiers

A package may import any package below it, never one above (jobs -> pipelines -> runs -> recipes; diagnosis
-> runs). Composition (recipes) never imports what builds on it: a module that needs a composition-time
check registers it with `recipes.recipe_checks.composition_check(NAME)`, and whoever composes configs that
need it imports that module (e.g. recipes.distillation, imported by `rlvr train`, `resolve`,
`submit`, the job driver, `diagnose` and the `distill` stage kind). Stage kinds register with
`pipelines.stages.stage_kind(NAME)`; commands are the modules of rlvr_launch.commands. No module imports
another that imports it back, even inside a function: tests/test_import_cycles.py reads every import.
"""
