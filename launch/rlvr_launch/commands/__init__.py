"""The `rlvr` subcommands: one module per command, named as the command (`rlvr eval` is commands/eval.py).

The CLI (rlvr_launch.cli) finds them by listing this package; it imports none of them by name. A command
module defines:

- ``HELP``: its one-line help; ``ORDER``: its place in `rlvr --help` (lowest first);
- ``add_arguments(parser)`` and ``run(args) -> int``, which call the module that does the work.

Modules are imported to build the parser, so neither they nor what they import at module level may import
torch, verl or ray: `rlvr score` on a slim verifier node must never import torch or verl. A new command is
a new module here.
"""
