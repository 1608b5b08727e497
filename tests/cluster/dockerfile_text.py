"""The project's Dockerfile read as text (no Docker engine here): its instructions, global ARGs and the
commands its RUN lines execute. Shared by the tests that check the images."""

from __future__ import annotations

import shlex
from pathlib import Path

DOCKERFILE = Path(__file__).resolve().parents[2] / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out, pending = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or not stripped:
            continue
        pending += " " + stripped.rstrip("\\").strip()
        if stripped.endswith("\\"):
            continue
        keyword, _, rest = pending.strip().partition(" ")
        out.append((keyword.upper(), rest.strip()))
        pending = ""
    return out


def global_args() -> dict[str, str]:
    """The ARGs with a default declared before the first FROM."""
    args = {}
    for keyword, rest in instructions():
        if keyword == "FROM":
            break
        if keyword == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            args[name] = value
    return args


def installed(runs: list[str], installer: list[str]) -> list[str]:
    """The arguments (options dropped) of every `installer` command (e.g. ["pip", "install"]) in the RUN
    texts, commands split at `&&`, `||` and `;`."""
    found: list[str] = []
    for run in runs:
        segment: list[str] = []
        for word in [*shlex.split(run), "&&"]:
            if word not in ("&&", "||", ";"):
                segment.append(word)
                continue
            if segment[: len(installer)] == installer:
                found += [w for w in segment[len(installer) :] if not w.startswith("-")]
            segment = []
    return found
