"""Reading: read_file numbers its lines; images and PDFs reach models that take them (PDFs as text
otherwise); the session remembers what it read and wrote, so an edit of a file it never read, or
that changed since, is refused, also after a restart."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import (
    Decision,
    NeedsInput,
    Resume,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    TurnEnd,
    UserPrompt,
)
from devagent.agent.history import transcript
from devagent.agent.loop import toolset
from devagent.agent.state import SessionState
from devagent.agent.tools import builtin_tools, freshness, media
from devagent.agent.tools.base import MediaInput, ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace
from tests.core_helpers import call, collect, text_of
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, Reply

TOOLS = builtin_tools()


def make_ctx(root: Path, **kw: Any) -> ToolContext:
    return ToolContext(
        workspace=Workspace([root]), state=SessionState(workspace_roots=[str(root)]), call_id="c1", **kw
    )


async def run(name: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return await TOOLS[name].run(args, ctx)


async def fails(name: str, args: dict[str, Any], ctx: ToolContext, type_: str) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        await run(name, args, ctx)
    assert info.value.type == type_, info.value.message
    return info.value


def png(width: int = 2, height: int = 1) -> bytes:
    """A small valid PNG (RGB, every pixel red)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def pdf(pages: list[list[str]]) -> bytes:
    """A small valid PDF, each page showing its lines in Helvetica."""
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    font = 3 + 2 * len(pages)
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>"]
    for i, lines in enumerate(pages):
        shown = " ".join(f"({line}) Tj 0 -16 Td" for line in lines)
        stream = f"BT /F1 12 Tf 72 720 Td {shown} ET"
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>"
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = b"%PDF-1.4\n"
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def finished(events: list[Any]) -> None:
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished", events[-1]


def last_call(events: list[Any], call_id: str) -> ToolCall:
    return [e.call for e in events if isinstance(e, ToolCallUpdate) and e.call.id == call_id][-1]


# --- lines -------------------------------------------------------------------------------------------


async def test_issue30_item3_read_file_numbers_lines_with_offset_and_limit(ws: Path) -> None:
    ctx = make_ctx(ws)
    (ws / "a.py").write_text("".join(f"x{i} = {i}\n" for i in range(1, 31)))
    res = await run("read_file", {"path": "a.py"}, ctx)
    assert res.text.splitlines()[:2] == ["1\tx1 = 1", "2\tx2 = 2"] and res.text.endswith("30\tx30 = 30\n")
    res = await run("read_file", {"path": "a.py", "offset": 9, "limit": 3}, ctx)
    assert res.text == (
        "[Showing lines 9-11 of 30 of a.py. To read more, call read_file with offset=12.]\n\n"
        "9\tx9 = 9\n10\tx10 = 10\n11\tx11 = 11\n"
    )
    assert "`12\\tdef main():`" in TOOLS["read_file"].description  # the format is documented


# --- images ------------------------------------------------------------------------------------------


def _image_script(body: dict[str, Any]) -> Reply:
    if not any(m.get("role") == "tool" for m in body["messages"]):
        return Reply(tool_calls=[FakeToolCall("call_i", "read_file", {"path": "pic.png"})])
    return Reply(text=["A red dot."])


async def test_issue30_item3_an_image_reaches_a_model_that_takes_images_once(
    core_factory: Any, workspace: Path
) -> None:
    """Over the real OpenAI provider code: the request after read_file carries the PNG (as the
    provider's image part); once the model answered it, the conversation keeps a note instead,
    so the next request and the stored transcript do not carry the image again."""
    image = png()
    (workspace / "pic.png").write_bytes(image)
    fake = FakeOpenAI(_image_script)
    data_uri = "data:image/png;base64," + base64.b64encode(image).decode()
    async with fake as base_url:
        core = await core_factory("openai-compatible:fake-model", model_base_url=base_url, model_api_key="k")
        s = await core.create_session([workspace], approval_mode="ask")
        events = await collect(s.advance(UserPrompt("What is in pic.png?")))
        finished(events)
        assert text_of(events) == "A red dot."
        assert last_call(events, "call_i").status is ToolCallStatus.SUCCEEDED
        stored = "".join(await core.store.load_messages(s.id))
        finished(await collect(s.advance(UserPrompt("And now?"))))
    first, second, third = fake.requests
    assert data_uri not in json.dumps(first)
    image_parts = [
        part
        for m in second["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for part in m["content"]
        if part.get("type") == "image_url"
    ]
    assert [p["image_url"]["url"] for p in image_parts] == [data_uri]
    tool = next(m for m in second["messages"] if m["role"] == "tool")
    assert "pic.png: PNG image" in tool["content"]
    assert data_uri not in json.dumps(third)
    tool = next(m for m in third["messages"] if m["role"] == "tool")
    assert transcript.FILE_SHOWN in tool["content"]
    assert base64.b64encode(image).decode() not in stored  # the stored conversation holds the note


async def test_issue30_item3_an_image_waiting_in_a_paused_step_survives_a_restart(
    core_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    """A step that reads an image and waits for permission on a write: stored with the image; a
    new process answers, and the model's next request carries the image."""
    image = png(3, 3)
    (workspace / "pic.png").write_bytes(image)
    db = f"sqlite+aiosqlite:///{tmp_path / 'restart.db'}"

    def script(body: dict[str, Any]) -> Reply:
        if not any(m.get("role") == "tool" for m in body["messages"]):
            calls = [
                FakeToolCall("call_i", "read_file", {"path": "pic.png"}),
                FakeToolCall("call_w", "write_file", {"path": "seen.txt", "content": "seen\n"}),
            ]
            return Reply(tool_calls=calls)
        return Reply(text=["Noted."])

    fake = FakeOpenAI(script)
    async with fake as base_url:
        spec = {"model_base_url": base_url, "model_api_key": "k", "db": db}
        core = await core_factory("openai-compatible:fake-model", **spec)
        s = await core.create_session([workspace], approval_mode="ask")
        events = await collect(s.advance(UserPrompt("look and note")))
        assert isinstance(events[-1], NeedsInput)
        await core.close()
        core2 = await core_factory("openai-compatible:fake-model", **spec)
        s2 = await core2.get_session(s.id)
        assert s2 is not None
        finished(await collect(s2.advance(Resume(decisions=[Decision("call_w", "proceed_once")]))))
    assert (workspace / "seen.txt").read_text() == "seen\n"
    assert "data:image/png;base64," + base64.b64encode(image).decode() in json.dumps(fake.requests[-1])


async def test_issue30_item3_images_for_a_model_that_takes_none_and_the_size_cap(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "pic.png").write_bytes(png())
    err = await fails("read_file", {"path": "pic.png"}, make_ctx(ws), "unsupported_media")
    assert "cannot be shown images" in err.message
    seeing = make_ctx(ws, media=MediaInput(images=True))
    res = await run("read_file", {"path": "pic.png"}, seeing)
    assert [a.media_type for a in res.attachments] == ["image/png"] and res.attachments[0].data == png()
    for name, head in [
        ("p.jpg", b"\xff\xd8\xff\xe0"),
        ("p.gif", b"GIF89a"),
        ("p.webp", b"RIFF\0\0\0\0WEBPVP8 "),
    ]:
        (ws / name).write_bytes(head + b"\0" * 32)
        kind = (await run("read_file", {"path": name}, seeing)).attachments[0].media_type
        assert kind == "image/" + {"jpg": "jpeg"}.get(name[2:], name[2:])
    monkeypatch.setattr(media, "MAX_IMAGE_BYTES", 10)
    err = await fails("read_file", {"path": "pic.png"}, seeing, "file_too_large")
    assert "the most read_file reads of one is 10 B" in err.message


# --- PDFs --------------------------------------------------------------------------------------------


async def test_issue30_item3_a_pdfs_text_for_a_model_that_takes_no_documents(ws: Path) -> None:
    (ws / "spec.pdf").write_bytes(pdf([["Hello PDF", "second line"], ["Page two here"]]))
    ctx = make_ctx(ws)
    res = await run("read_file", {"path": "spec.pdf"}, ctx)
    assert res.attachments == []
    assert res.text.startswith("[spec.pdf: PDF, 2 pages; its text follows")
    body = res.text.split("]\n", 1)[1]
    assert body.startswith("1\t[page 1]\n2\tHello PDF")
    assert "second line" in body and "\tPage two here" in body and "\t[page 2]\n" in body
    part = await run("read_file", {"path": "spec.pdf", "offset": 2, "limit": 1}, ctx)
    assert part.text.endswith("2\tHello PDF\n")
    # an edit of a PDF's text is no edit of the file: reading it does not count as reading it
    assert ctx.state.file_marks == {}
    (ws / "bad.pdf").write_bytes(b"%PDF-1.4\nnot really\n")
    await fails("read_file", {"path": "bad.pdf"}, ctx, "unreadable_pdf")


async def test_issue30_item3_a_pdf_attached_for_a_model_that_takes_pdfs(ws: Path) -> None:
    data = pdf([["Hello PDF"]])
    (ws / "spec.pdf").write_bytes(data)
    ctx = make_ctx(ws, media=MediaInput(images=True, pdf=True))
    res = await run("read_file", {"path": "spec.pdf"}, ctx)
    assert [(a.media_type, a.data) for a in res.attachments] == [("application/pdf", data)]
    assert "PDF, 1 page" in res.text and "attached as a document" in res.text
    paged = await run("read_file", {"path": "spec.pdf", "limit": 5}, ctx)  # a part: its text
    assert paged.attachments == [] and "Hello PDF" in paged.text


async def test_issue30_item3_the_session_knows_what_its_model_takes(
    core_factory: Any, workspace: Path
) -> None:
    """The flags come from the model's pydantic-ai profile."""
    from pydantic_ai.profiles import ModelProfile

    from devagent.agent.models.scripted import ScriptedModel, parse_script

    class TextOnly(ScriptedModel):
        @property
        def profile(self) -> ModelProfile:  # type: ignore[override]
            return ModelProfile(supports_image_input=False, supported_document_media_types=frozenset())

    core = await core_factory("demo")
    s = await core.create_session([workspace])
    assert toolset.media_input(s) == MediaInput(images=True, pdf=True)  # pydantic-ai's defaults
    core.models[core.default_model] = TextOnly(parse_script([[{"text": "hi"}]]))
    assert toolset.media_input(s) == MediaInput(images=False, pdf=False)


def test_issue30_item3_attached_files_in_the_transcript() -> None:
    """The transcript turns a result's files into the tool return's binary parts, stored with a
    waiting step as base64; an image weighs in the window what it costs, not its bytes."""
    from pydantic_ai import messages as pm

    from devagent.agent.loop.compact import part_chars
    from devagent.agent.state import CallResult, PendingCall

    p = PendingCall("c", "read_file", {}, "read")
    p.result = CallResult(
        "[pic]", files=[{"media_type": "image/png", "data": base64.b64encode(png()).decode()}]
    )
    msgs: list[pm.ModelMessage] = []
    transcript.append_tool_returns(msgs, [p], 100_000)
    part = msgs[0].parts[0]
    assert isinstance(part, pm.ToolReturnPart) and part.model_response_str() == "[pic]"
    assert [f.media_type for f in part.files] == ["image/png"]  # type: ignore[union-attr]
    assert CallResult.from_json(json.loads(json.dumps(p.result.to_json()))).files == p.result.files
    big = pm.ToolReturnPart(
        "read_file", ["[pic]", pm.BinaryContent(b"\x89PNG" + bytes(3_000_000), media_type="image/png")]
    )
    assert part_chars(big) == len("[pic]") + 1_600 * 4


# --- read before an edit -----------------------------------------------------------------------------


async def test_issue30_item3_an_edit_without_a_read_is_refused(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    """Through the loop: edit and write_file of a file never read fail and change nothing, saying
    to read it first; creating a file needs no read; after read_many_files the edit goes through."""
    edit = {"path": "README.md", "old_string": "Hello.", "new_string": "Hi."}
    spec = script(
        [
            [
                call("edit", edit, "e1"),
                call("write_file", {"path": "README.md", "content": "gone\n"}, "w1"),
                call("write_file", {"path": "new.txt", "content": "new\n"}, "n1"),
            ],
            [call("read_many_files", {"paths": ["README.md"]})],
            [call("edit", edit, "e2")],
            [{"text": "done"}],
        ]
    )
    core = await core_factory(spec, approval_mode="yolo")
    s = await core.create_session([workspace], approval_mode="yolo")
    events = await collect(s.advance(UserPrompt("say hi")))
    finished(events)
    for cid in ("e1", "w1"):
        refused = last_call(events, cid)
        assert refused.status is ToolCallStatus.FAILED and refused.error is not None
        assert refused.error.type == "file_not_read"
        assert "README.md has not been read in this session" in refused.error.message
        assert "read it first (read_file)" in refused.error.message
    assert last_call(events, "n1").status is ToolCallStatus.SUCCEEDED
    assert last_call(events, "e2").status is ToolCallStatus.SUCCEEDED
    assert (workspace / "README.md").read_text() == "# Demo project\nHi.\n"


async def test_issue30_item3_an_edit_after_an_outside_change_is_refused(
    core_factory: Any, script: Any, workspace: Path
) -> None:
    """The file changed on disk after the session read it (the user, a command): the edit is
    refused and the other change kept; once read again, the edit is made. The session's own writes
    keep it current."""
    spec = script(
        [
            [call("read_file", {"path": "README.md"})],
            [{"text": "read"}],
            [call("edit", {"path": "README.md", "old_string": "Hello.", "new_string": "Hi."}, "e1")],
            [{"text": "refused"}],
            [call("read_file", {"path": "README.md"})],
            [call("edit", {"path": "README.md", "old_string": "Hello.", "new_string": "Hi!"}, "e2")],
            [call("edit", {"path": "README.md", "old_string": "Hi!", "new_string": "Hey!"}, "e3")],
            [{"text": "edited twice"}],
        ]
    )
    core = await core_factory(spec, approval_mode="yolo")
    s = await core.create_session([workspace], approval_mode="yolo")
    finished(await collect(s.advance(UserPrompt("read it"))))
    (workspace / "README.md").write_text("# Demo project\nHello.\nMore.\n")  # someone else's change
    events = await collect(s.advance(UserPrompt("edit it")))
    refused = last_call(events, "e1")
    assert refused.error is not None and refused.error.type == "file_changed", refused
    assert "README.md changed since this session last read or wrote it" in refused.error.message
    assert (workspace / "README.md").read_text() == "# Demo project\nHello.\nMore.\n"
    events = await collect(s.advance(UserPrompt("read it again and edit")))
    finished(events)
    assert [last_call(events, c).status for c in ("e2", "e3")] == [ToolCallStatus.SUCCEEDED] * 2
    assert (workspace / "README.md").read_text() == "# Demo project\nHey!\nMore.\n"


async def test_issue30_item3_a_read_after_restart_still_counts(
    core_factory: Any, script: Any, workspace: Path, tmp_path: Path
) -> None:
    """What the session read is stored with it: a new process edits the file read by the old one
    (and /clear forgets it: the model no longer has what it read)."""
    db = f"sqlite+aiosqlite:///{tmp_path / 'marks.db'}"
    steps = [
        [call("read_file", {"path": "README.md"})],
        [{"text": "read"}],
        [call("edit", {"path": "README.md", "old_string": "Hello.", "new_string": "Hi."}, "e1")],
        [{"text": "edited"}],
        [call("edit", {"path": "README.md", "old_string": "Hi.", "new_string": "Hey."}, "e2")],
        [{"text": "after clear"}],
    ]
    core = await core_factory(script(steps), db=db, approval_mode="yolo")
    s = await core.create_session([workspace], approval_mode="yolo")
    finished(await collect(s.advance(UserPrompt("read it"))))
    await core.close()
    core2 = await core_factory(script(steps), db=db)
    s2 = await core2.get_session(s.id)
    assert s2 is not None and str(workspace / "README.md") in s2.state.file_marks
    events = await collect(s2.advance(UserPrompt("edit it")))
    assert last_call(events, "e1").status is ToolCallStatus.SUCCEEDED
    assert (workspace / "README.md").read_text() == "# Demo project\nHi.\n"
    await collect(s2.advance(UserPrompt("/clear")))
    assert s2.state.file_marks == {}


async def test_issue30_item3_what_counts_as_seen(ws: Path) -> None:
    """A read of part of a file counts; the session's own write keeps the file current; content
    the user changed before it was written must be read again; a binary file needs no read; the
    check is there for the coming patch tool too."""
    ctx = make_ctx(ws)
    (ws / "a.txt").write_text("".join(f"{i}\n" for i in range(100)))
    await run("read_file", {"path": "a.txt", "offset": 90, "limit": 2}, ctx)
    await run("edit", {"path": "a.txt", "old_string": "\n5\n", "new_string": "\nfive\n"}, ctx)
    await run("write_file", {"path": "a.txt", "content": "short\n"}, ctx)
    ctx.new_content = "the user's\n"
    await run("edit", {"path": "a.txt", "old_string": "short", "new_string": "long"}, ctx)
    ctx.new_content = None
    err = await fails(
        "edit", {"path": "a.txt", "old_string": "user's", "new_string": "mine"}, ctx, "file_changed"
    )
    assert "read it again" in err.message
    (ws / "blob.bin").write_bytes(b"\x00\x01")
    await run("write_file", {"path": "blob.bin", "content": "text now\n"}, ctx)
    real = ws / "c.txt"
    real.write_text("c\n")
    with pytest.raises(ToolFailure) as info:
        freshness.check_before_write(ctx.state, ctx.workspace, real, "c\n")
    assert info.value.type == "file_not_read"
    freshness.check_before_write(ctx.state, ctx.workspace, real, None)  # a new file: fine
    freshness.remember(ctx.state, real, freshness.mark_of("c\n"))
    freshness.check_before_write(ctx.state, ctx.workspace, real, "c\n")
    # bounded: the oldest marks go first
    for i in range(freshness.MAX_MARKS + 5):
        freshness.remember(ctx.state, ws / f"f{i}", "x")
    assert len(ctx.state.file_marks) == freshness.MAX_MARKS and str(real) not in ctx.state.file_marks
