"""The language servers of this process's sessions: which server checks which files, started per
session and workspace root on the first write of such a file, reused by the session's later
writes, stopped with the session (`AgentCore.release`), when the core closes, when the session's
calls have not used them for `IDLE_SECONDS`, or when more sessions than `MAX_SESSIONS` have
servers (the least recently used session's stop).

A server is looked up on the PATH the session's commands get and started as they are
(`checker.start_checker`: the clean environment, the limits, the sandbox). One that cannot start,
fails or breaks the protocol is not started again for that session and root; one that is slow
only costs that write its diagnostics (the result says so, and ruff answers for Python).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import shutil
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from devagent.agent.tools.base import ToolContext
from devagent.agent.tools.checker import CheckerUnavailable, checker_path, start_checker
from devagent.agent.tools.findings import Findings
from devagent.agent.tools.lsp import LanguageServer, ServerFailed

MAX_SESSIONS = 8  # sessions whose servers are kept running at once
IDLE_SECONDS = 1800.0  # a session's servers stop once no call of it has used them this long
START_SECONDS = 60.0  # a server's start and its first check (it reads the project)
CHECK_SECONDS = 20.0  # one later check (the old text and the new)


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """A language server: its name, its command, and the files it checks (suffix -> the LSP
    language id)."""

    name: str
    argv: tuple[str, ...]
    languages: dict[str, str]


_PYTHON = {".py": "python", ".pyi": "python"}
_TYPESCRIPT = {
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "typescriptreact",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascriptreact",
}
# In order of preference: the first one installed checks a file.
SERVERS = (
    ServerSpec("basedpyright", ("basedpyright-langserver", "--stdio"), _PYTHON),
    ServerSpec("pyright", ("pyright-langserver", "--stdio"), _PYTHON),
    ServerSpec("typescript-language-server", ("typescript-language-server", "--stdio"), _TYPESCRIPT),
    ServerSpec("gopls", ("gopls",), {".go": "go"}),
    ServerSpec("rust-analyzer", ("rust-analyzer",), {".rs": "rust"}),
)


def server_for(path: Path, search_path: str) -> ServerSpec | None:
    """The installed server that checks the file at `path`, if any."""
    suffix = path.suffix.lower()
    for spec in SERVERS:
        if suffix in spec.languages and shutil.which(spec.argv[0], path=search_path) is not None:
            return spec
    return None


class SessionServers:
    """One session's language servers, by (server, workspace root)."""

    def __init__(self) -> None:
        self._servers: dict[tuple[str, Path], LanguageServer] = {}
        self._broken: dict[tuple[str, Path], str] = {}
        self._starting = asyncio.Lock()
        self.used = time.monotonic()  # when a call of the session last got them

    def pids(self) -> list[int]:
        return [s.proc.pid for s in self._servers.values()]

    def running(self) -> bool:
        """Whether any of its servers is started (or starting: `_start` holds `_starting`)."""
        return bool(self._servers) or self._starting.locked()

    async def findings(self, ctx: ToolContext, real: Path, old: str | None, new: str) -> Findings | None:
        """What the file's language server says of its old and new text; None when no server
        checks it; a note when the server could not say."""
        spec = server_for(real, checker_path(ctx))
        if spec is None:
            return None
        root = next((r for r in ctx.workspace.roots if real.is_relative_to(r)), ctx.workspace.primary)
        key = (spec.name, root)
        if key in self._broken:
            return Findings(spec.name, note=self._broken[key])
        server, seconds = self._servers.get(key), CHECK_SECONDS
        if server is None:
            seconds = START_SECONDS
        language = spec.languages[real.suffix.lower()]
        try:
            async with asyncio.timeout(seconds):
                if server is None:
                    server = await self._start(ctx, spec, root)
                async with server.lock:
                    before = await server.diagnose(real, old, language) if old is not None else None
                    after = await server.diagnose(real, new, language)
        except TimeoutError:
            return Findings(spec.name, note=f"{spec.name} did not answer within {seconds:g} s")
        except (ServerFailed, CheckerUnavailable) as e:
            self._broken[key] = f"{spec.name} failed: {str(e)[:200]}"
            failed = self._servers.pop(key, None)
            if failed is not None:
                await failed.stop()
            return Findings(spec.name, note=self._broken[key])
        return Findings(spec.name, before, after)

    async def _start(self, ctx: ToolContext, spec: ServerSpec, root: Path) -> LanguageServer:
        key = (spec.name, root)
        async with self._starting:
            running = self._servers.get(key)
            if running is not None:
                return running
            proc = await start_checker(ctx, shlex.join(spec.argv), str(root))
            server = LanguageServer(proc, root)
            self._servers[key] = server
        try:
            await server.initialize()
        except BaseException:
            self._servers.pop(key, None)
            await asyncio.shield(server.stop())
            raise
        return server

    async def stop(self) -> None:
        servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            with contextlib.suppress(Exception):
                await server.stop()


class LanguageServerRegistry:
    """The language servers of this process's sessions (never stored: they end with it)."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[str, SessionServers] = OrderedDict()
        self._stopping: set[asyncio.Task[None]] = set()

    def of(self, session_id: str) -> SessionServers:
        """The session's servers (a call of it uses them: its idle time starts again)."""
        now = time.monotonic()
        servers = self._sessions.pop(session_id, None) or SessionServers()
        servers.used = now
        self._sessions[session_id] = servers  # a use moves it to the end
        while (
            len(self._sessions) > MAX_SESSIONS
            or next(iter(self._sessions.values())).used < now - IDLE_SECONDS
        ):
            _, oldest = self._sessions.popitem(last=False)
            if not oldest.running():  # most sessions never start one: no task to stop nothing
                continue
            task = asyncio.get_running_loop().create_task(oldest.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        return servers

    def _oldest_used(self) -> float:
        return next(iter(self._sessions.values())).used

    def pids(self, session_id: str) -> list[int]:
        servers = self._sessions.get(session_id)
        return servers.pids() if servers is not None else []

    async def stop_session(self, session_id: str) -> None:
        servers = self._sessions.pop(session_id, None)
        if servers is not None:
            await servers.stop()

    async def close(self) -> None:
        for session_id in list(self._sessions):
            await self.stop_session(session_id)
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)
