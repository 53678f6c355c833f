"""The REST routes of Gemini CLI's a2a-server: `GET /listCommands`, `POST /executeCommand`,
`POST /tasks`, `GET /tasks/metadata`, `GET /tasks/{id}/metadata`, with the same JSON shapes and
status codes, behind the same bearer authentication as everything else (the auth middleware wraps
the whole app).

Differences from the original, on purpose: `init` is listed; streaming commands are valid SSE
(frames separated by a blank line); commands run in a devagent conversation (`contextId` in the
body names one, else the caller's own command conversation) in the server's first workspace root;
`POST /tasks` never takes `isTrusted` or `autoExecute` beyond server policy.

An operator of the identity provider (or a member of a group that shares) reads here as it does
over A2A (operator_reads.py): `GET /tasks/{id}/metadata` of another identity's task, and
`GET /tasks/metadata?tenant=IDENTITY` of that identity's (the original has no tenants: a query
parameter of devagent's, as A2A's ListTasks names its `tenant`); anyone else naming another
identity is refused 403 in the original's error shape, and another's task is "Task not found".
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from a2a.compat.v0_3 import conversions
from a2a.types import (
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils import proto_utils
from a2a.utils.errors import A2AError
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from devagent.a2a import extension as ext
from devagent.a2a import legacy, operator_reads
from devagent.a2a.executor import owner_of
from devagent.a2a.request import Prepared, handoff
from devagent.agent.api import (
    Door,
    Event,
    InputError,
    Notice,
    RunCommand,
    TextDelta,
    ToolCall,
    TurnDriver,
    registry,
)
from devagent.common.rpcerrors import INTERNAL_ERROR, client_message, internal_error, rpc_error

if TYPE_CHECKING:
    from a2a.compat.v0_3.context_builders import V03ServerCallContextBuilder
    from a2a.server.context import ServerCallContext
    from starlette.requests import Request

    from devagent.a2a.executor import DevagentExecutor
    from devagent.a2a.handler import DevagentRequestHandler
    from devagent.agent.api import CommandInfo, Session

# Commands that act through the model: their events stream (SSE), as the original's `init` does.
STREAMING = frozenset(("init",))
# The original's names for commands devagent spells differently.
ALIASES = {"restore list": "restore"}
REST_CONTEXT = "devagent-rest-commands"  # the caller's conversation for commands without contextId

_MCP_STATUS = {"ready": "connected", "starting": "connecting", "closed": "disconnected"}


def command_json(info: CommandInfo, prefix: str = "") -> dict[str, Any]:
    """The original's listing: sub-commands carry their full name ("memory show")."""
    name = prefix + info.name
    return {
        "name": name,
        "description": info.description,
        "arguments": [
            {"name": a.name, "description": a.description, "isRequired": bool(a.required)}
            for a in info.arguments
        ],
        "subCommands": [command_json(s, name + " ") for s in info.sub_commands],
    }


def state_name(state: int) -> str:
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_").lower().replace("_", "-")  # type: ignore[arg-type]


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


async def _body_of(request: Request) -> dict[str, Any]:
    """The request's JSON object ({} for anything else)."""
    try:
        body = await request.json()
    except Exception:
        return {}
    return body if isinstance(body, dict) else {}


class _CommandOutput(Door):
    """A command's turn as the original answers it: its text and its errors; a question it
    comes to (a command whose prompt asks) parks it, for the stream of a later message."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.errors: list[str] = []

    async def show(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self.out.append(event.text)
        elif isinstance(event, Notice):
            (self.errors if event.level == "error" else self.out).append(event.text)

    async def ask(self, call: ToolCall, driver: TurnDriver) -> None:
        driver.park()


async def _run_command(session: Session, path: list[str], args: str) -> Any:
    """A command's output as the original answers it: its text, or an error message."""
    output = _CommandOutput()
    await TurnDriver(session, output).run(RunCommand(path, args))
    if output.errors:
        return {"type": "message", "messageType": "error", "content": "\n".join(output.errors)}
    return "".join(output.out).rstrip("\n")


def _sse_frame(ev: Any) -> str:
    """One event as a v0.3 stream response in a `data:` frame."""
    tid = ev.id if isinstance(ev, Task) else getattr(ev, "task_id", "")
    resp = conversions.to_compat_stream_response(proto_utils.to_stream_response(ev), tid)
    return f"data: {resp.model_dump_json(by_alias=True, exclude_none=True)}\n\n"


async def _sse_frames(first: Any, events: AsyncGenerator[Any, None]) -> AsyncIterator[str]:
    try:
        yield _sse_frame(first)
        async for ev in events:
            yield _sse_frame(ev)
    except A2AError as e:
        err = rpc_error(None, INTERNAL_ERROR, e.message)
        yield f"event: error\ndata: {json.dumps(err)}\n\n"
    finally:
        await events.aclose()


def _mcp_servers_json(entries: list[Any]) -> list[dict[str, Any]]:
    """A session's MCP servers as the original's task metadata lists them."""
    out: list[dict[str, Any]] = []
    for e in entries:
        conn = e.conn
        out.append(
            {
                "name": e.spec.name,
                "status": _MCP_STATUS.get(conn.state, "disconnected") if conn is not None else "disconnected",
                "tools": [
                    {"name": t.name, "description": t.description, "parameterSchema": t.input_schema}
                    for t in (conn.tools if conn is not None else [])
                ],
            }
        )
    return out


class LegacyRest:
    """The endpoints of Gemini CLI's a2a-server routes, over devagent's request handler."""

    def __init__(
        self,
        handler: DevagentRequestHandler,
        executor: DevagentExecutor,
        ctx_builder: V03ServerCallContextBuilder,
        on_new_task: Callable[[str], None] | None = None,
    ) -> None:
        self.handler = handler
        self.executor = executor
        self.settings = executor.settings
        self.ctx_builder = ctx_builder
        self.on_new_task = on_new_task

    async def list_commands(self, request: Request) -> Response:
        return JSONResponse({"commands": [command_json(c) for c in registry().list()]})

    async def execute_command(self, request: Request) -> Response:
        body = await _body_of(request)
        command = body.get("command")
        if not isinstance(command, str):
            return _error(400, 'Invalid "command" field.')
        args = body.get("args")
        if "args" in body and not isinstance(args, list):
            return _error(400, '"args" field must be an array.')
        name = ALIASES.get(command.strip(), command.strip())
        path = name.split()
        if not path or registry().find(path) is None:
            return _error(404, f"Command not found: {command}")
        arg_text = " ".join(str(a) for a in args or [])
        cid = body.get("contextId")
        context_id = cid if isinstance(cid, str) and cid else None
        call_context = self.ctx_builder.build(request)
        if path[0] in STREAMING:
            return await self._stream_command(request, call_context, path, arg_text, context_id)
        owner = owner_of(call_context)
        try:
            session = await self.executor.session_for(owner, context_id or REST_CONTEXT, None)
            assert session is not None
            return JSONResponse({"name": command, "data": await _run_command(session, path, arg_text)})
        except InputError as e:
            return _error(400, str(e))
        except Exception as e:  # the detail to the log, a reference to the client
            return _error(500, internal_error(repr(e), what=f"/{command}", exc_info=True))

    def _command_message(
        self, call_context: ServerCallContext, path: list[str], args: str, context_id: str | None
    ) -> Message:
        """The legacy message that runs `/path args` in the caller's first workspace root."""
        msg = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text="/" + " ".join(path) + (f" {args}" if args else ""))],
        )
        if context_id:
            msg.context_id = context_id
        workspace = str(self.settings.roots_for(owner_of(call_context))[0])
        msg.metadata.update({legacy.KEY: {"kind": legacy.AGENT_SETTINGS, "workspacePath": workspace}})
        return msg

    async def _stream_command(
        self,
        request: Request,
        call_context: ServerCallContext,
        path: list[str],
        args: str,
        context_id: str | None,
    ) -> Response:
        """A command acting through the model runs as a legacy task; its events stream as SSE,
        one `data:` frame per event, blank-line separated. The task can be continued (answer a
        permission request) with message/stream on its taskId."""
        streams = self.handler.streams
        if not streams.enter(request.scope):  # before any task exists
            return _error(429, streams.message())
        msg = self._command_message(call_context, path, args, context_id)
        call_context.state["method"] = "message/stream"
        handoff(call_context).command = (path, args)
        agen = self.handler.on_message_send_stream(SendMessageRequest(message=msg), call_context)
        try:
            first = await agen.__anext__()
        except StopAsyncIteration:
            return _error(500, "the command produced no events")
        except A2AError as e:
            return _error(400, e.message or "the command was refused")
        except Exception as e:
            return _error(500, internal_error(repr(e), what=f"/{' '.join(path)}", exc_info=True))
        return StreamingResponse(
            _sse_frames(first, agen),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def create_task(self, request: Request) -> Response:
        """Creates a legacy task without running it: 201 and the id as a JSON string."""
        body = await _body_of(request)
        cid = body.get("contextId")
        context_id = cid if isinstance(cid, str) and cid else str(uuid.uuid4())
        if len(context_id) > 36:
            return _error(400, "contextId longer than 36 characters")
        raw = body.get("agentSettings")
        st = ext.AgentSettings.from_metadata({legacy.KEY: raw}) if isinstance(raw, dict) else None
        prepared = Prepared(settings=st)
        call_context = self.ctx_builder.build(request)
        if st is not None and st.workspace_path:
            try:
                roots = self.settings.roots_for(owner_of(call_context))
                prepared.workspace = ext.validate_workspace(st.workspace_path, roots)
            except ext.SettingsError as e:
                return _error(400, str(e))
        try:
            session = await self.executor.session_for(owner_of(call_context), context_id, prepared)
        except Exception as e:  # a model or approval mode this server refuses, said plainly
            return _error(400, client_message(e, what="creating a task"))
        task_id = str(uuid.uuid4())
        task = Task(
            id=task_id, context_id=context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
        )
        task.status.timestamp.GetCurrentTime()
        task.metadata.update(legacy.event_metadata(legacy.STATE_CHANGE, self.executor.model_name(session)))
        if self.on_new_task is not None:
            self.on_new_task(task_id)
        await self.handler.store.save(task, call_context)
        return JSONResponse(task_id, status_code=201)

    async def _metadata_of(self, task: Task, owner: str) -> dict[str, Any]:
        session = await self.executor.session_for(owner, task.context_id, None, create=False)
        md: dict[str, Any] = {
            "id": task.id,
            "contextId": task.context_id,
            "taskState": state_name(task.status.state),
            "model": self.executor.model_name(session),
            "mcpServers": [],
            "availableTools": [],
        }
        if session is None:
            return md
        md["availableTools"] = [
            {"name": d["name"], "description": d["description"], "parameterSchema": d["parameters"]}
            for d in session.tool_definitions()
        ]
        try:
            entries = self.executor.core.mcp.session_servers(session)
        except Exception:
            entries = []
        md["mcpServers"] = _mcp_servers_json(entries)
        return md

    async def task_metadata(self, request: Request) -> Response:
        call_context = self.ctx_builder.build(request)
        task_id = request.path_params["task_id"]
        task = await self.handler.store.get(task_id, call_context)
        groups = self.executor.identity_groups
        if task is None and (
            owners := await operator_reads.owner_context(self.handler.store, task_id, call_context, groups)
        ):
            call_context = owners  # an operator (a shared group) reads another's task as its owner would
            task = await self.handler.store.get(task_id, call_context)
        if task is None:
            return _error(404, "Task not found")
        return JSONResponse({"metadata": await self._metadata_of(task, owner_of(call_context))})

    async def all_task_metadata(self, request: Request) -> Response:
        """The caller's tasks that are not finished (the original lists the tasks it holds in
        memory, which are those), newest first; 204 when there are none. `?tenant=`: another
        identity's, for an operator (a shared group's member)."""
        call_context = self.ctx_builder.build(request)
        tenant = request.query_params.get("tenant", "")
        try:
            call_context = await operator_reads.list_context(
                ListTasksRequest(tenant=tenant), call_context, self.executor.identity_groups
            )
        except A2AError as e:
            return _error(403, e.message or "another identity's tasks are not yours to list")
        owner = owner_of(call_context)
        out: list[dict[str, Any]] = []
        for state in (
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
            TaskState.TASK_STATE_INPUT_REQUIRED,
        ):
            resp = await self.handler.store.list(ListTasksRequest(status=state, page_size=100), call_context)
            for t in resp.tasks:
                out.append(await self._metadata_of(t, owner))
        if not out:
            return Response(status_code=204)
        return JSONResponse(out)

    def routes(self) -> list[Route]:
        return [
            Route("/listCommands", self.list_commands, methods=["GET"]),
            Route("/executeCommand", self.execute_command, methods=["POST"]),
            Route("/tasks", self.create_task, methods=["POST"]),
            Route("/tasks/metadata", self.all_task_metadata, methods=["GET"]),
            Route("/tasks/{task_id}/metadata", self.task_metadata, methods=["GET"]),
        ]


def rest_routes(
    handler: DevagentRequestHandler,
    executor: DevagentExecutor,
    ctx_builder: V03ServerCallContextBuilder,
    on_new_task: Callable[[str], None] | None = None,
) -> list[Route]:
    """The routes of Gemini CLI's a2a-server."""
    return LegacyRest(handler, executor, ctx_builder, on_new_task).routes()
