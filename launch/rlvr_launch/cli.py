"""The `rlvr` command: one entry point; its subcommands are the modules of rlvr_launch.commands.

Each subcommand module (see rlvr_launch/commands/__init__.py) exposes ``HELP``, ``ORDER``,
``add_arguments(parser)`` and ``run(args) -> int``. The CLI lists that package and imports every module in
it to build the parser; it names none of them, so adding a command touches no core module.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from types import ModuleType

from rlvr_launch import commands

# Re-exported: subcommand modules raise `rlvr_launch.cli.UserError`. It lives in its own module so
# `python -m rlvr_launch.cli` (a second copy of this module as __main__) still catches it.
from rlvr_launch.errors import UserError


def command_modules() -> dict[str, ModuleType]:
    """Subcommand name -> its module (the module of rlvr_launch.commands so named), in `rlvr --help` order."""
    found = {
        info.name: importlib.import_module(f"{commands.__name__}.{info.name}")
        for info in pkgutil.iter_modules(commands.__path__)
        if not info.name.startswith("_")
    }
    return dict(sorted(found.items(), key=lambda item: (item[1].ORDER, item[0])))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr", description="RL with verifiable rewards on verl.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in command_modules().items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except UserError as e:
        print(f"rlvr {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rlvr {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
