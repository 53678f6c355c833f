"""`devagent run`'s text output (`--output-format text`, the default): the turn rendered as it
streams, each permission answered by the command line's flags or asked at the terminal; beside
`headless.py`, its JSON output. Standard input not a terminal: a permission parks the turn (stored
waiting, `--resume` answers it) and a question is dismissed.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from devagent.agent.api import (
    Decision,
    Door,
    FileDiff,
    NeedsInput,
    Paused,
    QuestionDetails,
    ToolCall,
    TurnDriver,
    TurnEnd,
    UserPrompt,
    how_to_answer,
    runs_sandboxed,
)
from devagent.terminal.controls import markup, visible
from devagent.terminal.headless import EXIT_PERMISSION
from devagent.terminal.render import Renderer

if TYPE_CHECKING:
    from devagent.agent.api import AgentCore, Session
    from devagent.terminal.headless import RunRequest


async def run_text(
    s: Session,
    req: RunRequest,
    waiting: list[ToolCall],
    preset: dict[str, Decision],
    default_model: str,
    resumed: bool,
) -> int:
    """The run's turn (its prompt, or the answers to what a resumed session waits for) shown at the
    terminal; the exit code (`_drive`)."""
    err = Console(stderr=True, highlight=False)
    if resumed:
        err.print(f"[dim]Model: {s.state.model or default_model}[/dim]")
    where = req.workspace.resolve()
    err.print(f"[dim]session {s.id} · approval {s.state.approval_mode} · workspace {where}[/dim]")

    # thoughts shown whole: a one-shot run has no /thoughts to unfold them
    renderer = Renderer(Console(highlight=False), show_thoughts=True, sandboxed=runs_sandboxed(s.sandbox))
    renderer.new_turn()
    first = UserPrompt(req.prompt) if req.prompt is not None else None
    return await _drive(s, first, renderer, waiting, preset)


def announce_model(core: AgentCore) -> None:
    """The model a new run uses, and where it came from (the demo's explanation in yellow)."""
    err = Console(stderr=True, highlight=False)
    if core.default_model == "demo":
        err.print(f"[yellow]{core.model_explanation}[/yellow]")
    else:
        err.print(f"[dim]{core.model_explanation}[/dim]")


async def _drive(
    s: Any, prompt: Any, r: Renderer, waiting: list[ToolCall], preset: dict[str, Decision]
) -> int:
    """The turn (from a prompt, or from the calls a resumed session waits for) through the core's
    turn driver, its permission questions asked at the terminal; the exit code: 0 finished, 3 at
    the step limit, 4 waiting for a permission no one could give here, 130 cancelled, 2 refused to
    ask, 1 failed."""
    door = _RunDoor(r, preset)
    try:
        end = await TurnDriver(s, door).run(prompt, waiting=waiting or None)
    except (KeyboardInterrupt, EOFError, asyncio.CancelledError) as e:
        # Ctrl-C during the turn (asyncio.run cancels this task) or at the prompt, or Ctrl-D there
        task = asyncio.current_task()
        if isinstance(e, asyncio.CancelledError) and task is not None:
            task.uncancel()  # handled here: the cleanup below must not be cancelled again
        r.finish()
        why = "end of input at the prompt" if isinstance(e, EOFError) else "Ctrl-C"
        print(f"devagent: cancelled ({why}); the session is stored, --resume continues it.", file=sys.stderr)
        await s.cancel()
        return 130
    if isinstance(end, Paused):
        ids = visible(" ".join(f"--answer {c.id}=allow" for c in end.calls), layout=False)
        print(
            f"devagent: session {s.id} waits for permission. Go on with: devagent run --resume {s.id} "
            f"--allow (or --deny, or {ids})",
            file=sys.stderr,
        )
        return EXIT_PERMISSION
    if door.refused:
        return 2
    reason = getattr(end, "reason", "error")
    return {"finished": 0, "max_steps_reached": 3, "cancelled": 130}.get(reason, 1)


class _RunDoor(Door):
    """`devagent run`'s side of a turn: events rendered, each permission answered by the command
    line's flags or asked at the terminal; with standard input not a terminal the turn is parked
    (stored waiting, `--resume` answers it); a client tool's call is refused (the turn cancelled)."""

    def __init__(self, r: Renderer, preset: dict[str, Decision]) -> None:
        self.r = r
        self.preset = preset
        self.refused = False
        self.told = False  # the user was told the permission cannot be asked here
        self.calls: list[ToolCall] = []  # those the turn waits for now

    async def show(self, event: Any) -> None:
        self.r.render(event)
        if isinstance(event, NeedsInput | TurnEnd):
            self.r.finish()
        if isinstance(event, NeedsInput):
            self.calls = event.calls

    async def ask(self, call: ToolCall, driver: TurnDriver) -> None:
        if call.id in self.preset:
            driver.answer(self.preset.pop(call.id))
            return
        if call.question is None and not call.awaiting_client and not sys.stdin.isatty():
            if not self.told:
                self.told = True
                names = markup(", ".join(w.description or w.name for w in self.calls), layout=False)
                self.r.console.print(
                    f"[red]Permission needed for: {names}, but standard input is not a terminal.[/red]\n"
                    "Answer it with --resume, or choose a mode that does not ask: "
                    "--approval auto-edit | yolo | plan."
                )
            driver.park()
            return
        decision = None if self.refused else _ask(self.r.console, call)
        if decision is None:
            self.refused = True
            await driver.cancel()
        else:
            driver.answer(decision)


def _ask(console: Console, c: ToolCall) -> Any:
    """The user's decision on one call, or None when it cannot be asked here."""
    if c.question is not None:
        return _answer(console, c, c.question)
    if c.awaiting_client:
        console.print(
            f"[red]{markup(c.name, layout=False)} is a client tool; the terminal cannot run it.[/red]"
        )
        return None
    console.print(f"[bold yellow]Allow[/bold yellow] {markup(c.description or c.name, layout=False)}?")
    details = c.confirmation.details if c.confirmation else None
    prompt = r"  \[y] once  \[a] always (this session)  \[n] no"
    prompt += r"  \[e] edit first > " if isinstance(details, FileDiff) else " > "
    while True:
        answer = _read_answer(console, prompt)
        if answer == "e" and isinstance(details, FileDiff):
            from devagent.terminal.editor import edit_in_editor  # late: tempfile, for an edit only

            edited = edit_in_editor(details.new_content, details.file_name, console)
            if edited is not None:
                return Decision(c.id, "proceed_once", new_content=edited)
            continue
        option = {"y": "proceed_once", "a": c.allow_always(), "n": "cancel"}.get(answer)
        if option:
            return Decision(c.id, option)


def _answer(console: Console, c: ToolCall, q: QuestionDetails) -> Decision:
    """The user's answer to a question (its choices were shown with it), typed as a line; with
    standard input not a terminal, or on Ctrl-C or Ctrl-D, it is dismissed and the turn goes on."""
    if not sys.stdin.isatty():
        console.print("[yellow]The model asked a question, but standard input is not a terminal.[/yellow]")
        alone = "no one can answer: devagent run is not attached to a terminal"
        return Decision(c.id, "cancel", feedback=alone)
    hint = escape(f"{how_to_answer(q)} Ctrl-C dismisses the question.")
    console.print(f"[dim]{hint}[/dim]", highlight=False)
    while True:
        try:
            got = q.answer_for(_read_line(console, "Answer > "))
        except (KeyboardInterrupt, EOFError):
            console.print("\n[yellow]Question dismissed.[/yellow]")
            return Decision(c.id, "cancel")
        if got is not None:
            return Decision(c.id, got[0], new_content=got[1])


def _read_answer(console: Console, prompt: str) -> str:
    """One key's answer at the permission prompt (`_read_line`'s first letter)."""
    return _read_line(console, prompt).lower()[:1]


def _read_line(console: Console, prompt: str) -> str:
    """One line typed at a prompt. Ctrl-C raises KeyboardInterrupt here: asyncio.run's
    own handler would only cancel the task, and input() would go on reading (the next lines typed
    taken as answers).

    The line is waited for with `select` in short slices, not inside input(): the kernel gives
    SIGINT to any thread of the process, and when another thread (the SQLite driver's, a worker)
    took it, a read blocked in the main thread was not interrupted, so Python never ran the
    handler and the prompt hung on the Ctrl-C. Each slice returns to Python, which then runs it.
    The terminal is line-buffered, so stdin turns readable when a whole line is typed."""
    import select
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        console.print(prompt, end="")
        try:
            while not select.select([sys.stdin], [], [], 0.1)[0]:
                pass
        except (OSError, ValueError):  # stdin that select cannot wait on: input() alone
            pass
        return input().strip()
    finally:
        signal.signal(signal.SIGINT, previous)
