"""The small commands: `/init`, `/compact`, `/clear`, `/tools` and `/stats`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from devagent.agent.commands.output import Emit, say
from devagent.agent.hooks import points as hook_points
from devagent.agent.loop.spending import task_cap
from devagent.agent.models.prices import NANO, cost_text, usage_dollars
from devagent.agent.settings import utc_day

if TYPE_CHECKING:
    from devagent.agent.loop.compact import CompactingSession
    from devagent.agent.models.prices import Priced
    from devagent.agent.settings import CoreConfig
    from devagent.agent.state import SessionState
    from devagent.store.db import Store

INIT_PROMPT = """Create or update the file AGENTS.md at the root of this workspace: a concise guide for
coding agents working on this project. First look around (list the directory, read the build files,
README and main sources; grep where useful). Then write AGENTS.md with write_file: what the project
is, how it is laid out, how to build, run and test it, the coding conventions you observed, and
anything a newcomer would trip over. Keep it factual and short (under 80 lines). If AGENTS.md
already exists, read it first and improve it rather than starting over."""


class ClearingSession(hook_points.HookSession, Protocol):
    """What `/clear` needs of a session besides what its SessionEnd hooks read (`Session` is the
    one implementation)."""

    def restarted(self, source: str) -> None: ...

    async def replace_messages(self, messages: list[Any]) -> None: ...

    async def forget_saved_outputs(self) -> None:
        """Remove the saved whole outputs of the session's long commands."""
        ...


class ToolListing(Protocol):
    """What `/tools` needs of a session: the definitions of its tools."""

    def tool_definitions(self) -> list[dict[str, Any]]: ...


class StatsSession(Protocol):
    """What `/stats` needs of a session: its id, state and model, the settings and the store
    (for the caller's spending today), and the model's price (`Session` is the one implementation)."""

    id: str
    state: SessionState

    @property
    def config(self) -> CoreConfig: ...

    @property
    def store(self) -> Store: ...

    @property
    def model_name(self) -> str: ...

    def model_price(self) -> Priced | None: ...


async def init(session: object, args: str, emit: Emit) -> str | None:
    return INIT_PROMPT + (f"\n\nThe user adds: {args}" if args.strip() else "")


async def compact(session: CompactingSession, args: str, emit: Emit) -> str | None:
    # Imported when the command runs: compaction loads pydantic-ai, and listing the commands
    # (a stdio door's `initialize`) must stay cheap.
    from devagent.agent.loop.compact import compact

    await compact(session, emit, keep_instructions=args)
    return None


async def clear(session: ClearingSession, args: str, emit: Emit) -> str | None:
    await hook_points.session_end(session, "clear")
    session.restarted("clear")
    session.state.pending = []
    session.state.todos = []
    session.state.file_marks = {}  # the model no longer has what it read
    await session.replace_messages([])
    await session.forget_saved_outputs()
    say(emit, "Conversation cleared.")
    return None


async def tools(session: ToolListing, args: str, emit: Emit) -> str | None:
    lines = ["Tools:"]
    for d in session.tool_definitions():
        first = (d["description"] or "").strip().splitlines()[0] if d["description"] else ""
        lines.append(f"  {d['name']} ({d['kind']}): {first}")
    say(emit, "\n".join(lines))
    return None


async def stats(session: StatsSession, args: str, emit: Emit) -> str | None:
    state = session.state
    u = state.usage
    lines = [
        f"Session {session.id}",
        f"Model: {session.model_name}",
        f"Approval mode: {state.approval_mode}",
        f"Tokens: {u.input_tokens} in ({u.cache_read_tokens} read from the cache, "
        f"{u.cache_write_tokens} written to it), {u.output_tokens} out ({u.reasoning_tokens} reasoning); "
        f"{u.requests} model requests",
        *await money_lines(session),
    ]
    if state.tool_stats:
        lines.append("Tool calls:")
        for name, s in sorted(state.tool_stats.items()):
            lines.append(f"  {name}: {s['calls']} calls, {s['failures']} failed")
    say(emit, "\n".join(lines))
    return None


async def money_lines(session: StatsSession) -> list[str]:
    """What the session and its last task cost, the model's price, the task's cap, and what
    the session's caller spent today against its budget."""
    state, config = session.state, session.config
    cost = f"Cost: {cost_text(state.usage)}"
    if state.subagent_usage.requests:
        cost += f" (subagents: {cost_text(state.subagent_usage)})"
    lines = [cost + f"; the last task: {cost_text(state.turn_usage)}"]
    priced = session.model_price()
    lines.append(
        f"Price of {session.model_name}: {priced.price.describe()} ({priced.source})"
        if priced is not None
        else f"Price of {session.model_name}: unknown (the operator may set it in the settings file)"
    )
    cap = task_cap(config, state)
    if cap > 0:
        lines.append(f"Cap per task: {usage_dollars(cap)}")
    budget = config.budget_for(state.identity).usd_per_day
    today = await session.store.usage(utc_day(), state.identity)
    spent = sum(int(r["cost_nanousd"]) for r in today) / NANO
    who = f"caller {state.identity!r}" if state.identity else "the local user"
    of = f" of its {usage_dollars(budget)} budget" if budget > 0 else ""
    lines.append(f"Today (UTC), {who} has spent {usage_dollars(spent)}{of}")
    return lines
