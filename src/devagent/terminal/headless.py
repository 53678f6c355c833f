"""`devagent run --output-format json|stream-json`: a turn as JSON for scripts and CI.

`stream-json` writes one JSON object a line in Claude Code's message shapes
(`terminal/claude_stream.py`) with devagent's own fields and lines beside them: a `system` init
line (session id, model, workspace, tools), the turn's messages and events as they come, and a
`result` line (the answer, usage, cost, how the turn ended). `json` writes the result line alone.
Every string in them (the model's text, tool output) is JSON-escaped data, never interpreted. A
permission question is never asked here: the turn is parked, stored waiting, and the result lists
what waits (`permission_required`, exit code 4); `devagent run --resume ID --answer
CALL_ID=OPTION` (or `--allow`, `--deny`) goes on with it. `--input-format stream-json` reads the
turns from standard input, each a turn of the same session.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devagent import __version__
from devagent.agent.api import (
    Decision,
    Door,
    InputError,
    NeedsInput,
    Notice,
    Outcome,
    Paused,
    StatusUpdate,
    StepBegin,
    TextDelta,
    ToolCall,
    ToolCallUpdate,
    TurnDriver,
    TurnEnd,
    Usage,
    UserPrompt,
    repository_result,
)
from devagent.terminal.claude_stream import (
    PERMISSION_MODES,
    MessageShaper,
    new_uuid,
    prompt_of,
    stdin_lines,
    usage_json,
)

FORMATS = ("text", "json", "stream-json")
EXIT_PERMISSION = 4  # the turn waits for a permission no one here could give
# how the turn ended (devagent's `outcome`), and Claude Code's `subtype` for it
OUTCOMES = {"finished": "success", "max_steps_reached": "max_steps", "cancelled": "cancelled"}
SUBTYPES = {
    "success": "success",
    "max_steps": "error_max_turns",
    "permission_required": "permission_required",  # devagent's own: Claude Code never parks a turn
}
# how the model's last answer ended (pydantic-ai's finish reason), in the Anthropic API's words
STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "content_filter": "refusal",
    "tool_call": "tool_use",
}
TERMINAL_REASONS = {"success": "completed", "max_steps": "max_turns"}  # Claude Code's, where one fits
EXIT_CODES = {"success": 0, "max_steps": 3, "cancelled": 130, "permission_required": EXIT_PERMISSION}
ANSWER_WORDS = {"allow": "proceed_once", "yes": "proceed_once", "deny": "cancel", "no": "cancel"}


def emit(obj: dict[str, Any]) -> None:
    """One JSON line on standard output, flushed (a reader acts on each line as it comes)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def request_json(c: ToolCall) -> dict[str, Any]:
    """What a waiting call asks, for a script to answer with `--answer CALL_ID=OPTION`."""
    out: dict[str, Any] = {"call_id": c.id, "tool": c.name, "description": c.description, "args": c.args}
    if c.confirmation is not None:
        out["options"] = [{"id": o.id, "name": o.name} for o in c.confirmation.options]
    q = c.question
    if q is not None:
        out["question"] = {"text": q.question, "choices": q.choices, "free_text": q.allow_free_text}
    return out


def call_json(c: ToolCall) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "tool_call",
        "call_id": c.id,
        "tool": c.name,
        "status": str(c.status).lower(),
        "description": c.description,
        "args": c.args,
    }
    if c.parent_call_id:
        out["parent_call_id"] = c.parent_call_id
    if c.output is not None:
        out["output"] = c.output.text
    if c.error is not None:
        out["error"] = {"type": c.error.type, "message": c.error.message}
    return out


def event_json(e: Any) -> dict[str, Any] | None:
    """An event of the turn as devagent's own stream-json line (None: none of its own; the
    model's text and thinking are assistant messages, `MessageShaper`'s)."""
    if isinstance(e, StepBegin):
        return {"type": "step", "step": e.n}
    if isinstance(e, ToolCallUpdate):
        return call_json(e.call)
    if isinstance(e, Notice):
        return {"type": "notice", "level": e.level, "text": e.text}
    if isinstance(e, StatusUpdate):
        return {"type": "usage", "usage": e.usage.to_json(), "context_tokens": e.context_tokens}
    if isinstance(e, NeedsInput):
        return {"type": "permission_request", "requests": [request_json(c) for c in e.calls]}
    return None


def parse_answers(answers: list[str], allow: bool, deny: bool) -> tuple[dict[str, str], str | None]:
    """`--answer CALL_ID=OPTION` flags as {call id: option}, and the option for every other
    waiting call (`--allow`, `--deny`). Raises ValueError on a malformed flag."""
    if allow and deny:
        raise ValueError("--allow and --deny cannot both be given")
    given: dict[str, str] = {}
    for a in answers:
        call_id, sep, option = a.partition("=")
        if not sep or not call_id or not option:
            raise ValueError(
                f"--answer {a!r}: expected CALL_ID=OPTION (allow, always, deny, or an option id)"
            )
        given[call_id] = option
    return given, "proceed_once" if allow else "cancel" if deny else None


def decision_for(c: ToolCall, option: str) -> Decision:
    """The decision an answer's word or option id makes for this call (a question's answer is its
    text). Raises ValueError when the call offers no such option."""
    q = c.question
    if q is not None:
        got = q.answer_for(option)
        if got is None:
            raise ValueError(f"{option!r} does not answer the question of call {c.id}")
        return Decision(c.id, got[0], new_content=got[1])
    chosen = c.allow_always() if option == "always" else ANSWER_WORDS.get(option, option)
    if chosen not in c.option_ids():
        raise ValueError(f"call {c.id} has no option {option!r} (it offers: {', '.join(c.option_ids())})")
    return Decision(c.id, chosen)


def preset_decisions(waiting: list[ToolCall], given: dict[str, str], rest: str | None) -> dict[str, Decision]:
    """The decisions the flags make for the calls a stored turn waits for. Raises ValueError on an
    answer to a call that does not wait."""
    by_id = {c.id: c for c in waiting}
    unknown = sorted(set(given) - set(by_id))
    if unknown:
        waits = ", ".join(by_id) or "nothing"
        raise ValueError(f"no waiting call {', '.join(unknown)} (the session waits for: {waits})")
    out = {cid: decision_for(by_id[cid], option) for cid, option in given.items()}
    if rest is not None:
        for c in waiting:
            # a question is not a permission: --allow and --deny both dismiss it
            out.setdefault(c.id, decision_for(c, rest) if c.question is None else Decision(c.id, "cancel"))
    return out


@dataclass(slots=True)
class RunInfo:
    """What every turn of this run shares: the session, its model, what the run's model requests
    cost so far (Claude Code's `total_cost_usd`)."""

    session_id: str
    model: str
    spent: Usage = field(default_factory=Usage)


class JsonDoor(Door):
    """The turn's events as JSON lines (stream-json) or only collected (json); a question with no
    answer given on the command line parks the turn."""

    def __init__(
        self, stream: bool, preset: dict[str, Decision], info: RunInfo, partial: bool = False
    ) -> None:
        self.stream = stream
        self.preset = preset
        self.info = info
        self.shaper = MessageShaper(info.session_id, info.model, partial)
        self.answer = ""  # the text of the last step: the turn's answer
        self.steps = 0
        self.refused = ""  # why the turn was cancelled instead of parked (a client tool)
        self.used = Usage()  # what this turn's model requests in this run used
        self.started = time.monotonic()
        self.api_seconds = 0.0  # time spent in model requests (Claude Code's `duration_api_ms`)
        self.request_began: float | None = None

    async def show(self, event: Any) -> None:
        if isinstance(event, StepBegin):
            self.steps, self.answer = event.n, ""
            self.request_began = time.monotonic()
        elif isinstance(event, TextDelta):
            self.answer += event.text
        elif isinstance(event, StatusUpdate):
            self.used.add(event.usage)
            self.info.spent.add(event.usage)
            if self.request_began is not None:
                self.api_seconds += time.monotonic() - self.request_began
                self.request_began = None
        if self.stream:
            for line in self.shaper.lines(event):
                emit(line)
            own = event_json(event)
            if own is not None:
                emit(own)

    async def ask(self, call: ToolCall, driver: TurnDriver) -> None:
        if call.id in self.preset:
            driver.answer(self.preset.pop(call.id))
        elif call.awaiting_client:
            self.refused = f"{call.name} is a client tool; devagent run cannot run it"
            await driver.cancel()
        else:
            driver.park()

    def finish(self) -> None:
        """The block still gathered goes out before the result line."""
        if self.stream:
            for line in self.shaper.flush():
                emit(line)


def result_json(info: RunInfo, outcome: Outcome, door: JsonDoor, session_usage: Any) -> dict[str, Any]:
    """The result line: Claude Code's fields (`subtype`, `is_error`, `result`, `session_id`,
    `num_turns`, `duration_ms`, `duration_api_ms`, `total_cost_usd`, `usage`, `errors`,
    `terminal_reason`, `stop_reason`) and
    devagent's beside them (`outcome`, `model`, `cost_usd`, `session_cost_usd`, `finish_reason`,
    `error`, `pending`)."""
    if isinstance(outcome, Paused):
        ended, usage, error = "permission_required", door.used, None
    else:
        ended = "error" if door.refused else OUTCOMES.get(outcome.reason, "error")
        usage, error = outcome.usage, door.refused or outcome.error
    subtype = SUBTYPES.get(ended, "error_during_execution")
    out: dict[str, Any] = {
        "type": "result",
        "subtype": subtype,
        "is_error": subtype.startswith("error"),
        "result": door.answer,
        "session_id": info.session_id,
        "num_turns": door.steps,
        "duration_ms": int((time.monotonic() - door.started) * 1000),
        "duration_api_ms": int(door.api_seconds * 1000),
        "total_cost_usd": round(info.spent.cost_usd, 9),
        "usage": usage_json(usage),
        "uuid": new_uuid(),
        "outcome": ended,
        "model": info.model,
        "cost_usd": round(usage.cost_usd, 9),
        "session_cost_usd": round(session_usage.cost_usd, 9),
    }
    if ended in TERMINAL_REASONS:
        out["terminal_reason"] = TERMINAL_REASONS[ended]
    if isinstance(outcome, TurnEnd) and outcome.finish_reason:
        out["stop_reason"] = STOP_REASONS.get(outcome.finish_reason, outcome.finish_reason)
        out["finish_reason"] = outcome.finish_reason
    if error:
        out["error"] = error
        out["errors"] = [error]
    if isinstance(outcome, Paused):
        out["pending"] = [request_json(c) for c in outcome.calls]
    return out


def error_result(message: str, session_id: str | None = None) -> dict[str, Any]:
    """The result line of a run that could not start (bad flags, an unusable model) or of stream
    input that cannot be read."""
    return {
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": True,
        "result": "",
        "session_id": session_id,
        "num_turns": 0,
        "duration_ms": 0,
        "duration_api_ms": 0,
        "total_cost_usd": 0.0,
        "usage": usage_json(Usage()),
        "outcome": "error",
        "error": message,
        "errors": [message],
    }


def json_format(argv: list[str]) -> bool:
    """Whether a `devagent run` command line asks for JSON output (for its usage errors)."""
    if argv[:1] != ["run"]:
        return False
    for i, a in enumerate(argv):
        value = a.partition("=")[2] if a.startswith("--output-format=") else None
        if a == "--output-format" and i + 1 < len(argv):
            value = argv[i + 1]
        if value in ("json", "stream-json"):
            return True
    return False


def exit_code(result: dict[str, Any]) -> int:
    return EXIT_CODES.get(result["outcome"], 1)


@dataclass(slots=True)
class RunRequest:
    """What `devagent run`'s flags ask for, checked."""

    prompt: str | None
    workspace: Path
    session_id: str | None
    cont: bool
    model: str | None
    output_format: str
    given: dict[str, str]  # --answer CALL_ID=OPTION
    rest: str | None  # --allow / --deny: the option for every other waiting call
    approval: str | None = None  # --approval: a resumed session goes on in this mode
    input_format: str = "text"  # stream-json: the turns are read from standard input
    partial: bool = False  # --include-partial-messages: each delta as a stream_event line too
    base_url: str | None = None  # --base-url: a resumed session's model is reached there
    repository: Any = None  # --repo URL --ref REF (--setup NAME): a RepositoryRequest
    push: bool = False  # --push: a repository session's result is pushed as a branch


def init_json(s: Any, req: RunRequest, model: str, resumed: bool) -> dict[str, Any]:
    """The init line: Claude Code's fields (`session_id`, `cwd`, `model`, `tools`,
    `permissionMode`, `uuid`) and devagent's beside them."""
    mode = s.state.approval_mode
    workspace = str(req.workspace.resolve())
    return {
        "type": "system",
        "subtype": "init",
        "session_id": s.id,
        "cwd": workspace,
        "model": model,
        "tools": sorted(s.tools()),
        "permissionMode": PERMISSION_MODES.get(mode, "default"),
        "uuid": new_uuid(),
        "workspace": workspace,
        "approval_mode": mode,
        "resumed": resumed,
        "version": __version__,
    }


async def run_json(
    s: Any, req: RunRequest, waiting: list[ToolCall], preset: dict[str, Decision], default_model: str
) -> int:
    """Drive the turn (or, with stream-json input, each turn standard input gives) with its events
    as JSON (stream-json) and print its result line; the exit code the last result gives."""
    info = RunInfo(s.id, s.state.model or default_model)
    resumed = bool(req.session_id or req.cont)
    if req.input_format == "stream-json":
        return await run_input_turns(s, req, info, resumed)
    first = UserPrompt(req.prompt) if req.prompt is not None else None
    return exit_code(await run_turn(s, req, info, first, waiting, preset, resumed))


async def run_input_turns(s: Any, req: RunRequest, info: RunInfo, resumed: bool) -> int:
    """A turn for each user message on standard input, in this session, until its end; a turn
    that waits for a permission or was cancelled ends the run (the session is stored)."""
    code, number = 0, 0
    async for line in stdin_lines():
        number += 1
        try:
            prompt = prompt_of(line, number)
        except ValueError as e:
            emit(error_result(str(e), s.id))
            return 2
        if prompt is None:
            continue
        result = await run_turn(s, req, info, UserPrompt(prompt), [], {}, resumed)
        code, resumed = exit_code(result), True  # the next turn goes on in this session
        if result["outcome"] in ("permission_required", "cancelled"):
            break
    return code


async def run_turn(
    s: Any,
    req: RunRequest,
    info: RunInfo,
    first: UserPrompt | None,
    waiting: list[ToolCall],
    preset: dict[str, Decision],
    resumed: bool,
) -> dict[str, Any]:
    """One turn: its init line and events (stream-json), then its result line."""
    stream = req.output_format == "stream-json"
    if stream:
        emit(init_json(s, req, info.model, resumed))
    door = JsonDoor(stream, preset, info, req.partial)
    try:
        outcome: Outcome = await TurnDriver(s, door).run(first, waiting=waiting or None)
    except (KeyboardInterrupt, asyncio.CancelledError) as e:  # Ctrl-C, or SIGINT from a CI runner
        task = asyncio.current_task()
        if isinstance(e, asyncio.CancelledError) and task is not None:
            task.uncancel()  # handled here: the cleanup below must not be cancelled again
        await s.cancel()
        outcome = TurnEnd("cancelled", usage=door.used, error="cancelled (Ctrl-C); the session is stored")
    door.finish()
    result = result_json(info, outcome, door, s.state.usage)
    if isinstance(outcome, TurnEnd):
        result.update(await repository_json(s, req.push))
    emit(result)
    return result


async def repository_json(s: Any, push: bool) -> dict[str, Any]:
    """A repository session's result fields: `patch` (the unified diff against the ref it started
    from), `files`, `repository`, `ref`, `base_commit`, `workspace`, and when pushed `branch` and
    `commit`; `repository_error` says why there is none. {} for another session."""
    if not s.state.repository:
        return {}
    try:
        result = await repository_result(s, push=push)
    except InputError as e:
        return {"repository_error": str(e)}
    return {**result.to_json(), "workspace": s.state.repository.get("workspace", "")}
