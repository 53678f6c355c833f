"""The work of bench/long_session.py done by Gemini CLI's A2A server and by devagent, both against
one fake Gemini API that measures what each sends (issue 24).

    npm ci --prefix bench/js            # once: @google/gemini-cli-a2a-server, pinned
    .venv/bin/python bench/gemini_a2a_compare.py [--turns 200] [--window 8192]

One conversation of N turns: each turn the user asks for big.txt (18 kB), the model calls the
agent's own read_file tool, then answers in two words. Every request reaches the fake model of
this file (the Gemini API's streamGenerateContent, generateContent and countTokens), which counts
the bytes of its body as received and estimates its tokens at four bytes each (as long_session.py
does); it reports that estimate back as the prompt's token count, which is what both agents use
to decide when to compact. Four runs:

  gemini-a2a    `gemini-cli-a2a-server` (bench/js), one A2A task driven turn after turn over
                JSON-RPC `message/stream`, tools auto-approved; its model is gemini-2.5-pro,
                the default it offers, whose window it takes as 1,048,576 tokens; it compresses
                at half of that (its compressionThreshold setting is not read by this server).
  devagent      devagent's core on google:gemini-2.5-pro (pydantic-ai's Google path) through the
                same fake, its default window for that model (1,048,576; compaction at 80%).
  devagent@50%  the same, compacting at half the window as Gemini CLI does (DEVAGENT_COMPACT_AT).
  devagent-Nk   the same with --window tokens (long_session.py's compacted run, on this path).

Printed: per run, the request carrying the tool result at turns 1, N/4, N/2, 3N/4 and N, the
largest request, the bytes of all requests, the number of requests, the summaries (compressions)
asked for and in which turns, and where a run stopped if it did; then ratios to Gemini CLI.
Nothing is written outside a temporary folder, removed at the end. The server is started with
bench/js/offline.mjs preloaded, which refuses its fetch() calls to any host but this one (its
usage statistics).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.gemini_server import FakeGemini  # noqa: E402

JS = ROOT / "bench" / "js"
PACKAGE = JS / "node_modules" / "@google" / "gemini-cli-a2a-server"
SERVER = PACKAGE / "dist" / "a2a-server.mjs"
OFFLINE = JS / "offline.mjs"
GEMINI_MODEL = "gemini-2.5-pro"  # what the a2a-server uses unless preview features are on
BIG = "".join(f"line {i:05d} of a large file, padded to matter\n" for i in range(400))
ANSWER = "Read it."
SUMMARY = "Summary: the user asks for big.txt every turn; it was read each time."


class Meter(FakeGemini):
    """The fake Gemini API, scripted for the bench, with the size of every request it gets.

    A user's prompt is answered with a read_file call (`arg` names the tool's path argument, which
    differs between the agents), a function response with ANSWER, a request for a summary with a
    short one. `kinds` lists (kind, bytes) for every request, in order."""

    def __init__(self, arg: str, summary_marks: tuple[str, ...]) -> None:
        super().__init__(self._script)
        self.arg = arg
        self.summary_marks = summary_marks
        self.kinds: list[tuple[str, int]] = []
        self.turn_sizes: list[int] = []  # each turn's request carrying the tool result
        self.summary_turns: list[int] = []  # the turn during which each summary was asked for
        self._size = 0

    def _kind(self, body: dict[str, Any]) -> str:
        system = json.dumps(body.get("systemInstruction") or "")
        last = (body.get("contents") or [{}])[-1]
        parts = last.get("parts") or []
        text = "".join(p.get("text", "") for p in parts if isinstance(p, dict))
        if any(m in text or m in system for m in self.summary_marks):
            return "summary"
        if any("functionResponse" in p for p in parts):
            return "result"
        if last.get("role") == "user" and "read big.txt" in text:
            return "prompt"
        return "other"

    def _script(self, body: dict[str, Any]) -> tuple[list[list[dict[str, Any]]], dict[str, int]]:
        kind = self._kind(body)
        self.kinds.append((kind, self._size))
        usage = {"promptTokenCount": self._size // 4, "candidatesTokenCount": 8}
        usage["totalTokenCount"] = usage["promptTokenCount"] + 8
        if kind == "result":
            self.turn_sizes.append(self._size)
            return [[{"text": ANSWER}]], usage
        if kind == "prompt":
            call = {"name": "read_file", "args": {self.arg: "big.txt"}}
            return [[{"functionCall": call}]], usage
        if kind == "summary":
            self.summary_turns.append(len(self.turn_sizes) + 1)
            return [[{"text": SUMMARY}]], usage
        return [[{"text": "Done."}]], usage

    async def _generate(self, request: Request) -> Response:
        raw = await request.body()
        self._size = len(raw)
        path = request.url.path
        if path.endswith(":streamGenerateContent"):
            return await super()._generate(request)
        body = json.loads(raw)
        if path.endswith(":countTokens"):
            self.kinds.append(("count", self._size))
            return JSONResponse({"totalTokens": self._size // 4})
        if path.endswith(":generateContent"):
            chunks, usage = self._script(body)
            parts = [p for chunk in chunks for p in chunk]
            cand = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            return JSONResponse({"candidates": [cand], "usageMetadata": usage, "modelVersion": "gemini-fake"})
        return Response(f"the bench's fake does not serve {path}", status_code=404)

    def result(self, stopped: str | None) -> dict[str, Any]:
        return {
            "sizes": self.turn_sizes,
            "total": sum(size for _, size in self.kinds),
            "requests": len(self.kinds),
            "summaries": self.summary_turns,
            "other": sum(1 for kind, _ in self.kinds if kind in ("other", "count")),
            "stopped": stopped,
        }


# --- Gemini CLI's A2A server -------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _message(text: str, context_id: str, task_id: str | None, workspace: Path) -> dict[str, Any]:
    message: dict[str, Any] = {
        "kind": "message",
        "role": "user",
        "messageId": str(uuid.uuid4()),
        "contextId": context_id,
        "parts": [{"kind": "text", "text": text}],
    }
    if task_id is None:
        # Gemini CLI's coderAgent dialect: the task's settings ride on its first message.
        message["metadata"] = {
            "coderAgent": {"kind": "agent-settings", "workspacePath": str(workspace), "autoExecute": True}
        }
    else:
        message["taskId"] = task_id
    return {
        "jsonrpc": "2.0",
        "id": str(uuid.uuid4()),
        "method": "message/stream",
        "params": {"message": message},
    }


async def _turn(client: httpx.AsyncClient, url: str, payload: dict[str, Any]) -> tuple[str, str]:
    """One user turn over `message/stream`: returns (task id, final state), or raises with what
    the server said instead."""
    task_id, state, said = "", "", ""
    async with client.stream("POST", url, json=payload) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data:"):
                continue
            frame = json.loads(line[5:])
            if "error" in frame:
                raise RuntimeError(f"JSON-RPC error: {frame['error']}")
            event = frame["result"]
            task_id = event.get("taskId") or event.get("id") or task_id
            status = event.get("status") or {}
            state = status.get("state", state)
            for part in (status.get("message") or {}).get("parts", []):
                if part.get("kind") == "text":
                    said = part["text"]
            if event.get("kind") == "status-update" and event.get("final"):
                break
    if state != "input-required":
        raise RuntimeError(f"the task ended {state!r}: {said[:300]}")
    if said.startswith("Agent Error"):
        raise RuntimeError(said[:300])
    return task_id, state


async def run_gemini(turns: int, tmp: Path) -> dict[str, Any]:
    meter = Meter("file_path", ("<state_snapshot>", "state_snapshot"))
    home, ws = tmp / "gemini-home", tmp / "gemini-ws"
    (home / ".gemini").mkdir(parents=True)
    ws.mkdir()
    (ws / "big.txt").write_text(BIG)
    settings = {"folderTrust": False, "telemetry": {"enabled": False}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    port = _free_port()
    log = tmp / "gemini-a2a.log"
    stopped: str | None = None
    async with meter as base_url:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "GEMINI_API_KEY": "fake-key",
            "GOOGLE_GEMINI_BASE_URL": base_url,
            "CODER_AGENT_PORT": str(port),
            "CODER_AGENT_WORKSPACE_PATH": str(ws),
            "GEMINI_YOLO_MODE": "true",
            "NO_COLOR": "1",
        }
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                "node", "--import", OFFLINE.as_uri(), str(SERVER), cwd=ws, env=env, stdout=out, stderr=out
            )
            try:
                url = f"http://127.0.0.1:{port}/"
                async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=5)) as client:
                    await _wait_for_card(client, url, proc, log)
                    context_id, task_id = str(uuid.uuid4()), None
                    for turn in range(turns):
                        payload = _message(f"turn {turn}: read big.txt", context_id, task_id, ws)
                        try:
                            task_id, _ = await _turn(client, url, payload)
                        except (RuntimeError, httpx.HTTPError) as e:
                            stopped = f"turn {turn + 1}: {e}"
                            break
            finally:
                if proc.returncode is None:
                    proc.terminate()
                    await proc.wait()
    if stopped is not None:
        stopped += f" (server log, last lines: {_tail(log)})"
    return meter.result(stopped)


async def _wait_for_card(client: httpx.AsyncClient, url: str, proc: Any, log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            raise SystemExit(f"gemini-cli-a2a-server exited ({proc.returncode}): {_tail(log)}")
        try:
            r = await client.get(url + ".well-known/agent-card.json")
            if r.status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.2)
    raise SystemExit(f"gemini-cli-a2a-server did not start in 120 s: {_tail(log)}")


def _tail(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines()
    return " | ".join(line[:300] for line in lines[-5:])


# --- devagent ----------------------------------------------------------------------------------


async def run_devagent(turns: int, window: int, compact_at: float, tmp: Path) -> dict[str, Any]:
    from devagent.agent.core import AgentCore
    from devagent.agent.events import UserPrompt
    from devagent.agent.loop.compact import COMPACT_PROMPT
    from devagent.agent.settings import CoreConfig

    meter = Meter("path", (COMPACT_PROMPT[:40],))
    ws = tmp / f"devagent-ws-{window}-{compact_at}"
    ws.mkdir()
    (ws / "big.txt").write_text(BIG)
    stopped: str | None = None
    async with meter as base_url:
        core = await AgentCore.open(
            CoreConfig(
                db_url=f"sqlite+aiosqlite:///{tmp}/devagent-{window}-{compact_at}.db",
                default_model=f"google:{GEMINI_MODEL}",
                model_base_url=base_url,
                model_api_key="k",
                context_tokens=window,  # 0: what devagent knows of the model (1,048,576)
                compact_at=compact_at,
                approval_mode="yolo",
            )
        )
        try:
            s = await core.create_session([ws], approval_mode="yolo")
            for turn in range(turns):
                before = len(meter.turn_sizes)
                async for _ in s.advance(UserPrompt(f"turn {turn}: read big.txt")):
                    pass
                if len(meter.turn_sizes) == before:
                    stopped = f"turn {turn + 1}: no request carried the tool's result"
                    break
        finally:
            await core.close()
    return meter.result(stopped)


# --- report ------------------------------------------------------------------------------------


def report(name: str, r: dict[str, Any], turns: int) -> None:
    sizes = r["sizes"]
    if not sizes:
        print(f"{name:13} no turn completed: {r['stopped']}")
        return
    marks = [m for m in sorted({0, turns // 4, turns // 2, 3 * turns // 4, turns - 1}) if m < len(sizes)]
    cells = ", ".join(f"turn {m + 1}: {sizes[m]:,} B (~{sizes[m] // 4:,} tok)" for m in marks)
    print(f"{name:13} {cells}")
    print(
        f"{'':13} turns done {len(sizes)}; largest {max(sizes):,} B (~{max(sizes) // 4:,} tok) at turn "
        f"{sizes.index(max(sizes)) + 1}; all requests {r['total'] / 1e6:.1f} MB in {r['requests']}; "
        f"summaries {len(r['summaries'])}{_at(r['summaries'])}; other requests {r['other']}"
    )
    if r["stopped"]:
        print(f"{'':13} stopped at {r['stopped']}")


def _at(turns: list[int]) -> str:
    if not turns:
        return ""
    shown = ", ".join(str(t) for t in turns[:4]) + (", ..." if len(turns) > 4 else "")
    return f" (turns {shown})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--window", type=int, default=8192)
    ap.add_argument("--skip-devagent", action="store_true", help="only Gemini CLI's A2A server")
    a = ap.parse_args()
    if not SERVER.exists():
        raise SystemExit(
            f"Gemini CLI's A2A server is not installed in {JS.relative_to(ROOT)}; run:\n"
            f"    npm ci --prefix {JS.relative_to(ROOT)}"
        )
    if shutil.which("node") is None:
        raise SystemExit("node is not on PATH (Gemini CLI's A2A server needs Node.js 20 or later)")
    version = json.loads((PACKAGE / "package.json").read_text())["version"]
    runs: list[tuple[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        runs.append(("gemini-a2a", asyncio.run(run_gemini(a.turns, tmp))))
        if not a.skip_devagent:
            runs.append(("devagent", asyncio.run(run_devagent(a.turns, 0, 0.8, tmp))))
            runs.append(("devagent@50%", asyncio.run(run_devagent(a.turns, 0, 0.5, tmp))))
            small = asyncio.run(run_devagent(a.turns, a.window, 0.8, tmp))
            runs.append((f"devagent-{a.window // 1024}k", small))
    print(
        f"{a.turns} turns, each reading a {len(BIG):,}-byte file, model {GEMINI_MODEL} (fake); "
        f"@google/gemini-cli-a2a-server {version}; bytes as received, tokens ~ bytes/4"
    )
    for name, r in runs:
        report(name, r, a.turns)
    g = runs[0][1]
    for name, r in runs[1:]:
        if g["sizes"] and r["sizes"]:
            n = min(len(g["sizes"]), len(r["sizes"]))
            print(
                f"{name} / gemini-a2a: request at turn {n} {r['sizes'][n - 1] / g['sizes'][n - 1]:.3f}x; "
                f"largest {max(r['sizes']) / max(g['sizes']):.3f}x; all bytes {r['total'] / g['total']:.3f}x"
            )


if __name__ == "__main__":
    main()
