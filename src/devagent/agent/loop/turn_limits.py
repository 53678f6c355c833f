"""Why a turn may take no further model step: the step limit, the caller's daily tokens or
dollars, a task's cost cap, or a model whose price is unknown while a dollar limit applies. Each is
checked before the request that would pass it, so at most one request overspends."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from devagent.agent.history import transcript
from devagent.agent.loop import spending
from devagent.agent.loop.context import CoreSession
from devagent.agent.models.providers import shown_name

if TYPE_CHECKING:
    from pydantic_ai import messages as pm

    from devagent.agent.events import TurnEndReason

log = logging.getLogger("devagent.session")


class Limited(CoreSession, Protocol):
    """What the limits of a turn read of its session: with its core, its transcript."""

    async def messages(self) -> list[pm.ModelMessage]: ...


async def stop_reason(session: Limited) -> tuple[TurnEndReason, str] | None:
    """Why the turn may take no further step: the step limit, the caller's daily tokens or
    dollars, or a task's cost cap (no model request past them: at most one overspends). None
    when it may go on."""
    max_steps = session.core.config.max_steps
    if session.state.turn_steps >= max_steps:
        return (
            "max_steps_reached",
            f"Stopped after {max_steps} model steps in one turn (the server's limit).",
        )
    for limit, why in (
        ("the server's budget", await session.core.budget_spent(session.state.identity)),
        (
            "the task's cost cap",
            spending.cap_reached(session.config, session.state, session.core.loaded_state),
        ),
        ("a limit in dollars", unpriced(session)),
    ):
        if why:
            log.warning("budget: stopped the turn of session %s: %s", session.id, why)
            transcript.close_request(await session.messages(), f"[the turn was stopped by {limit}: {why}]")
            return "error", f"Stopped by {limit}: {why}."
    return None


def unpriced(session: Limited) -> str:
    """Why a model with no price may not be used now ("" if it may): a task's cap or a daily
    budget in dollars applies, and its cost could not be counted against it."""
    config, state_of = session.core.config, session.core.loaded_state
    if session.core.prices.lookup(session.model_name) is not None:
        return ""
    if config.budget_for(session.state.identity).usd_per_day <= 0 and not spending.capped(
        config, session.state, state_of
    ):
        return ""
    name = shown_name(session.model_name)
    return (
        f"the price of model {name!r} is unknown, so its cost cannot be counted; the operator can "
        f'price it in the settings file ([prices."{name}"] with input and output, USD per million tokens)'
    )
