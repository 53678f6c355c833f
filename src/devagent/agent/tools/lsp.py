"""A small Language Server Protocol client, for diagnostics after a write: JSON-RPC 2.0 over the
server's standard input and output, each message framed by a `Content-Length` header.

The client opens a file with `textDocument/didOpen` and sends each new text whole with
`textDocument/didChange`; it reads the diagnostics by asking (`textDocument/diagnostic`, when the
server offers pull diagnostics) or from the server's `textDocument/publishDiagnostics` for that
version of the text. The server's own requests get plain answers: its configuration questions the
settings below (pyright's type checking of the open files in its standard mode; a project's own
configuration file still wins), anything else null.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

from devagent.agent.sandbox.groups import kill_group
from devagent.agent.tools.findings import Diagnostic
from devagent.common.errors import DevagentError

_HEADER_LIMIT = 4096  # bytes of headers one message may have
MESSAGE_LIMIT = 64 * 1024 * 1024  # bytes one message may have
# A server that does not say which version its diagnostics are of: its last ones count once it has
# published none for this long.
QUIET_SECONDS = 0.5
_ANALYSIS = {"typeCheckingMode": "standard", "diagnosticMode": "openFilesOnly"}


class ServerFailed(DevagentError):
    """The language server ended, broke the protocol or answered with an error."""


class LanguageServer:
    """One running language server, for one workspace root, over `proc`'s pipes."""

    def __init__(self, proc: asyncio.subprocess.Process, root: Path) -> None:
        self.proc = proc
        self.root = root
        self.lock = asyncio.Lock()  # one file's check at a time
        self.pull = False  # the server answers textDocument/diagnostic
        self._next_id = 0
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._published: dict[str, tuple[int | None, list[Any]]] = {}
        self._news = asyncio.Condition()
        self._texts: dict[str, tuple[int, str]] = {}  # uri -> (version, text) the server has
        self._found: dict[str, tuple[str, tuple[Diagnostic, ...]]] = {}  # uri -> (text, its findings)
        self._reader = asyncio.create_task(self._read())

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None and not self._reader.done()

    async def initialize(self) -> None:
        folder = {"uri": self.root.as_uri(), "name": self.root.name or "workspace"}
        capabilities = {
            "textDocument": {
                "synchronization": {"dynamicRegistration": False},
                "publishDiagnostics": {"versionSupport": True},
                "diagnostic": {"dynamicRegistration": False},
            },
            "workspace": {"configuration": True, "workspaceFolders": True},
            "window": {"workDoneProgress": False},
        }
        answer = await self.request(
            "initialize",
            {
                "processId": None,  # in the sandbox's PID namespace the server could not see ours
                "rootUri": folder["uri"],
                "workspaceFolders": [folder],
                "capabilities": capabilities,
            },
        )
        offered = answer.get("capabilities", {}) if isinstance(answer, dict) else {}
        self.pull = bool(isinstance(offered, dict) and offered.get("diagnosticProvider"))
        await self.notify("initialized", {})

    async def diagnose(self, path: Path, text: str, language: str) -> tuple[Diagnostic, ...]:
        """The server's diagnostics of `text` as the content of the file at `path`."""
        uri = path.as_uri()
        known = self._found.get(uri)
        if known is not None and known[0] == text:
            return known[1]
        version = await self._send_text(uri, text, language)
        if self.pull:
            report = await self.request("textDocument/diagnostic", {"textDocument": {"uri": uri}})
            items = report.get("items", []) if isinstance(report, dict) else []
        else:
            items = await self._published_for(uri, version)
        found = tuple(d for d in map(_diagnostic, items if isinstance(items, list) else []) if d is not None)
        self._found[uri] = (text, found)
        return found

    async def _send_text(self, uri: str, text: str, language: str) -> int:
        held = self._texts.get(uri)
        if held is None:
            version = 1
            document = {"uri": uri, "languageId": language, "version": version, "text": text}
            await self.notify("textDocument/didOpen", {"textDocument": document})
        elif held[1] != text:
            version = held[0] + 1
            await self.notify(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
            )
        else:
            version = held[0]
        self._texts[uri] = (version, text)
        self._published.pop(uri, None)
        return version

    async def _published_for(self, uri: str, version: int) -> list[Any]:
        """The diagnostics the server publishes for `uri` after this version was sent: those of
        this version when the server says which; else the last of those it publishes until it
        has been quiet for `QUIET_SECONDS` (a server may publish a file's diagnostics in parts,
        the syntax first, and late ones of the text before)."""
        async with self._news:
            while True:
                got = self._published.get(uri)
                if got is not None and got[0] == version:
                    return got[1]
                if got is not None and got[0] is None:
                    try:
                        async with asyncio.timeout(QUIET_SECONDS):
                            await self._news.wait()
                    except TimeoutError:
                        return got[1]
                    continue
                if not self.alive:
                    raise ServerFailed("the language server ended")
                await self._news.wait()

    # --- JSON-RPC ------------------------------------------------------------------------------

    async def request(self, method: str, params: Any) -> Any:
        self._next_id += 1
        ident = self._next_id
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = answer
        try:
            await self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
            return await answer
        finally:
            self._waiting.pop(ident, None)

    async def notify(self, method: str, params: Any) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def _send(self, message: dict[str, Any]) -> None:
        if not self.alive or self.proc.stdin is None:
            raise ServerFailed("the language server ended")
        body = json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")
        try:
            self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as e:
            raise ServerFailed("the language server ended") from e

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            while (message := await read_message(self.proc.stdout)) is not None:
                await self._take(message)
        except (ServerFailed, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            for answer in self._waiting.values():
                if not answer.done():
                    answer.set_exception(ServerFailed("the language server ended"))
            async with self._news:
                self._news.notify_all()

    async def _take(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if method is None:  # an answer to one of ours
            answer = self._waiting.get(message.get("id", -1))
            if answer is not None and not answer.done():
                if "error" in message:
                    answer.set_exception(ServerFailed(str(message["error"])[:300]))
                else:
                    answer.set_result(message.get("result"))
        elif "id" in message:  # the server asks
            result = _configuration(message.get("params")) if method == "workspace/configuration" else None
            await self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        elif method == "textDocument/publishDiagnostics":
            params = message.get("params") or {}
            if isinstance(params, dict) and isinstance(params.get("uri"), str):
                version = params.get("version")
                items = params.get("diagnostics")
                self._published[params["uri"]] = (
                    version if isinstance(version, int) else None,
                    items if isinstance(items, list) else [],
                )
                async with self._news:
                    self._news.notify_all()

    async def stop(self) -> None:
        """Asks the server to shut down, then ends its process group whatever it does."""
        if self.alive:
            with contextlib.suppress(ServerFailed, TimeoutError):
                async with asyncio.timeout(2.0):
                    await self.request("shutdown", None)
                    await self.notify("exit", None)
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await kill_group(self.proc)


async def read_message(stream: asyncio.StreamReader) -> Any:
    """One framed message, None at the end of the stream."""
    length = -1
    seen = 0
    while True:
        line = await stream.readline()
        if not line:
            return None
        seen += len(line)
        if seen > _HEADER_LIMIT:
            raise ServerFailed("the language server sent an oversized header")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("ascii", "replace").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    if not 0 <= length <= MESSAGE_LIMIT:
        raise ServerFailed("the language server sent a message without a usable Content-Length")
    return json.loads(await stream.readexactly(length))


def _configuration(params: Any) -> list[Any]:
    items = params.get("items", []) if isinstance(params, dict) else []
    answers: list[Any] = []
    for item in items if isinstance(items, list) else []:
        section = item.get("section", "") if isinstance(item, dict) else ""
        section = str(section)
        if section.endswith(".analysis"):
            answers.append(dict(_ANALYSIS))
        elif section in ("python", "pyright", "basedpyright"):
            answers.append({"analysis": dict(_ANALYSIS)})
        else:
            answers.append({})
    return answers


def _diagnostic(item: Any) -> Diagnostic | None:
    """An LSP diagnostic as ours: errors and warnings (hints and information are left out)."""
    if not isinstance(item, dict):
        return None
    severity = item.get("severity", 1)
    if severity not in (1, 2):
        return None
    try:
        line = int(item["range"]["start"]["line"]) + 1
    except (KeyError, TypeError, ValueError):
        line = 1
    code = item.get("code")
    return Diagnostic(line, str(item.get("message", "")), "" if code is None else str(code), severity == 1)
