"""Money caps on a task: what a turn (across its pauses, its subagents included) may still spend.

A task's cap is the caller's (`SessionState.max_cost_usd`, set by a door from the caller's
request) within the operator's ceiling (`max_cost_usd_per_task`), or the ceiling alone. It is
checked before every model request of the turn, as the daily budgets are: the turn stops before
the request that would begin past the cap, so a task overspends by at most the one request that
crossed it.

Subagents spend from their parent's task: each request of a child session (`subagent_of`) is
added to its parent's turn as it is made (`AgentCore.charge`), so the parent's cap holds across
all its children, those running in parallel included, and a child stops as soon as any task it
works for has reached its cap. A child is also given the parent's remainder as a cap of its own
(`remaining`, when `subagents.py` starts it), which holds where the parent is not loaded in the
process running the child.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from devagent.agent.loop.context import CoreSession
from devagent.agent.models.prices import usage_dollars

if TYPE_CHECKING:
    from devagent.agent.events import Usage
    from devagent.agent.loop.record import SessionRecord
    from devagent.agent.settings import CoreConfig
    from devagent.agent.state import SessionState

# A session's state by id, if it is loaded in this process (AgentCore.loaded_state).
StateOf = Callable[[str], "SessionState | None"]


class Spender(CoreSession, Protocol):
    """What counting a session's requests needs of it: with its core, its stored record."""

    @property
    def record(self) -> SessionRecord: ...


def task_cap(config: CoreConfig, state: SessionState) -> float:
    """The cap on a session's task in USD: the caller's within the operator's ceiling; 0: none."""
    caps = [c for c in (state.max_cost_usd, config.max_cost_usd_per_task) if c > 0]
    return min(caps) if caps else 0.0


def _chain(state: SessionState, state_of: StateOf) -> list[tuple[SessionState, bool]]:
    """The session's state and those of the sessions it is charged to, loaded here, nearest
    first (a parent's, then its parent's...), each with whether it is the session itself."""
    chain = [(state, True)]
    seen: set[str] = set()
    link = state.subagent_of
    while link is not None and link.session not in seen:
        seen.add(link.session)
        found = state_of(link.session)
        if found is None:
            break
        chain.append((found, False))
        link = found.subagent_of
    return chain


def cap_reached(config: CoreConfig, state: SessionState, state_of: StateOf) -> str:
    """Why the session's turn may make no further model request under a task's cap ("" if it
    may): its own task's cost, or that of a task it is charged to, has reached its cap."""
    for s, own in _chain(state, state_of):
        cap = task_cap(config, s)
        if cap > 0 and s.turn_usage.cost_usd >= cap:
            whose = "this task" if own else "the task this subagent works for"
            return (
                f"{whose} has cost {usage_dollars(s.turn_usage.cost_usd)}, its cap is "
                f"{usage_dollars(cap)} (max_cost_usd)"
            )
    return ""


def capped(config: CoreConfig, state: SessionState, state_of: StateOf) -> bool:
    """Whether a task cap applies to the session's turn (its own or one it is charged to)."""
    return any(task_cap(config, s) > 0 for s, _ in _chain(state, state_of))


def remaining(config: CoreConfig, state: SessionState, state_of: StateOf) -> float:
    """What the session's task may still spend under the caps it is subject to (0: no cap)."""
    left = [
        max(0.0, cap - s.turn_usage.cost_usd)
        for s, _ in _chain(state, state_of)
        if (cap := task_cap(config, s)) > 0
    ]
    if not left:
        return 0.0
    # a spent task leaves its children a cent's millionth: a cap of 0 would mean none
    return max(min(left), 1e-9)


def record_request(session: Spender, usage: Usage) -> None:
    """A model request's usage, priced: the session's, the turn's and the caller's day
    (`record`), the server's metrics, and the task this session works for as a subagent."""
    session.core.prices.charge(session.model_name, usage)
    session.record.spend(usage)
    session.core.spent(session.state.identity, usage)
    if session.state.subagent_of is not None:
        session.core.charge(session.state.subagent_of.session, usage)


def record_subagent_request(session: Spender, usage: Usage) -> None:
    """A request of one of this session's subagents (`AgentCore.charge`): counted in this
    session's task, and in that of the session it works for in turn."""
    session.record.charge_subagent(usage)
    if session.state.subagent_of is not None:
        session.core.charge(session.state.subagent_of.session, usage)
