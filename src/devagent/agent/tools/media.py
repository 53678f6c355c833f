"""Images and PDFs that `read_file` gives the model: known by their first bytes, never by their
name; attached beside the tool's text when the session's model takes them (`MediaInput`, from
its profile), else refused (an image) or read as text (a PDF's text, through pypdf)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

from devagent.agent.events import ToolErrorType
from devagent.agent.tools._util import human_size
from devagent.agent.tools.base import Attachment, MediaInput, ToolResult
from devagent.agent.tools.failure import ToolFailure

if TYPE_CHECKING:
    from pypdf import PdfReader

# The most a file may weigh to be attached (the providers' own limits are about these: 5 MB an
# image at Anthropic, 32 MB and 100 pages a request's PDFs), and to be read as text at all.
MAX_IMAGE_BYTES = 5_000_000
MAX_PDF_ATTACHED_BYTES = 10 * 1024 * 1024
MAX_PDF_ATTACHED_PAGES = 100
MAX_PDF_BYTES = 50 * 1024 * 1024
MAX_PDF_TEXT_PAGES = 1000

PDF = "application/pdf"
# How many first bytes tell what a file is.
HEAD_BYTES = 16

_NAMES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP", PDF: "PDF"}


def media_type(head: bytes) -> str | None:
    """The media type of an image or PDF file from its first HEAD_BYTES bytes, else None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"%PDF-"):
        return PDF
    return None


def too_large(kind: str, size: int, shown: str) -> ToolFailure | None:
    """The failure for a file too large to read as what it is, before it is read."""
    limit = MAX_PDF_BYTES if kind == PDF else MAX_IMAGE_BYTES
    if size <= limit:
        return None
    return ToolFailure(
        f"{shown!r} is a {_NAMES[kind]} file of {human_size(size)}; the most read_file reads of one is "
        f"{human_size(limit)}",
        ToolErrorType.FILE_TOO_LARGE,
    )


def image(data: bytes, kind: str, shown: str, media: MediaInput) -> ToolResult:
    """An image for the model to look at, or a failure saying why it cannot."""
    what = f"{_NAMES[kind]} image, {human_size(len(data))}"
    if not media.images:
        raise ToolFailure(
            f"{shown!r} is an image ({what}); the model of this session cannot be shown images",
            ToolErrorType.UNSUPPORTED_MEDIA,
        )
    return ToolResult(
        text=f"[{shown}: {what}, attached for you to look at.]",
        data={"path": shown, "media_type": kind, "bytes": len(data)},
        attachments=[Attachment(kind, data)],
    )


@dataclass(frozen=True, slots=True)
class PdfText:
    text: str
    pages: int
    pages_read: int


def pdf_document(data: bytes, shown: str, media: MediaInput, paging: bool) -> ToolResult | None:
    """The whole PDF attached as a document, when the model takes PDFs, it is small enough and no
    part of its text was asked for (`paging`); None: read its text instead."""
    if not media.pdf or paging or len(data) > MAX_PDF_ATTACHED_BYTES:
        return None
    pages = len(_reader(data, shown).pages)
    if pages > MAX_PDF_ATTACHED_PAGES:
        return None
    return ToolResult(
        text=(
            f"[{shown}: PDF, {pages} page{'' if pages == 1 else 's'}, {human_size(len(data))}, attached "
            "as a document. To read its text instead, call read_file with offset or limit.]"
        ),
        data={"path": shown, "media_type": PDF, "bytes": len(data), "pages": pages},
        attachments=[Attachment(PDF, data)],
    )


def pdf_text(data: bytes, shown: str) -> PdfText:
    """The text of a PDF's pages, each after a `[page N]` line (the layout, images and tables are
    not kept)."""
    reader = _reader(data, shown)
    pages = len(reader.pages)
    parts: list[str] = []
    try:
        for n, page in enumerate(reader.pages[:MAX_PDF_TEXT_PAGES], start=1):
            text = page.extract_text() or ""
            parts.append(f"[page {n}]\n{text.rstrip()}\n")
    except Exception as e:  # a malformed file fails in many ways inside pypdf
        raise ToolFailure(
            f"{shown!r}: the PDF's text cannot be read ({e})", ToolErrorType.UNREADABLE_PDF
        ) from e
    return PdfText("".join(parts), pages, min(pages, MAX_PDF_TEXT_PAGES))


def _reader(data: bytes, shown: str) -> PdfReader:
    # late: pypdf is loaded by the first PDF a session reads
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ToolFailure(
                f"{shown!r} is an encrypted PDF; it cannot be read", ToolErrorType.UNREADABLE_PDF
            )
        return reader
    except ToolFailure:
        raise
    except Exception as e:  # a malformed file fails in many ways inside pypdf
        raise ToolFailure(
            f"{shown!r} is not a PDF that can be read ({e})", ToolErrorType.UNREADABLE_PDF
        ) from e
