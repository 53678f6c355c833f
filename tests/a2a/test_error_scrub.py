"""Issue 28 item 7: a provider whose error quotes the request it got (its `Authorization:
Bearer <key>` header included) leaks the key nowhere. A real `devagent serve` on the real
OpenAI provider code (the fake OpenAI server, echoing), traced to an OTLP receiver: the key is in
no span (with trace content off or on), no line of the server's log, no frame of the response.
The model request's span says what failed: the error's type and the HTTP status; its message
only with trace content on, scrubbed."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import v03_message
from tests.a2a.procs import TOKEN, send_stream, serving
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.otlp_receiver import OtlpReceiver


def echo_401(body: dict[str, Any]) -> Reply:
    return Reply(status=401, error_message="invalid key", echo_request=True)


@pytest.mark.parametrize("content", ["off", "on"])
async def test_issue28_item7_an_echoing_providers_key_reaches_no_span_log_or_caller(
    workspace: Path, content: str
) -> None:
    key = f"sk-test-{uuid.uuid4().hex}"
    fake = FakeOpenAI(echo_401)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "DEVAGENT_"))}
    with OtlpReceiver() as receiver:
        environ.update(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, DEVAGENT_TRACE_CONTENT=str(content == "on"))
        async with fake as base_url:
            args = ["--db", f"sqlite+aiosqlite:///{workspace.parent / 'scrub.db'}"]
            args += ["--workspace-root", str(workspace.parent), "--token", TOKEN, "--approval", "ask"]
            args += ["--model", "openai-compatible:fake-model", "--base-url", base_url, "--api-key", key]
            with serving(args, workspace.parent / "serve.log", env=environ) as srv:
                async with httpx.AsyncClient(timeout=60) as c:
                    message = v03_message("hello", settings={"workspace_path": str(workspace)})
                    reply = await send_stream(c, srv.url, message)
                srv.stop()  # every span sent before it exits
                log = srv.stderr()
        spans = receiver.spans
    assert len(fake.requests) == 1
    assert fake.request_headers[0]["authorization"] == f"Bearer {key}"  # the echo had it to quote
    answer = json.dumps(reply.frames)
    assert reply.last_state == "failed", answer
    assert "401" in answer and "invalid key" in answer and "Bearer [redacted]" in answer, answer
    assert "model error" in log.lower(), log
    for where, text in [("response", answer), ("log", log), *((s.name, s.text()) for s in spans)]:
        assert key not in text and key[8:] not in text, (where, text)
    (chat,) = [s for s in spans if s.name == "chat fake-model"]
    assert chat.status_code == 2  # error
    assert chat.attributes["error.type"] in ("ModelHTTPError", "ModelAuthenticationError")
    assert chat.attributes["http.response.status_code"] == 401
    if content == "on":
        assert "invalid key" in chat.status_message and "[redacted]" in chat.status_message, chat
    else:
        assert chat.status_message == chat.attributes["error.type"], chat
