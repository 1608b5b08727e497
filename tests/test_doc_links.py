"""Every relative link in the README, the guides in docs/ and bench/README.md names a file that exists,
and every anchor (`file.md#heading`) a heading of that file (GitHub's slugs)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "bench" / "README.md"]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(
        r"```.*?```", "", path.read_text(), flags=re.S
    )  # a `# comment` in a code block is no heading
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


def broken_links(paths: list[Path]) -> list[str]:
    broken = []
    for path in paths:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                broken.append(
                    f"{path.relative_to(ROOT) if ROOT in path.parents else path}: {target} (no such file)"
                )
            elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
                broken.append(
                    f"{path.relative_to(ROOT) if ROOT in path.parents else path}: {target} (no such heading)"
                )
    return broken


def test_every_relative_link_and_anchor_in_the_docs_resolves():
    paths = documents()
    assert all(p.is_file() for p in paths) and len(paths) > 3
    assert not broken_links(paths), "\n".join(broken_links(paths))


def test_a_missing_file_or_heading_is_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# A guide\n\n## Ray clusters and Kubernetes\n")
    (tmp_path / "README.md").write_text(
        "[ok](docs/guide.md) [ok](docs/guide.md#ray-clusters-and-kubernetes) [web](https://example.com)\n"
        "[gone](docs/old.md) [bad anchor](docs/guide.md#measured) ![img](bench/results/x.png)\n"
        "```\n[in code](nowhere.md)\n```\n"
    )
    found = broken_links([tmp_path / "README.md"])
    assert [f.split(": ", 1)[1] for f in found] == [
        "docs/old.md (no such file)",
        "docs/guide.md#measured (no such heading)",
        "bench/results/x.png (no such file)",
    ]
