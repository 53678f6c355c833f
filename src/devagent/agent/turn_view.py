"""A session's read model for a door that shows its turns as tasks (A2A): what the stored state
says about the current turn (`read_turn`; the transcript too once a reader needs it,
`read_transcript`), then asked without I/O. A door translates the view into its protocol's terms;
it decides nothing about the conversation.

The view answers three questions a reader meets when the process that ran a turn is gone: how
the turn stands (running, waiting for answers and which, or how it ended), which answers the model
gave since a turn's input (the text a task's history may lack: a running turn's task is written
behind, the conversation at once), and what became of calls a reader last saw open (the final
state the conversation gave them, "interrupted" when their process died)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic_ai import messages as pm

    from devagent.agent.core import AgentCore
    from devagent.agent.events import ToolCall
    from devagent.agent.session import Session
    from devagent.agent.state import PendingCall
    from devagent.agent.tools.base import Tool


@dataclass(frozen=True, slots=True)
class TurnInput:
    """A turn's input as a door names it: the user's prompt, or the ids of the calls whose
    results (or answers) it carried."""

    text: str = ""
    call_ids: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ModelAnswer:
    """One model answer: its key (`StepBegin.answer`: the same when the answer is asked for
    again) and the texts a door streamed of it as messages of their own (its text parts, a
    thought between two of them starting another)."""

    key: str
    texts: list[str]


@dataclass(slots=True)
class TurnView:
    """How a session's current turn stands, as stored. `label` names the turn that last began
    (a door's name for it, "" when none began); `status` is `idle | running | awaiting_input`;
    `outcome` and `outcome_message` say how the last turn ended; `revision` changes with every
    stored change (a door names what it derives from the view by it); `waiting` are the calls
    that wait for an answer; `lease_lapsed` is whether a process took the conversation's lease
    and is gone (read when asked for). `answers_since` and `settled` read the transcript, which
    `read_transcript` reads first."""

    session_id: str
    label: str
    status: str
    outcome: str
    outcome_message: str
    revision: int
    model: str
    waiting: list[ToolCall]
    lease_lapsed: bool = False
    _messages: Sequence[pm.ModelMessage] = field(default=(), repr=False)
    _pending: Sequence[PendingCall] = field(default=(), repr=False)
    _tools: Mapping[str, Tool] = field(default_factory=dict, repr=False)
    _session: Session | None = field(default=None, repr=False)

    async def read_transcript(self) -> None:
        """Reads what `answers_since` and `settled` look in: the transcript and the waiting step
        (not while the turn runs: its process writes them). Once; a reader that needs them calls
        it, so a read whose task already says what the view says costs no transcript."""
        session, self._session = self._session, None
        if session is None or self.status == "running" or not self.label:
            return
        self._messages = await session.messages()
        self._pending = list(session.state.pending)
        self._tools = session._tools  # the built-in tools, as `Session.settled_calls` reads them

    def answers_since(self, given: TurnInput) -> list[ModelAnswer] | None:
        """The model's answers from the request that carried `given` on, in order; None when the
        transcript holds no such request (or was not read: the turn runs)."""
        # late (as below): the transcript's modules load pydantic-ai, which a door's server starts
        # without; a view with a transcript to ask about was read by a core that loaded it
        from devagent.agent.history.transcript import answers_from

        start = _input_at(self._messages, given)
        if start is None:
            return None
        return [ModelAnswer(key, texts) for key, texts in answers_from(self._messages, start)]

    def settled(self, call_ids: set[str]) -> list[ToolCall]:
        """The final state of each of these calls that the conversation has settled (its result,
        from the waiting step or the transcript); calls without a result are left out."""
        if not call_ids:
            return []
        from devagent.agent.views import timeline

        return timeline.settled_calls(self._messages, list(self._pending), call_ids, self._tools)


def _input_at(messages: Sequence[pm.ModelMessage], given: TurnInput) -> int | None:
    """Where in the transcript the request with this input is: the last request returning every
    one of its calls, or holding its prompt."""
    if not given.text and not given.call_ids:
        return None
    from pydantic_ai import messages as pm

    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if not isinstance(m, pm.ModelRequest):
            continue
        if given.call_ids:
            if given.call_ids <= {p.tool_call_id for p in m.parts if isinstance(p, pm.ToolReturnPart)}:
                return i
        elif any(isinstance(p, pm.UserPromptPart) and p.content == given.text for p in m.parts):
            return i
    return None


async def read_turn(core: AgentCore, session_id: str, *, lease: bool = False) -> TurnView | None:
    """The view of a session's current turn as stored now (a turn whose process died settled
    first, `AgentCore.inspect`); None when there is no such session. `lease`: whether to read
    the lease too."""
    session = await core.inspect(session_id)
    if session is None:
        return None
    state = session.state
    running = state.status == "running"
    return TurnView(
        session_id=session.id,
        label=state.turn_label,
        status=state.status,
        outcome=state.outcome,
        outcome_message=state.outcome_message,
        revision=session.revision,
        model=state.model or "",
        waiting=session.waiting_calls(),
        lease_lapsed=lease and not running and await core.lease_lapsed(session_id),
        _session=session,
    )
