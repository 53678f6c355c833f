"""The console's routes: its static page, and the read-only views of sessions it draws from.

Tenancy is A2A's: the bearer token's name is the owner, and a session is listed and shown only to
the owner of the A2A context it belongs to (its core session id is derived from both, by the
function the A2A server passes in), so another token's session is as unknown here as it is to
`tasks/get`. The console imports nothing of the A2A server: what it needs of it comes as arguments.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from devagent.agent.api import (
    InputError,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    UserPrompt,
    repository_result,
    shown_name,
)
from devagent.console.signin import PATHS as SIGNIN_PATHS
from devagent.console.signin import SignIn, signin_routes

if TYPE_CHECKING:
    from devagent.agent.api import AgentCore, SandboxProvider

CONSOLE_PREFIX = "/ui"
_API = CONSOLE_PREFIX + "/api"
_STATIC = CONSOLE_PREFIX + "/static/"
# The page's own files, and their media types: nothing else under /ui/static is served.
_FILES = {
    "console.js": "text/javascript; charset=utf-8",
    "markdown.js": "text/javascript; charset=utf-8",
    "theme.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
# Only the page's own scripts and styles, requests to its own origin, no frames, no forms
# posting elsewhere; an agent's text or a file's content can never become code.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
STATES = ("all", "waiting", "running", "idle")
PAGE_SIZE = 25


class ServerSettings(Protocol):
    """What the console shows of the server's settings (the A2A server's A2ASettings)."""

    agent_name: str

    def roots_for(self, identity: str) -> list[Path]: ...


def is_public_path(path: str) -> bool:
    """The page and its files carry no data: served without a token (the page asks for one); nor
    do the steps of the sign-in through the identity provider (signin.py)."""
    return path in (CONSOLE_PREFIX, CONSOLE_PREFIX + "/", *SIGNIN_PATHS) or path.startswith(_STATIC)


def _asset(name: str) -> bytes:
    return resources.files("devagent.console").joinpath("static", name).read_bytes()


def _owner(request: Request) -> str:
    user = request.scope.get("user")
    return str(getattr(user, "display_name", "") or "") if user is not None else ""


def _operator(request: Request) -> bool:
    """Whether the caller has the operator's role of the identity provider (the auth scope
    "operator"): it sees every identity's sessions."""
    return "operator" in getattr(request.scope.get("auth"), "scopes", ())


# The auth scope of a caller in a group the operator lets share ("group:NAME", given by the A2A
# server's bearer check from the IdP's groups claim).
_GROUP_SCOPE = "group:"
# ... and in a group whose members also answer each other's permission requests ("approve:NAME").
_APPROVE_SCOPE = "approve:"


async def _may_open(
    request: Request, owner: str, groups_of: Callable[[str], Awaitable[frozenset[str]]] | None
) -> bool:
    """Whether the caller may open `owner`'s sessions (read-only): an operator, or a member of a
    shared group `owner` was last seen in."""
    if _operator(request):
        return True
    scopes = getattr(request.scope.get("auth"), "scopes", ())
    mine = {s.removeprefix(_GROUP_SCOPE) for s in scopes if s.startswith(_GROUP_SCOPE)}
    return bool(mine) and groups_of is not None and bool(mine & await groups_of(owner))


async def _may_answer(
    request: Request, owner: str, groups_of: Callable[[str], Awaitable[frozenset[str]]] | None
) -> bool:
    """Whether the caller may answer `owner`'s permission requests (allow once or refuse, through
    A2A as the page does): its own, or a member of a group that approves `owner` was last seen in.
    An operator's role alone reads."""
    if owner == _owner(request):
        return True
    scopes = getattr(request.scope.get("auth"), "scopes", ())
    mine = {s.removeprefix(_APPROVE_SCOPE) for s in scopes if s.startswith(_APPROVE_SCOPE)}
    return bool(mine) and groups_of is not None and bool(mine & await groups_of(owner))


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def summary(state: dict[str, Any], updated: float, default_model: str) -> dict[str, Any]:
    """One row of the session list, from a session's stored state and when it was stored."""
    a2a = (state.get("extra") or {}).get("a2a") or {}
    pending = state.get("pending") or []
    status = str(state.get("status", "idle"))
    asks = [
        p for p in pending if isinstance(p, dict) and p.get("needs") == "permission" and not p.get("result")
    ]
    waiting = status == "awaiting_input" and bool(asks)
    usage = state.get("usage") or {}
    roots = state.get("workspace_roots") or [""]
    return {
        "context_id": str(a2a.get("context_id", "")),
        "task_id": str(state.get("turn_label", "")),
        "title": str(state.get("title", "")),
        "workspace": str(roots[0]),
        "state": status,
        "outcome": str(state.get("outcome", "")),
        "waiting": waiting,
        # what waits is a question the model asks (ask_user), not a permission
        "asking": waiting and any(p.get("kind") == "question" for p in asks),
        "updated": _iso(updated),
        "tokens": _int(usage.get("input_tokens")) + _int(usage.get("output_tokens")),
        "model": shown_name(str(state.get("model") or default_model)),
        "approval_mode": str(state.get("approval_mode", "")),
    }


def _matches(row: dict[str, Any], want: str) -> bool:
    if want == "waiting":
        return bool(row["waiting"])
    if want == "running":
        return bool(row["state"] == "running")
    if want == "idle":
        return bool(row["state"] == "idle")
    return True


def _sandbox(sandboxes: SandboxProvider) -> dict[str, bool]:
    """Where this server runs shell commands: in the sandbox (with network or not), or not
    sandboxed; `unavailable` when the sandbox is on but cannot start, so commands are refused."""
    missing = sandboxes.unavailable() is not None
    on = sandboxes.kind != "none"
    return {
        "on": on,
        "network": on and not missing and sandboxes.network,
        "unavailable": missing,
    }


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers={"Cache-Control": "no-store"})


def _json(body: dict[str, Any]) -> JSONResponse:
    return JSONResponse(body, headers={"Cache-Control": "no-store"})


def _page_routes() -> list[Route]:
    """The page and its files."""
    index = _asset("index.html")
    started = time.time()

    async def page(request: Request) -> Response:
        return Response(index, media_type="text/html; charset=utf-8", headers=_HEADERS)

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _FILES:
            return Response("not found", status_code=404, media_type="text/plain", headers=_HEADERS)
        headers = dict(_HEADERS, **{"Cache-Control": "no-cache", "ETag": f'"{int(started)}-{name}"'})
        if request.headers.get("if-none-match") == headers["ETag"]:
            return Response(status_code=304, headers=headers)
        return Response(_asset(name), media_type=_FILES[name], headers=headers)

    return [
        Route(CONSOLE_PREFIX, page, methods=["GET"]),
        Route(CONSOLE_PREFIX + "/", page, methods=["GET"]),
        Route(_STATIC + "{name}", static, methods=["GET"]),
    ]


def _items(timeline: list[Any], tool_call_json: Callable[[ToolCall], dict[str, Any]]) -> list[dict[str, Any]]:
    """A session's conversation as the page draws it: prompts, text, thoughts and tool calls."""
    items: list[dict[str, Any]] = []
    for item in timeline:
        if isinstance(item, UserPrompt):
            items.append({"kind": "user", "text": item.text})
        elif isinstance(item, TextDelta):
            items.append({"kind": "text", "text": item.text})
        elif isinstance(item, ThoughtDelta):
            items.append({"kind": "thought", "text": item.text})
        elif isinstance(item, ToolCall):
            items.append({"kind": "tool", "call": tool_call_json(item)})
    return items


def _changes(timeline: list[Any]) -> list[dict[str, Any]]:
    """The files the session changed, each with its path and every change's unified diff."""
    # timeline.py imports pydantic-ai, which a cold start must not load: by the time a session is
    # shown, a session (and so pydantic-ai) is loaded anyway.
    from devagent.agent.api import changed_files

    return [
        {"path": f.path, "diff": f.formatted_diff, "changes": len(f.changes)} for f in changed_files(timeline)
    ]


def _repository(record: dict[str, Any]) -> dict[str, Any] | None:
    """Where a repository session came from and the branch it was pushed to ("" : not yet)."""
    if not record:
        return None
    return {
        "url": str(record.get("url", "")),
        "ref": str(record.get("ref", "")),
        "base_commit": str(record.get("base_commit", "")),
        "branch": str(record.get("pushed_branch", "")),
        "commit": str(record.get("pushed_commit", "")),
    }


def console_routes(
    core: AgentCore,
    settings: ServerSettings,
    session_id_for: Callable[[str, str], str],
    tool_call_json: Callable[[ToolCall], dict[str, Any]],
    signin: SignIn | None = None,
    groups_of: Callable[[str], Awaitable[frozenset[str]]] | None = None,
) -> list[Route]:
    """The console's routes over `core`. `session_id_for(owner, context_id)`: the core session of
    an owner's A2A context; `tool_call_json`: a tool call as the A2A extension shows it; `signin`:
    the sign-in through the operator's identity provider, where one is set for the console;
    `groups_of(identity)`: the shared groups an identity was last seen in, where groups share."""

    async def me(request: Request) -> Response:
        owner = _owner(request)
        return _json(
            {
                "identity": owner,
                "operator": _operator(request),
                "workspaces": [str(p) for p in settings.roots_for(owner)],
                "agent": settings.agent_name,
                "model": shown_name(core.default_model),
                "sandbox": _sandbox(core.sandboxes),
            }
        )

    async def sessions(request: Request) -> Response:
        owner = _owner(request)
        want = request.query_params.get("state", "all")
        if want not in STATES:
            return _error(400, f"state must be one of {', '.join(STATES)}")
        offset = _int(request.query_params.get("offset", "0"))
        limit = _int(request.query_params.get("limit", str(PAGE_SIZE)))
        if offset < 0 or not 1 <= limit <= 200:
            return _error(400, "offset must be 0 or more and limit 1 to 200")
        rows = await _listed(core, owner, _operator(request), want)
        return _json(
            {"sessions": rows[offset : offset + limit], "total": len(rows), "offset": offset, "limit": limit}
        )

    async def session(request: Request) -> Response:
        owner = _owner(request)
        named = request.query_params.get("owner", owner)
        if named != owner and await _may_open(request, named, groups_of):
            owner = named  # an operator (a shared group's member) opens another identity's session
        context_id = request.path_params["context_id"]
        if not context_id or len(context_id) > 200:
            return _error(404, "no such session")
        sid = session_id_for(owner, context_id)
        found = await core.inspect(sid)
        if found is None or (found.state.extra.get("a2a") or {}).get("owner", "") != owner:
            return _error(404, "no such session")
        stored = await core.store.read_session(sid)
        timeline = await found.timeline()
        return _json(
            {
                "session": summary(
                    found.state.to_json(), stored.updated_at if stored else time.time(), core.default_model
                ),
                "items": _items(timeline, tool_call_json),
                "changed_files": _changes(timeline),
                "waiting": [tool_call_json(c) for c in found.waiting_calls()],
                "repository": _repository(found.state.repository),
                "may_answer": await _may_answer(request, owner, groups_of),
            }
        )

    patch = _patch_handler(core, session_id_for)

    workers = _workers_handler(core)

    return [
        *_page_routes(),
        *signin_routes(signin),
        Route(_API + "/me", me, methods=["GET"]),
        Route(_API + "/sessions", sessions, methods=["GET"]),
        Route(_API + "/sessions/{context_id}", session, methods=["GET"]),
        Route(_API + "/sessions/{context_id}/patch", patch, methods=["GET"]),
        Route(_API + "/workers", workers, methods=["GET"]),
    ]


def _workers_handler(core: AgentCore) -> Callable[[Request], Awaitable[Response]]:
    async def workers(request: Request) -> Response:
        """The workers (sandbox_backend = worker) for the operator: alive, sessions held, load."""
        if not _operator(request):
            return _error(403, "the workers are shown to the operator only")
        rows = await core.store.workers.overview(core.config.worker_lease_seconds)
        shown = [
            {
                "name": r["id"],
                "token": r["token_name"],
                "pool": r["pool"],
                "backend": r["backend"],
                "templates": r["templates"],
                "alive": r["alive"],
                "sessions": int(r["sessions"]),
                "capacity": int(r["capacity"]),
                "running": int(r["running"]),
                "load": round(int(r["sessions"]) / max(1, int(r["capacity"])), 3),
                "last_seen": _iso(float(r["last_seen"])),
            }
            for r in rows
        ]
        return _json({"workers": shown})

    return workers


def _patch_handler(
    core: AgentCore, session_id_for: Callable[[str, str], str]
) -> Callable[[Request], Awaitable[Response]]:
    """The handler of a repository session's patch (`/sessions/{context_id}/patch`)."""

    async def patch(request: Request) -> Response:
        """A repository session's patch now, against the ref it started from (made on request,
        never pushed from here)."""
        owner = _owner(request)
        sid = session_id_for(owner, request.path_params["context_id"][:200])
        found = await core.get_session(sid)
        if found is None or (found.state.extra.get("a2a") or {}).get("owner", "") != owner:
            return _error(404, "no such session")
        if not found.state.repository:
            return _error(404, "this session did not start from a repository")
        try:
            result = await repository_result(found, push=False)
        except InputError as e:
            return _error(409, str(e))
        return _json({"patch": result.patch, "files": result.files, "base_commit": result.base_commit})

    return patch


async def _listed(core: AgentCore, owner: str, every: bool, want: str) -> list[dict[str, Any]]:
    """The sessions' rows the console lists: the store lists every door's sessions, newest first;
    this caller's A2A ones are kept (an operator's, `every`: every identity's) in the state `want`."""
    rows = []
    for _sid, state, updated in await core.store.list_sessions(None):
        a2a = (state.get("extra") or {}).get("a2a") or {}
        if (a2a.get("owner", "") != owner and not every) or not a2a.get("context_id"):
            continue
        row = {**summary(state, updated, core.default_model), "owner": str(a2a.get("owner", ""))}
        if _matches(row, want):
            rows.append(row)
    return rows
