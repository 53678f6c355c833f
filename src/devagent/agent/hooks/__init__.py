"""Hooks: the operator's (or the user's) commands run at points of a session, in Claude Code's
hooks format (`config.py`), run like any command the agent starts (`run.py`), their answers read
as Claude Code reads them (`verdict.py`). `Hooks.fire` is what the loop calls; `events.py` builds
each event's input and applies its verdict to the session.

Hooks come only from the settings (`hooks_file`), never from a workspace. A hook's "allow"
answers a permission question; it never widens the sandbox, the workspace or the server's policy.
A hook that fails, hangs or prints nonsense is reported, and the turn goes on; where it guards (a
tool call, a prompt) and could not answer, it blocks unless the operator marked it advisory."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from devagent.agent.hooks.config import NO_HOOKS, HookSet, load_hooks
from devagent.agent.hooks.run import HookLimits, HookRun, project_dir, run_hook
from devagent.agent.hooks.verdict import Verdict, combine
from devagent.common.rpcerrors import internal_error

__all__ = ["Hooks", "Verdict", "load_hooks"]

log = logging.getLogger("devagent.hooks")

# Claude Code's names for the approval modes, which hooks read as `permission_mode`.
PERMISSION_MODES = {"ask": "default", "auto-edit": "acceptEdits", "yolo": "bypassPermissions", "plan": "plan"}


class Hooks:
    """The hooks of a core: empty unless the settings name a hooks file."""

    def __init__(self, hook_set: HookSet = NO_HOOKS, limits: HookLimits | None = None) -> None:
        self.set = hook_set
        self.limits = limits or HookLimits()

    def has(self, event: str) -> bool:
        return self.set.has(event)

    async def fire(
        self,
        event: str,
        session_id: str,
        roots: Sequence[str],
        approval_mode: str,
        data: Mapping[str, Any],
        names: Sequence[str] = (),
    ) -> Verdict:
        """Run the event's hooks that match `names` (all at once) with the event's input: the
        common fields and `data`. Their verdict together; nothing runs without hooks."""
        commands = self.set.commands(event, names)
        if not commands:
            return Verdict()
        cwd = project_dir(roots)
        payload = {
            "session_id": session_id,
            "cwd": cwd,
            "hook_event_name": event,
            "permission_mode": PERMISSION_MODES.get(approval_mode, approval_mode),
            **data,
        }
        paths = [Path(r) for r in roots]
        try:
            runs = await asyncio.gather(*(run_hook(c, payload, cwd, paths, self.limits) for c in commands))
        except Exception as e:  # a hook's failure never ends the turn
            text = internal_error(repr(e), what=f"the {event} hooks", exc_info=e)
            runs = [HookRun(c.command, None, problem=text, advisory=c.advisory) for c in commands]
        verdict = combine(event, runs)
        for text in verdict.notices:
            log.warning("session %s: %s", session_id, text)
        return verdict
