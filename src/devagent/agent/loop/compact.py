"""Compaction: summarise the older part of a conversation through the model and continue from the
summary, the latest messages kept verbatim. `/compact` asks for it; a session does it on its own
before a model request that would pass `compact_at` of the model's context window, and a tool
result too large for the window is cut before the model reads it.

Sizes are estimated at four characters a token (what the providers' tokenizers give for English
and code, within a factor that the threshold's margin absorbs): a request is never sent to learn
that it is too large.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydantic_ai import messages as pm

from devagent.agent.events import Event, Notice, StatusUpdate, TextDelta, Usage
from devagent.agent.history.transcript import CHARS_PER_TOKEN
from devagent.agent.hooks import points as hook_points
from devagent.agent.loop import traces
from devagent.agent.prompt import instructions as prompt

if TYPE_CHECKING:
    from devagent.agent.settings import CoreConfig

COMPACT_PROMPT = """Summarise our conversation so far for your own later use: the user's goals, what was
done (files read and changed, commands run, results), decisions and their reasons, open problems and
the next steps. Be specific (paths, names, numbers) and concise. Reply with the summary only."""
SUMMARY_HEAD = "Summary of the conversation so far:\n"
ACK = "Understood; I will continue from this summary."

KEEP_TAIL = 2  # /compact: how many of the latest messages stay verbatim after the summary
TAIL_SHARE = 0.3  # automatic: the share of the window the verbatim tail may take
SUMMARY_INPUT_SHARE = 0.5  # automatic: the share of the window the summary request may take
ITEM_CHARS = 4000  # one message part, as the summary request quotes it


class CompactingSession(hook_points.HookSession, traces.TracedRequest, Protocol):
    """What compaction needs of a session besides what its hooks and its model request's span
    read: the settings, the model's window, the request's prefix, where usage is counted, and
    replacing the conversation (`Session` is the one implementation)."""

    @property
    def config(self) -> CoreConfig: ...

    def context_tokens(self) -> int:
        """The context window of the session's model, in tokens."""
        ...

    async def request_parameters(self) -> Any:
        """The instructions and tool definitions every model request of the session carries."""
        ...

    def spent(self, usage: Usage) -> None:
        """Count a model request's usage (the session's, the turn's, the caller's day)."""
        ...

    async def replace_messages(self, messages: list[pm.ModelMessage]) -> None:
        """Replace the whole transcript and store it with the state."""
        ...

    def restarted(self, source: str) -> None:
        """The conversation starts afresh (`clear`) or from a summary (`compact`): the
        SessionStart hooks fire again before the next prompt."""
        ...


def part_chars(part: pm.ModelRequestPart | pm.ModelResponsePart) -> int:
    if isinstance(part, pm.ToolCallPart):
        return len(part.tool_name) + len(part.args_as_json_str())
    content = getattr(part, "content", "")
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list) and any(isinstance(c, pm.BinaryContent) for c in content):
        return sum(file_chars(c) if isinstance(c, pm.BinaryContent) else len(str(c)) for c in content)
    try:
        return len(json.dumps(content, default=str))
    except (TypeError, ValueError):
        return len(str(content))


def file_chars(file: pm.BinaryContent) -> int:
    """What an attached file weighs in the window, as characters: an image costs the providers about
    1,600 tokens whatever its bytes; a PDF about a page's worth for every 50 KB of it."""
    if file.is_image:
        return 1_600 * CHARS_PER_TOKEN
    return max(1_600, len(file.data) // 50_000 * 1_600) * CHARS_PER_TOKEN


def estimate_tokens(messages: Sequence[pm.ModelMessage], extra_chars: int = 0) -> int:
    """The tokens a request made of `messages` (and `extra_chars` more: instructions, tool
    definitions) is likely to count."""
    chars = extra_chars + sum(part_chars(p) + 8 for m in messages for p in m.parts)
    return chars // CHARS_PER_TOKEN


def _render(messages: Sequence[pm.ModelMessage], budget_chars: int) -> str:
    """The conversation as text for the summary request, each part quoted up to ITEM_CHARS; when
    it is still too long, the oldest parts after the first (an earlier summary) are left out."""
    items: list[str] = []
    for m in messages:
        for p in m.parts:
            if isinstance(p, pm.UserPromptPart):
                text, who = (p.content if isinstance(p.content, str) else str(p.content)), "user"
            elif isinstance(p, pm.TextPart):
                text, who = p.content, "assistant"
            elif isinstance(p, pm.ToolCallPart):
                text, who = p.args_as_json_str(), f"assistant calls {p.tool_name}"
            elif isinstance(p, pm.ToolReturnPart):
                text, who = p.model_response_str(), f"{p.tool_name} returned"
            elif isinstance(p, pm.RetryPromptPart):
                text, who = p.model_response(), "tool error"
            else:
                continue
            if len(text) > ITEM_CHARS:
                text = text[: ITEM_CHARS // 2] + " [...] " + text[-ITEM_CHARS // 2 :]
            items.append(f"[{who}]\n{text}")
    while len(items) > 2 and sum(len(i) + 2 for i in items) > budget_chars:
        del items[1]
    return "\n\n".join(items)


def _summary_request(
    messages: Sequence[pm.ModelMessage], keep_instructions: str, budget_chars: int
) -> list[pm.ModelMessage]:
    """The request asking for the summary: the messages themselves and the question (the same
    prefix as the conversation's own requests, so a provider's prompt cache serves it), or, when
    they would not fit, the conversation quoted as text, cut to fit."""
    prompt = COMPACT_PROMPT + (f"\nKeep in particular: {keep_instructions}" if keep_instructions else "")
    if estimate_tokens(messages, len(prompt)) * CHARS_PER_TOKEN <= budget_chars:
        ask = pm.UserPromptPart(content=prompt)
        if messages and isinstance(messages[-1], pm.ModelRequest):  # one request, never two in a row
            return [*messages[:-1], pm.ModelRequest(parts=[*messages[-1].parts, ask])]
        return [*messages, pm.ModelRequest(parts=[ask])]
    quoted = _render(messages, budget_chars - len(prompt))
    text = f"{prompt}\n\n<conversation>\n{quoted}\n</conversation>"
    return [pm.ModelRequest(parts=[pm.UserPromptPart(content=text)])]


async def _summarise(
    session: CompactingSession, messages: Sequence[pm.ModelMessage], keep_instructions: str, budget_chars: int
) -> tuple[str, Usage]:
    from pydantic_ai.direct import model_request_stream

    request = _summary_request(messages, keep_instructions, budget_chars)
    # The session's own instructions and tools: the same request prefix as its other requests
    # (a provider's prompt cache serves it; some providers refuse tool calls in the history of a
    # request that defines no tools).
    params = await session.request_parameters()
    model = session.model()

    async def summarised() -> pm.ModelResponse:
        async with model_request_stream(model, request, model_request_parameters=params) as stream:
            async for _ in stream:
                pass
            return stream.get()

    response = await traces.model_request(session, summarised(), purpose="compaction")
    summary = "".join(p.content for p in response.parts if isinstance(p, pm.TextPart)).strip()
    return summary, Usage.of_response(response.usage)


def _rebuilt(summary: str, tail: Sequence[pm.ModelMessage]) -> list[pm.ModelMessage]:
    """The summary as the conversation's first request, then the tail; requests and responses
    keep alternating (an acknowledgement when the tail starts with a request)."""
    head: list[pm.ModelMessage] = [pm.ModelRequest(parts=[pm.UserPromptPart(content=SUMMARY_HEAD + summary)])]
    if not tail or isinstance(tail[0], pm.ModelRequest):
        head.append(pm.ModelResponse(parts=[pm.TextPart(content=ACK)]))
    return [*head, *tail]


async def compact(
    session: CompactingSession, emit: Callable[[Event], None], keep_instructions: str = ""
) -> None:
    """`/compact`: everything but the latest exchange becomes a summary."""
    if session.state.pending:
        emit(Notice("Cannot compact while tool calls wait for an answer.", "error"))
        return
    messages = await session.messages()
    if len(messages) <= KEEP_TAIL + 1:
        emit(TextDelta("Nothing to compact yet.\n"))
        return
    await hook_points.before_compact(session, "manual", keep_instructions, emit)
    limit = session.context_tokens()
    summary, usage = await _summarise(
        session, messages, keep_instructions, int(limit * SUMMARY_INPUT_SHARE) * CHARS_PER_TOKEN
    )
    session.spent(usage)
    emit(StatusUpdate(usage, usage.input_tokens, limit))
    if not summary:
        emit(Notice("The model returned an empty summary; the history was left as it was.", "error"))
        return
    before = len(messages)
    await session.replace_messages(_rebuilt(summary, _safe_tail(messages)))
    session.restarted("compact")
    emit(TextDelta(f"Compacted {before} messages into a summary ({len(summary)} characters).\n"))


async def fit_context(session: CompactingSession, emit: Callable[[Event], None], params: Any) -> bool:
    """Before a model request with the request parameters `params`: compact first when the
    request would fill too much of the model's window (its instructions and tool definitions
    counted too). True when it compacted."""
    return await compact_if_needed(session, emit, prompt.prefix_chars(params))


async def compact_if_needed(
    session: CompactingSession, emit: Callable[[Event], None], prefix_chars: int
) -> bool:
    """Before a model request: when the request would pass `compact_at` of the window, the older
    messages become a summary and the latest stay verbatim (never a call without its result).
    Only between steps, so no call is waiting; stored at once, like `/compact`. True when it
    compacted."""
    limit = session.context_tokens()
    messages = await session.messages()
    used = estimate_tokens(messages, prefix_chars)
    if session.state.pending or used < limit * session.config.compact_at:
        return False
    start = _tail_start(messages, int(limit * TAIL_SHARE))
    if start < 2:  # nothing older than the tail worth a summary
        return False
    if not await hook_points.before_compact(session, "auto", "", emit):
        return False
    summary, usage = await _summarise(
        session, messages[:start], "", int(limit * SUMMARY_INPUT_SHARE) * CHARS_PER_TOKEN
    )
    session.spent(usage)
    emit(StatusUpdate(usage, usage.input_tokens, limit))
    if not summary:
        emit(Notice("The model returned an empty summary; the conversation was not compacted.", "warning"))
        return False
    new = _rebuilt(summary, messages[start:])
    await session.replace_messages(new)
    session.restarted("compact")
    after = estimate_tokens(new, prefix_chars)
    emit(
        Notice(
            f"Compacted the conversation to fit the model's context window: {start} older messages "
            f"summarised, about {used:,} tokens down to {after:,} of {limit:,}.",
            "info",
        )
    )
    return True


def _tail_start(messages: Sequence[pm.ModelMessage], budget: int) -> int:
    """Where the verbatim tail begins: the earliest boundary whose tail fits `budget` tokens (at
    least the last exchange). A boundary is a model response (the summary request goes before
    it) or a request holding a user prompt, so no tool result loses its call."""
    best = len(messages)
    size = 0
    for i in range(len(messages) - 1, 0, -1):
        size += estimate_tokens(messages[i : i + 1])
        m = messages[i]
        boundary = isinstance(m, pm.ModelResponse) or any(isinstance(p, pm.UserPromptPart) for p in m.parts)
        if not boundary:
            continue
        if size > budget and best < len(messages):
            break
        best = i
    return best


def _safe_tail(messages: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
    """The last messages, starting at a user prompt so no tool return loses its call."""
    for i in range(max(len(messages) - KEEP_TAIL, 0), len(messages)):
        m = messages[i]
        if isinstance(m, pm.ModelRequest) and any(isinstance(p, pm.UserPromptPart) for p in m.parts):
            return list(messages[i:])
    return []
