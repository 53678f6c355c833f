"""The documentation holds together: every page is in the index, and every relative link of the
README and of the pages leads to a file that exists (issue 28 item 11)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _relative_links(page: Path) -> list[str]:
    links = [m.group(1).split("#", 1)[0] for m in LINK.finditer(page.read_text())]
    return [link for link in links if link and "://" not in link and not link.startswith("mailto:")]


def test_issue28_item11_docs_index_lists_every_page() -> None:
    index = (DOCS / "README.md").read_text()
    pages = sorted(p.name for p in DOCS.glob("*.md") if p.name != "README.md")
    missing = [name for name in pages if f"]({name})" not in index]
    assert not missing, f"docs/README.md does not list {missing}"


def test_issue28_item11_readme_links_the_index_deploy_and_models() -> None:
    links = _relative_links(ROOT / "README.md")
    for page in ("docs/README.md", "docs/deploy.md", "docs/models.md"):
        assert page in links, page


def test_issue28_item11_relative_links_lead_to_files() -> None:
    broken = []
    for page in [ROOT / "README.md", *DOCS.glob("*.md")]:
        for link in _relative_links(page):
            if not (page.parent / link).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {link}")
    assert not broken, broken
