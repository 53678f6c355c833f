"""What a remote agent's stream is held as (issue 37 item 9): the live output is the last
LIVE_CHARS of its progress, and its texts together at most ANSWER_MAX_CHARS, whatever it sends
and however (appended pieces, replaced artifacts, status after status)."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import (
    Artifact,
    Part,
    StreamResponse,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)

from devagent.agent.subagents import remote as remote_agents
from devagent.agent.subagents.remote import _Exchange, _take
from devagent.agent.subagents.remote_status import LIVE_CHARS


class _Ctx:
    emit = None  # no door: the progress notices are another test's

    def __init__(self) -> None:
        self.shown: list[str] = []

    async def live(self, text: str) -> None:
        self.shown.append(text)


def _status(text: str) -> Any:
    ev = TaskStatusUpdateEvent(task_id="t", context_id="c")
    ev.status.state = TaskState.TASK_STATE_WORKING
    ev.status.message.parts.append(Part(text=text))
    return StreamResponse(status_update=ev)


def _piece(artifact_id: str, text: str, append: bool) -> Any:
    ev = TaskArtifactUpdateEvent(task_id="t", context_id="c", append=append)
    ev.artifact.CopyFrom(Artifact(artifact_id=artifact_id, parts=[Part(text=text)]))
    return StreamResponse(artifact_update=ev)


async def test_issue37_item9_progress_and_answer_held_within_their_caps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(remote_agents, "ANSWER_MAX_CHARS", 1000)
    got, ctx = _Exchange(), _Ctx()
    for i in range(500):
        await _take(_status(f"[{i}]" + "x" * 300), got, ctx)  # type: ignore[arg-type]
    assert max(map(len, ctx.shown)) == LIVE_CHARS and ctx.shown[-1].endswith("[499]" + "x" * 300 + "\n")
    assert got.held == len(got.status_text) <= 1000
    await _take(_piece("b", "z" * 400, append=False), got, ctx)  # type: ignore[arg-type]
    await _take(_piece("b", "short", append=False), got, ctx)  # a replaced artifact frees its room
    await _take(_piece("b", " more", append=True), got, ctx)  # type: ignore[arg-type]
    for i in range(100):
        await _take(_piece("a", f"<{i}>" + "y" * 50, append=i > 0), got, ctx)  # type: ignore[arg-type]
    held = len(got.status_text) + sum(len("".join(p)) for p in got.artifacts.values())
    assert got.held == held == 1000
    assert "".join(got.artifacts["b"]) == "short more"
    assert got.left_out > 100 * 50 - 1000
    answer = got.answer()
    assert answer.startswith("short more\n\n<0>yyy") and answer.endswith(
        f"[the remote agent said {got.left_out:,} characters more, not kept: an answer keeps its first 1,000]"
    )
