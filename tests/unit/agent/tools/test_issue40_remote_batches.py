"""The file tools' batch reads from a sandbox whose workspace is not on this host (issue 40 item
1): which files one batch brings over (their sizes together within FETCH_MAX_BYTES, at least one,
in the walk's order), and the `find` arguments of a walk."""

from __future__ import annotations

from devagent.agent.tools.remote_files import FETCH_MAX_BYTES, Entry, pruned, within_batch


def entry(rel: str, size: int) -> Entry:
    return Entry("f", "f", size, 0.0, rel)


def test_issue40_item1_a_batch_keeps_the_first_files_within_its_bytes() -> None:
    half = FETCH_MAX_BYTES // 2
    assert within_batch([entry("a", half), entry("b", half), entry("c", 1)]) == ["a", "b"]
    assert within_batch([entry("big", FETCH_MAX_BYTES * 2), entry("small", 1)]) == ["big"]
    assert within_batch([]) == []


def test_issue40_item1_a_walk_prunes_the_skipped_folders_and_lists_files_and_links() -> None:
    assert pruned(frozenset({".git", "node_modules"})) == [
        "-mindepth", "1", "(", "-type", "d", "(", "-name", ".git", "-o", "-name", "node_modules", ")",
        "-prune", ")", "-o", "(", "-type", "f", "-o", "-type", "l", ")",
    ]  # fmt: skip
    assert pruned(frozenset(), depth=1) == ["-mindepth", "1", "-maxdepth", "1", "-true"]
