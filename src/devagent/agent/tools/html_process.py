"""HTML-to-text (`html_text.py`) in a process of its own, under a deadline and a memory cap, so
that no page can stall or swell the server.

Why a process and not a thread: the standard library's HTML parser is quadratic on some broken
markup (on Python 3.11, 80 KiB of `<a <a <a ...` took 116 s), and a regex or a join in C holds
the GIL for as long as it runs, so a thread stalls the event loop too (the old converter, in a
thread, kept another caller's `/healthz` waiting 61.7 s on a 937 KiB page) and a thread cannot be
stopped at a deadline. A process can be killed when its time is up, its memory is capped by the
kernel, and all of it goes back when it ends. It costs a Python start (tens of milliseconds,
without `site`) per HTML page."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path

from devagent.agent.events import ToolErrorType
from devagent.agent.sandbox.childenv import child_env
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.html_text import EXIT_MEMORY

CONVERTER = str(Path(__file__).with_name("html_text.py"))
CONVERT_SECONDS = 30.0  # for one page's conversion (5 MiB of ordinary HTML takes a few seconds)
CONVERT_MEMORY = 1024 * 1024 * 1024  # bytes of address space the conversion may use


async def convert_html(html: str, url: str) -> tuple[str, str, bool]:
    """(title, text, cut) of a page (see `html_text.html_to_text`), converted by a process of its
    own; a ToolFailure when it takes longer than CONVERT_SECONDS or needs more than CONVERT_MEMORY."""
    argv = [os.path.realpath(sys.executable), "-I", "-S", CONVERTER, str(CONVERT_MEMORY)]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=child_env(),
        )
    except OSError as e:
        raise ToolFailure(f"cannot start the HTML converter: {e}", ToolErrorType.CONVERSION_FAILED) from None
    page = f"{json.dumps(url)}\n{html}".encode("utf-8", "surrogatepass")
    try:
        async with asyncio.timeout(CONVERT_SECONDS):
            out, err = await proc.communicate(page)
    except TimeoutError:
        raise ToolFailure(
            f"{url}: its HTML could not be read as text within {CONVERT_SECONDS:g} s (a page this "
            "complex or this broken is not read)",
            ToolErrorType.CONVERSION_TIMEOUT,
        ) from None
    finally:
        if proc.returncode is None:  # timed out or cancelled
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())
    if proc.returncode == EXIT_MEMORY or b"MemoryError" in err:
        raise ToolFailure(
            f"{url}: its HTML needs more than {CONVERT_MEMORY // 2**20} MiB to be read as text",
            ToolErrorType.CONVERSION_TOO_LARGE,
        )
    if proc.returncode != 0:
        said = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        raise ToolFailure(
            f"{url}: its HTML could not be read as text ({said[0][:200]})", ToolErrorType.CONVERSION_FAILED
        )
    answer = json.loads(out.decode("utf-8", "surrogatepass"))
    return str(answer["title"]), str(answer["text"]), bool(answer["cut"])
