"""What a new user hit (issue 37 item 10), from real `python -m devagent run` processes: a session
started on an OpenAI-compatible server goes on (`--continue`, `--resume`) without `--base-url`
given again, its key never stored; the built-in demo model's own demo works when repeated."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.unit.devagent_process import devagent

SECRET = "sk-test-NEVER-STORED-7f3a"


def result_of(out: str) -> dict[str, Any]:
    [line] = out.splitlines()
    result: dict[str, Any] = json.loads(line)
    return result


def stored_text(tmp_path: Path) -> str:
    """Everything the run's SQLite database holds, as text."""
    with sqlite3.connect(tmp_path / "data" / "devagent.db") as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(repr(row) for t in tables for row in db.execute(f'SELECT * FROM "{t}"'))


async def test_issue37_item10_continue_and_resume_reach_the_stored_base_url(tmp_path: Path) -> None:
    """A session started with `--base-url` on an OpenAI-compatible server goes on with
    `--continue` and with `--resume ID`, no `--base-url` nor DEVAGENT_BASE_URL given again; the
    JSON result keeps the session's id; the key (from the environment) is never stored."""
    (tmp_path / "ws").mkdir()
    answers = iter(["first", "second", "third"])
    fake = FakeOpenAI(lambda body: Reply(text=[next(answers)]))
    json_run = ["-w", "ws", "--output-format", "json"]
    async with fake as url:
        key = {"DEVAGENT_API_KEY": SECRET}
        code, out, err = await devagent(
            ["run", "hello", "-m", "openai-compatible:m", "--base-url", url, *json_run], tmp_path, **key
        )
        assert code == 0, (out, err)
        first = result_of(out)
        sid = first["session_id"]
        assert first["result"] == "first" and sid
        code, out, err = await devagent(["run", "--continue", "go on", *json_run], tmp_path, **key)
        assert code == 0, (out, err)
        assert result_of(out)["result"] == "second" and result_of(out)["session_id"] == sid
        code, out, err = await devagent(["run", "--resume", sid, "once more", *json_run], tmp_path)
        assert code == 0, (out, err)  # no key at all: the server takes any
        assert result_of(out)["result"] == "third" and result_of(out)["session_id"] == sid
    assert len(fake.requests) == 3
    keys = [h.get("authorization") for h in fake.request_headers]
    assert keys == [f"Bearer {SECRET}", f"Bearer {SECRET}", "Bearer none"]
    stored = stored_text(tmp_path)
    assert url in stored and SECRET not in stored


async def test_issue37_item10_a_resumed_session_without_its_key_says_so_with_its_id(tmp_path: Path) -> None:
    """A session on a provider that needs a key, resumed without it: one error result naming
    what to set and the session's id (the key is not kept from the first run); `--base-url` given
    on the resume wins over the stored one."""
    (tmp_path / "ws").mkdir()
    fake = FakeOpenAI(lambda body: Reply(text=["ok"]))
    json_run = ["-w", "ws", "--output-format", "json"]
    async with fake as url:
        started = ["run", "hi", "-m", "openai:gpt-test", "--base-url", url, *json_run]
        code, out, err = await devagent(started, tmp_path, OPENAI_API_KEY=SECRET)
        assert code == 0, (out, err)
        sid = result_of(out)["session_id"]
        code, out, err = await devagent(["run", "--continue", "again", *json_run], tmp_path)
        failed = result_of(out)
        assert code == 2 and failed["is_error"] and "OPENAI_API_KEY" in failed["error"], (out, err)
        assert failed["session_id"] == sid
        other = FakeOpenAI(lambda body: Reply(text=["elsewhere"]))
        async with other as other_url:
            code, out, err = await devagent(
                ["run", "--resume", sid, "there", "--base-url", other_url, *json_run],
                tmp_path,
                OPENAI_API_KEY=SECRET,
            )
        assert code == 0 and result_of(out)["result"] == "elsewhere", (out, err)
    assert len(fake.requests) == 1 and len(other.requests) == 1
    assert SECRET not in stored_text(tmp_path)


async def test_issue37_item10_the_demo_model_repeats_its_own_demo(tmp_path: Path) -> None:
    """The demo model (no model configured) writes demo.txt; a second run in the same workspace
    (a new session, which never read it) reads it first and writes it again instead of failing,
    and so does a run that leaves the write waiting for permission, continued with --allow."""
    ws = tmp_path / "ws"
    ws.mkdir()
    code, out, err = await devagent(["run", "write hello", "-w", "ws", "-a", "yolo"], tmp_path)
    assert code == 0 and (ws / "demo.txt").read_text() == "hello\n", (out, err)
    code, out, err = await devagent(["run", "write hello again", "-w", "ws", "-a", "yolo"], tmp_path)
    assert code == 0, (out, err)
    assert (ws / "demo.txt").read_text() == "hello again\n", (out, err)
    assert "Error" not in out and "Wrote demo.txt" in out, out
    code, out, err = await devagent(["run", "write three", "-w", "ws"], tmp_path)
    assert code == 4 and "--allow" in out + err, (out, err)  # asked, no terminal: the session waits
    code, out, err = await devagent(["run", "--continue", "--allow", "-w", "ws"], tmp_path)
    assert code == 0 and (ws / "demo.txt").read_text() == "three\n", (out, err)
    code, out, err = await devagent(["run", "--continue", "what is here?", "-w", "ws"], tmp_path)
    assert code == 0 and "demo.txt" in out and "Error" not in out, (out, err)


def test_issue37_item10_a_base_url_with_credentials_is_not_kept() -> None:
    """The base URL kept with a session is the server's address only: one that carries a user and
    password is not kept (the flag or the environment must give it again)."""
    from devagent.agent.settings import CoreConfig
    from devagent.terminal.backend import BASE_URL_KEY, _keep_base_url

    plain = CoreConfig(model_base_url="http://gpu-box:8000/v1")
    assert _keep_base_url({}, "openai-compatible:m", plain) == {BASE_URL_KEY: "http://gpu-box:8000/v1"}
    secret = CoreConfig(model_base_url="http://me:pa55@gpu-box:8000/v1")
    assert _keep_base_url({BASE_URL_KEY: "http://old/v1"}, "openai-compatible:m", secret) == {}
    assert _keep_base_url({}, "demo", plain) == {}  # the demo model talks to no server
