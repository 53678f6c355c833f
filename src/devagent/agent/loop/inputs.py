"""Whether a session can take an input now: checked before a turn changes anything, so a refusal is
an `InputError` the door answers in its protocol's terms, and nothing is lost."""

from __future__ import annotations

from collections.abc import Callable

from devagent.agent.events import ANSWER_OPTION, Input, InputError, Resume, RunCommand, UserPrompt
from devagent.agent.state import PendingCall, SessionState


class CancelWaiting:
    """Internal input: end a turn that waits for input."""


def validate(
    inp: Input | CancelWaiting, state: SessionState, known_command: Callable[[list[str]], bool]
) -> None:
    """`known_command(path)`: whether the session has that slash command."""
    if isinstance(inp, Resume):
        _validate_answers(inp, state)
    elif isinstance(inp, UserPrompt):
        if not inp.text.strip():
            raise InputError("the prompt is empty", "empty")
    elif isinstance(inp, RunCommand):
        if not known_command(inp.path):
            raise InputError(f"unknown command /{' '.join(inp.path)}; try /help", "unknown_command")


def _validate_answers(inp: Resume, state: SessionState) -> None:
    if state.status != "awaiting_input":
        raise InputError(
            "nothing is waiting for an answer in this session (it was answered already, or the turn ended)",
            "not_waiting",
        )
    waiting = {p.id: p for p in state.pending if p.needs in ("permission", "client") and p.result is None}
    answered = {p.id for p in state.pending if p.id not in waiting and p.needs != "relay"}
    for d in inp.decisions:
        p = _waiting_call(waiting, answered, d.call_id, "permission")
        if p.needs != "permission":
            raise InputError(f"tool call {d.call_id!r} waits for a client result, not a decision")
        options = [o["id"] for o in (p.confirmation or {}).get("options", [])]
        if d.option not in options:
            raise InputError(
                f"option {d.option!r} is not one of {options} for call {d.call_id!r}", "bad_option"
            )
        if d.option == ANSWER_OPTION and not (d.new_content or "").strip():
            raise InputError(f"the answer to the question of call {d.call_id!r} is empty", "empty_answer")
    for r in inp.results:
        result_call = waiting.get(r.call_id)
        if result_call is None:
            raise InputError(f"no tool call {r.call_id!r} is waiting for a result", "unknown_call")
        if result_call.needs != "client":
            raise InputError(f"tool call {r.call_id!r} waits for permission, not a client result")
    if not inp.decisions and not inp.results:
        raise InputError("the answer carries no decision and no result", "empty")


def _waiting_call(
    waiting: dict[str, PendingCall], answered: set[str], call_id: str, what: str
) -> PendingCall:
    p = waiting.get(call_id)
    if p is None and call_id in answered:
        raise InputError(f"tool call {call_id!r} was answered already", "answered")
    if p is None:
        raise InputError(f"no tool call {call_id!r} is waiting for {what}", "unknown_call")
    return p


def answered_ids(inp: Resume) -> list[str]:
    return [d.call_id for d in inp.decisions] + [r.call_id for r in inp.results]
