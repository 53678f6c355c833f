"""All three A2A 1.0 bindings from one process (issue 11 item 4): the a2a-sdk client over
JSON-RPC, HTTP+JSON and gRPC sends, streams, answers a permission request, gets and cancels,
through the same handler, with the same tokens and dialects."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientCallContext, ClientConfig, create_client
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.types import CancelTaskRequest, GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value

from devagent.a2a.extension import EXTENSION_URI
from tests.a2a.helpers import TOKEN, running_server
from tests.conftest import Script
from tests.core_helpers import write_call

BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]


@asynccontextmanager
async def client_for(url: str, binding: str, token: str = TOKEN) -> AsyncIterator[Any]:
    """The SDK's client of the server at `url` on `binding`, closed after the block."""
    import grpc

    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        config = ClientConfig(
            streaming=True,
            httpx_client=http,
            supported_protocol_bindings=[binding],
            # the card's gRPC URL has a scheme (http://host:port), a channel's target none
            grpc_channel_factory=lambda url: grpc.aio.insecure_channel(url.removeprefix("http://")),
        )
        client = await create_client(url, config)
        try:
            yield client
        finally:
            await client.close()


def ctx(*extensions: str, token: str = TOKEN) -> ClientCallContext:
    # gRPC sends service parameters as metadata: the token travels there (HTTP has it as header too)
    params = ServiceParametersFactory.create([with_a2a_extensions(list(extensions))])
    params["authorization"] = f"Bearer {token}"
    return ClientCallContext(service_parameters=params)


def message(text: str | None = None, *, task_id: str = "", context_id: str = "", data: Any = None) -> Message:
    parts = [Part(text=text)] if text is not None else []
    if data is not None:
        v = Value()
        v.struct_value.update(data)
        parts.append(Part(data=v))
    return Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=parts, task_id=task_id, context_id=context_id
    )


async def run(client: Any, msg: Message, context: ClientCallContext) -> list[Any]:
    """The stream's events as (kind, event) pairs."""
    out = []
    async for resp in client.send_message(SendMessageRequest(message=msg), context=context):
        kind = resp.WhichOneof("payload")
        out.append((kind, getattr(resp, kind)))
    return out


def status_text(ev: Any) -> str:
    return "".join(p.text for p in ev.status.message.parts if p.HasField("text"))


@pytest.mark.parametrize("binding", BINDINGS)
async def test_binding_plain_write_get_cancel(
    binding: str, script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Issue 11 item 4, plain dialect on each binding: the permission request in words, answered
    "yes" on the same task, the file written, the reply an artifact; GetTask reads it; a second
    task waiting for permission is cancelled."""
    steps = [{"items": [write_call("b.txt", "bound\n", "w1")]}, {"items": [{"text": "wrote b.txt"}]}]
    async with (
        running_server(script(steps), sqlite_url, workspace, a2a_kw={"grpc_port": 0}) as srv,
        client_for(srv.url, binding) as client,
    ):
        assert client._transport.__class__.__name__.lower().startswith(  # the binding asked for
            {"JSONRPC": "jsonrpc", "HTTP+JSON": "rest", "GRPC": "grpc"}[binding]
        )
        evs = await run(client, message("write b.txt"), ctx())
        first = evs[0][1]
        task_id, context_id = first.id, first.context_id
        last = evs[-1][1]
        assert last.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "Reply yes" in status_text(last)
        assert EXTENSION_URI not in str([MessageToDict(e) for _, e in evs])  # plain: no extension content

        done = await run(client, message("yes", task_id=task_id, context_id=context_id), ctx())
        assert done[-1][1].status.state == TaskState.TASK_STATE_COMPLETED
        assert (workspace.parent / "b.txt").read_text() == "bound\n"
        arts = [e.artifact for k, e in done if k == "artifact_update"]  # chunks of one artifact
        assert "".join(p.text for a in arts for p in a.parts) == "wrote b.txt"
        assert len({a.artifact_id for a in arts}) == 1

        task = await client.get_task(GetTaskRequest(id=task_id), context=ctx())
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert [p.text for a in task.artifacts for p in a.parts] == ["wrote b.txt"]

        (workspace.parent / "b.txt").unlink()  # a new session would have to read it first
        evs2 = await run(client, message("write b.txt again"), ctx())
        assert evs2[-1][1].status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        canceled = await client.cancel_task(CancelTaskRequest(id=evs2[0][1].id), context=ctx())
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED


@pytest.mark.parametrize("binding", BINDINGS)
async def test_binding_extension_confirmation(
    binding: str, script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Issue 11 item 4, the development-tool extension on each binding: the ToolCall DataPart,
    answered with a ToolCallConfirmation."""
    steps = [{"items": [write_call("e.txt", "ext\n", "e1")]}, {"items": [{"text": "ok"}]}]
    async with (
        running_server(script(steps), sqlite_url, workspace, a2a_kw={"grpc_port": 0}) as srv,
        client_for(srv.url, binding) as client,
    ):
        evs = await run(client, message("write e.txt"), ctx(EXTENSION_URI))
        last = evs[-1][1]
        assert last.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        tool = MessageToDict(last.status.message.parts[0].data)
        assert tool["tool_call_id"] == "e1" and tool["status"] == "PENDING"
        conf = {"tool_call_id": "e1", "selected_option_id": "proceed_once"}
        first = evs[0][1]
        done = await run(
            client, message(task_id=first.id, context_id=first.context_id, data=conf), ctx(EXTENSION_URI)
        )
        assert done[-1][1].status.state == TaskState.TASK_STATE_COMPLETED
        assert (workspace.parent / "e.txt").read_text() == "ext\n"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_binding_refuses_a_wrong_token(
    binding: str, script: Script, sqlite_url: str, workspace: Path
) -> None:
    """A5 on each binding: a call with a token the server does not know is refused."""
    async with (
        running_server(script([]), sqlite_url, workspace, a2a_kw={"grpc_port": 0}) as srv,
        client_for(srv.url, binding, token="wrong") as client,
    ):
        with pytest.raises(Exception) as info:
            await client.get_task(GetTaskRequest(id="x"), context=ctx(token="wrong"))
        assert any(w in str(info.value).lower() for w in ("401", "unauthenticated", "token")), info.value


def test_grpc_is_imported_only_when_served() -> None:
    """Issue 11 item 4: the A2A server's modules load without grpcio (cold start); the gRPC
    binding's module loads it."""
    import subprocess
    import sys

    code = (
        "import os, sys, devagent.a2a.app, devagent.a2a.handler, devagent.a2a.push;"
        "print('grpc' in sys.modules);"
        "import devagent.a2a.grpc_server;"
        "print('grpc' in sys.modules);"
        "print(os.environ.get('GRPC_ENABLE_FORK_SUPPORT', '-'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    # gRPC's fork handlers are turned off as it is imported, without a variable left behind for
    # the agent's commands to inherit
    assert out.stdout.split() == ["False", "True", "-"]


def test_sdk_client_package_runs_only_when_a_name_is_asked_of_it() -> None:
    """Issue 14 (start-up, memory): the server's modules, v0.3 compatibility included, load
    without running `a2a.client`'s package code (the whole client and grpcio); the first name
    asked of the package runs it, and the client works as before."""
    import subprocess
    import sys

    code = (
        "import sys, devagent.a2a.app, a2a.client, a2a.client.service_parameters as sp;"
        "print('grpc' in sys.modules, 'a2a.client.client' in sys.modules, sp.ServiceParameters is not None);"
        "from a2a.client import ClientConfig, create_client;"
        "import a2a.client as c;"
        "print('a2a.client.client' in sys.modules, c.ClientConfig is ClientConfig,"
        " 'create_client' in c.__all__);"
        "print(hasattr(c, 'no_such_name'), hasattr(c, '__wrapped__'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "True", "True", "True", "True", "False", "False"]


def test_sdk_methods_are_untraced_unless_spans_can_be_recorded() -> None:
    """Issue 14: with no OpenTelemetry SDK installed and OTEL_INSTRUMENTATION_A2A_SDK_ENABLED
    unset, the a2a SDK's methods run without their tracing wrappers, and devagent sets no
    variable a shell command would inherit; with the variable set to true they keep them."""
    import os
    import subprocess
    import sys

    code = (
        "import os, devagent.a2a.app;"
        "from a2a.server.events.event_queue_v2 import EventQueueSource as Q;"
        "from a2a.server.request_handlers.default_request_handler_v2 import DefaultRequestHandlerV2 as H;"
        "print(hasattr(Q.enqueue_event, '__wrapped__'), hasattr(H._setup_active_task, '__wrapped__'),"
        " os.environ.get('OTEL_INSTRUMENTATION_A2A_SDK_ENABLED'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"}
    untraced = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert untraced.stdout.split() == ["False", "False", "None"]
    env["OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"] = "true"
    traced = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert traced.stdout.split() == ["True", "True", "true"]


async def test_rest_json_and_grpc_version(script: Script, sqlite_url: str, workspace: Path) -> None:
    """Issue 11 item 3 on the new bindings: HTTP+JSON answers `application/json` (A2A 1.0 11.1,
    TCK HTTP_JSON-SVC-001); gRPC refuses an A2A-Version it does not speak with UNIMPLEMENTED
    (5.4, TCK GRPC-ERR-002); a plain client's devagent metadata has camelCase field names and
    no data as keys (TCK DM-SERIAL-001)."""
    import grpc
    from a2a.types import a2a_pb2_grpc

    steps = [{"items": [{"tool_call": {"name": "list_directory", "args": {"path": "."}, "id": "l1"}}]}]
    steps.append({"items": [{"text": "listed"}]})
    async with running_server(script(steps), sqlite_url, workspace, a2a_kw={"grpc_port": 0}) as srv:
        async with httpx.AsyncClient(timeout=30) as c:
            body = {"message": {"role": "ROLE_USER", "parts": [{"text": "list"}], "messageId": "m1"}}
            headers = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}
            r = await c.post(srv.url + "rest/message:send", json=body, headers=headers)
            assert r.status_code == 200 and r.headers["content-type"] == "application/json"
            task = r.json()["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
            md = task["metadata"]["devagent"]
            assert md["toolStats"] == [{"tool": "list_directory", "calls": 1, "failures": 0}]
            assert md["usage"]["requests"] == 2 and md["usage"]["outputTokens"] > 0, md
            r = await c.get(srv.url + "rest/tasks/nope", headers={"Authorization": "Bearer wrong"})
            assert r.status_code == 401 and r.json()["error"]["status"] == "UNAUTHENTICATED"
            card = (await c.get(srv.url + ".well-known/agent-card.json")).json()
        grpc_url = next(i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC")
        async with grpc.aio.insecure_channel(grpc_url.removeprefix("http://")) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            req = SendMessageRequest(message=message("hello"))
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.SendMessage(
                    req, metadata=[("authorization", f"Bearer {TOKEN}"), ("a2a-version", "9.0")]
                )
            assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.GetTask(GetTaskRequest(id="x"), metadata=[("authorization", "Bearer wrong")])
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
