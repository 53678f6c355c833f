"""A driver for a real `devagent --wire` subprocess over its stdio."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from subprocess import PIPE
from typing import Any

import pytest

from tests.conftest import ScriptFile, child_env, folder_with

Msg = dict[str, Any]


class WireProc:
    """One wire server process. Every stdout line must be JSON (stdout carries only protocol)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdin=PIPE, stdout=PIPE, stderr=PIPE, env=env, cwd=cwd)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr_chunks: list[bytes] = []
        self.received: list[Msg] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for chunk in self.proc.stderr:
            self.stderr_chunks.append(chunk)

    @property
    def stderr(self) -> str:
        return b"".join(self.stderr_chunks).decode(errors="replace")

    # --- sending -------------------------------------------------------------------------------

    def send_raw(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def send(self, msg: Msg) -> None:
        self.send_raw(json.dumps(msg))

    def call(self, rpc_id: str, method: str, params: Any = None) -> None:
        msg: Msg = {"jsonrpc": "2.0", "id": rpc_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def respond(self, rpc_id: str, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": rpc_id, "result": result})

    def approve(self, request: Msg, response: str = "approve") -> None:
        rid = request["id"]
        self.respond(rid, {"request_id": rid, "response": response})

    def initialize(self, tools: list[Msg] | None = None, version: str = "1.7") -> Msg:
        params: Msg = {"protocol_version": version, "client": {"name": "test", "version": "0"}}
        if tools is not None:
            params["external_tools"] = tools
        self.call("init", "initialize", params)
        return self.until_response("init")

    def prompt(self, text: str, rpc_id: str = "p1") -> None:
        self.call(rpc_id, "prompt", {"user_input": text})

    # --- receiving -----------------------------------------------------------------------------

    def recv(self, timeout: float = 15.0) -> Msg:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message within {timeout}s; stderr:\n{self.stderr}") from None
        if line is None:
            raise AssertionError(f"the server closed stdout; stderr:\n{self.stderr}")
        try:
            msg = json.loads(line)
        except ValueError:
            raise AssertionError(f"stdout carried a non-JSON line: {line!r}") from None
        assert isinstance(msg, dict), msg
        self.received.append(msg)
        return msg

    def expect_silence(self, seconds: float) -> None:
        try:
            line = self.lines.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected output: {line!r}")

    def until(self, pred: Callable[[Msg], bool], timeout: float = 15.0) -> tuple[list[Msg], Msg]:
        """Messages up to and including the first that matches."""
        seen: list[Msg] = []
        deadline = time.monotonic() + timeout
        while True:
            msg = self.recv(max(0.01, deadline - time.monotonic()))
            seen.append(msg)
            if pred(msg):
                return seen, msg

    def until_response(self, rpc_id: str, timeout: float = 15.0) -> Msg:
        return self.until(lambda m: is_response(m, rpc_id), timeout)[1]

    def until_request(self, type_: str, timeout: float = 15.0) -> tuple[list[Msg], Msg]:
        return self.until(lambda m: m.get("method") == "request" and m["params"]["type"] == type_, timeout)

    def close(self, timeout: float = 10.0) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"the server did not exit after stdin closed; stderr:\n{self.stderr}"
            ) from None


def is_response(m: Msg, rpc_id: Any) -> bool:
    return "method" not in m and m.get("id") == rpc_id and ("result" in m or "error" in m)


def events(msgs: list[Msg], type_: str | None = None) -> list[Msg]:
    """The payloads of event notifications (with `_type`), optionally of one type."""
    out = []
    for m in msgs:
        if m.get("method") == "event":
            if type_ is None or m["params"]["type"] == type_:
                out.append({"_type": m["params"]["type"], **m["params"]["payload"]})
    return out


def event_types(msgs: list[Msg]) -> list[str]:
    return [m["params"]["type"] for m in msgs if m.get("method") in ("event", "request")]


def text_of(msgs: list[Msg]) -> str:
    return "".join(e["text"] for e in events(msgs, "ContentPart") if e["type"] == "text")


EXT_TOOL = {
    "name": "open_in_ide",
    "description": "Open file in IDE",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}


@pytest.fixture
def wire_env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path, "wire.db")


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    return folder_with(tmp_path / "work", {"README.md": "# Demo\n"})


@pytest.fixture
def start_wire(
    script_file: ScriptFile, wire_env: dict[str, str], work_dir: Path
) -> Iterator[Callable[..., WireProc]]:
    """start_wire(steps, *flags, session=None, top_level=True) -> a running server."""
    procs: list[WireProc] = []

    def start(
        steps: list[Any] | None = None,
        *flags: str,
        session: str | None = None,
        top_level: bool = True,
        script: Path | None = None,
    ) -> WireProc:
        if script is None and steps is not None:
            script = script_file(steps)
        argv = [sys.executable, "-m", "devagent"]
        argv += ["--wire"] if top_level else ["wire"]
        argv += ["--work-dir", str(work_dir)]
        if session:
            argv += ["--session", session]
        if script is not None:
            argv += ["--model", f"scripted:{script}"]
        argv += list(flags)
        p = WireProc(argv, wire_env, work_dir)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()
