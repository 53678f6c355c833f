"""An A2A agent on a2a-sdk's own server classes that reports progress as a working task does: one
status message per step, then its answer; or that holds its first event until released (the
remote task's id not yet said), then works until cancelled. Served by uvicorn in a thread.

    with stepping_a2a_agent(["step 1/3", "step 2/3\\nstep 3/3"], "done") as agent:
        agent.card_url ...
    with stepping_a2a_agent([], "", hold=True) as agent:
        agent.started.wait(); ...; agent.release.set(); agent.cancelled  # task ids cancelled
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.fakes.bare_a2a_agent import plain_card


@dataclasses.dataclass
class SteppingAgent:
    card_url: str = ""
    started: threading.Event = dataclasses.field(default_factory=threading.Event)  # a message came
    release: threading.Event = dataclasses.field(default_factory=threading.Event)  # held: go on
    task_ids: list[str] = dataclasses.field(default_factory=list)  # the tasks it said it works on
    cancelled: list[str] = dataclasses.field(default_factory=list)  # the tasks cancelled


@contextmanager
def stepping_a2a_agent(steps: list[str], answer: str, hold: bool = False) -> Iterator[SteppingAgent]:
    """The agent on 127.0.0.1 (a free port). Each of `steps` is one working status message; then
    it completes with `answer`. With `hold`, its first event waits for `release`, and then it
    works until cancelled."""
    import uvicorn  # late: the server side of a2a-sdk and uvicorn load only where an agent runs
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import Part, TaskState
    from starlette.applications import Starlette

    from a2a.helpers import new_task_from_user_message

    agent = SteppingAgent()
    ended: dict[str, asyncio.Event] = {}  # by task id: set when it is cancelled
    loops: list[asyncio.AbstractEventLoop] = []  # the server's

    class Steps(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            loops[:] = [asyncio.get_running_loop()]
            agent.started.set()
            if hold:
                await asyncio.to_thread(agent.release.wait)
            assert context.message is not None
            task = context.current_task or new_task_from_user_message(context.message)
            agent.task_ids.append(task.id)
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.start_work()
            for step in steps:
                said = updater.new_agent_message([Part(text=step)])
                await updater.update_status(TaskState.TASK_STATE_WORKING, message=said)
            if hold:  # works until cancelled
                await ended.setdefault(task.id, asyncio.Event()).wait()
                return
            await updater.complete(updater.new_agent_message([Part(text=answer)]))

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            assert context.task_id is not None and context.context_id is not None
            agent.cancelled.append(context.task_id)
            ended.setdefault(context.task_id, asyncio.Event()).set()
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # connections wait in the backlog until uvicorn serves them
    base = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    card: Any = plain_card(base)
    handler = DefaultRequestHandler(agent_executor=Steps(), task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    agent.card_url = base + ".well-known/agent-card.json"
    try:
        yield agent
    finally:
        agent.release.set()
        for loop in loops:  # a task still working ends, so the server can stop
            for event in list(ended.values()):
                loop.call_soon_threadsafe(event.set)
        server.should_exit = True
        thread.join()
        sock.close()
