"""MCP servers as tool sources (B15, B8 mcp_details, G3 grants, G5 /mcp), against real servers
written with the `mcp` SDK: stdio (a script run as a subprocess) and streamable HTTP (uvicorn on
127.0.0.1, port 0, in a subprocess)."""

from __future__ import annotations

import asyncio
import ipaddress
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import (
    Decision,
    McpDetails,
    NeedsInput,
    Notice,
    Resume,
    ToolCallStatus,
    ToolCallUpdate,
    ToolKind,
    TurnEnd,
    UserPrompt,
)
from tests.core_helpers import call, collect, text_of
from tests.mcp_servers import SERVER, start_http_server


@pytest.fixture
def server_script(tmp_path: Path) -> Path:
    p = tmp_path / "mcp_server.py"
    p.write_text(SERVER)
    return p


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from start_http_server(tmp_path_factory.mktemp("mcp_http"))


def stdio(script: Path, **kw: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(script)], **kw}


def final(events: list[Any], call_id: str) -> Any:
    return [e.call for e in events if isinstance(e, ToolCallUpdate) and e.call.id == call_id][-1]


async def test_b15_stdio_tools_listed_and_call_asks_with_mcp_details(
    core_factory: Any, script: Any, workspace: Path, server_script: Path
) -> None:
    spec = script(
        [
            [call("calc__add", {"a": 2, "b": 40}, "c1")],
            [{"text": "The sum is {last_tool_results}."}],
        ]
    )
    core = await core_factory(spec, mcp_servers={"calc": stdio(server_script)})
    s = await core.create_session([workspace], approval_mode="ask")
    assert not any(d["name"].startswith("calc__") for d in s.tool_definitions())  # not started yet

    events = await collect(s.advance(UserPrompt("add 2 and 40")))
    need = events[-1]
    assert isinstance(need, NeedsInput), events
    c = need.calls[0]
    assert c.kind is ToolKind.MCP and c.name == "calc__add"
    assert c.confirmation is not None
    assert c.confirmation.details == McpDetails(server_name="calc", tool_name="add")  # B8
    assert [o.id for o in c.confirmation.options] == [
        "proceed_once",
        "proceed_always_tool",
        "proceed_always_server",
        "cancel",
        "cancel_always",
    ]
    names = [o.name for o in c.confirmation.options]
    assert names[1:3] == ["Always allow this tool", "Always allow this server"]
    defs = {d["name"]: d for d in s.tool_definitions()}
    assert defs["calc__add"]["kind"] == "mcp"
    assert defs["calc__add"]["parameters"]["required"] == ["a", "b"]
    assert {"calc__echo", "calc__picture", "calc__grow"} <= set(defs)

    events = await collect(s.advance(Resume(decisions=[Decision("c1", "proceed_once")])))
    done = final(events, "c1")
    assert done.status is ToolCallStatus.SUCCEEDED
    assert done.output.text == "42"
    assert done.output.data["structured_content"] == {"result": 42}  # structured content reaches the client
    assert done.output.data["mcp"] == {"server": "calc", "tool": "add"}
    assert text_of(events) == "The sum is 42."
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "finished"

    # G5 /mcp: servers, state, tools
    out = text_of(await collect(s.advance(UserPrompt("/mcp"))))
    assert "calc (stdio, from server config): ready" in out
    assert "calc__add: Add two integers." in out


async def test_b15_always_allow_tool_then_server(
    core_factory: Any, script: Any, workspace: Path, server_script: Path
) -> None:
    spec = script(
        [
            [call("calc__add", {"a": 1, "b": 1}, "a1")],
            [{"text": "ok"}],
            [call("calc__add", {"a": 2, "b": 2}, "a2")],  # the tool is allowed: runs at once
            [{"text": "ok"}],
            [call("calc__echo", {"text": "hi"}, "e1")],  # another tool of the server: asks
            [{"text": "ok"}],
            [call("calc__echo", {"text": "again"}, "e2"), call("calc__picture", {}, "p1")],
            [{"text": "done"}],
        ]
    )
    core = await core_factory(spec, mcp_servers={"calc": stdio(server_script)})
    s = await core.create_session([workspace], approval_mode="ask")
    ev = await collect(s.advance(UserPrompt("one")))
    assert isinstance(ev[-1], NeedsInput)
    ev = await collect(s.advance(Resume(decisions=[Decision("a1", "proceed_always_tool")])))
    assert final(ev, "a1").status is ToolCallStatus.SUCCEEDED
    assert s.state.grants_tools == ["calc__add"]

    ev = await collect(s.advance(UserPrompt("two")))
    assert isinstance(ev[-1], TurnEnd), ev
    assert final(ev, "a2").output.text == "4"

    ev = await collect(s.advance(UserPrompt("three")))
    assert isinstance(ev[-1], NeedsInput) and ev[-1].calls[0].name == "calc__echo"
    ev = await collect(s.advance(Resume(decisions=[Decision("e1", "proceed_always_server")])))
    assert final(ev, "e1").output.text == "echo: hi"
    assert s.state.grants_mcp_servers == ["calc"]

    ev = await collect(s.advance(UserPrompt("four")))
    assert isinstance(ev[-1], TurnEnd), ev  # every tool of the server now runs without asking
    assert final(ev, "e2").output.text == "echo: again"
    pic = final(ev, "p1").output
    assert "a red dot" in pic.text and "[image image/png" in pic.text  # the model reads a description
    images = [c for c in pic.data["content"] if c["type"] == "image"]
    assert images and images[0]["mime_type"] == "image/png" and images[0]["data"]  # the client gets data

    # the grants are stored (G3): a fresh core on the same database knows them
    loaded = await (await core_factory(spec, mcp_servers={"calc": stdio(server_script)})).get_session(s.id)
    assert loaded is not None
    assert loaded.state.grants_mcp_servers == ["calc"] and loaded.state.grants_tools == ["calc__add"]


async def test_b15_tool_error_crash_and_failed_start_are_reported(
    core_factory: Any, script: Any, workspace: Path, server_script: Path
) -> None:
    spec = script(
        [
            [call("calc__fail", {}, "f1")],
            [call("calc__crash", {}, "x1")],
            [{"text": "after the crash"}],
            [call("read_file", {"path": "README.md"}, "r1")],
            [{"text": "still working"}],
        ]
    )
    servers = {
        "calc": stdio(server_script),
        "broken": {"command": "/nonexistent/mcp-server-binary"},
    }
    core = await core_factory(spec, mcp_servers=servers, approval_mode="yolo")
    s = await core.create_session([workspace])
    ev = await collect(s.advance(UserPrompt("go")))
    notices = [e.text for e in ev if isinstance(e, Notice)]
    assert any("MCP server broken is unavailable" in n and "nonexistent" in n for n in notices), notices
    failed = final(ev, "f1")
    assert failed.status is ToolCallStatus.FAILED and failed.error.type == "mcp_tool_error"
    assert "Error executing tool fail" in failed.error.message  # what the SDK's server says
    crashed = final(ev, "x1")
    assert crashed.status is ToolCallStatus.FAILED
    assert crashed.error.type == "mcp_server_crashed"
    assert text_of(ev) == "after the crash"
    assert isinstance(ev[-1], TurnEnd) and ev[-1].reason == "finished"

    # the next turn reports the crash once, and goes on without the server
    ev = await collect(s.advance(UserPrompt("more")))
    notices = [e.text for e in ev if isinstance(e, Notice)]
    assert len(notices) == 1 and "MCP server calc is unavailable" in notices[0], notices
    assert "boom" in notices[0]  # the server's last stderr line
    assert final(ev, "r1").status is ToolCallStatus.SUCCEEDED
    assert text_of(ev) == "still working"
    assert not any(d["name"].startswith("calc__") for d in s.tool_definitions())

    out = text_of(await collect(s.advance(UserPrompt("/mcp"))))
    assert "calc (stdio, from server config): failed" in out
    assert "broken (stdio, from server config): failed" in out

    # /mcp restart starts the failed servers afresh
    out = text_of(await collect(s.advance(UserPrompt("/mcp restart calc"))))
    assert "calc (stdio, from server config): ready" in out
    assert "calc__add" in {d["name"] for d in s.tool_definitions()}
    assert "No MCP server named nope" in str(await collect(s.advance(UserPrompt("/mcp restart nope"))))


async def test_b15_timeouts_start_and_call(
    core_factory: Any, script: Any, workspace: Path, server_script: Path
) -> None:
    # The start timeout: a server that reads requests and never answers cannot start, however
    # slow the machine; no real server shares this core, so none races the 1.5 s.
    mute = ["-c", "import sys; sys.stdin.read()"]
    quiet = await core_factory(
        script([[{"text": "hello"}]]),
        mcp_servers={"mute": {"command": sys.executable, "args": mute}},
        mcp_start_timeout=1.5,
    )
    ev = await collect((await quiet.create_session([workspace])).advance(UserPrompt("hi")))
    notices = [e.text for e in ev if isinstance(e, Notice)]
    assert any("MCP server mute is unavailable: did not start within 1.5 s" in n for n in notices), notices
    assert text_of(ev) == "hello"

    # The call timeout, with the start timeout left at its default (the start is not tested here).
    spec = script(
        [
            [call("calc__slow", {"seconds": 30}, "s1")],
            [call("calc__slow", {"seconds": 0}, "s2")],
            [{"text": "{last_tool_results}"}],
        ]
    )
    core = await core_factory(
        spec, mcp_servers={"calc": stdio(server_script, timeout=1)}, approval_mode="yolo"
    )
    s = await core.create_session([workspace])
    ev = await collect(s.advance(UserPrompt("slow")))
    slow = final(ev, "s1")
    assert slow.status is ToolCallStatus.FAILED and slow.error.type == "timeout"
    assert "did not answer within 1 s" in slow.error.message
    assert text_of(ev) == "slept"  # the server itself is fine: the next call answers


async def test_b15_tool_list_refreshes_on_list_changed(
    core_factory: Any, script: Any, workspace: Path, server_script: Path
) -> None:
    spec = script(
        [
            [call("calc__grow", {}, "g1")],
            [{"sleep": 0.3}, call("calc__extra", {"x": "ab"}, "x1")],
            [{"text": "{last_tool_results}"}],
        ]
    )
    core = await core_factory(spec, mcp_servers={"calc": stdio(server_script)}, approval_mode="yolo")
    s = await core.create_session([workspace])
    ev = await collect(s.advance(UserPrompt("grow")))
    assert final(ev, "g1").output.text == "grown"
    assert final(ev, "x1").status is ToolCallStatus.SUCCEEDED, final(ev, "x1")
    assert text_of(ev) == "abab"
    assert "calc__extra" in {d["name"] for d in s.tool_definitions()}


async def test_b15_http_server_named_by_the_client_and_reconnect_after_restart(
    core_factory: Any, script: Any, workspace: Path, http_server: str
) -> None:
    spec = script(
        [
            [call("web__add", {"a": 20, "b": 22}, "h1")],
            [{"text": "{last_tool_results}"}],
            [call("web__echo", {"text": "back"}, "h2")],
            [{"text": "{last_tool_results}"}],
        ]
    )
    core = await core_factory(spec, mcp_client_private_urls=True)  # the test server is on loopback
    s = await core.create_session([workspace], mcp_servers={"web": {"url": http_server}})
    ev = await collect(s.advance(UserPrompt("http")))
    assert isinstance(ev[-1], NeedsInput), ev
    details = ev[-1].calls[0].confirmation.details
    assert details == McpDetails("web", "add")
    await core.close()  # the process ends while nothing waits... except this permission request

    core2 = await core_factory(spec, mcp_client_private_urls=True)
    s2 = await core2.get_session(s.id)
    assert s2 is not None and s2.state.mcp_servers == {"web": {"url": http_server}}
    ev = await collect(s2.advance(Resume(decisions=[Decision("h1", "proceed_always_server")])))
    assert final(ev, "h1").output.text == "42"
    ev = await collect(s2.advance(UserPrompt("again")))
    assert text_of(ev) == "echo: back"
    out = text_of(await collect(s2.advance(UserPrompt("/mcp"))))
    assert "web (http, from session settings): ready" in out


async def test_b15_client_stdio_servers_follow_server_policy(
    core_factory: Any, script: Any, workspace: Path, server_script: Path
) -> None:
    spec = script([[{"text": "hello"}], [{"text": "hello"}]])
    core = await core_factory(spec)
    s = await core.create_session([workspace], mcp_servers={"mine": stdio(server_script)})
    ev = await collect(s.advance(UserPrompt("hi")))
    notices = [e.text for e in ev if isinstance(e, Notice)]
    assert notices and "MCP server mine was not connected" in notices[0]
    assert "does not let clients start stdio MCP servers" in notices[0]
    assert text_of(ev) == "hello"
    assert "refused" in text_of(await collect(s.advance(UserPrompt("/mcp"))))

    allowed = await core_factory(spec, mcp_client_commands=(sys.executable,))
    s2 = await allowed.create_session([workspace], mcp_servers={"mine": stdio(server_script)})
    out = text_of(await collect(s2.advance(UserPrompt("/mcp"))))
    assert "mine (stdio, from session settings): ready" in out
    other = await allowed.create_session([workspace], mcp_servers={"evil": {"command": "/bin/sh"}})
    out = text_of(await collect(other.advance(UserPrompt("/mcp"))))
    assert "not in the server's allowlist" in out
    with_env = {**stdio(server_script), "env": {"LD_PRELOAD": "/tmp/evil.so"}}
    s4 = await allowed.create_session([workspace], mcp_servers={"mine": with_env})
    out = text_of(await collect(s4.advance(UserPrompt("/mcp"))))
    assert "may not set the environment" in out

    off = await core_factory(spec, mcp_client_http=False)
    s3 = await off.create_session([workspace], mcp_servers={"web": {"url": "http://127.0.0.1:9/mcp"}})
    assert "does not let clients name HTTP MCP servers" in text_of(
        await collect(s3.advance(UserPrompt("/mcp")))
    )


def test_b15_config_mcp_servers(tmp_path: Path) -> None:
    from devagent.config import ConfigError, load_config

    toml = tmp_path / "devagent.toml"
    toml.write_text(
        textwrap.dedent(
            """
            [devagent]
            model = "demo"
            mcp_client_commands = ["npx"]

            [mcp_servers.files]
            command = "npx"
            args = ["-y", "some-mcp-server", "."]
            env = { TOKEN = "x" }

            [mcp_servers.remote]
            url = "https://mcp.example.com/mcp"
            headers = { Authorization = "Bearer abc" }
            """
        )
    )
    cfg = load_config(environ={"DEVAGENT_CONFIG": str(toml)})
    assert cfg.mcp_servers["files"] == {
        "command": "npx",
        "args": ["-y", "some-mcp-server", "."],
        "env": {"TOKEN": "x"},
    }
    assert cfg.mcp_servers["remote"]["url"] == "https://mcp.example.com/mcp"
    assert cfg.mcp_client_commands == ("npx",)
    env_cfg = load_config(environ={"DEVAGENT_MCP_SERVERS": '{"w": {"url": "http://localhost:1/mcp"}}'})
    assert env_cfg.mcp_servers == {"w": {"url": "http://localhost:1/mcp"}}
    with pytest.raises(ConfigError, match="exactly one of"):
        load_config(environ={"DEVAGENT_MCP_SERVERS": '{"w": {}}'})
    with pytest.raises(ConfigError, match="must not contain '__'"):
        load_config(environ={"DEVAGENT_MCP_SERVERS": '{"a__b": {"url": "http://x/mcp"}}'})


def test_b15_tool_names_are_unambiguous() -> None:
    from devagent.agent.mcp.manager import server_of, tool_name

    assert tool_name("gh", "list.issues") == "gh__list_issues"
    long = tool_name("server", "x" * 100)
    assert len(long) == 64 and long.startswith("server__")
    assert tool_name("server", "x" * 100) != tool_name("server", "x" * 99 + "y")
    assert server_of("my-srv__do_it") == "my-srv"


async def test_b15_mcp_not_imported_until_used() -> None:
    code = (
        "import sys, devagent.agent.core, devagent.agent.session, devagent.config, "
        "devagent.agent.mcp.manager, "
        "devagent.agent.loop.checkpoints, devagent.agent.commands, devagent.wire.server, devagent.a2a.app; "
        "print('mcp' in sys.modules)"
    )
    out = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


async def test_b15_client_named_server_on_a_private_address_is_refused_by_default(
    core_factory: Any, script: Any, workspace: Path, http_server: str
) -> None:
    """A client cannot aim the server at its own network (SSRF): loopback/private addresses are
    refused unless the operator sets mcp_client_private_urls, as for webhooks (A4)."""
    core = await core_factory(script([[{"text": "ok"}]]))
    s = await core.create_session([workspace], mcp_servers={"web": {"url": http_server}})
    ev = await collect(s.advance(UserPrompt("hi")))
    notices = [e.text for e in ev if isinstance(e, Notice)]
    assert any("web was not connected" in n and "loopback/private" in n for n in notices), notices
    assert not any(d["name"].startswith("web__") for d in s.tool_definitions())


async def test_issue12_item4_client_named_mcp_server_connected_at_the_checked_address(
    core_factory: Any, script: Any, workspace: Path, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The address the policy checked is the one connected to (no second DNS answer: rebinding),
    and the operator's networks (outbound_allow) let a non-global address in."""
    from devagent.common import netpolicy

    port = http_server.rsplit(":", 1)[1].split("/")[0]
    url = f"http://localhost:{port}/mcp"  # the name the client gives; "DNS" answers below
    answer = {"ip": "127.0.0.1"}

    async def fake_lookup(host: str, port: int) -> list[Any]:
        assert host == "localhost"
        return [ipaddress.ip_address(answer["ip"])]

    monkeypatch.setattr(netpolicy, "lookup", fake_lookup)
    spec = script([[call("web__add", {"a": 1, "b": 2}, "p1")], [{"text": "{last_tool_results}"}]])
    core = await core_factory(spec, outbound_allow=("127.0.0.0/8",))
    s = await core.create_session([workspace], mcp_servers={"web": {"url": url}})
    out = text_of(await collect(s.advance(UserPrompt("/mcp"))))
    assert "web (http, from session settings): ready" in out, out
    ev = await collect(s.advance(UserPrompt("add")))
    ev = await collect(s.advance(Resume(decisions=[Decision("p1", "proceed_once")])))
    assert final(ev, "p1").output.text == "3"

    # The check's answer is an address where nothing listens: the connection goes there (and
    # fails), although the system resolver would have found the server at localhost.
    answer["ip"] = "127.0.0.2"
    s2 = await core.create_session([workspace], mcp_servers={"web2": {"url": url}})
    out = text_of(await collect(s2.advance(UserPrompt("/mcp"))))
    assert "web2 (http, from session settings): failed" in out, out

    # Without the operator's network, the same name is refused before any connection.
    answer["ip"] = "127.0.0.1"
    strict = await core_factory(spec)
    s3 = await strict.create_session([workspace], mcp_servers={"web": {"url": url}})
    out = text_of(await collect(s3.advance(UserPrompt("/mcp"))))
    assert "refused: localhost resolves to 127.0.0.1" in out, out
