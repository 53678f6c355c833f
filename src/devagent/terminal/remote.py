"""The terminal as an A2A client of a remote `devagent serve` (the development-tool extension's
client side), through the official a2a-sdk client.

The server's TaskStatusUpdateEvents are translated back into the core's events (the extension's
objects are the core's, in JSON: `a2a/extension.py` writes them), so the same renderer and
permission prompts serve both. Answers go back as the RFC's ToolCallConfirmation DataParts on the
same task.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from devagent.a2a.extension import (
    EXTENSION_URI,
    EXTENSION_VERSION,
    STATE_CHANGE,
    TEXT_CONTENT,
    THOUGHT,
    TOOL_CALL_UPDATE,
)
from devagent.agent.api import (
    ANSWER_OPTION,
    CommandInfo,
    ConfirmationRequest,
    Event,
    ExecuteDetails,
    FileDiff,
    GenericDetails,
    Input,
    McpDetails,
    NeedsInput,
    PermissionOption,
    QuestionDetails,
    Resume,
    RunCommand,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    ToolError,
    ToolErrorType,
    ToolKind,
    ToolOutput,
    TurnEnd,
    UserPrompt,
)
from devagent.preflight import StartError
from devagent.terminal.backend import Status
from devagent.terminal.history import PastTurn

# How many of a continued conversation's last tasks (turns) are read to show it.
HISTORY_TASKS = 20


def understands(version: str) -> bool:
    """Whether an extension version is one this client speaks: the same major version (and, for a
    0.x version, the same minor), as semantic versioning makes them compatible."""
    try:
        theirs = [int(x) for x in version.split(".")[:2]]
        ours = [int(x) for x in EXTENSION_VERSION.split(".")[:2]]
    except ValueError:
        return False
    if len(theirs) < 2:
        return False
    return theirs[0] == ours[0] and (ours[0] > 0 or theirs[1] == ours[1])


def check_card(card: dict[str, Any], url: str) -> str:
    """The extension version the card declares; StartError when it declares none this client speaks."""
    exts = (card.get("capabilities") or {}).get("extensions") or []
    for e in exts:
        if isinstance(e, dict) and e.get("uri") == EXTENSION_URI:
            version = str((e.get("params") or {}).get("version") or "")
            if not understands(version):
                raise StartError(
                    f"{url} speaks version {version or '(none given)'} of the development-tool extension; "
                    f"this devagent understands {EXTENSION_VERSION.rsplit('.', 1)[0]}.x: upgrade one of them",
                    1,
                )
            return version
    name = card.get("name") or "the agent"
    raise StartError(
        f"{url} ({name}) does not declare the development-tool extension, which devagent chat needs "
        "(tool calls, permission prompts); is it a devagent serve?",
        1,
    )


class RemoteBackend:
    """A conversation (an A2A contextId) on a remote devagent server."""

    def __init__(
        self,
        url: str,
        http: httpx.AsyncClient,
        client: Any,
        *,
        workspace: str | None,
        context_id: str | None,
        model: str | None,
        approval: str | None,
        commands: list[CommandInfo],
    ) -> None:
        self.url = url
        self.http = http
        self.client = client
        self.workspace = workspace
        self.context_id = context_id or ""
        self.task_id = ""
        self.model = model
        self.approval = approval
        self._commands = commands
        self._waiting: list[ToolCall] = []
        self.status = Status(
            model=model or "(server default)",
            approval_mode=approval or "(server default)",
            session_id=self.context_id,
            tokens=None,
            where=url,
        )

    @classmethod
    async def connect(
        cls,
        url: str,
        token: str | None,
        *,
        workspace: Path | None,
        context_id: str | None,
        model: str | None,
        approval: str | None,
    ) -> RemoteBackend:
        """Reads the card, the commands and the caller's workspace roots: the workspace is the one
        given (StartError listing the roots when the server refuses it), else the first root."""
        from a2a.client import ClientConfig, create_client

        base = url if url.endswith("/") else url + "/"
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30.0, read=None))
        try:
            try:
                resp = await http.get(base + ".well-known/agent-card.json")
            except httpx.HTTPError as e:
                raise StartError(f"cannot reach {base}: {e or type(e).__name__}", 1) from e
            if resp.status_code != 200:
                raise StartError(
                    f"{base} gave no agent card (HTTP {resp.status_code}); is it a devagent serve?", 1
                )
            try:
                card = resp.json()
            except ValueError as e:
                raise StartError(f"{base} answered with something that is not an agent card", 1) from e
            check_card(card, base)
            commands = await _commands(http, base)
            chosen = await _workspace(http, base, workspace)
            client = await create_client(base, ClientConfig(streaming=True, httpx_client=http))
        except BaseException:
            await http.aclose()
            raise
        backend = cls(
            base,
            http,
            client,
            workspace=chosen,
            context_id=context_id,
            model=model,
            approval=approval,
            commands=commands,
        )
        backend.status.workspace = chosen or ""  # shown before the first prompt
        await backend.find_waiting()
        return backend

    # --- Backend ------------------------------------------------------------------------------

    def start(self, inp: Input) -> RemoteTurn:
        return RemoteTurn(self, inp)

    def waiting(self) -> list[ToolCall]:
        return self._waiting

    async def history(self) -> list[PastTurn]:
        """A continued conversation's turns, from its tasks' histories (tasks/list, newest first;
        the last HISTORY_TASKS of them)."""
        from a2a.types import ListTasksRequest
        from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

        if not self.context_id:
            return []
        try:
            listed = await self.client.list_tasks(
                ListTasksRequest(context_id=self.context_id, page_size=HISTORY_TASKS, history_length=1000),
                context=self._ctx(),
            )
        except Exception:  # a server without tasks/list: nothing to show
            return []
        turns: list[PastTurn] = []
        for task in reversed(listed.tasks):
            turns += turns_of([MessageToDict(m) for m in task.history])
        return turns

    async def find_waiting(self) -> None:
        """A continued conversation (`--session`) that stopped at a permission request: its task
        and the calls it waits on, to ask again."""
        from a2a.types import ListTasksRequest, TaskState
        from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

        if not self.context_id:
            return
        try:
            listed = await self.client.list_tasks(
                ListTasksRequest(
                    context_id=self.context_id, status=TaskState.TASK_STATE_INPUT_REQUIRED, page_size=1
                ),
                context=self._ctx(),
            )
        except Exception:  # a server without tasks/list: start with a prompt
            return
        for task in listed.tasks:
            calls = [
                tool_call_from_json(d)
                for p in (task.status.message.parts if task.status.HasField("message") else [])
                if p.HasField("data") and "tool_call_id" in (d := MessageToDict(p.data))
            ]
            if calls:
                self.task_id = task.id
                self._waiting = calls
                return

    async def end_waiting(self) -> None:
        if self.task_id:
            await self._cancel()

    async def _cancel(self) -> None:
        from a2a.types import CancelTaskRequest

        try:
            await self.client.cancel_task(CancelTaskRequest(id=self.task_id), context=self._ctx())
        except Exception:  # the task ended meanwhile: nothing to cancel
            pass

    def can_edit(self, call: ToolCall) -> bool:
        # The RFC's confirmation carries edited file content only (file_details.new_content).
        return call.confirmation is not None and isinstance(call.confirmation.details, FileDiff)

    def commands(self) -> list[CommandInfo]:
        return self._commands

    async def set_approval_mode(self, mode: str) -> str | None:
        return "the approval mode of a remote session is the server's policy; restart with --approval MODE"

    def observe(self, ev: Event) -> None:
        pass

    async def close(self) -> None:
        await self.client.close()
        await self.http.aclose()

    # --- requests -----------------------------------------------------------------------------

    def _ctx(self) -> Any:
        from a2a.client import ClientCallContext
        from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions

        return ClientCallContext(
            service_parameters=ServiceParametersFactory.create([with_a2a_extensions([EXTENSION_URI])])
        )

    def message(self, inp: Input) -> Any:
        from a2a.types import Message, Part, Role
        from google.protobuf.struct_pb2 import Struct, Value  # type: ignore[import-untyped]

        if isinstance(inp, Resume):
            parts = []
            for d in inp.decisions:
                v = Value()
                conf: dict[str, Any] = {"tool_call_id": d.call_id, "selected_option_id": d.option}
                if d.new_content is not None and d.option == ANSWER_OPTION:
                    conf["question_details"] = {"answer": d.new_content}
                elif d.new_content is not None:
                    conf["file_details"] = {"new_content": d.new_content}
                v.struct_value.update(conf)
                parts.append(Part(data=v))
                if d.feedback:  # the user's reason, beside the refusal (docs/a2a.md)
                    parts.append(Part(text=d.feedback))
            return Message(
                message_id=str(uuid.uuid4()),
                role=Role.ROLE_USER,
                task_id=self.task_id,
                context_id=self.context_id,
                parts=parts,
            )
        if isinstance(inp, RunCommand):
            text = "/" + " ".join(inp.path) + (f" {inp.args}" if inp.args else "")
        else:
            assert isinstance(inp, UserPrompt)
            text = inp.text
        settings: dict[str, Any] = {"workspace_path": self.workspace} if self.workspace else {}
        if self.approval:
            settings["approval_mode"] = self.approval
        if self.model:
            settings["model"] = self.model
        md = Struct()
        md.update({EXTENSION_URI: settings})
        msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)], metadata=md)
        if self.context_id:
            msg.context_id = self.context_id
        return msg


class RemoteTurn:
    """One message's stream, as core events; `cancel()` is A2A's tasks/cancel."""

    def __init__(self, backend: RemoteBackend, inp: Input) -> None:
        self.b = backend
        self.inp = inp
        self._stream: AsyncIterator[Any] | None = None

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def cancel(self) -> None:
        await self.b._cancel()

    async def aclose(self) -> None:
        if self._stream is not None and hasattr(self._stream, "aclose"):
            await self._stream.aclose()

    async def _events(self) -> AsyncIterator[Event]:
        from a2a.client.errors import A2AClientError
        from a2a.types import SendMessageRequest

        self._stream = self.b.client.send_message(
            SendMessageRequest(message=self.b.message(self.inp)), context=self.b._ctx()
        )
        try:
            async for resp in self._stream:
                for ev in self._translate(resp):
                    yield ev
                    if isinstance(ev, NeedsInput | TurnEnd):
                        return
        except A2AClientError as e:
            yield TurnEnd("error", error=f"the server refused the request: {e}")
            return
        except httpx.HTTPError as e:
            yield TurnEnd("error", error=f"lost the connection to {self.b.url}: {e or type(e).__name__}")
            return
        yield TurnEnd("error", error="the server closed the stream before the turn ended")

    def _translate(self, resp: Any) -> list[Event]:
        from a2a.types import TaskState
        from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

        b = self.b
        if resp.HasField("task"):
            b.task_id, b.context_id = resp.task.id, resp.task.context_id
            b.status.session_id = b.context_id
            return []
        if not resp.HasField("status_update"):
            return []  # the reply artifact repeats the streamed text
        su = resp.status_update
        b.task_id, b.context_id = su.task_id, su.context_id
        b.status.session_id = b.context_id
        md = MessageToDict(su.metadata).get(EXTENSION_URI) or {}
        if md.get("model"):
            b.status.model = md["model"]
        usage = md.get("usage")
        if isinstance(usage, dict):  # the conversation's tokens so far, at a turn's end
            b.status.tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
        kind = md.get("kind")
        parts = list(su.status.message.parts) if su.status.HasField("message") else []
        state = su.status.state
        out: list[Event] = []
        if kind == TEXT_CONTENT:
            out.extend(TextDelta(p.text) for p in parts if p.HasField("text"))
        elif kind == THOUGHT:
            for p in parts:
                if p.HasField("data"):
                    d = MessageToDict(p.data)
                    out.append(ThoughtDelta(str(d.get("description", "")), str(d.get("subject", ""))))
        elif kind == TOOL_CALL_UPDATE:
            for p in parts:
                if p.HasField("data"):
                    out.append(ToolCallUpdate(tool_call_from_json(MessageToDict(p.data))))
        if kind == STATE_CHANGE:
            if state == TaskState.TASK_STATE_INPUT_REQUIRED:
                calls = []
                for p in parts:
                    if p.HasField("data"):
                        d = MessageToDict(p.data)
                        if "tool_call_id" in d:
                            calls.append(tool_call_from_json(d))
                        for c in d.get("tool_calls") or []:  # client tools: this terminal has none
                            calls.append(
                                ToolCall(
                                    str(c.get("tool_call_id", c.get("id", ""))),
                                    str(c.get("tool_name", c.get("name", ""))),
                                    {},
                                    ToolKind.CLIENT,
                                    awaiting_client=True,
                                )
                            )
                out.append(NeedsInput(calls))
            elif state == TaskState.TASK_STATE_COMPLETED:
                err = md.get("error")
                out.append(TurnEnd("max_steps_reached" if err else "finished", error=err))
            elif state == TaskState.TASK_STATE_CANCELED:
                out.append(TurnEnd("cancelled"))
            elif state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED):
                text = md.get("error") or " ".join(p.text for p in parts if p.HasField("text")) or "failed"
                out.append(TurnEnd("error", error=text))
        return out


def turns_of(history: list[dict[str, Any]]) -> list[PastTurn]:
    """A task's history as turns: the user's text messages are prompts (their answers to
    permission requests are not); the agent's text, thoughts, and each tool call once, in its last
    state (one still waiting is asked again after the history, not shown in it)."""
    turns: list[PastTurn] = []
    calls: dict[str, int] = {}  # call id -> its event's index in the turn
    for m in history:
        parts = [p for p in m.get("parts") or [] if isinstance(p, dict)]
        if m.get("role") == "ROLE_USER":
            if not any("data" in p for p in parts):
                turns.append(PastTurn(" ".join(str(p.get("text", "")) for p in parts if "text" in p)))
                calls = {}
            continue
        if not turns:
            turns.append(PastTurn(""))
        events = turns[-1].events
        for p in parts:
            d = p.get("data")
            if p.get("text"):
                events.append(TextDelta(str(p["text"])))
            elif isinstance(d, dict) and "tool_call_id" in d:
                update = ToolCallUpdate(tool_call_from_json(d))
                if str(d["tool_call_id"]) in calls:
                    events[calls[str(d["tool_call_id"])]] = update
                else:
                    calls[str(d["tool_call_id"])] = len(events)
                    events.append(update)
            elif isinstance(d, dict) and "description" in d:
                events.append(ThoughtDelta(str(d["description"]), str(d.get("subject", ""))))
    for t in turns:
        t.events = [e for e in t.events if not isinstance(e, ToolCallUpdate) or e.call.status.terminal]
    return turns


def tool_call_from_json(d: dict[str, Any]) -> ToolCall:
    """The core's ToolCall from the extension's ToolCall JSON (the inverse of
    `a2a.extension.tool_call_json`)."""
    status = ToolCallStatus(str(d.get("status", "PENDING")))
    output = None
    if isinstance(d.get("output"), dict):
        o = d["output"]
        if isinstance(o.get("diff"), dict):
            diff = _file_diff(o["diff"])
            output = ToolOutput(diff.formatted_diff, diff=diff)
        elif "text" in o:
            output = ToolOutput(str(o["text"]))
        else:
            sd = o.get("structured_data")
            output = ToolOutput(str(sd.get("text", "")) if isinstance(sd, dict) else "", data=sd)
    error = None
    if isinstance(d.get("error"), dict):
        e = d["error"]
        error = ToolError(str(e.get("message", "")), str(e.get("type", ToolErrorType.TOOL_ERROR.value)))
    confirmation = None
    cr = d.get("confirmation_request")
    if isinstance(cr, dict):
        options = [
            PermissionOption(str(o.get("id", "")), str(o.get("name", "")), str(o.get("description", "")))
            for o in cr.get("options") or []
            if isinstance(o, dict)
        ]
        details: Any
        if isinstance(cr.get("file_edit_details"), dict):
            details = _file_diff(cr["file_edit_details"])
        elif isinstance(cr.get("execute_details"), dict):
            ex = cr["execute_details"]
            details = ExecuteDetails(str(ex.get("command", "")), str(ex.get("working_directory", "")))
        elif isinstance(cr.get("mcp_details"), dict):
            m = cr["mcp_details"]
            details = McpDetails(str(m.get("server_name", "")), str(m.get("tool_name", "")))
        elif isinstance(cr.get("question_details"), dict):
            q = cr["question_details"]
            choices = [str(c) for c in q.get("choices") or [] if isinstance(c, str)]
            free = q.get("allow_free_text") is not False
            details = QuestionDetails(str(q.get("question", "")), choices, free)
        else:
            g = cr.get("generic_details") or {}
            details = GenericDetails(str(g.get("description", "")) if isinstance(g, dict) else "")
        confirmation = ConfirmationRequest(options, details)
    live = d.get("live_content")
    return ToolCall(
        id=str(d.get("tool_call_id", "")),
        name=str(d.get("tool_name", "")),
        args=_dict(d.get("input_parameters")),
        kind=ToolKind.CLIENT
        if d.get("awaiting_client")
        else ToolKind.QUESTION
        if confirmation is not None and isinstance(confirmation.details, QuestionDetails)
        else ToolKind.READ,
        description=str(d.get("description", "")),
        status=status,
        live_output=str(live) if live is not None else None,
        output=output,
        error=error,
        confirmation=confirmation,
    )


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _file_diff(d: dict[str, Any]) -> FileDiff:
    old = d.get("old_content")
    return FileDiff(
        file_name=str(d.get("file_name", "")),
        file_path=str(d.get("file_path", "")),
        old_content=str(old) if old is not None else None,
        new_content=str(d.get("new_content", "")),
        formatted_diff=str(d.get("formatted_diff", "")),
    )


async def _commands(http: httpx.AsyncClient, base: str) -> list[CommandInfo]:
    """The server's slash commands (the extension's `commands/get`), for completion."""
    try:
        resp = await http.post(base, json={"jsonrpc": "2.0", "id": 1, "method": "commands/get"})
    except httpx.HTTPError as e:
        raise StartError(f"cannot reach {base}: {e or type(e).__name__}", 1) from e
    if resp.status_code == 401:
        raise StartError(f"{base} refused the token (HTTP 401): give the server's token with --token", 2)
    try:
        body = resp.json()
    except ValueError:
        return []
    result = body.get("result") if isinstance(body, dict) else None
    cmds = result.get("commands") if isinstance(result, dict) else None

    def entry(c: dict[str, Any]) -> CommandInfo:
        subs = [entry(s) for s in c.get("sub_commands") or [] if isinstance(s, dict)]
        return CommandInfo(str(c.get("name", "")), str(c.get("description", "")), sub_commands=subs)

    return [entry(c) for c in cmds or [] if isinstance(c, dict)]


async def _workspace(http: httpx.AsyncClient, base: str, given: Path | None) -> str | None:
    """The workspace to send (the extension's `workspaces/get`): `given`, once the server allows
    it, else the first of the caller's roots there. None for a server without the method: it
    then picks its own (the first root) for a message that names none."""
    params = {"workspace_path": str(given)} if given is not None else {}
    try:
        resp = await http.post(
            base, json={"jsonrpc": "2.0", "id": 2, "method": "workspaces/get", "params": params}
        )
        body = resp.json()
    except httpx.HTTPError as e:
        raise StartError(f"cannot reach {base}: {e or type(e).__name__}", 1) from e
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return str(given) if given is not None else None
    err = body.get("error")
    if isinstance(err, dict):
        data = err.get("data")
        roots = data.get("workspaces") if isinstance(data, dict) else None
        if not isinstance(roots, list):  # a server without the method: it checks the first message
            return str(given) if given is not None else None
        listed = ", ".join(str(r) for r in roots) or "none"
        raise StartError(
            f"{base} refused --workspace {given}: {err.get('message', '')}. Your workspace roots there: "
            f"{listed} (give one, or a folder in one, with --workspace; without it the first is used)",
            2,
        )
    found = body.get("result")
    result: dict[str, Any] = found if isinstance(found, dict) else {}
    if given is not None:
        return str(result.get("workspace_path") or given)
    roots = result.get("workspaces")
    return str(roots[0]) if isinstance(roots, list) and roots else None
