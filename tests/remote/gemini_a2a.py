"""Gemini CLI's own A2A server (`@google/gemini-cli-a2a-server` from npm, tests/remote/js) on a fake
Gemini API, for tests that use it as a remote subagent.

    async with gemini_a2a_server(tmp_path, answer_chunks) as (card_url, fake):
        ...

The fake model answers every prompt with `answer_chunks` (streamed, one chunk each) and records
the requests. The server runs with a temporary HOME (folder trust and telemetry off), its
workspace in tmp_path, and js/offline.mjs preloaded so nothing it sends leaves the machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.fakes.gemini_server import FakeGemini
from tests.npm import ensure_installed

JS = Path(__file__).parent / "js"
SERVER = JS / "node_modules" / "@google" / "gemini-cli-a2a-server" / "dist" / "a2a-server.mjs"
OFFLINE = JS / "offline.mjs"


class ScriptedGemini(FakeGemini):
    """The fake Gemini API answering every turn with the same text chunks; the other calls the
    Gemini CLI core makes (`generateContent`, `countTokens`) get short valid answers."""

    def __init__(self, chunks: list[str]) -> None:
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
        super().__init__(lambda _body: ([[{"text": c}] for c in chunks], usage))

    async def _generate(self, request: Request) -> Response:
        path = request.url.path
        if path.endswith(":streamGenerateContent"):
            return await super()._generate(request)
        self.paths.append(path)
        if path.endswith(":countTokens"):
            return JSONResponse({"totalTokens": 10})
        cand = {"content": {"role": "model", "parts": [{"text": "{}"}]}, "finishReason": "STOP", "index": 0}
        return JSONResponse({"candidates": [cand], "modelVersion": "gemini-fake"})


@asynccontextmanager
async def gemini_a2a_server(tmp_path: Path, chunks: list[str]) -> AsyncIterator[tuple[str, ScriptedGemini]]:
    """The server on a free port, its model the fake; yields (its card URL, the fake). Skips the
    test without node or the npm package (installed by scripts/test, or here). Without
    CODER_AGENT_PORT the server binds a free port itself and logs it (a port picked here and handed
    over could be taken meanwhile by another test's server, which would then answer in its place)."""
    ensure_installed(JS, SERVER, "@google/gemini-cli-a2a-server")
    home, ws = tmp_path / "gemini-home", tmp_path / "gemini-ws"
    (home / ".gemini").mkdir(parents=True)
    ws.mkdir()
    settings = {"folderTrust": False, "telemetry": {"enabled": False}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    fake = ScriptedGemini(chunks)
    log = tmp_path / "gemini-a2a.log"
    async with fake as base_url:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "GEMINI_API_KEY": "fake-key",
            "GOOGLE_GEMINI_BASE_URL": base_url,
            "CODER_AGENT_WORKSPACE_PATH": str(ws),
            "NO_COLOR": "1",
        }
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                "node", "--import", OFFLINE.as_uri(), str(SERVER), cwd=ws, env=env, stdout=out, stderr=out
            )
        try:
            card = f"http://localhost:{await _announced_port(proc, log)}/.well-known/agent-card.json"
            await _wait_for_card(card, proc, log)
            yield card, fake
        finally:
            if proc.returncode is None:
                proc.terminate()
            await proc.wait()


async def _announced_port(proc: Any, log: Path) -> int:
    """The port the server says it took ("Agent Server started on http://localhost:PORT")."""
    for _ in range(1200):  # a hang guard: it starts in a few seconds
        found = re.search(r"Agent Server started on http://localhost:(\d+)", log.read_text(errors="replace"))
        if found:
            return int(found.group(1))
        if proc.returncode is not None:
            raise AssertionError(f"gemini-cli-a2a-server exited ({proc.returncode}): {_tail(log)}")
        await asyncio.sleep(0.1)
    raise AssertionError(f"gemini-cli-a2a-server never said its port: {_tail(log)}")


async def _wait_for_card(card: str, proc: Any, log: Path) -> None:
    """Until the server answers its card (it starts in a few seconds; a failed start says why)."""
    async with httpx.AsyncClient(timeout=5) as client:
        for _ in range(1200):
            if proc.returncode is not None:
                raise AssertionError(f"gemini-cli-a2a-server exited ({proc.returncode}): {_tail(log)}")
            try:
                if (await client.get(card)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"gemini-cli-a2a-server did not answer its card: {_tail(log)}")


def _tail(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines()
    return " | ".join(line[:300] for line in lines[-8:])
