"""Operability of `devagent serve` (issue 13 item 4): one log line per request and per turn (JSON
with --log-format json), and Prometheus metrics at /metrics behind the bearer auth, from a real
server process."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import auth, v03_message
from tests.a2a.procs import TOKEN, confirmation, get_task, send_stream, serve_argv, serving
from tests.core_helpers import write_call

STEPS = [
    {"items": [write_call("m.txt", "M\n", "w1")]},
    {"items": [{"text": "done"}]},
]


def _metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the exposition text (0 when it is absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:]+)(\{([^}]*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = ",".join(sorted((m.group(3) or "").split(","))) if m.group(3) else ""
        if got == want:
            return float(m.group(4))
    return 0.0


def _json_lines(log: Path) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


async def test_metrics_and_json_log_lines(tmp_path: Path, workspace: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": STEPS}))
    db = f"sqlite+aiosqlite:///{tmp_path / 'o.db'}"
    args = serve_argv(db, workspace, f"scripted:{script}", "--no-sandbox", "--log-format", "json")
    log = tmp_path / "serve.log"
    with serving(args, log) as srv:
        async with httpx.AsyncClient(timeout=60) as client:
            # behind the same auth as everything but the card
            assert (await client.get(srv.url + "metrics")).status_code == 401
            assert (
                await client.get(srv.url + "metrics", headers={"Authorization": "Bearer no"})
            ).status_code == 401

            reply = await send_stream(
                client, srv.url, v03_message("write m", settings={"workspace_path": str(workspace)})
            )
            assert reply.last_state == "input-required"
            task_id = reply.results[0]["id"]
            r = await client.get(srv.url + "metrics", headers=auth(TOKEN, ext=False))
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
            m = r.text
            assert _metric(m, "devagent_turns_total", outcome="input-required") == 1
            assert _metric(m, "devagent_pending_permission_requests") == 1
            assert _metric(m, "devagent_open_streams") == 0  # the stream closed
            assert _metric(m, "devagent_time_to_first_event_seconds_count") == 1

            task = await get_task(client, srv.url, task_id)
            reply = await send_stream(client, srv.url, confirmation(task, "w1"))
            assert reply.last_state == "completed"
            m = (await client.get(srv.url + "metrics", headers=auth(TOKEN, ext=False))).text
            assert _metric(m, "devagent_turns_total", outcome="finished") == 1
            assert _metric(m, "devagent_tool_calls_total", tool="write_file", outcome="succeeded") == 1
            assert _metric(m, "devagent_pending_permission_requests") == 0
            assert _metric(m, "devagent_turn_duration_seconds_count") == 2
            assert _metric(m, "devagent_requests_total", method="message/stream", status="200") == 2
            assert _metric(m, "devagent_requests_total", method="tasks/get", status="200") == 1
            assert _metric(m, "devagent_errors_total", kind="turn_error") == 0

    lines = _json_lines(log)
    turns = [x for x in lines if x.get("event") == "turn"]
    assert [(t["task_id"], t["state"]) for t in turns] == [(task_id, "input-required"), (task_id, "finished")]
    assert all(
        t["level"] == "info" and t["duration_ms"] >= 0 and t["first_event_ms"] is not None for t in turns
    )
    reqs = [x for x in lines if x.get("event") == "request"]
    streams = [x for x in reqs if x["method"] == "message/stream"]
    assert [(s["task_id"], s["state"], s["status"]) for s in streams] == [
        (task_id, "input-required", 200),
        (task_id, "completed", 200),
    ]
    gets = [x for x in reqs if x["method"] == "tasks/get"]
    assert gets and gets[0]["task_id"] == task_id and gets[0]["state"] == "input-required"


@pytest.mark.parametrize("fmt", ["text"])
async def test_text_log_lines(fmt: str, tmp_path: Path, workspace: Path) -> None:
    """The default format: one readable line per request and per turn, at info level."""
    db = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    args = serve_argv(db, workspace, "demo", "--no-sandbox")
    log = tmp_path / "serve.log"
    with serving(args, log) as srv:
        async with httpx.AsyncClient(timeout=60) as client:
            reply = await send_stream(
                client, srv.url, v03_message("hello", settings={"workspace_path": str(workspace)})
            )
            assert reply.last_state == "completed"
            task_id = reply.results[0]["id"]
    text = log.read_text()
    assert re.search(rf"INFO devagent\.a2a\.turns: turn task={task_id} state=finished [\d.]+ ms", text), text
    assert re.search(
        rf"INFO devagent\.a2a\.requests: request message/stream task={task_id} status=200 state=completed",
        text,
    ), text


async def test_every_route_logged_and_counted_with_bounded_labels(tmp_path: Path, workspace: Path) -> None:
    """Issue 13 item 4: the HTTP+JSON binding's and the Gemini CLI routes' requests get their
    line and count too (a stream when it closes), labelled by route shape, ids replaced."""
    db = f"sqlite+aiosqlite:///{tmp_path / 'r.db'}"
    args = ["--db", db, "--workspace-root", str(workspace), "--token", TOKEN, "--model", "demo"]
    args += ["--no-sandbox", "--log-format", "json"]
    log = tmp_path / "serve.log"
    headers = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}
    with serving(args, log) as srv:
        async with httpx.AsyncClient(timeout=60) as client:
            body = {"message": {"role": "ROLE_USER", "parts": [{"text": "hi"}], "messageId": "r1"}}
            async with client.stream(
                "POST", srv.url + "rest/message:stream", json=body, headers=headers
            ) as resp:
                assert resp.status_code == 200
                text = "".join([chunk async for chunk in resp.aiter_text()])
            task_id = re.search(r'"taskId"\s*:\s*"([^"]+)"', text) or re.search(r'"id"\s*:\s*"([^"]+)"', text)
            assert task_id, text
            tid = task_id.group(1)
            assert (await client.get(srv.url + f"rest/tasks/{tid}", headers=headers)).status_code == 200
            assert (await client.get(srv.url + "rest/tasks/nope-1", headers=headers)).status_code == 404
            assert (await client.get(srv.url + "no/such/route/x1", headers=headers)).status_code == 404
            assert (await client.get(srv.url + "no/such/route/x2", headers=headers)).status_code == 404
            assert (await client.get(srv.url + "listCommands", headers=headers)).status_code == 200
            m = (await client.get(srv.url + "metrics", headers=auth(TOKEN, ext=False))).text
    assert _metric(m, "devagent_requests_total", method="POST /rest/message:stream", status="200") == 1
    assert _metric(m, "devagent_requests_total", method="GET /rest/tasks/*", status="200") == 1
    assert _metric(m, "devagent_requests_total", method="GET /rest/tasks/*", status="404") == 1
    assert _metric(m, "devagent_requests_total", method="GET (no route)", status="404") == 2
    assert _metric(m, "devagent_errors_total", kind="http_5xx") == 0
    assert _metric(m, "devagent_requests_total", method="GET /listCommands", status="200") == 1
    assert _metric(m, "devagent_open_streams") == 0
    reqs = [x for x in _json_lines(log) if x.get("event") == "request"]
    got = {(x["method"], x["task_id"], x["status"]) for x in reqs}
    assert ("POST /rest/message:stream", "", 200) in got, got
    assert ("GET /rest/tasks/*", tid, 200) in got and ("GET /rest/tasks/*", "nope-1", 404) in got
    assert not any(x["method"].startswith("GET /metrics") for x in reqs)
