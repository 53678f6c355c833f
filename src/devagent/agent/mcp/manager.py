"""MCP servers as tool sources.

Where servers come from:
- the operator: `[mcp_servers.NAME]` in the settings file (or `DEVAGENT_MCP_SERVERS` as JSON), given to
  every session: `CoreConfig.mcp_servers`;
- a client, per session (A2A AgentSettings `mcp_servers`), stored in `SessionState.mcp_servers`
  so that a restarted process reconnects. Each is checked against server policy when the session
  first needs it (`check_client_server`): a stdio server runs a command on the server's machine,
  so a client may start only commands the operator allowlisted (`mcp_client_commands`, empty by
  default); HTTP servers are allowed unless the operator turned them off or restricted the URLs.

Connections are process resources owned by the core (`AgentCore.mcp`, an `McpManager`): started
when a session first needs them (the first model turn, `/mcp`), shared by sessions that configure
the same server in the same directory, closed by `AgentCore.close()`. They are never stored.

Each server's tools join the session's tools as `SERVER__TOOL` (sanitised to `[A-Za-z0-9_-]`, at
most 64 characters), kind `ToolKind.MCP`; the approval policy asks with `McpDetails` and offers
"always allow this tool" and "always allow this server". A server that fails to start, crashes or
does not answer in time is reported (a `Notice` at the next turn, and `/mcp`) and the session goes
on without it. Tool lists refresh when a server announces a change.

The `mcp` SDK is imported only when a connection starts: importing this module is cheap.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from devagent.agent.events import ConfirmationDetails, Event, McpDetails, Notice, ToolErrorType, ToolKind
from devagent.agent.naming.mcp import SEPARATOR, server_of
from devagent.agent.sandbox.childenv import child_env
from devagent.agent.tools.base import Tool, ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.common.lru import LRU
from devagent.common.netpolicy import resolve_outbound_url
from devagent.common.tables import named_tables

if TYPE_CHECKING:
    from devagent.agent.settings import CoreConfig
    from devagent.agent.state import SessionState

log = logging.getLogger("devagent.mcp")

MAX_TOOL_NAME = 64
_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


# --- server specs and policy ---------------------------------------------------------------------


def check_server_name(name: str) -> str | None:
    """Why a server name cannot be used, or None. Names become the prefix of tool names, so they
    must be tool-name safe and must not contain the separator (`__`) or end with `_`."""
    if not _SERVER_NAME.fullmatch(name):
        return "a server name has 1 to 32 characters from A-Z, a-z, 0-9, '_' and '-'"
    if SEPARATOR in name or name.endswith("_"):
        return "a server name must not contain '__' or end with '_'"
    return None


def _str_map(raw: Any, what: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) for k in raw):
        raise ValueError(f"{what} must be a table of strings")
    return {k: str(v) for k, v in raw.items()}


@dataclass(slots=True)
class McpServerSpec:
    """One server: `command` (+ `args`, `env`, `cwd`) for stdio, or `url` (+ `headers`) for
    streamable HTTP. `timeout` overrides the server-wide tool call timeout."""

    name: str
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    @classmethod
    def parse(cls, name: str, raw: Any) -> McpServerSpec:
        """Validates one `[mcp_servers.NAME]` table (or AgentSettings entry); ValueError says why."""
        problem = check_server_name(name)
        if problem:
            raise ValueError(f"MCP server {name!r}: {problem}")
        if not isinstance(raw, dict):
            raise ValueError(f"MCP server {name!r}: expected a table with `command` or `url`")
        known = {"command", "args", "env", "cwd", "url", "headers", "timeout", "type", "transport"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"MCP server {name!r}: unknown keys {', '.join(unknown)}")
        command, url = raw.get("command"), raw.get("url")
        if bool(command) == bool(url):
            raise ValueError(f"MCP server {name!r}: give exactly one of `command` (stdio) or `url` (HTTP)")
        args = raw.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
            raise ValueError(f"MCP server {name!r}: `args` must be a list of strings")
        timeout = raw.get("timeout")
        if timeout is not None and (not isinstance(timeout, int | float) or timeout <= 0):
            raise ValueError(f"MCP server {name!r}: `timeout` must be a positive number of seconds")
        if url is not None:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ValueError(f"MCP server {name!r}: `url` must be an http:// or https:// URL")
        elif not isinstance(command, str):
            raise ValueError(f"MCP server {name!r}: `command` must be a string")
        cwd = raw.get("cwd") or ""
        if not isinstance(cwd, str):
            raise ValueError(f"MCP server {name!r}: `cwd` must be a string")
        return cls(
            name=name,
            command=command or "",
            args=[str(a) for a in args],
            env=_str_map(raw.get("env"), f"MCP server {name!r}: `env`"),
            cwd=cwd,
            url=url or "",
            headers=_str_map(raw.get("headers"), f"MCP server {name!r}: `headers`"),
            timeout=float(timeout) if timeout is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.url:
            out["url"] = self.url
            if self.headers:
                out["headers"] = dict(self.headers)
        else:
            out["command"] = self.command
            if self.args:
                out["args"] = list(self.args)
            if self.env:
                out["env"] = dict(self.env)
            if self.cwd:
                out["cwd"] = self.cwd
        if self.timeout is not None:
            out["timeout"] = self.timeout
        return out

    def target(self) -> str:
        """What /mcp shows (no header or environment values: they may hold secrets)."""
        if self.url:
            return self.url
        return " ".join([self.command, *self.args])


def parse_servers(raw: Any, what: str = "mcp_servers") -> dict[str, McpServerSpec]:
    return {
        name: McpServerSpec.parse(name, spec) for name, spec in named_tables(raw, what, "servers").items()
    }


def _inside(path: Path, roots: list[str]) -> bool:
    real = Path(os.path.realpath(path))
    return any(real == Path(r) or real.is_relative_to(Path(r)) for r in roots)


def check_client_server(spec: McpServerSpec, config: CoreConfig, roots: list[str]) -> str | None:
    """Why server policy refuses a server a client named, or None (a client's say-so alone
    never starts a process on the server's machine)."""
    if spec.name in config.mcp_servers:
        return "its name is already used by a server the operator configured"
    if spec.transport == "stdio":
        if not config.mcp_client_commands:
            return (
                "this server does not let clients start stdio MCP servers "
                "(the operator can allow commands with mcp_client_commands)"
            )
        if spec.command not in config.mcp_client_commands:
            return f"the command {spec.command!r} is not in the server's allowlist (mcp_client_commands)"
        if spec.env:
            # LD_PRELOAD, PATH and the like would let a client run other code than the allowed command
            return "a client may not set the environment of a stdio MCP server"
        if spec.cwd and not _inside(Path(roots[0]) / spec.cwd, roots):
            return "its cwd is outside the session's workspace"
        return None
    if not config.mcp_client_http:
        return "this server does not let clients name HTTP MCP servers"
    prefixes = config.mcp_client_url_prefixes
    if prefixes and not any(spec.url.startswith(p) for p in prefixes):
        return "its URL is not under an address the operator allows (mcp_client_url_prefixes)"
    return None


# --- tool names ----------------------------------------------------------------------------------


def tool_name(server: str, tool: str) -> str:
    """The name the model sees: `SERVER__TOOL`, sanitised, at most 64 characters (a long name
    is cut and ends with a short hash of the full one, so it stays unique)."""
    name = f"{server}{SEPARATOR}{_UNSAFE.sub('_', tool) or '_'}"
    if len(name) > MAX_TOOL_NAME:
        digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
        name = name[: MAX_TOOL_NAME - 9] + "_" + digest
    return name


# --- connections ---------------------------------------------------------------------------------


@dataclass(slots=True)
class McpToolInfo:
    name: str
    description: str
    input_schema: dict[str, Any]
    title: str = ""


def _pinned_transport(httpx2: Any, url: str, ip: str) -> Any:
    """An HTTP transport that connects to the checked address `ip` whenever a request names the
    URL's host, keeping the Host header and the TLS server name of the host, and refuses any
    other host: a second DNS answer (rebinding) or a redirect elsewhere never reaches the network.
    (httpx has no per-client address override; a transport is its documented extension point.)"""
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    https = url.lower().startswith("https:")

    class Pinned(httpx2.AsyncHTTPTransport):  # type: ignore[misc, name-defined]
        async def handle_async_request(self, request: Any) -> Any:
            if request.url.host != host:
                raise httpx2.ConnectError(
                    f"{request.url.host} is not the checked MCP server host", request=request
                )
            request.url = request.url.copy_with(host=ip)
            if https:
                request.extensions = {**request.extensions, "sni_hostname": host}
            return await super().handle_async_request(request)

    return Pinned()


class McpConnection:
    """One running MCP server. The SDK's client context is entered and left by one task
    (`_run`), as anyio requires; calls come from the session's tasks."""

    def __init__(
        self,
        spec: McpServerSpec,
        cwd: str,
        start_timeout: float,
        call_timeout: float,
        pin: str | None = None,
        env_pass: tuple[str, ...] = (),
    ) -> None:
        self.spec = spec
        self.cwd = cwd
        self.env_pass = env_pass  # the operator's extra environment names
        self.pin = pin  # the checked address a client-named URL is connected to (netpolicy)
        self.start_timeout = start_timeout
        self.call_timeout = spec.timeout or call_timeout
        self.state = "idle"  # idle | starting | ready | failed | closed
        self.error = ""
        self.failures = 0  # counts failures, so each one is reported once per session
        self.tools: list[McpToolInfo] = []
        self.tool_objects: dict[str, McpTool] = {}
        self.server_info = ""
        self._client: Any = None
        self._runner: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._refreshing: asyncio.Task[None] | None = None
        self._stale = False
        self._stderr: Any = None
        self.calls_in_flight = 0

    # lifecycle

    async def start(self) -> None:
        """Starts the server if it is not running yet and waits (bounded) until it is ready or
        failed. Never raises: a failure is in `state` / `error`."""
        if self._runner is None:
            self.state = "starting"
            self._runner = asyncio.create_task(self._run(), name=f"mcp:{self.spec.name}")
        if self._ready.is_set():
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._ready.wait()), self.start_timeout)
        except TimeoutError:
            self._fail(f"did not start within {self.start_timeout:g} s")
            self._stop.set()
            self._runner.cancel()

    async def close(self) -> None:
        self._stop.set()
        runner = self._runner
        if runner is not None and not runner.done():
            try:
                await asyncio.wait_for(asyncio.shield(runner), 5.0)
            except (TimeoutError, asyncio.CancelledError, Exception):
                runner.cancel()
                with contextlib.suppress(BaseException):
                    await runner
        if self.state != "failed":
            self.state = "closed"

    async def _run(self) -> None:
        listen_task: asyncio.Task[None] | None = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                self._client = await self._open(stack)
                info = self._client.server_info
                if info is not None:
                    self.server_info = f"{info.name} {info.version}".strip()
                await self._list_tools()
                listen_task = asyncio.create_task(self._listen())
                self.state = "ready"
                self._ready.set()
                await self._stop.wait()
                listen_task.cancel()
                with contextlib.suppress(BaseException):
                    await listen_task
        except asyncio.CancelledError:
            if self.state in ("starting", "ready"):
                self.state = "closed"
        except BaseException as e:
            self._fail(self._describe(e))
        finally:
            if listen_task is not None and not listen_task.done():
                listen_task.cancel()
            self._client = None
            self._ready.set()
            if self._stderr is not None:
                with contextlib.suppress(Exception):
                    self._stderr.close()
                self._stderr = None
            if self.state in ("starting", "ready"):
                self.state = "closed"

    async def _open(self, stack: contextlib.AsyncExitStack) -> Any:
        from mcp import Client, StdioServerParameters

        if self.spec.url:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            pinned = _pinned_transport(httpx2, self.spec.url, self.pin) if self.pin else None
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=self.spec.headers,
                    timeout=httpx2.Timeout(30.0, read=300.0),
                    transport=pinned,
                    follow_redirects=False,
                )
            )
            transport: Any = streamable_http_client(self.spec.url, http_client=http)
        else:
            from mcp.client.stdio import stdio_client

            # The server's stderr goes to a file, not to ours (wire mode owns our stdio), so that
            # a failure can quote its last lines.
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
            cwd = self.spec.cwd or self.cwd
            if self.spec.cwd and not os.path.isabs(self.spec.cwd):
                cwd = os.path.join(self.cwd, self.spec.cwd)
            # The allow-list of every program the agent starts, then the
            # operator's `env` of this server. The SDK adds its own short list (PATH, HOME, ...).
            env = child_env(self.env_pass, extra=self.spec.env)
            params = StdioServerParameters(command=self.spec.command, args=self.spec.args, env=env, cwd=cwd)
            transport = stdio_client(params, errlog=self._stderr)
        client = Client(transport, message_handler=self._on_message, read_timeout_seconds=None)
        return await stack.enter_async_context(client)

    async def _list_tools(self) -> None:
        tools: list[McpToolInfo] = []
        cursor: str | None = None
        for _ in range(100):
            page = await asyncio.wait_for(
                self._client.list_tools(cursor=cursor, cache_mode="refresh"), self.start_timeout
            )
            for t in page.tools:
                schema = dict(t.input_schema or {})
                schema.setdefault("type", "object")
                tools.append(McpToolInfo(t.name, t.description or "", schema, t.title or ""))
            cursor = page.next_cursor
            if not cursor:
                break
        self.tools = tools
        self._build_tool_objects()

    def _build_tool_objects(self) -> None:
        objs: dict[str, McpTool] = {}
        for info in self.tools:
            name = tool_name(self.spec.name, info.name)
            if name in objs:  # two tools that sanitise alike: the later one gets a hash
                digest = hashlib.sha256(info.name.encode()).hexdigest()[:8]
                name = name[: MAX_TOOL_NAME - 9] + "_" + digest
            objs[name] = _make_tool(self, name, info)
        self.tool_objects = objs

    async def _on_message(self, message: Any) -> None:
        import mcp_types

        inner = getattr(message, "root", message)
        if isinstance(inner, mcp_types.ToolListChangedNotification):
            # Not from inside the SDK's receive loop: listing waits for an answer that loop delivers.
            self._stale = True
            if self._refreshing is None or self._refreshing.done():
                self._refreshing = asyncio.create_task(self._refresh())

    async def _refresh(self) -> None:
        while self._stale:  # a change announced during a refresh is listed again
            self._stale = False
            await asyncio.sleep(0)
            if self.state != "ready" or self._client is None:
                return
            try:
                await self._list_tools()
                log.info("MCP server %s: tool list changed (%d tools)", self.spec.name, len(self.tools))
            except Exception as e:
                log.warning("MCP server %s: could not refresh its tools: %s", self.spec.name, e)

    async def _listen(self) -> None:
        """On 2026-07-28 connections change notifications need a `subscriptions/listen` stream;
        older servers send them unasked. Either way `_on_message` sees them."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        client = self._client
        if client is None or client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return
        caps = client.server_capabilities.tools
        if caps is None or not getattr(caps, "list_changed", False):
            return
        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _event in sub:
                    pass
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if not self._stop.is_set():
                from mcp.client.subscriptions import SubscriptionLost

                if isinstance(e, SubscriptionLost):
                    await asyncio.sleep(0.05)  # let the process's last stderr lines arrive
                    tail = self._stderr_tail()
                    lost = "the server closed the connection"
                    self._fail(f"{lost} (stderr: {tail})" if tail else lost)
                else:
                    log.info("MCP server %s: no change notifications (%s)", self.spec.name, e)

    def _fail(self, error: str) -> None:
        if self.state == "failed":
            return
        self.state = "failed"
        self.error = error
        self.failures += 1
        self.tool_objects = {}
        self._stop.set()
        log.warning("MCP server %s failed: %s", self.spec.name, error)

    def _describe(self, e: BaseException, default: str = "") -> str:
        leaves: list[BaseException] = []

        def walk(x: BaseException) -> None:
            if isinstance(x, BaseExceptionGroup):
                for sub in x.exceptions:
                    walk(sub)
            else:
                leaves.append(x)

        walk(e)
        first = leaves[0] if leaves else e
        text = str(first) or default or type(first).__name__
        if isinstance(first, FileNotFoundError | PermissionError):
            text = f"cannot run {self.spec.command!r}: {first.strerror or first}"
        tail = self._stderr_tail()
        return f"{text} (stderr: {tail})" if tail else text

    def _stderr_tail(self) -> str:
        f = self._stderr
        if f is None:
            return ""
        try:
            f.flush()
            f.seek(0)
            lines = [ln.rstrip() for ln in f.read().splitlines() if ln.strip()]
        except Exception:
            return ""
        return " | ".join(lines[-3:])[-400:]

    # calls

    async def call(self, name: str, args: dict[str, Any]) -> Any:
        client = self._client
        if self.state != "ready" or client is None:
            raise ToolFailure(
                f"the MCP server {self.spec.name!r} is not available ({self.error or self.state})",
                ToolErrorType.MCP_UNAVAILABLE,
            )
        from mcp.shared.exceptions import MCPError

        self.calls_in_flight += 1
        try:
            return await asyncio.wait_for(client.call_tool(name, args), self.call_timeout)
        except TimeoutError:
            raise ToolFailure(
                f"the MCP server {self.spec.name!r} did not answer within {self.call_timeout:g} s",
                ToolErrorType.TIMEOUT,
            ) from None
        except MCPError as e:
            import mcp_types

            if e.code == mcp_types.CONNECTION_CLOSED:
                await asyncio.sleep(0.05)  # let the process's last stderr lines arrive
                tail = self._stderr_tail()
                lost = "the server closed the connection"
                self._fail(f"{lost} (stderr: {tail})" if tail else lost)
                raise ToolFailure(
                    f"the MCP server {self.spec.name!r} stopped: {self.error}",
                    ToolErrorType.MCP_SERVER_CRASHED,
                ) from None
            raise ToolFailure(f"{self.spec.name}: {e}", ToolErrorType.MCP_ERROR) from None
        except (asyncio.CancelledError, ToolFailure):
            raise
        except Exception as e:
            raise ToolFailure(f"{self.spec.name}: {type(e).__name__}: {e}", ToolErrorType.MCP_ERROR) from None
        finally:
            self.calls_in_flight -= 1


# --- the tool the session sees -------------------------------------------------------------------


class McpTool(Tool):
    """A tool of an MCP server. Concrete classes are made per tool by `_make_tool` (the base class
    keeps name, description and schema as class attributes)."""

    kind = ToolKind.MCP

    def __init__(self, conn: McpConnection, info: McpToolInfo) -> None:
        self.conn = conn
        self.info = info
        self.server = conn.spec.name

    def describe(self, args: dict[str, Any]) -> str:
        return f"{self.info.title or self.info.name} ({self.server} MCP server)"

    async def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> ConfirmationDetails:
        return McpDetails(server_name=self.server, tool_name=self.info.name)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        result = await self.conn.call(self.info.name, args)
        return convert_result(self.server, self.info.name, result)


def _make_tool(conn: McpConnection, name: str, info: McpToolInfo) -> McpTool:
    description = f"[MCP server {conn.spec.name}] {info.description}".strip()
    cls = type(
        "McpTool_" + name.replace("-", "_"),
        (McpTool,),
        {"name": name, "description": description, "parameters": info.input_schema},
    )
    tool: McpTool = cls(conn, info)
    return tool


def convert_result(server: str, tool: str, r: Any) -> ToolResult:
    """An MCP CallToolResult as a ToolResult: the text the model reads (images and other binary
    content as a short description) and, for clients, the whole content in `data`."""
    texts: list[str] = []
    for c in r.content or []:
        kind = getattr(c, "type", "")
        if kind == "text":
            texts.append(c.text)
        elif kind in ("image", "audio"):
            size = len(c.data) * 3 // 4
            texts.append(f"[{kind} {c.mime_type}, about {size} bytes, shown to the user]")
        elif kind == "resource":
            res = c.resource
            if getattr(res, "text", None) is not None:
                texts.append(f"[resource {res.uri}]\n{res.text}")
            else:
                texts.append(f"[binary resource {res.uri} ({res.mime_type or 'unknown type'})]")
        elif kind == "resource_link":
            texts.append(f"[resource link {c.uri}: {c.name}]")
        else:
            texts.append(f"[{kind or 'unknown'} content]")
    structured = r.structured_content
    text = "\n".join(texts)
    if structured is not None and not text.strip():
        text = json.dumps(structured, ensure_ascii=False)
    if r.is_error:
        raise ToolFailure(text or f"the MCP tool {tool} reported an error", ToolErrorType.MCP_TOOL_ERROR)
    data: dict[str, Any] = {
        "mcp": {"server": server, "tool": tool},
        "content": [c.model_dump(mode="json", exclude_none=True) for c in r.content or []],
    }
    if structured is not None:
        data["structured_content"] = structured
    return ToolResult(text=text, data=data)


# --- per core and per session --------------------------------------------------------------------


@dataclass(slots=True)
class ServerEntry:
    """A server as a session sees it: its spec, where it came from, and why it was refused."""

    spec: McpServerSpec
    origin: str  # "config" | "session"
    refused: str = ""
    conn: McpConnection | None = None
    cwd: str = ""
    # A client-named URL is connected only after its address was checked (netpolicy), and then
    # to that address (`pin`; None when the operator allows private URLs: nothing to pin).
    address_checked: bool = False
    pin: str | None = None

    @property
    def needs_check(self) -> bool:
        return self.origin == "session" and bool(self.spec.url)


@dataclass(slots=True)
class _SessionView:
    entries: list[ServerEntry]
    key: str  # the session's stored servers (JSON) the entries were built from
    reported: set[tuple[str, int, int]] = field(default_factory=set)


# Session views kept per process, bounded: a view is built from the session's stored
# servers and the configuration, so one dropped is built again on the session's next use (its
# refused or failed servers are then reported once more, and a client-named URL checked again).
MCP_VIEWS_IN_MEMORY = 1024


class HasServers(Protocol):
    """What the manager needs of a session: its id and the servers its state names."""

    @property
    def id(self) -> str: ...

    @property
    def state(self) -> SessionState: ...


class McpManager:
    """The MCP connections of one core (process resources; never stored)."""

    def __init__(self, config: CoreConfig, views: int = MCP_VIEWS_IN_MEMORY) -> None:
        self.config = config
        self._conns: dict[str, McpConnection] = {}
        # session id -> its servers, as built
        self.views: LRU[str, _SessionView] = LRU(views, on_evict=self._view_evicted)
        self._closing: set[asyncio.Task[None]] = set()

    def _view_evicted(self, _session_id: str, view: _SessionView) -> None:
        """A client-named server no session view uses any more is stopped (a client naming ever
        new servers cannot keep ever more of them running); one with a call under way is left
        alone. The operator's servers are shared by every session and stay. A session that comes
        back starts its servers again on its next turn."""
        if not any(e.origin == "session" and e.conn is not None for e in view.entries):
            return  # nothing of the client's to stop: no walk over every other view (once full,
            # the map evicts one view for each new session)
        in_use = {id(e.conn) for v in self.views.values() for e in v.entries if e.conn is not None}
        for e in view.entries:
            conn = e.conn
            if e.origin != "session" or conn is None or id(conn) in in_use or conn.calls_in_flight:
                continue
            key = self._key(e.spec, e.cwd, e.pin)
            if self._conns.get(key) is conn:
                del self._conns[key]
            try:
                task = asyncio.get_running_loop().create_task(conn.close())
            except RuntimeError:  # no loop (a view built outside one): nothing was started
                continue
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def release(self, session_id: str) -> None:
        """A session closed: its view goes, and the client-named servers only it used stop (as
        when the view is evicted), before this returns."""
        view = self.views.pop(session_id)
        if view is None:
            return
        before = set(self._closing)
        self._view_evicted(session_id, view)
        await asyncio.gather(*(self._closing - before), return_exceptions=True)

    def session_servers(self, session: HasServers) -> list[ServerEntry]:
        """The servers of a session: the operator's, then those its client named (checked
        against policy now, so a changed policy applies after a restart)."""
        return self._view(session).entries

    def _view(self, session: HasServers) -> _SessionView:
        view = self.views.get(session.id)
        key = json.dumps(session.state.mcp_servers, sort_keys=True)
        if view is None or view.key != key:
            return self._build(session, key)
        for e in view.entries:  # a connection restarted (by /mcp restart in any session)
            if e.conn is not None and e.conn.state == "failed":
                e.conn = self._connection(e.spec, e.cwd, e.pin)
        return view

    def _build(self, session: HasServers, key: str) -> _SessionView:
        old = self.views.peek(session.id)
        entries: list[ServerEntry] = []
        for name, raw in self.config.mcp_servers.items():
            try:
                entries.append(ServerEntry(McpServerSpec.parse(name, raw), "config"))
            except ValueError as e:
                entries.append(ServerEntry(McpServerSpec(name=name), "config", refused=str(e)))
        for name, raw in session.state.mcp_servers.items():
            try:
                spec = McpServerSpec.parse(name, raw)
            except ValueError as e:
                entries.append(ServerEntry(McpServerSpec(name=name), "session", refused=str(e)))
                continue
            reason = check_client_server(spec, self.config, session.state.workspace_roots)
            entries.append(ServerEntry(spec, "session", refused=reason or ""))
        cwd = session.state.workspace_roots[0]
        for entry in entries:
            if not entry.refused:
                entry.cwd = cwd
                if not entry.needs_check:  # the others connect once checked, in prepare
                    entry.conn = self._connection(entry.spec, cwd)
        view = _SessionView(entries, key, old.reported if old is not None else set())
        self.views[session.id] = view
        return view

    @staticmethod
    def _key(spec: McpServerSpec, cwd: str, pin: str | None = None) -> str:
        return json.dumps([spec.name, spec.to_json(), "" if spec.url else cwd, pin], sort_keys=True)

    def _connection(self, spec: McpServerSpec, cwd: str, pin: str | None = None) -> McpConnection:
        key = self._key(spec, cwd, pin)
        conn = self._conns.get(key)
        if conn is None:
            conn = McpConnection(
                spec,
                cwd,
                self.config.mcp_start_timeout,
                self.config.mcp_call_timeout,
                pin=pin,
                env_pass=self.config.env_pass,
            )
            self._conns[key] = conn
        return conn

    async def prepare(self, session: HasServers, emit: Callable[[Event], None] | None = None) -> None:
        """Starts the session's servers that have not started yet (concurrently, bounded by the
        start timeout) and reports, once per session, servers refused or failed since."""
        view = self._view(session)  # held across the awaits below (other sessions may evict it)
        entries = view.entries
        for e in entries:
            if e.needs_check and not e.refused and not e.address_checked:
                e.address_checked = True
                reason, e.pin = await resolve_outbound_url(
                    e.spec.url,
                    allow_private=self.config.mcp_client_private_urls,
                    what="an MCP server URL",
                    hint=(
                        "the operator can allow such addresses with mcp_client_private_urls, "
                        "or list its network in outbound_allow"
                    ),
                    allow=self.config.outbound_networks(),
                )
                if reason:
                    e.refused = reason
                else:
                    e.conn = self._connection(e.spec, e.cwd, e.pin)
        conns = [e.conn for e in entries if e.conn is not None and e.conn.state in ("idle", "starting")]
        if conns:
            await asyncio.gather(*(c.start() for c in conns))
        if emit is None:
            return
        for e in entries:
            if e.refused:
                mark = (f"refused:{e.spec.name}", 0, 0)
                if mark not in view.reported:
                    view.reported.add(mark)
                    emit(Notice(f"MCP server {e.spec.name} was not connected: {e.refused}.", "warning"))
            elif e.conn is not None and e.conn.state == "failed":
                mark = (e.spec.name, id(e.conn), e.conn.failures)
                if mark not in view.reported:
                    view.reported.add(mark)
                    emit(
                        Notice(
                            f"MCP server {e.spec.name} is unavailable: {e.conn.error}. "
                            "Continuing without its tools.",
                            "warning",
                        )
                    )

    def tools_for(self, session: HasServers) -> dict[str, Tool]:
        """The tools of the session's ready servers, by the name the model sees."""
        if not self.config.mcp_servers and not session.state.mcp_servers:
            return {}
        tools: dict[str, Tool] = {}
        for e in self.session_servers(session):
            if e.conn is not None and e.conn.state == "ready":
                tools.update(e.conn.tool_objects)
        return tools

    async def restart(self, session: HasServers, names: list[str]) -> list[str]:
        """Starts the named servers of the session afresh (none named: those that failed)."""
        done: list[str] = []
        for e in self.session_servers(session):
            if e.refused or e.conn is None:
                continue
            if (names and e.spec.name in names) or (not names and e.conn.state in ("failed", "closed")):
                old = self._conns.pop(self._key(e.spec, e.cwd, e.pin), None)
                if old is not None:
                    await old.close()
                e.conn = self._connection(e.spec, e.cwd, e.pin)
                done.append(e.spec.name)
        await self.prepare(session)
        return done

    def missing_tool(self, name: str) -> Tool:
        """Stands in for the tool of a server that went away while a call waited: the call fails."""
        server = server_of(name)

        class Missing(Tool):
            kind = ToolKind.MCP

            async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
                raise ToolFailure(
                    f"the tool {name} is not available: its MCP server {server!r} is not connected",
                    ToolErrorType.MCP_UNAVAILABLE,
                )

        Missing.name = name
        return Missing()

    async def close(self) -> None:
        conns = list(self._conns.values())
        self._conns.clear()
        self.views.clear()
        await asyncio.gather(*(c.close() for c in conns), *self._closing, return_exceptions=True)
