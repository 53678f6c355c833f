"""Issue 38 item 8: ACP's stable `session/list` (Zed's history panel), driven by the Python SDK's
client side against real `devagent acp` subprocesses: the capability is advertised; sessions made
in two folders are listed newest first with their cwd, title and last activity, a page at a time
through the cursor (a small page size set by the operator), filtered by cwd; the local user's
top-level prompted sessions only; bad cursors and relative cwds are refused; a listed session
opens with session/load in a new process, whose `--work-dir` limits the list to its folder."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp", reason="agent-client-protocol is installed by scripts/test (pyproject.toml)")

from acp import RequestError, text_block

from tests.acp.conftest import acp_argv
from tests.acp.test_python_sdk import TIMEOUT, EditorClient, agent, new_session_id, start
from tests.conftest import ScriptFile


async def _pages(conn: Any, cwd: str | None = None) -> list[list[dict[str, Any]]]:
    """Every page of `session/list` (with `cwd`), following the cursor until there is none."""
    pages: list[list[dict[str, Any]]] = []
    cursor: str | None = None
    while True:
        resp = await asyncio.wait_for(conn.list_sessions(cwd=cwd, cursor=cursor), TIMEOUT)
        pages.append([s.model_dump(by_alias=True, exclude_none=True) for s in resp.sessions])
        cursor = resp.next_cursor
        if cursor is None:
            return pages
        assert len(pages) < 20, "the cursor never ends"


def _ids(pages: list[list[dict[str, Any]]]) -> list[str]:
    return [s["sessionId"] for page in pages for s in page]


async def _seed_hidden(core_factory: Callable[..., Any], db: str, folder: Path) -> list[str]:
    """Stored sessions in `folder` that an editor must not see: a server caller's, a subagent's."""
    from devagent.agent.state import SessionState, SubagentOf

    core = await core_factory(db=db)
    root = [str(folder.resolve())]
    theirs = SessionState(workspace_roots=root, title="alice's task", identity="alice")
    child = SessionState(
        workspace_roots=root,
        title="a subagent's task",
        subagent_of=SubagentOf(
            session="parent", call="c1", agent="general", description="d", depth=1, tools=[]
        ),
    )
    await core.store.create_session("alice-session", theirs.to_json())
    await core.store.create_session("child-session", child.to_json())
    return ["alice-session", "child-session"]


async def test_issue38_item8_session_list_pages_filters_and_loads_through_the_python_sdk(
    acp_env: dict[str, str],
    script: ScriptFile,
    tmp_path: Path,
    core_factory: Callable[..., Any],
) -> None:
    a = (tmp_path / "proj-a").resolve()
    b = (tmp_path / "proj-b").resolve()
    a.mkdir()
    b.mkdir()
    hidden = await _seed_hidden(core_factory, acp_env["DEVAGENT_DB"], a)
    path = script([[{"text": "Answer to: {last_user}"}], [{"text": "Again: {last_user}"}]])
    env = {**acp_env, "DEVAGENT_ACP_PAGE_SIZE": "2"}
    client = EditorClient()
    async with agent(client, acp_argv(path), env, tmp_path, tmp_path / "err.log") as (conn, _):
        init = await start(conn)
        assert init.agent_capabilities is not None
        caps = init.agent_capabilities.session_capabilities
        assert caps is not None and caps.list is not None  # `sessionCapabilities.list: {}`

        empty = await conn.list_sessions()
        assert empty.sessions == [] and empty.next_cursor is None  # nothing of the hidden ones

        made: dict[str, str] = {}  # name -> session id, in the order they were last active
        for name, folder in (("a1", a), ("b1", b), ("a2", a), ("b2", b), ("a3", a)):
            sid = await new_session_id(conn, folder)
            resp = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block(f"task {name}\nmore lines")]), TIMEOUT
            )
            assert resp.stop_reason == "end_turn"
            made[name] = sid
        unprompted = await new_session_id(conn, a)  # opened and left: not listed
        # Each first prompt named its session, and the editor heard of it.
        named = [u["title"] for u in client.updates if u["sessionUpdate"] == "session_info_update"]
        assert named == [f"task {n}" for n in made]

        # All of them, newest first, two a page.
        pages = await _pages(conn)
        assert [len(p) for p in pages] == [2, 2, 1]
        newest_first = [made[n] for n in ("a3", "b2", "a2", "b1", "a1")]
        assert _ids(pages) == newest_first
        assert unprompted not in _ids(pages) and not set(hidden) & set(_ids(pages))
        first = pages[0][0]
        assert set(first) == {"sessionId", "cwd", "title", "updatedAt"}
        assert first["cwd"] == str(a) and first["title"] == "task a3"
        times = [datetime.fromisoformat(s["updatedAt"]) for p in pages for s in p]
        assert all(t.tzinfo is not None for t in times) and times == sorted(times, reverse=True)

        # Filtered by folder, through the cursor; a folder's last page ends the list.
        assert [[s["title"] for s in p] for p in await _pages(conn, str(a))] == [
            ["task a3", "task a2"],
            ["task a1"],
        ]
        only_b = await _pages(conn, str(b))  # exactly one page: no cursor to an empty one
        assert [[s["sessionId"] for s in p] for p in only_b] == [[made["b2"], made["b1"]]]
        assert all(s.cwd == str(b) for s in (await conn.list_sessions(cwd=str(b))).sessions)
        assert (await conn.list_sessions(cwd=str(tmp_path))).sessions == []

        # A session active between two pages moves to the top; the next page goes on after the
        # cursor without listing anything twice.
        one = await conn.list_sessions()
        assert one.next_cursor is not None
        await conn.prompt(session_id=made["a1"], prompt=[text_block("once more")])
        rest = await conn.list_sessions(cursor=one.next_cursor)
        assert [s.session_id for s in rest.sessions] == [made["a2"], made["b1"]]
        assert (await conn.list_sessions()).sessions[0].session_id == made["a1"]
        assert len([u for u in client.updates if u["sessionUpdate"] == "session_info_update"]) == 5

        # Refused with -32602: a cursor devagent did not give, one given for another cwd, a
        # relative cwd.
        given_for_a = (await conn.list_sessions(cwd=str(a))).next_cursor
        assert given_for_a is not None
        for bad in (
            {"cursor": "not-a-cursor"},
            {"cursor": given_for_a, "cwd": str(b)},
            {"cursor": given_for_a},
            {"cwd": "proj-a"},
        ):
            with pytest.raises(RequestError) as refused:
                await conn.list_sessions(**bad)
            assert refused.value.code == -32602, bad

    # A new process on the same store, whose sessions all live in proj-a: it lists those only,
    # and a listed one opens with its history.
    second = EditorClient()
    argv = acp_argv(path, "--work-dir", str(a))
    async with agent(second, argv, acp_env, tmp_path, tmp_path / "err.log") as (conn, _):
        await start(conn)
        listed = (await conn.list_sessions()).sessions
        assert [s.session_id for s in listed] == [made["a1"], made["a3"], made["a2"]]
        assert listed[0].title == "task a1"  # the title stays the first prompt's
        chosen = listed[2]
        await asyncio.wait_for(
            conn.load_session(cwd=chosen.cwd, session_id=chosen.session_id, mcp_servers=[]), TIMEOUT
        )
        assert second.text("user_message_chunk") == "task a2\nmore lines"
        assert second.text() == "Answer to: task a2\nmore lines"


def test_issue38_item8_a_page_size_that_is_not_a_positive_number_stops_the_start(
    acp_env: dict[str, str], script: ScriptFile, tmp_path: Path
) -> None:
    env = {**acp_env, "DEVAGENT_ACP_PAGE_SIZE": "0"}
    argv = acp_argv(script([[{"text": "unused"}]]))
    done = subprocess.run(argv, env=env, cwd=tmp_path, input="", capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "DEVAGENT_ACP_PAGE_SIZE must be positive" in done.stderr
    assert done.stdout == ""  # nothing on the protocol's stream
