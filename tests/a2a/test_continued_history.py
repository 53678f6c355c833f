"""Issue 37 item 6: a task's history holds each message once when the task is continued. A real
`devagent serve` (the extension's dialect, JSON-RPC v0.3), a conversation continued several times
on one taskId (after a completed turn and after a permission), `tasks/get` read after every step.
The kill tests of test_crash.py use `assert_history_once` too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.a2a.helpers import v03_message
from tests.a2a.procs import confirmation, get_task, send_stream, serve_args, serving, status_text

WRITE = {"tool_call": {"name": "write_file", "args": {"path": "w.txt", "content": "W\n"}, "id": "w1"}}
STEPS = [
    {"items": [{"text": "R0 hello to you"}]},
    {"items": [{"text": "R1 Let me write it."}, WRITE]},
    {"items": [{"text": "R2 written."}]},
    {"items": [{"text": "R3 third: {last_user}"}]},
    {"items": [{"text": "R4 fourth: {last_user}"}]},
]


def texts_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message.get("parts") or [] if p.get("kind") == "text")


def assert_history_once(task: dict[str, Any], expected: list[str] | None = None) -> list[str]:
    """Every messageId of the task's history once, and every text of it once; with `expected`,
    the texts are those, in that order. The texts, in order."""
    history = task.get("history") or []
    ids = [m["messageId"] for m in history]
    assert len(ids) == len(set(ids)), [(m["role"], m["messageId"], texts_of(m)) for m in history]
    texts = [texts_of(m) for m in history if texts_of(m)]
    assert len(texts) == len(set(texts)), texts
    if expected is not None:
        assert texts == expected, texts
    return texts


async def test_issue37_item6_A6_a_continued_task_holds_each_message_once(
    tmp_path: Path, shared_db: str
) -> None:
    ws = tmp_path / "root" / "ws"
    ws.mkdir(parents=True)
    spec = tmp_path / "script.json"
    spec.write_text(__import__("json").dumps({"steps": STEPS}))
    args = serve_args(shared_db, ws, f"scripted:{spec}", "ask")
    with serving(args, tmp_path / "serve.log") as s:
        async with httpx.AsyncClient(timeout=60) as c:

            async def read(expected: list[str], state: str) -> dict[str, Any]:
                got = await get_task(c, s.url, task["id"])
                assert got["status"]["state"] == state, got["status"]
                assert_history_once(got, expected)
                again = await get_task(c, s.url, task["id"])
                assert again["history"] == got["history"]  # the same at every read
                return got

            async def go_on(text: str) -> None:
                on = await send_stream(c, s.url, v03_message(text, task_id=task["id"], context_id=ctx))
                assert not on.errors and on.cut is None, on.frames

            first = await send_stream(c, s.url, v03_message("hi", settings={"workspace_path": str(ws)}))
            assert first.last_state == "completed", first.frames
            task = first.results[0]
            ctx = task["contextId"]
            seen = ["hi", "R0 hello to you"]
            got = await read(seen, "completed")
            assert status_text(got) == "R0 hello to you"

            await go_on("write it")
            seen += ["write it", "R1 Let me write it."]
            await read(seen, "input-required")
            done = await send_stream(c, s.url, confirmation(task, "w1"))
            assert done.last_state == "completed", done.frames
            seen += ["R2 written."]
            got = await read(seen, "completed")
            assert status_text(got) == "R2 written." and (ws / "w.txt").read_text() == "W\n"

            for n, (word, reply) in enumerate((("third", "R3"), ("fourth", "R4")), 3):
                await go_on(f"the {word} message")
                seen += [f"the {word} message", f"{reply} {word}: the {word} message"]
                got = await read(seen, "completed")
                assert status_text(got) == seen[-1], (n, got["status"])
