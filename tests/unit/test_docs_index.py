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


def _anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, no punctuation, spaces as hyphens."""
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")


def test_issue37_item10_readme_contents_lists_every_section_in_order() -> None:
    """The README's contents list names each of its sections, in order, by its anchor; choosing a
    model comes right after the Quick start, before the protocols, and holds no benchmark."""
    text = (ROOT / "README.md").read_text()
    titles = re.findall(r"^## (.+)$", text, flags=re.M)
    assert titles[0] == "Contents" and titles[1:3] == ["Quick start", "Choosing a model"], titles
    start = text.index("## Contents\n")
    contents = text[start : text.index("\n## ", start + 1)]
    listed = re.findall(r"^- \[(.+?)\]\(#([^)]+)\)", contents, flags=re.M)
    assert listed == [(t, _anchor(t)) for t in titles[1:]], listed
    model = text[text.index("## Choosing a model\n") :]
    model = model[: model.index("\n## ")]
    assert "bench/" not in model and "Measured" not in model
