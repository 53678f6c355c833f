"""The development-tool extension's own JSON-RPC methods, beside the SDK's:
`commands/get` (the slash commands), `workspaces/get` (the caller's workspace roots) and
`command/execute` (a slash command run as a task of its own)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from a2a.types import Message, Part, Role, SendMessageRequest

from devagent.a2a import extension as ext
from devagent.a2a.executor import owner_of
from devagent.a2a.request import handoff
from devagent.agent.api import Registry, Workspace, user_config_dir, with_custom
from devagent.common.rpcerrors import rpc_error

if TYPE_CHECKING:
    from a2a.compat.v0_3.context_builders import V03ServerCallContextBuilder
    from starlette.requests import Request

    from devagent.a2a.handler import DevagentRequestHandler
    from devagent.a2a.settings import A2ASettings

METHODS = ("commands/get", "command/execute", "workspaces/get")


def _result(rid: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _invalid_params(rid: Any, message: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    return rpc_error(rid, -32602, message, data)


def _command_message(path: list[str], args: str, params: dict[str, Any]) -> Message:
    """The user message that runs `/path args`, in the context and with the metadata given."""
    text = "/" + " ".join(path) + (f" {args}" if args else "")
    msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    cid = params.get("context_id") or params.get("contextId")
    if isinstance(cid, str) and cid:
        msg.context_id = cid
    md = params.get("metadata")
    if isinstance(md, dict) and md:
        msg.metadata.update(md)
    return msg


@dataclass(eq=False, slots=True)
class ExtensionMethods:
    """Answers the extension's methods for the JSON-RPC endpoint (jsonrpc.py)."""

    handler: DevagentRequestHandler
    settings: A2ASettings
    ctx_builder: V03ServerCallContextBuilder

    async def answer(self, method: str, request: Request, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        """The JSON-RPC response object of one of `METHODS`."""
        if method == "commands/get":
            return self.commands_get(request, rid)
        if method == "workspaces/get":
            return self.workspaces_get(request, rid, params)
        return await self.command_execute(request, rid, params)

    def commands_for(self, request: Request, *, every_root: bool = False) -> Registry:
        """The built-in commands and the custom ones of the caller's workspace (the first of its
        roots, where its sessions work when a message names no other; with `every_root`, those of
        all its roots), as on disk now; a session keeps the list it read when it was loaded."""
        roots = self.settings.roots_for(owner_of(self.ctx_builder.build(request)))
        chosen = roots if every_root else roots[:1]
        return with_custom(user_config_dir(), Workspace(chosen) if chosen else None)

    def commands_get(self, request: Request, rid: Any) -> dict[str, Any]:
        commands = self.commands_for(request).list()
        return _result(rid, {"commands": [ext.slash_command_json(c) for c in commands]})

    def workspaces_get(self, request: Request, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        """The caller's workspace roots (the first is its workspace when a message names none), and
        with `workspace_path` whether that one is allowed: a client asks before its first message."""
        roots = self.settings.roots_for(owner_of(self.ctx_builder.build(request)))
        result: dict[str, Any] = {"workspaces": [str(r) for r in roots]}
        path = params.get("workspace_path")
        if path is None:
            return _result(rid, result)
        if not isinstance(path, str):
            return _invalid_params(rid, "workspace_path must be a string")
        try:
            result["workspace_path"] = ext.validate_workspace(path, roots)
        except ext.SettingsError as e:
            return _invalid_params(rid, str(e), result)
        return _result(rid, result)

    async def command_execute(self, request: Request, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        """Starts the command as a task and answers at once with its id (the task runs on)."""
        path = params.get("command_path")
        args = params.get("args", "")
        if (
            not isinstance(path, list)
            or not path
            or not all(isinstance(p, str) and p for p in path)
            or not isinstance(args, str)
        ):
            return _invalid_params(rid, "command_path must be a non-empty list of names and args a string")
        # any of the caller's workspaces: the session (perhaps in another of them) checks its own
        if self.commands_for(request, every_root=True).find(path) is None:
            message = f"unknown command /{' '.join(path)}"
            return _result(rid, {"execution_id": "", "status": "FAILED_TO_START", "message": message})
        req = SendMessageRequest(message=_command_message(path, args, params))
        req.configuration.return_immediately = True
        call_context = self.ctx_builder.build(request)
        call_context.state["method"] = "command/execute"
        handoff(call_context).command = (list(path), args)
        from a2a.utils.errors import A2AError

        try:
            task = await self.handler.on_message_send(req, call_context)
        except A2AError as e:
            return _invalid_params(rid, e.message or type(e).__name__)
        return _result(
            rid,
            {
                "execution_id": getattr(task, "id", ""),
                "status": "STARTED",
                "message": "",
                "context_id": getattr(task, "context_id", ""),
            },
        )
