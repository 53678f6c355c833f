"""`devagent run --output-format json|stream-json`: a turn as JSON for scripts and CI.

`stream-json` writes one JSON object a line: a `system` init line (session id, model, workspace,
tools), the turn's events as they come, and a `result` line (the answer, usage, cost, how the turn
ended). `json` writes the result line alone. Every string in them (the model's text, tool output)
is JSON-escaped data, never interpreted. A permission question is never asked here: the turn is
parked, stored waiting, and the result lists what waits (`permission_required`, exit code 4);
`devagent run --resume ID --answer CALL_ID=OPTION` (or `--allow`, `--deny`) goes on with it.
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
from devagent.agent import events as ev
from devagent.agent.driver import Door, Outcome, Paused, TurnDriver
from devagent.agent.events import Decision, ToolCall, TurnEnd

FORMATS = ("text", "json", "stream-json")
EXIT_PERMISSION = 4  # the turn waits for a permission no one here could give
SUBTYPES = {"finished": "success", "max_steps_reached": "max_steps", "cancelled": "cancelled"}
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
    """An event of the turn as a stream-json line (None: the result line says it)."""
    if isinstance(e, ev.TextDelta):
        return {"type": "assistant", "subtype": "text", "text": e.text}
    if isinstance(e, ev.ThoughtDelta):
        return {"type": "assistant", "subtype": "thinking", "text": e.text, "subject": e.subject}
    if isinstance(e, ev.StepBegin):
        return {"type": "step", "step": e.n}
    if isinstance(e, ev.ToolCallUpdate):
        return call_json(e.call)
    if isinstance(e, ev.Notice):
        return {"type": "notice", "level": e.level, "text": e.text}
    if isinstance(e, ev.StatusUpdate):
        return {"type": "usage", "usage": e.usage.to_json(), "context_tokens": e.context_tokens}
    if isinstance(e, ev.NeedsInput):
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


class JsonDoor(Door):
    """The turn's events as JSON lines (stream-json) or only collected (json); a question with no
    answer given on the command line parks the turn."""

    def __init__(self, stream: bool, preset: dict[str, Decision]) -> None:
        self.stream = stream
        self.preset = preset
        self.answer = ""  # the text of the last step: the turn's answer
        self.steps = 0
        self.refused = ""  # why the turn was cancelled instead of parked (a client tool)
        self.used = ev.Usage()  # what this run's model requests used (a parked turn's usage)

    async def show(self, event: Any) -> None:
        if isinstance(event, ev.StepBegin):
            self.steps, self.answer = event.n, ""
        elif isinstance(event, ev.TextDelta):
            self.answer += event.text
        elif isinstance(event, ev.StatusUpdate):
            self.used.add(event.usage)
        line = event_json(event)
        if self.stream and line is not None:
            emit(line)

    async def ask(self, call: ToolCall, driver: TurnDriver) -> None:
        if call.id in self.preset:
            driver.answer(self.preset.pop(call.id))
        elif call.awaiting_client:
            self.refused = f"{call.name} is a client tool; devagent run cannot run it"
            await driver.cancel()
        else:
            driver.park()


@dataclass(slots=True)
class RunInfo:
    """What the result line says besides the turn's end."""

    session_id: str
    model: str
    started: float = field(default_factory=time.monotonic)


def result_json(info: RunInfo, outcome: Outcome, door: JsonDoor, session_usage: Any) -> dict[str, Any]:
    if isinstance(outcome, Paused):
        subtype, usage, error = "permission_required", door.used, None
    else:
        subtype = "error" if door.refused else SUBTYPES.get(outcome.reason, "error")
        usage, error = outcome.usage, door.refused or outcome.error
    out: dict[str, Any] = {
        "type": "result",
        "subtype": subtype,
        "is_error": subtype == "error",
        "result": door.answer,
        "session_id": info.session_id,
        "model": info.model,
        "num_turns": door.steps,
        "duration_ms": int((time.monotonic() - info.started) * 1000),
        "usage": usage.to_json(),
        "cost_usd": round(usage.cost_usd, 9),
        "session_cost_usd": round(session_usage.cost_usd, 9),
    }
    if isinstance(outcome, TurnEnd) and outcome.finish_reason:
        out["stop_reason"] = outcome.finish_reason
    if error:
        out["error"] = error
    if isinstance(outcome, Paused):
        out["pending"] = [request_json(c) for c in outcome.calls]
    return out


def error_result(message: str, session_id: str | None = None) -> dict[str, Any]:
    """The result line of a run that could not start (bad flags, an unusable model)."""
    return {
        "type": "result",
        "subtype": "error",
        "is_error": True,
        "result": "",
        "session_id": session_id,
        "error": message,
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
    return EXIT_CODES.get(result["subtype"], 1)


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
    base_url: str | None = None  # --base-url: a resumed session's model is reached there


def init_json(s: Any, req: RunRequest, model: str, resumed: bool) -> dict[str, Any]:
    return {
        "type": "system",
        "subtype": "init",
        "session_id": s.id,
        "model": model,
        "workspace": str(req.workspace.resolve()),
        "approval_mode": s.state.approval_mode,
        "tools": sorted(s.tools()),
        "resumed": resumed,
        "version": __version__,
    }


async def run_json(
    s: Any, req: RunRequest, waiting: list[ToolCall], preset: dict[str, Decision], default_model: str
) -> int:
    """Drive the turn with its events as JSON (stream-json) and print its result line; the exit
    code the result's subtype gives."""
    model = s.state.model or default_model
    info = RunInfo(s.id, model)
    stream = req.output_format == "stream-json"
    if stream:
        emit(init_json(s, req, model, resumed=bool(req.session_id or req.cont)))
    door = JsonDoor(stream, preset)
    first = ev.UserPrompt(req.prompt) if req.prompt is not None else None
    try:
        outcome: Outcome = await TurnDriver(s, door).run(first, waiting=waiting or None)
    except (KeyboardInterrupt, asyncio.CancelledError) as e:  # Ctrl-C, or SIGINT from a CI runner
        task = asyncio.current_task()
        if isinstance(e, asyncio.CancelledError) and task is not None:
            task.uncancel()  # handled here: the cleanup below must not be cancelled again
        await s.cancel()
        outcome = TurnEnd("cancelled", usage=door.used, error="cancelled (Ctrl-C); the session is stored")
    result = result_json(info, outcome, door, s.state.usage)
    emit(result)
    return exit_code(result)
