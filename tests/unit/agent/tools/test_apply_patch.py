"""apply_patch: the V4A format parsed and applied to files, all or none, with the errors the model
reads; and through the session: one question showing every file's diff, a checkpoint /restore
undoes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import (
    ConfirmationRequest,
    Decision,
    FileDiff,
    FileDiffs,
    NeedsInput,
    Resume,
    ToolCallStatus,
    TurnEnd,
    UserPrompt,
)
from devagent.agent.history import serial
from devagent.agent.tools import builtin_tools
from devagent.agent.tools.base import ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.patch_format import parse
from devagent.agent.wording import request_text
from tests.core_helpers import call, collect, text_of, updates
from tests.unit.agent.tools.test_tools import make_ctx, run

TOOL = builtin_tools()["apply_patch"]
APP = 'def greet():\n    print("Hi")\n\n\ndef other():\n    return 1\n'


def patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"]) + "\n"


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


async def applied(ws: Path, text: str, ctx: ToolContext | None = None) -> ToolResult:
    """The patch applied by a session that has read every file now in `ws` (unless `ctx` is given)."""
    return await TOOL.run({"input": text}, ctx or make_ctx(ws, seen=True))


async def refused(ws: Path, text: str, type_: str, ctx: ToolContext | None = None) -> str:
    """The patch is refused with this error type, and no file changed; its message. The session
    has read every file now in `ws` (unless `ctx` is given), so the refusal is the patch's own."""
    before = tree(ws)
    with pytest.raises(ToolFailure) as info:
        await TOOL.run({"input": text}, ctx or make_ctx(ws, seen=True))
    assert info.value.type == type_, info.value.message
    assert tree(ws) == before
    return info.value.message


@pytest.fixture
def app(ws: Path) -> Path:
    (ws / "app.py").write_text(APP)
    return ws


async def test_issue30_item1_add_delete_move_update_several_files_at_once(app: Path) -> None:
    (app / "obsolete.txt").write_text("old\n")
    text = patch(
        "*** Add File: docs/hello.txt",
        "+Hello world",
        "+",
        "*** Update File: app.py",
        "*** Move to: src/main.py",
        "@@ def greet():",
        '-    print("Hi")',
        '+    print("Hello, world!")',
        "*** Delete File: obsolete.txt",
    )
    details = await TOOL.confirmation({"input": text}, make_ctx(app, seen=True))
    assert isinstance(details, FileDiffs)
    assert [d.file_name for d in details.files] == ["hello.txt", "main.py", "obsolete.txt"]
    assert "--- a/app.py\n+++ b/src/main.py\n" in details.formatted_diff
    assert "--- a/obsolete.txt\n+++ /dev/null\n" in details.formatted_diff
    assert tree(app) == {"app.py": APP.encode(), "obsolete.txt": b"old\n"}  # asking wrote nothing
    res = await applied(app, text)
    assert tree(app) == {
        "docs/hello.txt": b"Hello world\n\n",
        "src/main.py": APP.replace('"Hi"', '"Hello, world!"').encode(),
    }
    assert res.text == (
        "Applied the patch to 3 files:\n"
        "- Created docs/hello.txt (2 lines).\n"
        "- Moved app.py to src/main.py (6 lines).\n"
        "- Deleted obsolete.txt."
    )
    assert isinstance(res.diff, FileDiffs) and len(res.diff.files) == 3
    assert res.data["files"][2] == {"action": "delete", "path": "obsolete.txt"}


async def test_issue30_item1_several_chunks_in_one_file_in_order(ws: Path) -> None:
    lines = [f"line {i}\n" for i in range(1, 21)]
    (ws / "n.txt").write_text("".join(lines))
    text = patch(
        "*** Update File: n.txt",
        "@@",
        " line 2",
        "-line 3",
        "+line three",
        " line 4",
        "@@ line 10",
        " line 11",
        "+line 11.5",
        " line 12",
        "@@",
        " line 19",
        "-line 20",
        "+line twenty",
        "*** End of File",
    )
    res = await applied(ws, text)
    want = "".join(lines).replace("line 3\n", "line three\n").replace("line 11\n", "line 11\nline 11.5\n")
    assert (ws / "n.txt").read_text() == want.replace("line 20\n", "line twenty\n")
    assert isinstance(res.diff, FileDiff) and res.text == (
        "Edited n.txt (21 lines).\n\nThe changed part of n.txt now reads (line number, a tab, the line):\n"
        "1\tline 1\n2\tline 2\n3\tline three\n4\tline 4\n5\tline 5\n6\tline 6\n...\n"
        "9\tline 9\n10\tline 10\n11\tline 11\n12\tline 11.5\n13\tline 12\n14\tline 13\n15\tline 14\n...\n"
        "18\tline 17\n19\tline 18\n20\tline 19\n21\tline twenty"
    )
    # The end-of-file marker: the lines must end the file (here "line 2" occurs elsewhere too).
    (ws / "e.txt").write_text("a\nb\na\n")
    await applied(ws, patch("*** Update File: e.txt", "@@", "-a", "+z", "*** End of File"))
    assert (ws / "e.txt").read_text() == "a\nb\nz\n"
    # A chunk of added lines only: after its '@@' line, or at the end without one.
    await applied(ws, patch("*** Update File: e.txt", "@@ b", "+after b", "@@", "+at the end"))
    assert (ws / "e.txt").read_text() == "a\nb\nafter b\nz\nat the end\n"


async def test_issue30_item1_unicode_crlf_and_missing_final_newline_kept(ws: Path) -> None:
    (ws / "u.py").write_bytes("# Größe\r\nname = 'naïve'\r\nend = 1".encode())
    await applied(
        ws, patch("*** Update File: u.py", "@@", " # Größe", "-name = 'naïve'", "+name = 'ñandú 🐍'")
    )
    assert (ws / "u.py").read_bytes() == "# Größe\r\nname = 'ñandú 🐍'\r\nend = 1".encode()
    await applied(ws, patch("*** Update File: u.py", "@@", "-end = 1", "+end = 2", "*** End of File"))
    assert (ws / "u.py").read_bytes().endswith(b"\r\nend = 2")
    await applied(ws, patch("*** Add File: 日本/説明.md", "+# 説明", "+本文"))
    assert (ws / "日本" / "説明.md").read_text() == "# 説明\n本文\n"


async def test_issue30_item1_tolerant_context_and_the_result_says_so(ws: Path) -> None:
    (ws / "t.py").write_text('class A:\n\tdef f(self):  \n\t\treturn "x"\n')
    res = await applied(
        ws,
        patch("*** Update File: t.py", "@@ class A:", " def f(self):", "-    return “x”", "+    return “y”"),
    )
    assert (ws / "t.py").read_text() == 'class A:\n\tdef f(self):  \n\t\treturn "y"\n'
    assert res.text == (
        "Edited t.py (3 lines). Not an exact match: the chunk tolerated trailing whitespace (the file's "
        "kept on unchanged lines); indentation (the file's is 4 columns deeper; the new lines were "
        "re-indented the same way); tabs against spaces (the file indents with tabs; the new lines do "
        "too); typographic quotes and dashes (read as ASCII, in the new lines too).\n\n"
        "The changed part of t.py now reads (line number, a tab, the line):\n"
        '1\tclass A:\n2\t\tdef f(self):  \n3\t\t\treturn "y"'
    )


async def test_issue30_item1_missing_context_is_refused_with_the_closest_lines(app: Path) -> None:
    text = patch("*** Update File: app.py", "@@ def greet():", '-    print("Hello")', '+    print("Bye")')
    assert await refused(app, text, "patch_context_not_found") == (
        "app.py: the lines of the chunk were not found after line 1, not even ignoring trailing "
        "whitespace, indentation, tabs against spaces and typographic quotes and dashes:\n"
        '    print("Hello")\n'
        "The closest in the file, line 2 (80% similar):\n"
        '     2\t    print("Hi")\n'
        "Read the file again and copy its current lines as the context (' ') and removed ('-') lines. "
        "Nothing was changed."
    )
    text = patch("*** Update File: app.py", "@@ def welcome():", '-    print("Hi")', '+    print("Bye")')
    message = await refused(app, text, "patch_context_not_found")
    assert message.startswith("app.py: the line '@@ def welcome():' of the chunk was not found")
    assert "     1\tdef greet():" in message and message.endswith(
        "After '@@' give a line of the file copied exactly (the class or function the change is in), "
        "or nothing. Nothing was changed."
    )


async def test_issue30_item1_all_or_none_a_bad_second_file_writes_nothing(app: Path) -> None:
    text = patch(
        "*** Add File: new.txt",
        "+fresh",
        "*** Update File: app.py",
        "@@",
        "-    return 2",
        "+    return 3",
    )
    message = await refused(app, text, "patch_context_not_found")
    assert message.startswith("app.py: the lines of the chunk were not found")
    # Ambiguous lines without an '@@' line to anchor them.
    message = await refused(app, patch("*** Update File: app.py", "@@", "-", "+# gap"), "patch_ambiguous")
    assert message == (
        "app.py: the lines of the chunk occur 2 times:\nline 3:\n     3\t\nline 4:\n     4\t\n"
        "Add an '@@' line naming the class or function they are in, or more context lines, to tell "
        "which is meant. Nothing was changed."
    )


async def test_issue30_item1_files_that_are_or_are_not_there(app: Path, outside: Path) -> None:
    assert await refused(app, patch("*** Update File: nope.py", "@@", "-a", "+b"), "not_found") == (
        "nope.py: cannot update it: it does not exist. Use '*** Add File: nope.py' to create it. "
        "Nothing was changed."
    )
    assert await refused(app, patch("*** Delete File: nope.py"), "not_found") == (
        "nope.py: cannot delete it: it does not exist. Nothing was changed."
    )
    assert await refused(app, patch("*** Add File: app.py", "+x"), "file_exists") == (
        "app.py: cannot add it: it exists. Use '*** Update File: app.py' to change it. Nothing was changed."
    )
    (app / "b.py").write_text("b\n")
    move = patch("*** Update File: app.py", "*** Move to: b.py", "@@", "-    return 1", "+    return 2")
    assert await refused(app, move, "file_exists") == (
        "app.py: cannot move it to b.py: that file exists. Delete it in the patch first, or choose "
        "another name. Nothing was changed."
    )
    escape = f"../{outside.name}/secret.txt"
    message = await refused(
        app, patch(f"*** Update File: {escape}", "@@", "-TOP SECRET", "+x"), "path_outside_workspace"
    )
    assert message == f"path {escape!r} is outside the workspace roots ({app}). Nothing was changed."
    await refused(
        app,
        patch("*** Add File: ok.txt", "+x", f"*** Add File: {outside}/new.txt", "+x"),
        "path_outside_workspace",
    )
    assert not (outside / "new.txt").exists()
    await refused(app, patch("*** Add File: .git/config", "+x"), "protected_path")
    message = await refused(
        app,
        patch("*** Update File: app.py", "@@", "-    return 1", "+    return 2", "*** Delete File: app.py"),
        "invalid_patch",
    )
    assert message.startswith("invalid patch: app.py is named twice;")


async def test_issue30_item3_a_patch_updates_only_files_read_as_they_are(app: Path) -> None:
    """A file the session never read, which the patch only adds lines to, is not updated, nor
    anything else the patch holds, and the user is not asked; once read it is (as it is when the
    patch's lines are found in the file: issue 37 item 8), and the patch's own write keeps it
    current; a change on disk after that refuses the next patch until the file is read again."""
    blind = patch("*** Add File: x.txt", "+x", "*** Update File: app.py", "+# appended")
    ctx = make_ctx(app)
    with pytest.raises(ToolFailure) as info:
        await TOOL.confirmation({"input": blind}, ctx)
    assert info.value.type == "file_not_read"
    message = await refused(app, blind, "file_not_read", ctx)
    assert message.startswith(
        "app.py has not been read in this session, so it was not changed: read it first"
    )
    assert not (app / "x.txt").exists()  # nor was the file the patch adds created
    await run("read_file", {"path": "app.py"}, ctx)
    text = patch(
        "*** Add File: x.txt", "+x", "*** Update File: app.py", "@@", "-    return 1", "+    return 2"
    )
    res = await applied(app, text, ctx)
    assert res.text.startswith("Applied the patch to 2 files:\n- Created x.txt (1 line).\n- Edited app.py")
    await applied(app, patch("*** Update File: app.py", "@@", "-    return 2", "+    return 3"), ctx)
    (app / "app.py").write_text(APP.replace("return 1", "return 4"))  # the user, a command
    again = patch("*** Update File: app.py", "@@", "-    return 4", "+    return 5")
    message = await refused(app, again, "file_changed", ctx)
    assert message.startswith("app.py changed since this session last read or wrote it")
    await run("read_file", {"path": "app.py"}, ctx)
    await applied(app, again, ctx)
    assert (app / "app.py").read_text() == APP.replace("return 1", "return 5")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "*** Update File: a\n@@\n-a\n+b\n*** End Patch",
            "invalid patch (patch line 1): the first line must be '*** Begin Patch'",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n-a\n+b",
            "invalid patch (patch line 5): the last line must be '*** End Patch'",
        ),
        (patch(), "invalid patch: it changes no file"),
        (
            patch("*** Update File: app.py"),
            "invalid patch (patch line 2): '*** Update File: app.py' has no changes",
        ),
        (
            patch("*** Update File: app.py", "@@", " def greet():"),
            "invalid patch (patch line 3): a chunk changes nothing: it has no '+' or '-' line",
        ),
        (
            patch("*** Add File: x.txt", "no plus"),
            "invalid patch (patch line 3): in an added file every line starts with '+'; got 'no plus'",
        ),
        (
            patch("*** Frobnicate: x"),
            "invalid patch (patch line 2): '*** Frobnicate: x' is not a file header; each file starts "
            "with '*** Add File: PATH', '*** Delete File: PATH' or '*** Update File: PATH'",
        ),
        (
            patch("*** Update File: app.py", "@@", "x def greet():"),
            "invalid patch (patch line 4): 'x def greet():': in an update every line starts with ' ' "
            "(context), '-' (removed) or '+' (added), or is an '@@' line",
        ),
    ],
)
async def test_issue30_item1_invalid_patches_name_the_line(app: Path, text: str, message: str) -> None:
    assert await refused(app, text, "invalid_patch") == message + ". Nothing was changed."


def test_issue30_item1_parser_is_forgiving_where_nothing_can_be_misread() -> None:
    text = (
        "<<'EOF'\n  *** Begin Patch  \n*** Update File: a.py\n def f():\n-    x\n+    y\n\n"
        "@@ -10,3 +10,3 @@ def g():\n@@ return\n-a\n+b\n *** End Patch\nEOF\n"
    )
    (op,) = parse(text)
    assert op.action == "update" and op.path == "a.py" and len(op.chunks) == 2
    first, second = op.chunks
    assert (first.anchors, first.old, first.new) == ([], ["def f():", "    x", ""], ["def f():", "    y", ""])
    assert second.anchors == ["def g():", "return"] and (second.old, second.new) == (["a"], ["b"])


async def test_issue30_item1_one_file_is_a_plain_diff_the_user_may_edit(app: Path) -> None:
    text = patch("*** Update File: app.py", "@@", "-    return 1", "+    return 2")
    details = await TOOL.confirmation({"input": text}, make_ctx(app, seen=True))
    assert isinstance(details, FileDiff) and details.new_content == APP.replace("return 1", "return 2")
    res = await applied(app, text, make_ctx(app, seen=True, new_content="mine\n"))
    assert (app / "app.py").read_text() == "mine\n" and "user modified" in res.text
    # The user's content cannot stand for several files: refused, nothing written.
    two = patch("*** Add File: x.txt", "+x", "*** Update File: app.py", "@@", "-mine", "+yours")
    with pytest.raises(ToolFailure) as info:
        await applied(app, two, make_ctx(app, seen=True, new_content="edited"))
    assert info.value.type == "invalid_arguments" and not (app / "x.txt").exists()


async def test_issue30_item1_several_diffs_stored_and_worded(app: Path) -> None:
    text = patch(
        "*** Add File: x.txt", "+x", "*** Update File: app.py", "@@", "-    return 1", "+    return 2"
    )
    details = await TOOL.confirmation({"input": text}, make_ctx(app, seen=True))
    assert isinstance(details, FileDiffs)
    request = ConfirmationRequest([], details)
    assert serial.confirmation_from_json(serial.confirmation_to_json(request)) == request
    assert TOOL.describe({"input": text}) == "Patch x.txt, app.py"
    assert TOOL.describe({"input": "nonsense"}) == "Apply a patch"
    ctx = make_ctx(app)
    assert [p.name for p in TOOL.touched_paths({"input": text}, ctx)] == ["x.txt", "app.py"]  # type: ignore[attr-defined]


async def test_issue30_item1_patch_through_the_session_asks_once_and_restore_undoes_it(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    text = patch(
        "*** Add File: notes.txt",
        "+one",
        "*** Update File: README.md",
        "@@",
        "-Hello.",
        "+Bonjour.",
    )
    spec = script(
        [
            [call("read_file", {"path": "README.md"})],  # the model reads what it will change
            [call("apply_patch", {"input": text}, "p1")],
            [{"text": "patched: {last_tool_results}"}],
            [{"text": "ok"}],
        ]
    )
    core = await core_factory(spec)
    s = await core.create_session([workspace], approval_mode="ask")
    events = await collect(s.advance(UserPrompt("patch it")))
    end = events[-1]
    assert isinstance(end, NeedsInput) and len(end.calls) == 1
    (waiting,) = end.calls
    assert waiting.kind.value == "edit" and isinstance(waiting.confirmation.details, FileDiffs)  # type: ignore[union-attr]
    assert request_text(waiting) == "change 2 files: notes.txt (new file, 1 line), README.md (+1 -1 lines)"
    assert not (workspace / "notes.txt").exists()
    # The question survives a reload of the session (the details are stored).
    again = await core.get_session(s.id)
    assert again is not None and again.waiting_calls()[0].confirmation == waiting.confirmation
    events = await collect(s.advance(Resume(decisions=[Decision("p1", "proceed_once")])))
    assert updates(events, "p1") == [ToolCallStatus.EXECUTING, ToolCallStatus.SUCCEEDED]
    assert "Applied the patch to 2 files" in text_of(events)
    assert (workspace / "notes.txt").read_text() == "one\n"
    assert (workspace / "README.md").read_text() == "# Demo project\nBonjour.\n"
    assert isinstance(events[-1], TurnEnd)
    # The stored view (the web console's, MCP's) reads every file's diff back from the transcript.
    (shown,) = [i for i in await s.timeline() if getattr(i, "id", None) == "p1"]
    assert shown.output is not None and isinstance(shown.output.diff, FileDiffs)
    assert [d.file_name for d in shown.output.diff.files] == ["notes.txt", "README.md"]
    assert "+Bonjour." in shown.output.diff.formatted_diff
    listing = text_of(await collect(s.advance(UserPrompt("/restore"))))
    assert "files: notes.txt, README.md" in listing, listing
    out = text_of(await collect(s.advance(UserPrompt("/restore 1"))))
    assert "Restored checkpoint 1" in out, out
    assert not (workspace / "notes.txt").exists()
    assert (workspace / "README.md").read_text() == "# Demo project\nHello.\n"


class _Buffers:
    """An editor's buffers: what it holds of each file (unsaved changes included)."""

    def __init__(self, files: dict[Path, str]) -> None:
        self.files = files

    async def read_text(self, path: Path) -> str | None:
        return self.files.get(path)

    async def write_text(self, path: Path, content: str) -> None:
        self.files[path] = content


async def test_issue30_item1_a_patch_goes_through_the_clients_buffers(app: Path) -> None:
    from devagent.agent.tools.backends import ToolBackends

    real = app.resolve() / "app.py"
    buffers = _Buffers({real: APP.replace("return 1", "return 'unsaved'")})
    ctx = make_ctx(app, backends=ToolBackends(files=buffers))
    await run("read_file", {"path": "app.py"}, ctx)  # the buffer's text, as the model reads it
    await applied(app, patch("*** Update File: app.py", "@@", "-    return 'unsaved'", "+    return 2"), ctx)
    assert buffers.files[real] == APP.replace("return 1", "return 2")
    assert (app / "app.py").read_text() == APP  # the editor saves it, not the tool
