"""`devagent mcp`'s start: `initialize` and `tools/list` answered before the MCP SDK is loaded.

Importing the SDK's server takes about 0.6 s here, and a host waits for `initialize` before it
does anything else; some (Codex CLI) list the tools at once and do not wait for a slow answer. So
the process answers `initialize` itself (the same answer the SDK gives: `tests/mcpdoor/
test_stdio.py` compares them) while the SDK loads, and passes every line on to the SDK, which
then answers a second time: that answer is dropped. Until the SDK serves, a `tools/list` is
answered here too, with the SDK's stored answer (listing.py), and not passed on. Done with public
means only: the SDK's stdio transport reads fd 0 and writes fd 1, which become pipes between it
and two threads that carry the lines to and from the real stdin and stdout.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from typing import Any

from devagent import __version__
from devagent.agent.api import SandboxError, setup_sandbox
from devagent.mcp import listing
from devagent.mcp.instructions import INSTRUCTIONS
from devagent.preflight import stdio_door_config
from devagent.stdio import setup_logging, work_folder
from devagent.stdio_cli import DoorFlags

# The protocol versions the SDK's handshake accepts; another one gets the latest (as the SDK does).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MAX_LINE = 64 * 1024 * 1024
_END = b"\x00devagent-mcp-end\n"  # no JSON line starts with NUL


def initialize_result(params: Any) -> dict[str, Any]:
    """What the SDK answers to `initialize` for devagent's server."""
    asked = params.get("protocolVersion") if isinstance(params, dict) else None
    version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {
        "capabilities": {
            "prompts": {"listChanged": False},
            "resources": {"listChanged": False, "subscribe": False},
            "tools": {"listChanged": False},
        },
        "instructions": INSTRUCTIONS,
        "protocolVersion": version,
        "serverInfo": {"name": "devagent", "version": __version__},
    }


class _Relay:
    """The two threads between the real stdio and the SDK's pipes."""

    def __init__(self, real_in: int, real_out: int, to_sdk: int, from_sdk: int) -> None:
        self.real_in = os.fdopen(real_in, "rb", buffering=0)
        self.real_out = real_out
        self.to_sdk = to_sdk
        self.from_sdk = os.fdopen(from_sdk, "rb")
        self.lock = threading.Lock()
        self.init_id: Any = None
        self.dropped = False
        self.sdk_serving = False  # the SDK has answered something: it answers from now on
        self.tools = listing.stored()  # read now: the threads import nothing while the SDK loads
        self.input_lock = threading.RLock()  # (taken in a signal handler, which may nest)
        self.input_ended = False

    def _write(self, data: bytes) -> None:
        with self.lock:
            view = memoryview(data)
            while view:
                n = os.write(self.real_out, view)
                view = view[n:]

    def inbound(self) -> None:
        first = True
        buf = b""
        try:
            while chunk := self.real_in.read(65536):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if first and line.strip():
                        first = False
                        self._fast_initialize(line)
                    elif self.init_id is not None and not self.sdk_serving and self._fast_list(line):
                        continue  # answered here; the SDK does not see it
                    os.write(self.to_sdk, line + b"\n")
                if len(buf) > MAX_LINE:  # the SDK refuses such a line; do not hold it for ever
                    os.write(self.to_sdk, buf)
                    buf = b""
            if buf:
                os.write(self.to_sdk, buf)
        except OSError:
            pass
        finally:
            with self.input_lock:
                self.input_ended = True
                os.close(self.to_sdk)

    def end_input(self) -> None:
        """The SDK reads the end of its input now, as if stdin had closed: the pipe's only write
        end becomes /dev/null (in place, so the inbound thread's writes go nowhere)."""
        with self.input_lock:
            if self.input_ended:
                return
            self.input_ended = True
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.to_sdk)
            os.close(null)

    def _fast_initialize(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if isinstance(msg, dict) and msg.get("method") == "initialize" and msg.get("id") is not None:
            self.init_id = msg["id"]
            answer = {"jsonrpc": "2.0", "id": msg["id"], "result": initialize_result(msg.get("params"))}
            self._write(json.dumps(answer, separators=(",", ":")).encode() + b"\n")

    def _fast_list(self, line: bytes) -> bool:
        """Answers a plain `tools/list` (no cursor) with the SDK's stored answer."""
        if b'"tools/list"' not in line:
            return False
        try:
            msg = json.loads(line)
        except ValueError:
            return False
        if not isinstance(msg, dict) or msg.get("method") != "tools/list" or msg.get("id") is None:
            return False
        params = msg.get("params")
        if params is not None and (not isinstance(params, dict) or set(params) - {"_meta"}):
            return False
        answer = {"jsonrpc": "2.0", "id": msg["id"], "result": self.tools}
        self._write(json.dumps(answer, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
        return True

    def outbound(self) -> None:
        for line in self.from_sdk:
            if line == _END:
                return
            self.sdk_serving = True
            if self.init_id is not None and not self.dropped and b'"result"' in line:
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = None
                if isinstance(msg, dict) and msg.get("id") == self.init_id and "result" in msg:
                    self.dropped = True  # the SDK's own answer to the initialize answered already
                    continue
            self._write(line)


def run_mcp(flags: DoorFlags, *, approval: str | None = None, sandbox: bool | None = None) -> int:
    """Serve MCP on this process's stdin/stdout until stdin closes. Returns the exit code."""
    if (root := work_folder("devagent mcp", flags.work_dir or os.getcwd())) is None:
        return 2
    config = stdio_door_config("devagent mcp", flags, approval)
    if isinstance(config, int):
        return config
    try:
        line = setup_sandbox(sandbox, config, "mcp", owned_by=[root])
    except SandboxError as e:
        print(f"devagent mcp: {e}", file=sys.stderr)
        return 2
    setup_logging(flags.verbose)
    if flags.verbose:
        print(f"devagent mcp: {line}", file=sys.stderr)

    # fd 0 and fd 1 become the SDK's pipes; the relay threads hold the real ones.
    sys.stdout.flush()
    real_in, real_out = os.dup(0), os.dup(1)
    sdk_in, to_sdk = os.pipe()
    from_sdk, sdk_out = os.pipe()
    os.dup2(sdk_in, 0)
    os.dup2(sdk_out, 1)
    os.close(sdk_in)
    os.close(sdk_out)
    relay = _Relay(real_in, real_out, to_sdk, from_sdk)
    threading.Thread(target=relay.inbound, name="mcp-in", daemon=True).start()
    out = threading.Thread(target=relay.outbound, name="mcp-out", daemon=True)
    out.start()

    from devagent.mcp.server import McpDoor, McpOptions, build_server  # late: the SDK, after `initialize`

    door = McpDoor(McpOptions(config=config, root=root))
    # SIGINT (a host's first signal to its server) and SIGTERM (its next) end the SDK's input, and
    # the SDK stops as at the end of stdin: a running turn is cancelled, its commands with it.
    # Python's KeyboardInterrupt would not: the SDK reads its input in a worker thread that a
    # cancellation does not interrupt, so it would wait for another line; SIGTERM's default would
    # leave the commands running.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda _sig, _frame: relay.end_input())
    try:
        build_server(door).run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        # Everything the SDK wrote is in the pipe before this line: the relay passes it on and
        # stops at the line (the SDK may still hold a copy of the pipe, so no EOF would come).
        sys.stdout.flush()
        os.write(1, _END)
        out.join(10)
    return 0
