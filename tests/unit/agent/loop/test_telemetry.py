"""Traces (issue 24 item 4), the parts without a server: when tracing is on, the settings, and the
promise that tracing off costs nothing: no OpenTelemetry SDK module is imported, the a2a SDK's
tracing decorators are left out, and the core's wrappers hand back the coroutine they were given.
(tests/a2a/test_traces.py has the spans of a real server.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from devagent import telemetry
from devagent.agent.loop import traces
from devagent.agent.state import SessionState
from devagent.config import ConfigError, load_config


@pytest.mark.parametrize(
    ("mode", "env", "on"),
    [
        ("auto", {}, False),
        ("auto", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ("auto", {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ("auto", {"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, False),
        ("off", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
        ("on", {}, True),
        ("on", {"OTEL_SDK_DISABLED": "true"}, False),
        ("auto", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
    ],
)
def test_when_tracing_is_on(mode: str, env: dict[str, str], on: bool) -> None:
    assert telemetry.wanted_by(mode, env) is on


def test_trace_settings() -> None:
    config = load_config(environ={"DEVAGENT_TRACES": "ON", "DEVAGENT_TRACE_CONTENT": "yes"})
    assert (config.traces, config.trace_content) == ("on", True)
    assert (load_config(environ={}).traces, load_config(environ={}).trace_content) == ("auto", False)
    with pytest.raises(ConfigError, match="traces \\(DEVAGENT_TRACES\\) must be one of auto, on, off"):
        load_config(environ={"DEVAGENT_TRACES": "sometimes"})


async def test_the_wrappers_are_the_identity_when_off() -> None:
    assert not telemetry.active()

    async def work() -> int:
        return 7

    coro = work()
    assert traces.turn(None, None, None, coro) is coro  # type: ignore[arg-type]
    assert traces.model_request(None, coro) is coro  # type: ignore[arg-type]
    assert traces.tool_call(None, None, coro) is coro  # type: ignore[arg-type]
    assert await coro == 7


def test_a_failing_setup_leaves_tracing_off(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:
        raise RuntimeError("no exporter today")

    monkeypatch.setattr(telemetry, "_make_tracer", broken)
    monkeypatch.setattr(telemetry, "_wanted", None)
    assert telemetry.configure("on", False, {})
    telemetry.start()
    assert not telemetry.active() and not telemetry.wanted()
    assert "traces are off: the OpenTelemetry setup failed: RuntimeError: no exporter today" in caplog.text


def test_the_trace_context_is_stored_only_when_set() -> None:
    state = SessionState(workspace_roots=["/w"])
    assert "trace_context" not in state.to_json()  # tracing off: the stored state is as before
    state.trace_context = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    assert (
        SessionState.from_json(json.loads(json.dumps(state.to_json()))).trace_context == state.trace_context
    )


OFF_PROBE = """
import asyncio, sys, tempfile
from pathlib import Path

import devagent.a2a.app  # the server's modules, the a2a SDK's tracing module among them
from a2a.server.events.event_queue_v2 import EventQueueSource
from devagent.agent.core import AgentCore
from devagent.agent.settings import CoreConfig
from devagent.agent.events import TurnEnd, UserPrompt

async def main():
    with tempfile.TemporaryDirectory() as d:
        core = await AgentCore.open(CoreConfig(db_url=f"sqlite+aiosqlite:///{d}/t.db", default_model="demo"))
        s = await core.create_session([Path(d)], approval_mode="yolo")
        events = [e async for e in s.advance(UserPrompt("hello"))]
        assert isinstance(events[-1], TurnEnd), events[-1]
        await core.close()

asyncio.run(main())
loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter")))
print("LOADED", loaded)
print("WRAPPED", EventQueueSource.enqueue_event.__code__.co_filename.endswith("telemetry.py"))
"""


def test_tracing_off_loads_no_opentelemetry_sdk(tmp_path: Path) -> None:
    """With no collector named, a server's modules and a whole turn load neither the OpenTelemetry
    SDK nor its exporter (installed, as devagent's dependencies), and the a2a SDK's methods are not
    wrapped in its tracing decorators (issue 14's cold start and per-call cost stay as they were)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "DEVAGENT_"))}
    env["XDG_CONFIG_HOME"] = str(tmp_path)  # no settings file of the developer's
    out = subprocess.run(
        [sys.executable, "-c", OFF_PROBE], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert "LOADED []" in out.stdout, out.stdout
    assert "WRAPPED False" in out.stdout, out.stdout
