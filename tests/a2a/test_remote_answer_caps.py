"""A remote agent that floods its caller (issue 37 item 9): a bare a2a-sdk agent streams 10 MB
of progress and a 30 MiB answer to a real `devagent serve` that delegated a `task` to it. The
call's result is capped like a command's output (head and tail, 40,000 characters at most), the
answer kept is capped (16 Mi characters, the rest counted), and the whole of what was kept is
saved where the session's `read_file` reads it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from devagent.agent.subagents.remote import ANSWER_MAX_CHARS
from tests.a2a.test_remote_agents import _delegate, _remote_settings
from tests.a2a.test_subagents import _reply
from tests.fakes.bare_a2a_agent import bare_a2a_agent

PROGRESS = 100  # status updates of 100 KB each
CHUNKS = 30  # artifact pieces of 1 MiB each
MIB = 1024 * 1024


def _flood() -> Any:
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.tasks import TaskUpdater
    from a2a.types import Part, TaskState

    from a2a.helpers import new_task_from_user_message, new_text_message

    class Flood(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            assert context.message is not None
            task = context.current_task or new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
            up = TaskUpdater(event_queue, task.id, task.context_id)
            for i in range(PROGRESS):
                said = new_text_message(f"step {i} " + "p" * 100_000, context_id=task.context_id)
                await up.update_status(TaskState.TASK_STATE_WORKING, said)
            for i in range(CHUNKS):
                piece = f"<chunk {i}>" + chr(ord("a") + i % 26) * (MIB - 20) + "\n"
                await up.add_artifact([Part(text=piece)], artifact_id="answer", append=i > 0)
            await up.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            """Nothing to stop here."""

    return Flood()


async def test_issue37_item9_a_remote_agents_answer_is_capped_like_a_tools_output(tmp_path: Path) -> None:
    env = {
        "DEVAGENT_DATA_DIR": str(tmp_path / "data"),
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    with bare_a2a_agent("", executor=_flood()) as card:
        frames = await _delegate(tmp_path, "flood", _remote_settings("flood", card), env)
    assert frames[-1]["status"]["state"] == "completed", frames[-1]
    reply = _reply(frames)
    print(f"\nthe parent's reply: {len(reply):,} characters for a {CHUNKS} MiB answer")
    assert reply.startswith("parent: <chunk 0>aaaa")
    assert len(reply) < 40_000
    m = re.search(r"left out here; the whole output \((\d+) lines\) is in (\S+) …\]", reply)
    assert m, reply[9_000:11_000]
    saved = Path(m.group(2))
    assert saved.is_relative_to(tmp_path / "data" / "outputs")
    text = saved.read_text()
    kept_chunks = ANSWER_MAX_CHARS // MIB
    assert text.startswith("<chunk 0>aaaa") and f"<chunk {kept_chunks - 1}>" in text
    assert f"<chunk {kept_chunks + 1}>" not in text
    note = re.search(
        r"\n\[the remote agent said ([\d,]+) characters more, not kept: an answer keeps its "
        r"first ([\d,]+)\]$",
        text,
    )
    assert note, text[-300:]
    assert int(note.group(1).replace(",", "")) >= CHUNKS * MIB - ANSWER_MAX_CHARS
    assert int(note.group(2).replace(",", "")) == ANSWER_MAX_CHARS
    assert len(text) <= ANSWER_MAX_CHARS + len(note.group(0))
    assert reply.endswith(text[-200:])  # the tail the model sees is the end of what was kept
