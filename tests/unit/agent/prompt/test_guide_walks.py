"""The nested guides' walk remembered per root (prompt/guides.py): a new conversation in a tree
walked before whose folders have not changed takes the last walk's result; any name added, removed
or swapped in a folder it listed, or a folder changed just before the walk, means a new walk; a
root's first walk is not kept (a clone per conversation is never walked twice)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.prompt import guides
from devagent.agent.tools.workspace import Workspace

NAME = "AGENTS.md"


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """The roots the real walk lists from now on (a remembered result lists none); nothing
    remembered from other tests."""
    listed: list[Path] = []
    real = guides.walk_files

    def counted(fd: int, base: Path, **kw: Any) -> Any:
        listed.append(base)
        return real(fd, base, **kw)

    monkeypatch.setattr(guides, "walk_files", counted)
    monkeypatch.setattr(guides, "_walks", type(guides._walks)())
    monkeypatch.setattr(guides, "_seen", type(guides._seen)())
    yield listed


def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walks happen a minute from now: what the test made before is not racily new."""
    monkeypatch.setattr(guides, "_now_ns", lambda: time.time_ns() + 60 * 10**9)


def aged(root: Path) -> None:
    """Every folder's times set an hour back, so a later change of one shows in its times
    whatever the clock's grain (os.utime cannot set the change time: that one is now)."""
    old = time.time_ns() - 3600 * 10**9
    for folder, _, _ in os.walk(root):
        os.utime(folder, ns=(old, old))


def tree(root: Path) -> Workspace:
    (root / "a").mkdir(parents=True)
    (root / "a" / NAME).write_text("A rule.\n")
    (root / "b" / "c").mkdir(parents=True)
    (root / "b" / "c" / "x.py").write_text("x = 1\n")
    (root / NAME).write_text("The root's own: not nested.\n")
    aged(root)
    return Workspace([root])


def found(ws: Workspace, max_files: int = guides.WALK_MAX_FILES) -> list[str]:
    paths, _ = guides._walk(ws, NAME, max_files)
    return [p.relative_to(ws.primary).as_posix() for p in paths]


@pytest.fixture
def kept(tmp_path: Path, walks: list[Path], monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """`tree`, walked as a first conversation and a second one would: its walk kept from then
    (`walks` emptied)."""
    later(monkeypatch)
    ws = tree(tmp_path / "ws")
    assert found(ws) == found(ws) and len(walks) == 2
    walks.clear()
    return ws


def test_issue39_an_unchanged_tree_is_not_walked_again(kept: Workspace, walks: list[Path]) -> None:
    ws = kept
    assert found(ws) == ["a/AGENTS.md"] and found(ws) == ["a/AGENTS.md"] and walks == []
    text = guides.render_nested(guides.nested_guides(ws, NAME))  # the text read afresh
    (ws.primary / "a" / NAME).write_text("A new rule.\n")  # in place: no name changes
    assert "A new rule." in guides.render_nested(guides.nested_guides(ws, NAME)) and "A rule." in text
    assert walks == []


def test_issue39_a_guide_added_or_removed_in_a_listed_folder_is_seen(
    kept: Workspace, walks: list[Path]
) -> None:
    ws = kept
    (ws.primary / "b" / "c" / NAME).write_text("Deep rule.\n")
    assert found(ws) == ["a/AGENTS.md", "b/c/AGENTS.md"] and len(walks) == 1
    aged(ws.primary)
    assert found(ws) == ["a/AGENTS.md", "b/c/AGENTS.md"] and len(walks) == 2
    assert found(ws) == ["a/AGENTS.md", "b/c/AGENTS.md"] and len(walks) == 2  # kept again
    (ws.primary / "a" / NAME).unlink()
    assert found(ws) == ["b/c/AGENTS.md"] and len(walks) == 3


def test_issue39_a_folder_swapped_for_a_link_is_walked_again_and_not_followed(
    kept: Workspace, walks: list[Path], tmp_path: Path
) -> None:
    ws = kept
    outside = tmp_path / "outside" / "deep"
    outside.mkdir(parents=True)
    (outside / NAME).write_text("Not the project's.\n")
    os.rename(ws.primary / "a", tmp_path / "moved")
    os.symlink(tmp_path / "outside", ws.primary / "a")
    assert found(ws) == [] and len(walks) == 1


def test_issue39_a_folder_changed_just_before_the_walk_is_not_trusted(
    tmp_path: Path, walks: list[Path]
) -> None:
    ws = tree(tmp_path / "ws")
    (ws.primary / "b" / "new.txt").write_text("now\n")  # b changed a moment ago
    assert found(ws) == found(ws) == found(ws) == ["a/AGENTS.md"]
    assert len(walks) == 3  # a change within its timestamps' grain could follow unseen


def test_issue39_a_walk_cut_at_its_cap_is_remembered_as_cut(
    tmp_path: Path, walks: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    later(monkeypatch)
    ws = tree(tmp_path / "ws")
    assert guides.nested_guides_within(ws, NAME, 2) is None
    assert guides.nested_guides_within(ws, NAME, 2) is None and len(walks) == 2
    assert guides.nested_guides_within(ws, NAME, 2) is None and len(walks) == 2
    assert [g.path for g in guides.nested_guides_within(ws, NAME, 10) or []] == ["a/AGENTS.md"]


def test_issue39_a_root_walked_once_keeps_nothing(
    tmp_path: Path, walks: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    later(monkeypatch)
    for i in range(3):  # a clone per conversation: each root new
        assert found(tree(tmp_path / f"clone-{i}")) == ["a/AGENTS.md"]
    assert len(walks) == 3 and len(guides._walks) == 0
