"""Real `devagent serve` processes for the kill tests and the two-process tests (issue 10): each
process's stderr goes to a log file (read at any time, never a pipe that could fill up), a process
can be told where to die (`DEVAGENT_CRASH_AT`), and SSE responses are read to their end or to the
moment the server died under them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.a2a.helpers import auth, call, rpc, v03_message
from tests.process_stop import stop_process
from tests.sandbox_user import for_sandbox_user

DEVAGENT = [sys.executable, "-m", "devagent"]
TOKEN = "tok"
START_WITHIN = 90.0  # seconds for a process to listen (2 shared cores, a cold import)
EXIT_WITHIN = 90.0  # seconds for a process told to crash to reach its crash point and die


@dataclass
class Serve:
    proc: subprocess.Popen[bytes]
    log: Path
    url: str = ""

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_killed(self) -> int:
        """Wait for a process told to crash to die; its exit status (-9 when it SIGKILLed itself)."""
        try:
            return self.proc.wait(EXIT_WITHIN)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the server did not reach its crash point; stderr:\n{self.stderr()}"
            ) from None

    def stop(self) -> None:
        stop_process(self.proc, 15)


def start_serve(
    args: list[str], log: Path, *, crash_at: str | None = None, env: dict[str, str] | None = None
) -> Serve:
    """Start `devagent serve --port 0 ARGS` and wait until it listens (`env`: its environment
    instead of ours)."""
    env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
    env.pop("DEVAGENT_CRASH_AT", None)
    if crash_at:
        env["DEVAGENT_CRASH_AT"] = crash_at
    with log.open("wb") as f:
        proc = subprocess.Popen([*DEVAGENT, "serve", "--port", "0", *args], stderr=f, env=env)
    s = Serve(proc, log)
    deadline = time.monotonic() + START_WITHIN
    while time.monotonic() < deadline:
        m = re.search(r"listening on (http://\S+)", s.stderr())
        if m:
            s.url = m.group(1)
            # Ready once the core and the task store are loaded (a request waits for that). A
            # second process is started only then: the first creates the tables of an empty
            # database (docs/deploy.md: start the first replica alone).
            try:
                r = httpx.get(
                    s.url + "healthz",
                    headers=auth(TOKEN, ext=False),
                    timeout=max(1.0, deadline - time.monotonic()),
                )
            except httpx.HTTPError as e:
                s.stop()
                raise AssertionError(f"server did not get ready ({e!r}); stderr:\n{s.stderr()}") from None
            if r.status_code == 200:
                return s
            s.stop()
            raise AssertionError(
                f"server not ready: /healthz {r.status_code} {r.text!r}; stderr:\n{s.stderr()}"
            )
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    s.stop()
    raise AssertionError(f"server did not start (exit {proc.poll()}); stderr:\n{s.stderr()}")


@contextmanager
def serving(
    args: list[str], log: Path, *, crash_at: str | None = None, env: dict[str, str] | None = None
) -> Iterator[Serve]:
    s = start_serve(args, log, crash_at=crash_at, env=env)
    try:
        yield s
    finally:
        s.stop()


@contextmanager
def killed_at(args: list[str], log: Path, point: str) -> Iterator[Serve]:
    """A server that SIGKILLs itself at crash point `point` (`name` or `name@N`): the block does
    what takes it there, and by the block's end it must have died of it; stopped whatever happens."""
    with serving(args, log, crash_at=point) as s:
        yield s
        assert s.wait_killed() == -9, s.stderr()


def serve_argv(db: str, root: Path, model: str, *more: str, token: str = TOKEN) -> list[str]:
    """`serve`'s arguments: its database, a workspace root, its model, a caller's `--token`
    (`TOKEN`, or `name=token`), then `more`."""
    return ["--db", db, "--workspace-root", str(root), "--token", token, "--model", model, *more]


def serve_args(db: str, workspace: Path, model: str, approval: str) -> list[str]:
    """`serve`'s arguments for one workspace (its sandbox, on by default, runs commands as the
    sandbox user where the tests run as root: the workspace is given to that user)."""
    for_sandbox_user(workspace)
    return serve_argv(db, workspace.parent, model, "--approval", approval)


@dataclass
class Reply:
    """A `message/stream` response: its frames (`result` or `error` objects), and the transport
    error that cut it (the server died under it)."""

    frames: list[dict[str, Any]]
    cut: BaseException | None = None

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [f["error"] for f in self.frames if "error" in f]

    @property
    def results(self) -> list[dict[str, Any]]:
        return [f["result"] for f in self.frames if "result" in f]

    @property
    def last_state(self) -> str | None:
        states = [r["status"]["state"] for r in self.results if "status" in r]
        return states[-1] if states else None


async def send_stream(
    client: httpx.AsyncClient,
    url: str,
    message: dict[str, Any],
    on_frame: Callable[[dict[str, Any]], None] | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """`message/stream` with the extension header, read to its end (or until the server dies).
    `on_frame` sees each frame as it arrives (a kill test opens a gate once the client knows its
    task); `headers` go with the request besides the token's."""
    frames: list[dict[str, Any]] = []
    try:
        async with client.stream(
            "POST",
            url,
            json=rpc("message/stream", {"message": message}),
            headers={**auth(TOKEN), **(headers or {})},
        ) as r:
            if "text/event-stream" not in r.headers.get("content-type", ""):
                body = (await r.aread()).decode(errors="replace")
                try:
                    frames.append(json.loads(body))
                except ValueError:
                    frames.append({"http_error": r.status_code, "body": body})
                return Reply(frames)
            async for line in r.aiter_lines():
                if line.startswith("data:"):
                    frames.append(json.loads(line[5:]))
                    if on_frame is not None:
                        on_frame(frames[-1])
    except httpx.TransportError as e:
        return Reply(frames, e)
    return Reply(frames)


async def get_task(client: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    got = await call(client, url, rpc("tasks/get", {"id": task_id}), auth(TOKEN))
    assert "result" in got, got
    task: dict[str, Any] = got["result"]
    return task


def confirmation(task: dict[str, Any], call_id: str, option: str = "proceed_once") -> dict[str, Any]:
    conf = {"tool_call_id": call_id, "selected_option_id": option}
    return v03_message(data=[conf], task_id=task["id"], context_id=task["contextId"])


def status_text(task: dict[str, Any]) -> str:
    msg = task["status"].get("message") or {}
    return " ".join(p.get("text", "") for p in msg.get("parts") or [])


def status_tool_calls(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The RFC ToolCall objects in the DataParts of a task's status message."""
    msg = task["status"].get("message") or {}
    out: list[dict[str, Any]] = []
    for p in msg.get("parts") or []:
        if p.get("kind") == "data":
            d = p["data"]
            out += d.get("tool_calls", [d]) if isinstance(d, dict) else list(d)
    return out


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0
