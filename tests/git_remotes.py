"""Real git remotes for the repository-session tests: bare repositories on disk, the same served by
`git daemon` on a loopback port, and by `git http-backend` behind a small loopback HTTP server
that asks for basic credentials (and records every request's, so a test sees the token used)."""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

GIT_ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
# git's own programs' folder (Debian: /usr/lib/git-core), where git-http-backend is
HTTP_BACKEND = os.path.join(
    subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True).stdout.strip(),
    "git-http-backend",
)


def git(*args: str, cwd: Path | None = None) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, (args, out.stderr)
    return out.stdout.strip()


@dataclass
class Remote:
    """A bare repository with `main` (two commits), `feature` and the tag `v1` (the first commit)."""

    path: Path
    first: str
    second: str

    def branches(self) -> dict[str, str]:
        lines = git("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads", cwd=self.path)
        return dict(line.split(" ", 1) for line in lines.splitlines())

    def show(self, rev: str, path: str) -> str:
        return git("show", f"{rev}:{path}", cwd=self.path)


def make_remote(root: Path, name: str = "project") -> Remote:
    work = root / f"{name}-src"
    work.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=work)
    (work / "README.md").write_text("# Project\nHello.\n")
    (work / "setup.sh").write_text("echo set-up-ran > setup-marker.txt\n")
    git("add", ".", cwd=work)
    git("commit", "-qm", "first", cwd=work)
    first = git("rev-parse", "HEAD", cwd=work)
    git("tag", "v1", cwd=work)
    (work / "app.py").write_text("print('hello')\n")
    git("add", ".", cwd=work)
    git("commit", "-qm", "second", cwd=work)
    second = git("rev-parse", "HEAD", cwd=work)
    git("branch", "feature", first, cwd=work)
    bare = root / f"{name}.git"
    git("clone", "-q", "--bare", str(work), str(bare))
    shutil.rmtree(work)
    return Remote(bare, first, second)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening_inodes(port: int) -> set[str]:
    """The inodes of the sockets listening on loopback `port` (/proc/net/tcp)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(f":{port:04X}") and fields[3] == "0A":
            inodes.add(fields[9])
    return inodes


def _held_by_group(inodes: set[str], group: int) -> bool:
    """Whether a process of process group `group` holds one of the sockets `inodes`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.getpgid(int(entry)) != group:
                continue
            for fd in os.listdir(f"/proc/{entry}/fd"):
                if os.readlink(f"/proc/{entry}/fd/{fd}").removeprefix("socket:[").rstrip("]") in inodes:
                    return True
    return False


def _listens(port: int, proc: subprocess.Popen[bytes]) -> bool:
    """Until the daemon listens on `port` (True) or ends (False: another process had the port;
    tests in parallel processes may pick the same free port). The deadline guards a hang."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        inodes = _listening_inodes(port)
        if inodes and _held_by_group(inodes, proc.pid):
            return True
        time.sleep(0.05)
    raise AssertionError(f"git daemon never listened on {port}")


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


@contextmanager
def git_daemon(base: Path) -> Iterator[str]:
    """`git daemon` serving `base` (fetch and push) on a free loopback port; its URL prefix.
    Stopped (and waited for) at the end. A port another process took first is given up for
    another: the URL is always this daemon's, never another test's."""
    for _ in range(10):
        port = free_port()
        argv = [
            "git", "daemon", "--export-all", "--enable=receive-pack", "--informative-errors",
            "--listen=127.0.0.1", f"--port={port}", f"--base-path={base}", str(base),
        ]  # fmt: skip
        # `git daemon` runs `git-daemon` as a child of its own: the whole group is stopped, else
        # the child would outlive the test
        proc = subprocess.Popen(
            argv, env=GIT_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        if _listens(port, proc):
            break
        _stop_group(proc)
    else:
        raise AssertionError("git daemon found no free port in 10 tries")
    try:
        yield f"git://127.0.0.1:{port}/"
    finally:
        _stop_group(proc)


@dataclass
class HttpRemote:
    url: str  # the prefix: http://127.0.0.1:PORT/
    authorizations: list[str] = field(default_factory=list)  # every request's Authorization header
    refused: int = 0  # requests answered 401


def basic(user: str, token: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()


def _handler(base: Path, expected: str, remote: HttpRemote) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                data = b""
                while size := int(self.rfile.readline().strip() or b"0", 16):
                    data += self.rfile.read(size)
                    self.rfile.readline()
                self.rfile.readline()
                return data
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _serve(self) -> None:
            given = self.headers.get("Authorization", "")
            remote.authorizations.append(given)
            body = self._body()
            if given != expected:
                remote.refused += 1
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            env = {
                "PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1", "GIT_PROJECT_ROOT": str(base),
                "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path, "QUERY_STRING": query,
                "REQUEST_METHOD": self.command, "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": "bot", "REMOTE_ADDR": "127.0.0.1",
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            }  # fmt: skip
            out = subprocess.run([HTTP_BACKEND], input=body, env=env, capture_output=True, timeout=60).stdout
            head, _, payload = out.partition(b"\r\n\r\n")
            headers = [line.split(":", 1) for line in head.decode().split("\r\n") if ":" in line]
            status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
            self.send_response(status)
            for k, v in headers:
                if k.lower() != "status":
                    self.send_header(k, v.strip())
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@contextmanager
def http_remote(base: Path, user: str, token: str) -> Iterator[HttpRemote]:
    """`git http-backend` serving `base` at http://127.0.0.1:PORT/, answering only requests with
    `user`:`token` as basic credentials (others get 401). Shut down at the end."""
    remote = HttpRemote("")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(base, basic(user, token), remote))
    remote.url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield remote
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
