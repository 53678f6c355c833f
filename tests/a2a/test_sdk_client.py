"""The official `a2a-sdk` client (1.x, with its 1.0 and its v0.3 transport) drives the appendix."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientCallContext, ClientConfig, ClientFactory, create_client
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.types import AgentCard, GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct, Value

from devagent.a2a.extension import EXTENSION_URI
from tests.a2a.helpers import TOKEN, running_server
from tests.conftest import Script
from tests.core_helpers import call_then_text, write_call

WRITE = call_then_text(write_call("s.txt", "S\n", "s1"), "sdk done")


def _meta(d: dict[str, Any]) -> Struct:
    s = Struct()
    s.update(d)
    return s


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_sdk_client_appendix(version: str, script: Script, sqlite_url: str, workspace: Path) -> None:
    """A2 B4-B10: a2a-sdk's client over the 1.0 transport and over its v0.3 transport."""
    async with running_server(script(WRITE), sqlite_url, workspace) as srv:
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        config = ClientConfig(streaming=True, httpx_client=http)
        if version == "1.0":
            client = await create_client(srv.url, config)
        else:
            card_json = (await http.get(srv.url + ".well-known/agent-card.json")).json()
            card = AgentCard()
            from google.protobuf.json_format import ParseDict

            ParseDict(card_json, card, ignore_unknown_fields=True)
            keep = [i for i in card.supported_interfaces if i.protocol_version == "0.3"]
            del card.supported_interfaces[:]
            card.supported_interfaces.extend(keep)
            client = ClientFactory(config).create(card)
        ctx = ClientCallContext(
            service_parameters=ServiceParametersFactory.create([with_a2a_extensions([EXTENSION_URI])])
        )
        msg = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text="write s")],
            metadata=_meta({EXTENSION_URI: {"workspace_path": str(workspace)}}),
        )
        states = []
        task_id = context_id = ""
        tool: dict[str, Any] = {}
        async for resp in client.send_message(SendMessageRequest(message=msg), context=ctx):
            if resp.HasField("task"):
                task_id, context_id = resp.task.id, resp.task.context_id
                states.append(resp.task.status.state)
            elif resp.HasField("status_update"):
                su = resp.status_update
                states.append(su.status.state)
                md = MessageToDict(su.metadata)
                if md.get(EXTENSION_URI, {}).get("kind") == "TOOL_CALL_UPDATE":
                    tool = MessageToDict(su.status.message.parts[0].data)
        assert states[0] == TaskState.TASK_STATE_SUBMITTED
        assert states[-1] == TaskState.TASK_STATE_INPUT_REQUIRED
        assert tool["status"] == "PENDING" and tool["confirmation_request"]["options"]

        v = Value()
        v.struct_value.update({"tool_call_id": "s1", "selected_option_id": "proceed_once"})
        conf = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            task_id=task_id,
            context_id=context_id,
            parts=[Part(data=v)],
        )
        texts = []
        last = None
        async for resp in client.send_message(SendMessageRequest(message=conf), context=ctx):
            if resp.HasField("status_update"):
                last = resp.status_update.status.state
                for p in resp.status_update.status.message.parts:
                    if p.HasField("text"):
                        texts.append(p.text)
        assert last == TaskState.TASK_STATE_COMPLETED
        # the streamed pieces, then the whole reply again in the final status message
        assert "".join(texts) == "sdk done" * 2 and texts[-1] == "sdk done"
        assert (workspace / "s.txt").read_text() == "S\n"
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        await client.close()
        await http.aclose()
