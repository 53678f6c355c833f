"""Hostile web pages through a real `devagent serve` (issue 37 item 2): `web_fetch` reads ~5 MiB
pages shaped to make an HTML-to-text conversion quadratic or huge (spaces between inline tags,
deeply nested lists, thousands of unclosed tags) from a web server on 127.0.0.1 (allowed by the
operator's `outbound_allow`), while a second caller polls `/healthz`. The server keeps answering
while a page converts (the conversion is a process of its own), each call ends with text or a
clear error, and the turn completes. The worst `/healthz` wait and the server's memory are
printed (`pytest -s`)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from tests.a2a.helpers import auth, rpc, tool_updates, v03_message
from tests.a2a.procs import TOKEN, serve_argv, serving
from tests.core_helpers import call
from tests.fakes.http_reply import send_body

SIZE = 5 * 1024 * 1024 - 64  # just under web_fetch's download cap: the whole page is read
PAGES = {
    "/spaces": b"<html><body>x" + b"<b> </b>" * (SIZE // 8) + b"y",
    "/lists": b"<html><body>" + b"<ul><li>x" * (SIZE // 9),
    "/unclosed": b"<html><body><div hidden>" + b"<span>" * (SIZE // 12) + b"</i>" * (SIZE // 8),
}


class _Hostile(BaseHTTPRequestHandler):
    served: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        send_body(self, PAGES.get(self.path, b"<p>nothing</p>"), "text/html; charset=utf-8")
        type(self).served.append(self.path)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def hostile_site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def converting(server_pid: int) -> bool:
    """Whether a page's conversion (a child of the server running html_text.py) is running."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == server_pid and fields[0] != "Z" and b"html_text.py" in cmdline:
            return True
    return False


@dataclass
class Poller:
    """A second caller asking `/healthz` as fast as it is answered, in a thread."""

    url: str
    pid: int
    worst: float = 0.0
    worst_converting: float = 0.0  # of the answers asked while a page converted
    answered: int = 0
    answered_while_converting: int = 0  # a conversion ran before and after the answer
    peak_rss: float = 0.0
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with httpx.Client(timeout=600) as c:
            while not self.stop.is_set():
                before = converting(self.pid)
                t0 = time.monotonic()
                try:
                    r = c.get(self.url + "healthz", headers=auth(TOKEN, ext=False))
                except httpx.HTTPError as e:
                    self.failures.append(repr(e))
                    continue
                waited = time.monotonic() - t0
                self.worst = max(self.worst, waited)
                if before:
                    self.worst_converting = max(self.worst_converting, waited)
                if r.status_code != 200:
                    self.failures.append(f"{r.status_code} {r.text[:200]}")
                    continue
                self.answered += 1
                if before and converting(self.pid):
                    self.answered_while_converting += 1
                self.peak_rss = max(self.peak_rss, rss_mib(self.pid))
                time.sleep(0.02)


def test_issue37_item2_hostile_pages_do_not_stall_the_server(hostile_site: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    steps = [
        {"items": [call("web_fetch", {"url": hostile_site + path}, f"f{i}")]} for i, path in enumerate(PAGES)
    ]
    steps.append({"items": [{"text": "read: {last_tool_results}"}]})
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": steps}))
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "DEVAGENT_DATA_DIR": str(tmp_path / "data"),
        "DEVAGENT_OUTBOUND_ALLOW": "127.0.0.1/32",
    }
    db = f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}"
    args = serve_argv(db, workspace, f"scripted:{script}", "--approval", "yolo", "--no-sandbox")
    with serving(args, tmp_path / "serve.log", env=env) as srv:
        idle = rss_mib(srv.proc.pid)
        poller = Poller(srv.url, srv.proc.pid)
        thread = threading.Thread(target=poller.run, daemon=True)
        thread.start()
        try:
            frames = _stream(srv.url, v03_message("read the pages"))
        finally:
            poller.stop.set()
            thread.join(60)
        after = rss_mib(srv.proc.pid)
        print(
            f"\nhostile pages: worst /healthz wait {poller.worst:.2f} s over {poller.answered} answers, "
            f"{poller.worst_converting:.2f} s while a page converted "
            f"({poller.answered_while_converting} while a page converted); server RSS idle {idle:.0f} MiB, "
            f"peak {poller.peak_rss:.0f} MiB, after {after:.0f} MiB"
        )
    assert frames[-1]["status"]["state"] == "completed", frames[-1]
    assert _Hostile.served == list(PAGES)
    assert poller.failures == []
    # The server answered another caller while pages converted, never stalled for long.
    assert poller.answered_while_converting > 0
    assert poller.worst < 20.0
    assert poller.peak_rss < idle + 400
    results = _tool_results(frames)
    assert set(results) == {"f0", "f1", "f2"}, results
    assert results["f0"].split("\n\n")[1] == "x y"  # a whole page of spaces is one space
    for cid in ("f1", "f2"):  # text, cut where it is too long, or a clear error
        out = results[cid]
        assert (
            "[The page's text is longer than" in out
            or "characters" in out.split("\n\n")[0]
            or "could not be read as text within 30 s" in out
        ), out[:500]


def _stream(url: str, message: dict[str, Any]) -> list[dict[str, Any]]:
    """The results of a `message/stream` with the extension, read to its end."""
    frames = []
    with (
        httpx.Client(timeout=900) as c,
        c.stream("POST", url, json=rpc("message/stream", {"message": message}), headers=auth(TOKEN)) as r,
    ):
        for line in r.iter_lines():
            if line.startswith("data:"):
                frame = json.loads(line[5:])
                assert "result" in frame, frame
                frames.append(frame["result"])
    return frames


def _tool_results(frames: list[dict[str, Any]]) -> dict[str, str]:
    """Each finished call's result text or error message, by call id."""
    found = {}
    for u in tool_updates(frames):
        if u["status"] == "SUCCEEDED":
            found[u["tool_call_id"]] = u["output"]["text"]
        elif u["status"] == "FAILED":
            found[u["tool_call_id"]] = u["error"]["message"]
    return found
