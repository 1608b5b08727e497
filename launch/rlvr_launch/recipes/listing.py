"""`rlvr ls`: the recipes of every group, the pipelines and the verifiers, each with its one-line purpose."""

from __future__ import annotations

import argparse
import shutil
import sys
import textwrap

# Listings beside the recipe groups: name -> how a user selects an entry.
PIPELINES, VERIFIERS = "pipeline", "verifier"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "group",
        nargs="?",
        help="only this group (experiment, algo, model, task, platform, rollout, pipeline, verifier; "
        "plurals work too)",
    )


def _verifier_purpose(name: str) -> str:
    """A verifier's module docstring's first sentence; a rubric's weighted components."""
    from rlvr_launch.recipes import compose
    from rlvr_verifiers import registry

    verifier = registry.get(name)
    components = getattr(verifier, "components", None)
    if components:
        parts = [f"{c.weight:g} x {c.verifier}" + (f"/{c.metric}" if c.metric else "") for c in components]
        return "rubric: " + " + ".join(parts)
    doc = (sys.modules[type(verifier).__module__].__doc__ or type(verifier).__doc__ or "").strip()
    sentence = compose.first_sentence(" ".join(doc.split()))
    question = sentence.find("? ")  # a docstring that opens with its question ("... equal to the reference?")
    return sentence[: question + 1] if question >= 0 else sentence


def _entries(group: str) -> tuple[str, list[tuple[str, str]]]:
    """(heading, [(name, purpose)]) of one listing."""
    from rlvr_launch.recipes import compose

    if group == VERIFIERS:
        from rlvr_verifiers import registry

        names = registry.names()
        return "verifiers (rlvr score --verifier NAME; a task's verifier):", [
            (n, _verifier_purpose(n)) for n in names
        ]
    heading = "pipelines (rlvr pipeline NAME):" if group == PIPELINES else f"{group}s ({group}=NAME):"
    return heading, [(n, compose.describe(group, n)) for n in compose.group_entries(group)]


def run(args: argparse.Namespace) -> int:
    from rlvr_launch.errors import UserError
    from rlvr_launch.recipes import compose

    groups = (*compose.GROUPS, PIPELINES, VERIFIERS)
    if args.group:
        group = args.group[:-1] if args.group.endswith("s") and args.group[:-1] in groups else args.group
        if group not in groups:
            raise UserError(f"unknown group {args.group!r}; groups: {', '.join(groups)}")
        groups = (group,)
    for group in groups:
        heading, entries = _entries(group)
        print(heading)
        width = max((len(n) for n, _ in entries), default=0)
        for name, purpose in entries:
            # Whole first sentences, wrapped under their name (never cut mid-sentence).
            print(
                textwrap.fill(
                    purpose,
                    width=max(60, shutil.get_terminal_size((110, 20)).columns - 1),
                    initial_indent=f"  {name.ljust(width)}  ",
                    subsequent_indent=" " * (width + 4),
                    break_on_hyphens=False,
                )
            )
        print()
    return 0
