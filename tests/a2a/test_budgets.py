"""Spend per caller and budgets (issue 24 item 3) on the A2A server: usage summed per token
identity and day in the store and in /metrics (labelled by the token's name, never the token),
and a caller over its budget refused with a clear error while the others go on."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.a2a.helpers import auth, call, rpc, running_server, v03_message
from tests.conftest import Script

TOKENS = {"tok-alice": "alice", "tok-bob": "bob"}
USAGE = {
    "usage": {"input_tokens": 120, "output_tokens": 30, "cache_read_tokens": 90, "cache_write_tokens": 20}
}
SPENDY = [{"items": [{"text": f"answer {i}"}, USAGE]} for i in range(6)]


async def send(c: httpx.AsyncClient, url: str, token: str, text: str) -> dict[str, Any]:
    got = await call(c, url, rpc("message/send", {"message": v03_message(text)}), auth(token, ext=False))
    assert "result" in got, got
    task: dict[str, Any] = got["result"]
    return task


def devagent_sessions(db: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "devagent", "sessions", "--db", db, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def status_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in (task["status"].get("message") or {}).get("parts") or [])


async def test_issue24_a_caller_over_its_daily_tokens_is_refused_and_others_go_on(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    core_kw = {"budget_tokens_per_day": 100, "budgets": ("bob=1000/0",)}
    a2a_kw = {"metrics_token": "tok-metrics"}  # each caller's spend is the operator's to read
    async with running_server(
        script(SPENDY), sqlite_url, workspace, tokens=TOKENS, core_kw=core_kw, a2a_kw=a2a_kw
    ) as srv:
        async with httpx.AsyncClient(timeout=60) as c:
            first = await send(c, srv.url, "tok-alice", "hello")
            assert first["status"]["state"] == "completed"
            # the conversation's tokens with the final status, cached ones included (issue 24 item 2)
            usage = first["metadata"]["devagent"]["usage"]
            assert (usage["inputTokens"], usage["cacheReadTokens"], usage["cacheWriteTokens"]) == (
                120,
                90,
                20,
            )
            refused = await send(c, srv.url, "tok-alice", "hello again")
            assert refused["status"]["state"] == "failed"
            text = status_text(refused)
            assert "refused by the server's budget" in text and "150 of its 100 tokens" in text, text
            # Bob has a budget of his own and goes on
            for n in range(3):
                assert (await send(c, srv.url, "tok-bob", f"hi {n}"))["status"]["state"] == "completed"
            metrics = (await c.get(srv.url + "metrics", headers=auth("tok-metrics", ext=False))).text
            core = getattr(srv.app, "app", srv.app).state.executor.core
            rows = {r["identity"]: r for r in await core.store.usage()}
    assert 'devagent_tokens_total{identity="alice",kind="input"} 120.0' in metrics
    assert 'devagent_tokens_total{identity="alice",kind="cached"} 90.0' in metrics
    assert 'devagent_tokens_total{identity="alice",kind="cache_write"} 20.0' in metrics
    assert 'devagent_tokens_total{identity="bob",kind="output"} 90.0' in metrics
    assert 'devagent_model_requests_total{identity="bob"} 3.0' in metrics
    assert "tok-alice" not in metrics and "tok-bob" not in metrics
    # `devagent sessions` shows each session's caller and tokens, and the spend per caller
    table = await asyncio.to_thread(devagent_sessions, sqlite_url)
    assert "Usage per caller" in table and "alice" in table and "bob" in table, table
    assert "cache writes" in table, table
    listed = json.loads(await asyncio.to_thread(devagent_sessions, sqlite_url, "--json"))
    assert {r["identity"] for r in listed} == {"alice", "bob"}
    assert sum(r["usage"]["input_tokens"] for r in listed if r["identity"] == "bob") == 360
    alice = rows["alice"]
    assert (alice["input_tokens"], alice["output_tokens"], alice["requests"]) == (120, 30, 1)
    assert (alice["cached_tokens"], alice["cache_write_tokens"]) == (90, 20)
    assert (rows["bob"]["input_tokens"], rows["bob"]["requests"]) == (360, 3)


async def test_issue24_concurrent_turns_per_caller(script: Script, sqlite_url: str, workspace: Path) -> None:
    """alice may run one turn at a time: while her command runs, a second conversation of hers is
    refused; bob's is not; once hers ended, she may start again."""
    gate = workspace / "go"
    wait = {"command": f"while [ ! -e {gate} ]; do sleep 0.05; done"}
    steps = [
        {"items": [{"tool_call": {"name": "run_shell_command", "args": wait, "id": "s1"}}]},
        {"items": [{"text": "released"}]},
    ]
    core_kw = {"budgets": ("alice=0/1",), "approval_mode": "yolo"}
    a2a_kw = {"plain_approval": "server"}  # the server's yolo: the command runs unasked
    async with running_server(
        script(steps), sqlite_url, workspace, tokens=TOKENS, core_kw=core_kw, a2a_kw=a2a_kw
    ) as srv:
        async with httpx.AsyncClient(timeout=60) as c:

            async def start(token: str, text: str) -> str:
                body = rpc(
                    "message/send", {"message": v03_message(text), "configuration": {"blocking": False}}
                )
                started = await call(c, srv.url, body, auth(token, ext=False))
                return str(started["result"]["id"])

            async def reaches(token: str, task_id: str, state: str) -> None:
                while True:  # polled until the state shows; the test's own timeout bounds it
                    got = await call(c, srv.url, rpc("tasks/get", {"id": task_id}), auth(token, ext=False))
                    if got["result"]["status"]["state"] == state:
                        return
                    await asyncio.sleep(0.05)

            alice_task = await start("tok-alice", "run the gate")
            await reaches("tok-alice", alice_task, "working")  # her command runs (the session leased)
            refused = await send(c, srv.url, "tok-alice", "a second conversation")
            assert refused["status"]["state"] == "failed"
            assert "already has 1 turns running" in status_text(refused), status_text(refused)
            bob_task = await start("tok-bob", "bob's own command")  # bob is not limited
            await reaches("tok-bob", bob_task, "working")
            gate.touch()
            await reaches("tok-alice", alice_task, "completed")
            await reaches("tok-bob", bob_task, "completed")
            assert (await send(c, srv.url, "tok-alice", "again"))["status"]["state"] == "completed"
