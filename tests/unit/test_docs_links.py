"""The README stays short, and every relative link of the README and docs/ reaches a file (and heading)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens."""
    text = FENCE.sub("", page.read_text())
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text()))


def test_the_readme_is_under_200_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) < 200


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path):
    broken = []
    for target in links(page):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        missing_heading = anchor and resolved.suffix == ".md" and anchor not in anchors(resolved)
        if not resolved.exists() or missing_heading:
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


def test_every_docs_page_is_linked_from_the_readme():
    readme = set(links(ROOT / "README.md"))
    missing = [page.name for page in PAGES[1:] if f"docs/{page.name}" not in readme]
    assert not missing
