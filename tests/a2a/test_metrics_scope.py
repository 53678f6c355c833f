"""Issue 28 item 6: `/metrics` of a real `devagent serve` tells each caller's spend (identity
labels) only to the operator's metrics token (`--metrics-token`), which is good for /metrics
alone; a caller's token reads the totals of all callers, with no identity in them."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from tests.a2a.helpers import auth, call, rpc, v03_message
from tests.a2a.procs import TOKEN, serving
from tests.conftest import Script

USAGE = {"usage": {"input_tokens": 120, "output_tokens": 30}}
METRICS_TOKEN = "tok-metrics-3f9a"


async def test_issue28_item6_metrics_per_identity_only_for_the_metrics_token(
    script: Script, sqlite_url: str, workspace: Path
) -> None:
    model = script([[{"text": f"answer {n}"}, USAGE] for n in range(4)])
    args = ["--db", sqlite_url, "--workspace-root", str(workspace.parent), "--model", model]
    args += ["--token", f"alice={TOKEN}", "--token", "bob=tok-bob", "--metrics-token", METRICS_TOKEN]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    with serving(args, workspace.parent / "serve.log", env=env) as srv:
        async with httpx.AsyncClient(timeout=60) as c:
            for token in (TOKEN, "tok-bob"):
                body = rpc("message/send", {"message": v03_message("hello")})
                got = await call(c, srv.url, body, auth(token, ext=False))
                assert got["result"]["status"]["state"] == "completed", got
            as_caller = await c.get(srv.url + "metrics", headers=auth(TOKEN, ext=False))
            as_reader = await c.get(srv.url + "metrics", headers=auth(METRICS_TOKEN, ext=False))
            # the metrics token is no caller: no task, no card extension, nothing else
            elsewhere = await call(c, srv.url, rpc("tasks/get", {"id": "x"}), auth(METRICS_TOKEN, ext=False))
            healthz = await c.get(srv.url + "healthz", headers=auth(METRICS_TOKEN, ext=False))
    assert as_caller.status_code == 200 and as_reader.status_code == 200
    caller, reader = as_caller.text, as_reader.text
    assert "identity=" not in caller and "alice" not in caller and "bob" not in caller, caller
    assert 'devagent_tokens_total{kind="input"} 240.0' in caller, caller
    assert "devagent_model_requests_total 2.0" in caller, caller
    assert "devagent_turns_total" in caller  # the server's own metrics stay readable
    assert 'devagent_tokens_total{identity="alice",kind="input"} 120.0' in reader, reader
    assert 'devagent_model_requests_total{identity="bob"} 1.0' in reader, reader
    assert METRICS_TOKEN not in reader and "tok-bob" not in reader
    assert "invalid token" in elsewhere["error"]["message"], elsewhere
    assert healthz.status_code == 401
