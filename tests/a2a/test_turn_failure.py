"""A failure the core did not foresee ends the turn `failed` with a reference, never Python's
own words (issue 12 item 3), and the conversation goes on."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from devagent.agent.session import Session
from tests.a2a.helpers import auth, results, rpc, running_server, stream, stream_message, v03_message


class _Exploding:
    """A turn handle whose events end in an unexpected exception."""

    async def cancel(self) -> None:
        return None

    def __aiter__(self) -> _Exploding:
        return self

    async def __anext__(self) -> Any:
        raise KeyError("secret /src/devagent/agent/session.py detail")


async def test_unexpected_failure_gives_a_reference_not_internals(
    script: Callable[..., str],
    sqlite_url: str,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    steps = [{"items": [{"text": "fine again"}]}]
    real_advance = Session.advance
    async with (
        running_server(script(steps), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        monkeypatch.setattr(Session, "advance", lambda self, inp, **kw: _Exploding())
        with caplog.at_level(logging.ERROR, logger="devagent.errors"):
            body = rpc("message/stream", {"message": v03_message("hi")})
            evs = results(await stream(c, srv.url, body, auth()))
        last = evs[-1]
        assert last["status"]["state"] == "failed", last
        text = " ".join(p.get("text", "") for p in last["status"]["message"]["parts"])
        found = re.search(r"Internal error \(reference ([0-9a-f]{12})\)", text)
        assert found, text
        dumped = str(evs)
        assert "KeyError" not in dumped and "secret" not in dumped and "/src/" not in dumped
        assert any(found.group(1) in r.getMessage() and r.exc_info for r in caplog.records)

        monkeypatch.setattr(Session, "advance", real_advance)
        again = v03_message("again", context_id=evs[0]["contextId"])
        evs = results(await stream_message(c, srv.url, again))
        assert evs[-1]["status"]["state"] == "completed", evs[-1]


async def test_a_clients_malformed_request_is_one_warning_line_in_the_log(
    script: Callable[..., str], sqlite_url: str, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK logs a request that fails its validation with a traceback; the server's log gets
    one warning line instead (the client's mistake, answered with a JSON-RPC error)."""
    async with (
        running_server(script([{"items": [{"text": "ok"}]}]), sqlite_url, workspace) as srv,
        httpx.AsyncClient(timeout=30) as c,
    ):
        with caplog.at_level(logging.INFO):
            bad = {"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": {"parts": 5}}}
            answer = (await c.post(srv.url, json=bad, headers=auth())).json()
    assert answer["error"]["code"] in (-32600, -32602), answer
    sdk = [r for r in caplog.records if r.name.startswith("a2a.") and "Failed to validate" in r.getMessage()]
    assert sdk, [r.getMessage() for r in caplog.records]
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in sdk)
    assert all("\n" not in r.getMessage() for r in sdk)
