"""Recipes: composing a recipe into the verl config it runs, and checking it before anything starts.

compose (Hydra over verl's trainer config, validated as verl validates it), recipe_checks (the checks
of recipe combinations, and the registry of composition checks that modules building on composition add),
distillation (verl's `distillation.*` keys, a registered check), embedded_models (the specs and
cache folders of the `embedded://` models a recipe names), and the `rlvr resolve` / `rlvr ls` commands.
Imports only rlvr_launch.errors, rlvr_cluster and rlvr_verifiers (and itself).
"""
