"""Hooks: the operator's (or the user's) commands run at points of a session, in Claude Code's
hooks format (`config.py`; a hook's `if` is tested by `rules.py`), run like any command the agent
starts (`run.py`) or posted to (`http.py`), with the session's conversation at `transcript_path`
(`transcript.py`), their answers read as Claude Code reads them (`verdict.py`). `Hooks.fire` is
what the loop calls; `points.py` builds each event's input and applies its verdict to the session.

Hooks come only from the settings (`hooks_file`), never from a workspace. A hook's "allow"
answers a permission question; it never widens the sandbox, the workspace or the server's policy.
A hook that fails, hangs or prints nonsense is reported, and the turn goes on; where it guards (a
tool call, a prompt) and could not answer, it blocks unless the operator marked it advisory."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from devagent.agent.hooks import transcript
from devagent.agent.hooks.config import NO_HOOKS, TOOL_EVENTS, HookCommand, HookSet, load_hooks
from devagent.agent.hooks.rules import rule_matches
from devagent.agent.hooks.run import HookLimits, HookRun, project_dir, run_hook
from devagent.agent.hooks.verdict import HookVerdict, combine
from devagent.agent.sandbox.base import Sandbox
from devagent.agent.sandbox.none import Unsandboxed
from devagent.common.netpolicy import IPNetwork
from devagent.common.rpcerrors import internal_error

__all__ = ["HookVerdict", "Hooks", "load_hooks"]

log = logging.getLogger("devagent.hooks")

# Claude Code's names for the approval modes, which hooks read as `permission_mode`.
PERMISSION_MODES = {"ask": "default", "auto-edit": "acceptEdits", "yolo": "bypassPermissions", "plan": "plan"}

Messages = Callable[[], Awaitable[Sequence[Any]]]


class Hooks:
    """The hooks of a core: empty unless the settings name a hooks file. `data_dir` is where the
    sessions' transcripts for hooks are written (none without it), `allow` the operator's networks
    an http hook may reach besides public addresses."""

    def __init__(
        self,
        hook_set: HookSet = NO_HOOKS,
        limits: HookLimits | None = None,
        *,
        data_dir: Path | None = None,
        allow: tuple[IPNetwork, ...] = (),
    ) -> None:
        self.set = hook_set
        self.limits = limits or HookLimits()
        self.data_dir = data_dir
        self.allow = allow
        self._background: set[asyncio.Task[None]] = set()

    def has(self, event: str) -> bool:
        return self.set.has(event)

    def chosen(
        self, event: str, names: Sequence[str], data: Mapping[str, Any], cwd: str
    ) -> list[HookCommand]:
        """The event's hooks for `names` whose `if` (tested on tool events only) the call matches."""
        tool_input = data.get("tool_input") if event in TOOL_EVENTS else None
        return [
            c
            for c in self.set.commands(event, names)
            if not c.condition
            or (isinstance(tool_input, dict) and rule_matches(c.condition, names, tool_input, cwd))
        ]

    async def fire(
        self,
        event: str,
        session_id: str,
        roots: Sequence[str],
        approval_mode: str,
        data: Mapping[str, Any],
        names: Sequence[str] = (),
        messages: Messages | None = None,
        sidechain: bool = False,
        sandbox: Sandbox | None = None,
    ) -> HookVerdict:
        """Run the event's hooks that match `names` with the event's input: the common fields
        (`transcript_path` the session's conversation, from `messages`, written first) and `data`.
        Those marked `async` start and are not waited for; the others run all at once and their
        verdict is the event's. They run in the session's `sandbox` (None: directly). Nothing
        runs without hooks."""
        cwd = project_dir(roots)
        commands = self.chosen(event, names, data, cwd)
        if not commands:
            return HookVerdict()
        if sandbox is None:
            sandbox = Unsandboxed([Path(r) for r in roots])
        path = await self._transcript(session_id, messages, cwd, sidechain, sandbox.owner())
        payload = {
            "session_id": session_id,
            "transcript_path": str(path) if path is not None else "",
            "cwd": cwd,
            "hook_event_name": event,
            "permission_mode": PERMISSION_MODES.get(approval_mode, approval_mode),
            **data,
        }
        shown = [path.parent] if path is not None else []
        for c in commands:
            if c.background:
                self._start(event, session_id, c, payload, cwd, sandbox, shown)
        now = [c for c in commands if not c.background]
        try:
            runs = await asyncio.gather(*(self._run(c, payload, cwd, sandbox, shown) for c in now))
        except Exception as e:  # a hook's failure never ends the turn
            text = internal_error(repr(e), what=f"the {event} hooks", exc_info=e)
            runs = [HookRun(c.command, None, problem=text, advisory=c.advisory) for c in now]
        verdict = combine(event, runs)
        for text in verdict.notices:
            log.warning("session %s: %s", session_id, text)
        return verdict

    async def _run(
        self, hook: HookCommand, payload: Mapping[str, Any], cwd: str, sandbox: Sandbox, shown: list[Path]
    ) -> HookRun:
        if hook.kind == "http":
            from devagent.agent.hooks.http import run_http_hook

            return await run_http_hook(hook, payload, self.allow)
        return await run_hook(hook, payload, cwd, sandbox, self.limits, shown)

    def _start(
        self,
        event: str,
        session_id: str,
        hook: HookCommand,
        payload: Mapping[str, Any],
        cwd: str,
        sandbox: Sandbox,
        shown: list[Path],
    ) -> None:
        """An `async` hook runs on its own: nothing waits for it, and what it answers decides
        nothing (its failures and messages are logged)."""

        async def background() -> None:
            try:
                run = await self._run(hook, payload, cwd, sandbox, shown)
            except Exception as e:
                internal_error(repr(e), what=f"the async {event} hook", exc_info=e)
                return
            said = run.failure() or (
                f"exit {run.exit_code}: {run.stderr.strip()[:300]}" if run.exit_code else ""
            )
            if said:
                log.warning("session %s: the async %s hook `%s`: %s", session_id, event, hook.command, said)

        task = asyncio.get_running_loop().create_task(background())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _transcript(
        self,
        session_id: str,
        messages: Messages | None,
        cwd: str,
        sidechain: bool,
        user: tuple[int, int] | None,
    ) -> Path | None:
        """The session's transcript, written now for the hooks about to run (None: not written,
        logged; the hooks run without it); `user`, the sandbox's, owns it."""
        if self.data_dir is None or messages is None:
            return None
        owner = user[0] if user is not None else None
        try:
            said = await messages()
            return await asyncio.to_thread(
                transcript.write, self.data_dir, session_id, said, cwd, sidechain=sidechain, owner=owner
            )
        except Exception as e:  # the hooks run without it
            log.warning("session %s: the transcript for hooks could not be written: %s", session_id, e)
            return None

    def forget(self, session_id: str) -> None:
        """The session ended: its transcript for hooks is removed."""
        if self.data_dir is not None:
            transcript.remove(self.data_dir, session_id)
