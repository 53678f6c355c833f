"""What the hooks of one event said, read the way Claude Code reads them: exit 0 goes on (its
stdout may be JSON with a decision, or, for a prompt or a session's start, context for the model),
exit 2 blocks with stderr as the reason, any other code is reported and the turn goes on. A hook
that guards (PreToolUse, UserPromptSubmit) and gives no answer of its own (it cannot start, is
killed, runs out of time or prints too much) blocks, unless the operator marked it advisory: a
guard that cannot run guards nothing. A hook's output is data: only the fields below are read,
and nothing in it can change a setting."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from devagent.agent.hooks.config import GUARD_EVENTS
from devagent.agent.hooks.run import HookRun

# Events whose plain stdout (exit 0, not JSON) is context for the model, as in Claude Code.
_STDOUT_IS_CONTEXT = ("UserPromptSubmit", "SessionStart")
_PERMISSIONS = ("allow", "deny", "ask")
_SHOWN = 300  # characters of a failing hook's stderr shown to the user
_NAMED = 200  # characters of a hook's command that name it


@dataclass
class HookVerdict:
    """The event's hooks together: whether one blocked (exit 2, or a `block`/`deny` decision) and
    why; for PreToolUse the permission decision (deny over ask over allow) and changed input;
    context for the model; whether one asked to stop the turn; what the user should be told."""

    blocked: bool = False
    reasons: list[str] = field(default_factory=list)
    permission: str | None = None
    permission_reason: str = ""
    updated_input: dict[str, Any] | None = None
    context: list[str] = field(default_factory=list)
    stop: bool = False
    stop_reason: str = ""
    notices: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str:
        return "\n".join(r for r in self.reasons if r) or "a hook blocked it"

    def take(self, event: str, run: HookRun) -> None:
        if failure := run.failure():
            self._failed(event, run, failure)
        elif run.exit_code == 2:
            self.blocked = True
            self.reasons.append(
                run.stderr.strip() or f"the {event} hook `{_short(run.command)}` exited with 2"
            )
        elif run.exit_code != 0:
            said = run.stderr.strip()[:_SHOWN]
            self.notices.append(
                f"The {event} hook `{_short(run.command)}` exited with {run.exit_code}"
                + (f": {said}" if said else "")
            )
        else:
            self._take_output(event, run.stdout)

    def _failed(self, event: str, run: HookRun, failure: str) -> None:
        """A hook without an answer: a guard's blocks (naming it), an advisory one's or another
        event's is a warning."""
        said = f"The {event} hook `{_short(run.command)}` failed: {failure}"
        if event in GUARD_EVENTS and not run.advisory:
            self.blocked = True
            self.reasons.append(
                f"{said}. A guard that cannot run blocks; the operator can fix the hook or mark it "
                '"advisory": true in the hooks file'
            )
        else:
            self.notices.append(f"{said}.")

    def _take_output(self, event: str, stdout: str) -> None:
        text = stdout.strip()
        doc = _json_object(text)
        if doc is None:
            if text and event in _STDOUT_IS_CONTEXT:
                self.context.append(text)
            return
        if doc.get("continue") is False:
            self.stop = True
            self.stop_reason = self.stop_reason or _str(doc.get("stopReason"))
        if message := _str(doc.get("systemMessage")):
            self.notices.append(message)
        decision = doc.get("decision")
        if decision == "block":
            self.blocked = True
            self.reasons.append(_str(doc.get("reason")))
        elif decision == "approve" and event == "PreToolUse":  # Claude Code's older spelling
            self._permit("allow", _str(doc.get("reason")))
        specific = doc.get("hookSpecificOutput")
        if isinstance(specific, dict):
            self._take_specific(event, specific)

    def _take_specific(self, event: str, specific: dict[str, Any]) -> None:
        if context := _str(specific.get("additionalContext")):
            self.context.append(context)
        if event != "PreToolUse":
            return
        decision = specific.get("permissionDecision")
        if decision in _PERMISSIONS:
            self._permit(decision, _str(specific.get("permissionDecisionReason")))
        updated = specific.get("updatedInput")
        if isinstance(updated, dict):
            self.updated_input = updated

    def _permit(self, decision: str, reason: str) -> None:
        rank = {None: -1, "allow": 0, "ask": 1, "deny": 2}
        if rank[decision] > rank[self.permission]:
            self.permission, self.permission_reason = decision, reason
        if decision == "deny":
            self.blocked = True
            self.reasons.append(reason)


def combine(event: str, runs: Iterable[HookRun]) -> HookVerdict:
    verdict = HookVerdict()
    for run in runs:
        verdict.take(event, run)
    return verdict


def _json_object(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _str(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _short(command: str) -> str:
    """How a hook is named: its command's first line, long enough to hold a script's path."""
    line = command.strip().splitlines()[0] if command.strip() else command
    return line if len(line) <= _NAMED else line[: _NAMED - 3] + "..."
