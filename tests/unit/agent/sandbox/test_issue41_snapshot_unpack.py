"""Issue 41 item 1: a repository session's result on a worker is made from the stored snapshot
unpacked into a private folder without its top-level `.git` (which the model may have rewritten),
and nothing the "data" filter refuses (a link leaving the folder) lands there."""

from __future__ import annotations

import os
from pathlib import Path

from devagent.agent.sandbox import snapshot


def test_issue41_item1_unpack_leaves_out_the_top_level_git_and_links_that_leave(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".git" / "hooks").mkdir(parents=True)
    (work / ".git" / "config").write_text("[core]\n\tfsmonitor = evil\n")
    (work / "sub" / ".git").mkdir(parents=True)
    (work / "sub" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (work / "a.txt").write_text("kept\n")
    (work / ".gitignore").write_text("*.o\n")
    os.symlink("/etc/passwd", work / "out")
    os.symlink("a.txt", work / "in")
    into = tmp_path / "into"
    into.mkdir()
    snapshot.unpack(snapshot.pack(work), into, skip=(".git",))
    assert sorted(os.listdir(into)) == [".gitignore", "a.txt", "in", "sub"]
    assert (into / "a.txt").read_text() == "kept\n" and os.readlink(into / "in") == "a.txt"
    assert (into / "sub" / ".git" / "HEAD").is_file()  # only the workspace's own `.git` is left out
    whole = tmp_path / "whole"
    snapshot.restore(whole, snapshot.pack(work))  # a worker's restore keeps `.git`
    assert (whole / ".git" / "config").is_file() and not os.path.lexists(whole / "out")
