"""A minimal A2A agent made of nothing but a2a-sdk's own server classes: its agent card, and an
agent that answers any message with one fixed agent message, served by uvicorn in a thread. The
benchmarks' floor agents share the card."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def plain_card(url: str) -> Any:
    """The card of a streaming, text-only agent named "bare" with one JSON-RPC (A2A 1.0)
    interface at `url`."""
    from a2a.types import (  # late: a2a-sdk's server side
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
    )

    return AgentCard(
        name="bare",
        description="A bare a2a-sdk agent.",
        version="1",
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=url)],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="answer", name="answer", description="answers anything", tags=["test"])],
    )


@contextmanager
def bare_a2a_agent(answer: str, executor: Any = None) -> Iterator[str]:
    """The agent answering `answer` on 127.0.0.1 (a free port), or running `executor` (an
    a2a-sdk `AgentExecutor`) instead; yields its card URL."""
    import uvicorn  # late: the server side of a2a-sdk and uvicorn load only where an agent runs
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from starlette.applications import Starlette

    from a2a.helpers import new_text_message

    class Answers(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            await event_queue.enqueue_event(new_text_message(answer, context_id=context.context_id))

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            """Nothing to stop: an answer is one event."""

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # connections wait in the backlog until uvicorn serves them
    base = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    card = plain_card(base)
    handler = DefaultRequestHandler(
        agent_executor=executor or Answers(), task_store=InMemoryTaskStore(), agent_card=card
    )
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield base + ".well-known/agent-card.json"
    finally:
        server.should_exit = True
        thread.join()
        sock.close()
