"""Scripted models: deterministic, offline pydantic-ai models played from a script.

`ScriptedModel` plays a JSON script (docs/scripted-model.md): the step played for a request is the
number of model responses already in the history, so a conversation resumed in another process
continues where it stopped. `DemoModel` is the built-in offline demo (`--model demo`), a scripted
model whose steps are built in code from the conversation.

Both stream through pydantic-ai's ordinary machinery (`StreamedResponse` and its parts manager),
so the agent loop cannot tell them from a real provider: text and thinking arrive in several
deltas, tool-call arguments in several chunks, usage is reported, errors are pydantic-ai's.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponseStreamEvent,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from devagent.agent.history.transcript import answers
from devagent.agent.models.errors import ModelConfigError
from devagent.common.errors import DevagentError

__all__ = [
    "DemoModel",
    "ErrorItem",
    "FileItem",
    "Item",
    "ScriptedModel",
    "ScriptedStreamedResponse",
    "SleepItem",
    "TextItem",
    "ThinkingItem",
    "ToolCallItem",
    "UsageItem",
    "parse_script",
]

SYSTEM = "scripted"


# --- script items --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextItem:
    """Answer text. `finish` is the finish reason the provider gives when the text itself decides
    it: `content_filter` for a refusal, `length` for text cut off at the model's output token limit."""

    text: str
    finish: Literal["content_filter", "length"] | None = None


@dataclass(frozen=True, slots=True)
class ThinkingItem:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallItem:
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, slots=True)
class UsageItem:
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ErrorItem:
    message: str
    status: int | None = 500


@dataclass(frozen=True, slots=True)
class SleepItem:
    seconds: float


@dataclass(frozen=True, slots=True)
class FileItem:
    """A file a test follows or holds the script by: `touch` creates it (the test sees the step
    being played), `wait_for` waits until it exists (the test decides when the step goes on)."""

    action: Literal["touch", "wait_for"]
    path: str


Item = TextItem | ThinkingItem | ToolCallItem | UsageItem | ErrorItem | SleepItem | FileItem
Step = tuple[Item, ...]


# --- parsing ------------------------------------------------------------------------------------


class _Invalid(DevagentError):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def parse_script(data: Any) -> list[Step]:
    """Validate a decoded script (`{"steps": [...]}` or a bare list of steps) into steps.

    Raises `ModelConfigError` naming the JSON path of the first problem, e.g.
    `steps[1].items[0].tool_call.args: must be an object`."""
    try:
        return _parse_steps(data)
    except _Invalid as e:
        raise ModelConfigError(f"invalid script at {e.path}: {e.problem}") from None


def _parse_steps(data: Any) -> list[Step]:
    if isinstance(data, dict):
        unknown = set(data) - {"steps", "conversations"}
        if unknown:
            raise _Invalid(
                f"$.{sorted(unknown)[0]}", "unknown key (a script has 'steps' and 'conversations')"
            )
        if "steps" not in data:
            raise _Invalid("$", "missing 'steps'")
        data = data["steps"]
    elif not isinstance(data, list):
        raise _Invalid("$", 'must be {"steps": [...]} or a list of steps')
    if not isinstance(data, list):
        raise _Invalid("steps", "must be a list")
    if not data:
        raise _Invalid("steps", "the script has no steps")
    return [_parse_step(step, f"steps[{i}]") for i, step in enumerate(data)]


Conversations = list[tuple[str, list[Step]]]


def parse_conversations(data: Any) -> Conversations:
    """A script's `conversations` (`[{"first_prompt": PREFIX, "steps": [...]}]`): the steps of each
    conversation whose first user prompt starts with PREFIX (a subagent's, say), in order; none
    when the script has no such key. Raises `ModelConfigError` like `parse_script`."""
    if not isinstance(data, dict) or "conversations" not in data:
        return []
    try:
        items = data["conversations"]
        if not isinstance(items, list):
            raise _Invalid("conversations", "must be a list")
        out: Conversations = []
        for i, item in enumerate(items):
            path = f"conversations[{i}]"
            obj = _object(item, path, required={"first_prompt", "steps"}, optional=set())
            prefix = obj["first_prompt"]
            if not isinstance(prefix, str) or not prefix:
                raise _Invalid(f"{path}.first_prompt", "must be a non-empty string")
            steps = obj["steps"]
            if not isinstance(steps, list) or not steps:
                raise _Invalid(f"{path}.steps", "must be a non-empty list of steps")
            out.append((prefix, [_parse_step(st, f"{path}.steps[{j}]") for j, st in enumerate(steps)]))
        return out
    except _Invalid as e:
        raise ModelConfigError(f"invalid script at {e.path}: {e.problem}") from None


def _parse_step(step: Any, path: str) -> Step:
    if isinstance(step, dict):
        unknown = set(step) - {"items"}
        if unknown:
            raise _Invalid(f"{path}.{sorted(unknown)[0]}", "unknown key (a step has only 'items')")
        if "items" not in step:
            raise _Invalid(path, "missing 'items'")
        items = step["items"]
        path = f"{path}.items"
    else:
        items = step  # a bare list of items is accepted as a step
    if not isinstance(items, list):
        raise _Invalid(path, 'must be a list of items (or a step {"items": [...]})')
    return tuple(_parse_item(item, f"{path}[{i}]") for i, item in enumerate(items))


# The finish reason of the text items that decide it
_FINISH: dict[str, Literal["content_filter", "length"]] = {"refusal": "content_filter", "truncated": "length"}


def _parse_item(item: Any, path: str) -> Item:
    kinds = (
        "text",
        "thinking",
        "tool_call",
        "usage",
        "error",
        "sleep",
        "touch",
        "wait_for",
        "refusal",
        "truncated",
    )
    if not isinstance(item, dict) or len(item) != 1:
        raise _Invalid(path, f"an item is an object with exactly one key, one of {', '.join(kinds)}")
    ((kind, value),) = item.items()
    path = f"{path}.{kind}"
    if kind in ("touch", "wait_for"):
        if not isinstance(value, str) or not value:
            raise _Invalid(path, "must be a file path")
        return FileItem(kind, value)
    if kind in ("text", "thinking", "refusal", "truncated"):
        if not isinstance(value, str):
            raise _Invalid(path, "must be a string")
        if kind == "thinking":
            return ThinkingItem(value)
        return TextItem(value, _FINISH.get(kind))
    if kind == "tool_call":
        obj = _object(value, path, required={"name"}, optional={"args", "id"})
        name, args, call_id = obj["name"], obj.get("args", {}), obj.get("id")
        if not isinstance(name, str) or not name:
            raise _Invalid(f"{path}.name", "must be a non-empty string")
        if not isinstance(args, dict):
            raise _Invalid(f"{path}.args", "must be an object")
        if call_id is not None and (not isinstance(call_id, str) or not call_id):
            raise _Invalid(f"{path}.id", "must be a non-empty string")
        return ToolCallItem(name, args, call_id)
    if kind == "usage":
        fields = (
            "input_tokens",
            "output_tokens",
            "reasoning_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
        )
        obj = _object(value, path, required=set(), optional=set(fields))
        for k, v in obj.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise _Invalid(f"{path}.{k}", "must be a non-negative integer")
        return UsageItem(**obj)
    if kind == "error":
        obj = _object(value, path, required={"message"}, optional={"status"})
        message, status = obj["message"], obj.get("status", 500)
        if not isinstance(message, str):
            raise _Invalid(f"{path}.message", "must be a string")
        if status is not None and (
            not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599
        ):
            raise _Invalid(f"{path}.status", "must be an HTTP error status (400-599) or null")
        return ErrorItem(message, status)
    if kind == "sleep":
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or value < 0
            or not math.isfinite(value)
        ):
            raise _Invalid(path, "must be a non-negative number of seconds")
        return SleepItem(float(value))
    raise _Invalid(path, f"unknown item kind (expected one of {', '.join(kinds)})")


def _object(value: Any, path: str, *, required: set[str], optional: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(path, "must be an object")
    for key in sorted(required):
        if key not in value:
            raise _Invalid(f"{path}.{key}", "is required")
    for key in sorted(value):
        if key not in required | optional:
            raise _Invalid(
                f"{path}.{key}", f"unknown key (allowed: {', '.join(sorted(required | optional))})"
            )
    return value


# --- reading the conversation -------------------------------------------------------------------


def count_responses(messages: Sequence[ModelMessage]) -> int:
    """The model's responses in the history: not the note that closes a turn a crash cut off, so
    the step the crash cut off is played again when the conversation goes on."""
    return answers(messages)


def first_user_prompt(messages: Sequence[ModelMessage]) -> str:
    """The text of the first user prompt in the history ('' if none)."""
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    return part.content if isinstance(part.content, str) else ""
    return ""


def last_user_prompt(messages: Sequence[ModelMessage]) -> str:
    """The text of the last user prompt in the history ('' if none)."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    if isinstance(part.content, str):
                        return part.content
                    return "".join(c for c in part.content if isinstance(c, str))
    return ""


def last_tool_returns(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    """The tool returns of the last request, when the history ends with one."""
    if messages and isinstance(messages[-1], ModelRequest):
        return [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    return []


def _fill(text: str, messages: Sequence[ModelMessage]) -> str:
    if "{last_tool_results}" in text:
        results = "\n".join(p.model_response_str() for p in last_tool_returns(messages))
        text = text.replace("{last_tool_results}", results)
    if "{last_user}" in text:
        text = text.replace("{last_user}", last_user_prompt(messages))
    return text


def _estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4)) if text else 0


def _estimate_input(messages: Sequence[ModelMessage]) -> int:
    """A plausible input token count: about a token per four characters of the history."""
    chars = 0
    for message in messages:
        for part in message.parts:
            content = getattr(part, "content", None)
            if isinstance(content, str):
                chars += len(content)
            elif content is not None:
                chars += len(json.dumps(content, default=str))
            args = getattr(part, "args", None)
            if args is not None:
                chars += len(args if isinstance(args, str) else json.dumps(args, default=str))
    return 20 + math.ceil(chars / 4)


def _chunks(text: str, n: int = 3) -> list[str]:
    """Split text into up to n pieces at word boundaries (never an empty piece)."""
    if len(text) < 2 * n:
        return [text] if text else []
    size = math.ceil(len(text) / n)
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            space = text.rfind(" ", start + 1, end + 1)
            if space > start:
                end = space + 1
        pieces.append(text[start:end])
        start = end
    return pieces


# --- the model ----------------------------------------------------------------------------------


class _Named:
    """The model name a scripted model and each of its responses report."""

    _model_name: str

    @property
    def model_name(self) -> str:
        return self._model_name


class ScriptedModel(_Named, Model):
    """A model that plays a script: step N answers the request whose history holds N responses.

    `source` names the script in messages (its file name); `model_name` defaults to it."""

    def __init__(
        self,
        steps: Sequence[Step],
        *,
        source: str = "<script>",
        model_name: str | None = None,
        settings: ModelSettings | None = None,
        conversations: Conversations | None = None,
    ) -> None:
        self._steps = list(steps)
        self._conversations = list(conversations or [])
        self._source = source
        self._model_name = model_name or f"scripted:{Path(source).name}"
        self._fill_placeholders = True
        super().__init__(settings=settings, profile=ModelProfile(supports_json_schema_output=True))

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        """Read and validate a script file. Errors raise `ModelConfigError` naming the file and,
        for an invalid script, the JSON path of the problem."""
        p = Path(path).expanduser()
        try:
            raw = p.read_text(encoding="utf-8")
        except OSError as e:
            raise ModelConfigError(f"scripted model: cannot read {path}: {e.strerror or e}") from None
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ModelConfigError(
                f"scripted model: {path} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})"
            ) from None
        try:
            steps = parse_script(data)
            conversations = parse_conversations(data)
        except ModelConfigError as e:
            raise ModelConfigError(f"scripted model: {path}: {e}") from None
        return cls(steps, source=str(path), conversations=conversations)

    @property
    def steps(self) -> list[Step]:
        return list(self._steps)

    @property
    def system(self) -> str:
        return SYSTEM

    def select_step(
        self, messages: Sequence[ModelMessage], parameters: ModelRequestParameters
    ) -> tuple[int, Step]:
        """The step to play for this history: `(number, items)`, from the steps of the first of the
        script's `conversations` whose prefix starts the history's first prompt, else from its
        `steps`. Subclasses may choose otherwise."""
        n = count_responses(messages)
        steps, which = self._steps, ""
        if self._conversations:
            first = first_user_prompt(messages)
            for prefix, conversation in self._conversations:
                if first.startswith(prefix):
                    steps, which = conversation, f" (conversation {prefix!r})"
                    break
        if n >= len(steps):
            raise ModelAPIError(
                self._model_name,
                f"scripted model: {self._source}{which} has no step {n} "
                f"(it has {len(steps)} step{'s' if len(steps) != 1 else ''}, numbered from 0)",
            )
        return n, steps[n]

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        async with self.request_stream(messages, model_settings, model_request_parameters) as stream:
            async for _ in stream:
                pass
        return stream.get()

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncGenerator[StreamedResponse]:
        model_settings, model_request_parameters = self.prepare_request(
            model_settings, model_request_parameters
        )
        number, items = self.select_step(messages, model_request_parameters)
        # An error that is the step's first item fails the request itself, as an HTTP error does
        # before a real stream opens; later ones fail the stream where they stand.
        if items and isinstance(items[0], ErrorItem):
            raise _error(items[0], self._model_name, in_stream=False)
        yield ScriptedStreamedResponse(
            model_request_parameters=model_request_parameters,
            _model_name=self._model_name,
            _step=number,
            _items=items,
            _messages=list(messages),
            _fill_placeholders=self._fill_placeholders,
        )


async def _wait_for(gate: Path) -> None:
    """Until the file exists (looked for every 20 ms: a file has no event to wait on here)."""
    while True:
        if gate.exists():
            return
        await asyncio.sleep(0.02)


def _error(item: ErrorItem, model_name: str, *, in_stream: bool) -> ModelAPIError:
    body = {"error": {"message": item.message}}
    if item.status is None:
        return ModelAPIError(model_name, item.message, body=body, in_stream=in_stream)
    return ModelHTTPError(item.status, model_name, body, in_stream=in_stream)


@dataclass
class ScriptedStreamedResponse(_Named, StreamedResponse):
    """Streams one script step as pydantic-ai events and reports the step's usage exactly."""

    _model_name: str
    _step: int
    _items: Step
    _messages: list[ModelMessage]
    _fill_placeholders: bool = True
    _timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        reported: UsageItem | None = None
        output_chars = reasoning_chars = 0
        calls = 0
        refused = truncated = False
        for index, item in enumerate(self._items):
            if isinstance(item, TextItem | ThinkingItem):
                text = self._text(item.text)
                if isinstance(item, ThinkingItem):
                    reasoning_chars += len(text)
                else:
                    output_chars += len(text)
                    refused = refused or item.finish == "content_filter"
                    truncated = truncated or item.finish == "length"
                async for event in self._deltas(text, index, thinking=isinstance(item, ThinkingItem)):
                    yield event
            elif isinstance(item, ToolCallItem):
                call_id = item.id or f"call_{self._step}_{calls}"
                calls += 1
                args = self._filled(item.args)
                for event in self._tool_call_events(("tool", index), item.name, args, call_id):
                    output_chars += len(item.name)
                    yield event
                output_chars += len(json.dumps(args))
                await asyncio.sleep(0)
            elif isinstance(item, UsageItem):
                reported = item
                self._usage = RequestUsage(
                    input_tokens=item.input_tokens,
                    output_tokens=item.output_tokens,
                    output_reasoning_tokens=item.reasoning_tokens,
                    cache_read_tokens=item.cache_read_tokens,
                    cache_write_tokens=item.cache_write_tokens,
                )
            elif isinstance(item, ErrorItem):
                raise _error(item, self._model_name, in_stream=True)
            elif isinstance(item, SleepItem):
                await asyncio.sleep(item.seconds)
            elif isinstance(item, FileItem) and item.action == "touch":
                Path(self._text(item.path)).touch()
            elif isinstance(item, FileItem):
                await _wait_for(Path(self._text(item.path)))
        self.finish_reason = (
            "content_filter" if refused else "length" if truncated else "tool_call" if calls else "stop"
        )
        if reported is None:
            reasoning = _estimate_tokens("x" * reasoning_chars)
            self._usage = RequestUsage(
                input_tokens=_estimate_input(self._messages),
                output_tokens=_estimate_tokens("x" * output_chars) + reasoning,
                output_reasoning_tokens=reasoning,
            )

    def _text(self, text: str) -> str:
        return _fill(text, self._messages) if self._fill_placeholders else text

    def _filled(self, value: Any) -> Any:
        """A tool call's arguments with the placeholders filled in each string they hold."""
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, dict):
            return {k: self._filled(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._filled(v) for v in value]
        return value

    async def _deltas(
        self, text: str, index: int, *, thinking: bool
    ) -> AsyncIterator[ModelResponseStreamEvent]:
        """The events of a text or thinking item, in a few pieces, each followed by a turn of the loop."""
        for piece in _chunks(text):
            if thinking:
                events = self._parts_manager.handle_thinking_delta(
                    vendor_part_id=("thinking", index), content=piece
                )
            else:
                events = self._parts_manager.handle_text_delta(vendor_part_id=("text", index), content=piece)
            for event in events:
                yield event
            await asyncio.sleep(0)

    def _tool_call_events(
        self, part_id: tuple[str, int], name: str, arguments: dict[str, Any], call_id: str
    ) -> Iterator[ModelResponseStreamEvent]:
        args = json.dumps(arguments, ensure_ascii=False)
        middle = max(1, len(args) // 2)
        first, rest = args[:middle], args[middle:]
        yield from self._parts_manager.handle_tool_call_delta_events(
            vendor_part_id=part_id, tool_name=name, args=first, tool_call_id=call_id
        )
        if rest:
            yield from self._parts_manager.handle_tool_call_delta_events(vendor_part_id=part_id, args=rest)

    async def close_stream(self) -> None:
        """Nothing to close: cancelling just stops iterating."""

    @property
    def provider_name(self) -> str:
        return SYSTEM

    @property
    def provider_url(self) -> None:
        return None

    @property
    def timestamp(self) -> datetime:
        return self._timestamp


# --- the built-in demo --------------------------------------------------------------------------

_DEMO_LISTING_LIMIT = 1500
_DEMO_FILE = "demo.txt"  # what the demo writes


def _refused_unread(result: ToolReturnPart) -> bool:
    """Whether a write_file result refused the write because the session has not read the file
    as it is now (an earlier run left it there, or it changed since)."""
    text = result.model_response_str()
    return result.tool_name == "write_file" and ("(file_not_read)" in text or "(file_changed)" in text)


def _read_this_turn(messages: Sequence[ModelMessage]) -> bool:
    """Whether read_file answered since the last user prompt."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            if any(isinstance(p, ToolReturnPart) and p.tool_name == "read_file" for p in message.parts):
                return True
            if any(isinstance(p, UserPromptPart) for p in message.parts):
                return False
    return False


_HOW_TO_CONFIGURE = (
    "To work with a real model, set DEVAGENT_MODEL=provider:model (for example openai:gpt-4.1, "
    "anthropic:claude-sonnet-4-5 or ollama:qwen3) together with that provider's API key, "
    "or pass --model."
)


class DemoModel(ScriptedModel):
    """devagent's offline demo model (`--model demo`).

    On a new prompt it thinks briefly and lists the workspace with `list_directory` (or, for a
    prompt starting with "write ", proposes writing `demo.txt` with `write_file`, reading it first
    with `read_file` when the write is refused because an earlier run left one it has not read);
    once the tool has answered, it explains what it is, what it saw, and how to configure a real
    model. When the tool it wants is not offered, it answers directly."""

    def __init__(self, *, settings: ModelSettings | None = None) -> None:
        super().__init__([], source="demo", model_name="demo", settings=settings)
        self._fill_placeholders = False  # the demo's text is final: a prompt's braces stay as typed

    def select_step(
        self, messages: Sequence[ModelMessage], parameters: ModelRequestParameters
    ) -> tuple[int, Step]:
        n = count_responses(messages)
        prompt = last_user_prompt(messages).strip()
        tools = {t.name for t in parameters.function_tools}
        returns = last_tool_returns(messages)
        writing = prompt.lower().startswith("write ") and "write_file" in tools
        if writing and returns and returns[0].tool_name == "read_file":
            return n, self._write(prompt, n, "Now that I have read demo.txt, I'll propose the new text.")
        if writing and returns and _refused_unread(returns[0]) and "read_file" in tools:
            if not _read_this_turn(messages):
                return n, (
                    ThinkingItem("demo.txt is already there, and I may only replace what I have read."),
                    ToolCallItem("read_file", {"path": _DEMO_FILE}, f"call_{n}_0"),
                )
        if returns:
            return n, self._answer(prompt, returns)
        if writing:
            return n, self._write(
                prompt, n, "The user wants something written. I'll propose demo.txt with their words in it."
            )
        if "list_directory" in tools:
            return n, (
                ThinkingItem(
                    "A new request. Let me look at the workspace first, so I can say what is in it."
                ),
                ToolCallItem("list_directory", {"path": "."}, f"call_{n}_0"),
            )
        return n, (
            TextItem(
                "I'm devagent's offline demo model: I don't call any AI service, I only show how the "
                f"agent works.\n\nYou said: {prompt}\n\n{_HOW_TO_CONFIGURE}"
            ),
        )

    @staticmethod
    def _write(prompt: str, n: int, thought: str) -> Step:
        content = prompt[len("write ") :].strip() + "\n"
        return (
            ThinkingItem(thought),
            ToolCallItem("write_file", {"path": _DEMO_FILE, "content": content}, f"call_{n}_0"),
        )

    @staticmethod
    def _answer(prompt: str, returns: list[ToolReturnPart]) -> Step:
        result = "\n".join(p.model_response_str() for p in returns).strip()
        if len(result) > _DEMO_LISTING_LIMIT:
            result = result[:_DEMO_LISTING_LIMIT].rstrip() + "\n..."
        tool = returns[0].tool_name
        if tool == "write_file":
            seen = f"I asked to write demo.txt, and the tool answered:\n\n{result or '(nothing)'}"
        elif tool == "list_directory":
            seen = f"Here is what I found in the workspace:\n\n{result or '(an empty directory)'}"
        else:
            seen = f"The {tool} tool answered:\n\n{result or '(nothing)'}"
        return (
            TextItem(
                "I'm devagent's offline demo model: I don't call any AI service, I only show how the "
                f"agent streams thinking, tool calls and answers.\n\n{seen}\n\nYou said: {prompt}\n\n"
                f"{_HOW_TO_CONFIGURE}"
            ),
        )
