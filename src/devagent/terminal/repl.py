"""The interactive loop of `devagent chat` (prompt_toolkit): the prompt with history, multi-line
input, slash-command completion and a status line; turns with Ctrl-C to cancel; inline permission
prompts (once / always / no with feedback / edit first) and answers to the model's questions.

Keys at the prompt: Enter sends; Esc then Enter (or Alt-Enter) and Ctrl-J insert a new line (a
pasted text keeps its lines); Ctrl-C clears the line, and on an empty line a second Ctrl-C
leaves; Ctrl-D on an empty line leaves. During a turn Ctrl-C cancels it; a second one leaves.

Type-ahead: what is typed while no prompt reads the terminal (before the first one is drawn,
during a turn) waits in the terminal in its cooked mode, where Enter arrives as a line feed, which
the prompt would take as Ctrl-J (a new line). `take_typeahead` reads it before a prompt and gives
it to prompt_toolkit's type-ahead store with each line feed as Enter, so a line typed ahead is
sent once the prompt is ready. A permission question answers to one key; keys typed before it
was shown never answer it: they are kept for the next prompt.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prompt_toolkit import PromptSession
from prompt_toolkit.application import Application
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import StyleAndTextTuples, to_formatted_text
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import Input as TermInput
from prompt_toolkit.input.typeahead import clear_typeahead, get_typeahead, store_typeahead
from prompt_toolkit.key_binding import KeyBindings, KeyPress, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import FormattedTextControl, Layout, Window

from devagent.agent.api import (
    CommandInfo,
    Decision,
    Door,
    Event,
    ExecuteDetails,
    FileDiff,
    Input,
    NeedsInput,
    QuestionDetails,
    ToolCall,
    TurnDriver,
    TurnEnd,
    UserPrompt,
    how_to_answer,
)
from devagent.common.errors import DevagentError
from devagent.preflight import debug_enabled
from devagent.terminal.backend import Backend
from devagent.terminal.controls import formatted, markup, styled, visible
from devagent.terminal.editor import edit_in_editor
from devagent.terminal.render import Renderer

if TYPE_CHECKING:
    from rich.console import Console

# The terminal's own commands (the rest go to the session: the core's commands, or the server's).
LOCAL_COMMANDS = [
    CommandInfo("exit", "Leave devagent (also Ctrl-D)", aliases=["quit"]),
    CommandInfo("thoughts", "Show the last turn's thoughts; 'on' shows them always, 'off' folds them"),
    CommandInfo("approval", "Set the approval mode: ask | auto-edit | yolo | plan"),
    CommandInfo("status", "Model, approval mode, tokens and session id"),
]


# How many of a resumed session's last turns are shown when it opens.
HISTORY_TURNS = 10


class Leave(DevagentError):
    """The user leaves (a second Ctrl-C, Ctrl-D, /exit)."""


class SlashCompleter(Completer):
    """Completes `/command` and its sub-commands from the session's command list."""

    def __init__(self, commands: list[CommandInfo]) -> None:
        self.commands = commands

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or "\n" in text:
            return
        words = text[1:].split(" ")
        level = self.commands
        for w in words[:-1]:  # walk down the complete words
            found = next((c for c in level if w == c.name or w in c.aliases), None)
            if found is None:
                return
            level = found.sub_commands
        last = words[-1]
        for c in level:
            if c.name.startswith(last):
                yield Completion(
                    c.name, start_position=-len(last), display_meta=visible(c.description, layout=False)
                )


class Chat:
    def __init__(
        self,
        backend: Backend,
        console: Console,
        *,
        history_file: Path,
        show_thoughts: bool = False,
        sandboxed: bool = False,
        debug: bool = False,
    ) -> None:
        self.backend = backend
        self.debug = debug  # --debug: an error's traceback too
        self.console = console
        self.renderer = Renderer(console, show_thoughts=show_thoughts, sandboxed=sandboxed)
        self.commands = [*LOCAL_COMMANDS, *backend.commands()]
        history_file.parent.mkdir(parents=True, exist_ok=True)
        self.prompt: PromptSession[str] = PromptSession(
            history=FileHistory(str(history_file)),
            completer=SlashCompleter(self.commands),
            complete_while_typing=True,
            key_bindings=self._keys(),
            bottom_toolbar=self._toolbar,
            multiline=False,
        )
        self._armed = False  # a Ctrl-C was just pressed: a second one leaves
        self._held: list[KeyPress] = []  # typed before a permission question: for the next prompt
        self._spoke = False  # the conversation holds a turn (one of the past, or of this chat)

    # --- the prompt ---------------------------------------------------------------------------

    def _keys(self) -> KeyBindings:
        kb = KeyBindings()

        @kb.add("escape", "enter")
        @kb.add("c-j")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @kb.add("c-c")
        def _interrupt(event: KeyPressEvent) -> None:
            buf = event.current_buffer
            if buf.text:
                buf.reset()  # Ctrl-C on a typed line clears it
            else:
                event.app.exit(exception=KeyboardInterrupt())

        return kb

    def _toolbar(self) -> StyleAndTextTuples:
        s = self.backend.status
        model = s.model or "?"
        if model.startswith("scripted:"):  # a script's path would fill the line
            model = "scripted:" + os.path.basename(model[len("scripted:") :])
        parts = [
            f"approval {s.approval_mode}",
            _tokens(s.tokens, s.context_tokens),
            f"session {s.session_id[:8] or 'new'}",
        ]
        if s.where:
            parts.append(s.where)
        # (what a server said, the session's model: shown, never read as markup or controls)
        return [("", " "), *formatted(model, "bold"), *formatted("".join(f" · {p}" for p in parts))]

    async def run(self) -> int:
        s = self.backend.status
        where = f" · workspace {s.workspace}" if s.workspace else ""
        said = f"devagent chat · model {s.model} · session {s.session_id or '(new)'}{where}"
        self.console.print(
            f"[dim]{markup(said, layout=False)}[/dim]",
            highlight=False,
            soft_wrap=True,
        )
        self.console.print("[dim]/help lists the commands · Ctrl-C cancels a turn · Ctrl-D leaves[/dim]")
        try:
            await self._show_history()
            waiting = self.backend.waiting()
            if waiting:  # a resumed session paused at a permission request
                self.console.print("[yellow]This session waits for your answer:[/yellow]")
                for c in waiting:
                    self.renderer.render_call_header(c)
                await self._turns(None, waiting)
            while True:
                inp = self.prompt.app.input
                store_typeahead(inp, [*self._held, *self._typeahead()])
                self._held = []
                try:
                    text = await self.prompt.prompt_async("› ")
                except KeyboardInterrupt:
                    if self._armed:
                        raise Leave() from None
                    self._armed = True
                    self.console.print("[dim](Ctrl-C again or Ctrl-D to leave)[/dim]")
                    continue
                except EOFError:
                    raise Leave() from None
                self._armed = False
                text = text.strip()
                if not text:
                    continue
                if text.startswith("/") and await self._local_command(text):
                    continue
                try:
                    await self._turns(UserPrompt(text), [])
                except (Leave, KeyboardInterrupt):
                    raise
                except Exception as e:  # the session goes on; the next prompt may work
                    self.renderer.finish()
                    self.console.print(
                        f"[red]error: {markup(str(e) or type(e).__name__)}[/red]"
                        " [dim](--debug shows the traceback)[/dim]",
                        highlight=False,
                    )
                    if debug_enabled(self.debug):
                        self.console.print_exception()
        except Leave:
            self._how_to_go_on()
            return 0

    def _how_to_go_on(self) -> None:
        """On leaving a conversation that holds something: the command line that goes on with it."""
        s = self.backend.status
        if not (self._spoke and s.session_id):
            return
        if s.where:  # a remote conversation: its context id on that server
            line = f"devagent chat --url {s.where} --resume {s.session_id}"
        else:
            line = f"devagent chat --resume {s.session_id}  (or: devagent chat --continue, in its workspace)"
        self.console.print(styled(f"To go on with this conversation: {line}", "dim", layout=False))

    async def _show_history(self) -> None:
        """A resumed session's last turns, drawn as live ones were (the prompt, then its answer)."""
        turns = await self.backend.history()
        if not turns:
            return
        self._spoke = True
        shown = turns[-HISTORY_TURNS:]
        if len(turns) > len(shown):
            self.console.print(f"[dim]… {len(turns) - len(shown)} earlier turns not shown[/dim]")
        for t in shown:
            if t.prompt:
                self.console.print(styled("› " + t.prompt, "bold"), soft_wrap=True)
            self.renderer.new_turn(markdown=not t.prompt.startswith("/"))
            for ev in t.events:
                self.renderer.render(ev)
            self.renderer.finish()
        self.console.print("[dim]── the conversation goes on from here ──[/dim]")

    # --- turns --------------------------------------------------------------------------------

    async def _turns(self, inp: Input | None, waiting: list[ToolCall]) -> None:
        """Run a turn and the turns its permission answers start, until it ends: Ctrl-C while it
        runs cancels it, a second one leaves once it stopped."""
        # a slash command's report is plain lines; the model's answer is Markdown
        command = isinstance(inp, UserPrompt) and inp.text.startswith("/")
        self._spoke = self._spoke or not command  # (a command alone leaves nothing to go on with)
        self.renderer.new_turn(markdown=not command)
        session = _Interruptible(self)
        driver = session.driver = TurnDriver(session, _TerminalDoor(self))
        await driver.run(inp, waiting or None)
        if session.presses:
            self._armed = True
            if session.presses > 1:
                raise Leave()

    # --- permission prompts -------------------------------------------------------------------

    async def _ask_one(self, c: ToolCall) -> Decision | None:
        if c.question is not None:
            return await self._answer(c, c.question)
        always = c.always_option()
        never = "cancel_always" in c.option_ids()  # refuse it for the rest of the session
        can_edit = self.backend.can_edit(c)
        keys = (
            "[y] once  "
            + ("[a] always  " if always else "")
            + "[n] no  "
            + ("[x] never  " if never else "")
            + ("[e] edit first" if can_edit else "")
        )
        # the call's own words as text, never markup: whatever they hold, the prompt is drawn
        message: StyleAndTextTuples = [
            ("bold ansiyellow", "Allow"),
            ("", " "),
            *formatted(c.description or c.name),
            ("", f"?  {keys} › "),
        ]
        offered = "y" + ("a" if always else "") + "n" + ("x" if never else "") + ("e" if can_edit else "")
        # Keys typed before the question was shown (during the turn) never answer it.
        inp = self.prompt.app.input
        self._held += [*get_typeahead(inp), *self._typeahead()]
        clear_typeahead(inp)
        while True:
            try:
                a = await ask_key(message, offered)
            except (KeyboardInterrupt, EOFError):
                return None
            if a == "y":
                return Decision(c.id, "proceed_once")
            if a == "a" and always:
                return Decision(c.id, always)
            if a == "x" and never:
                return Decision(c.id, "cancel_always")
            if a == "n":
                try:
                    feedback = await PromptSession[str]().prompt_async(
                        "Why not, or what instead? (Enter to skip) › "
                    )
                except (KeyboardInterrupt, EOFError):
                    return None
                return Decision(c.id, "cancel", feedback=feedback.strip() or None)
            if a == "e" and can_edit:
                edited = await self._edit(c)
                if edited is not None:
                    return Decision(c.id, "proceed_once", new_content=edited)
                continue
            keys_said = ", ".join(offered[:-1]) + " or " + offered[-1]
            self.console.print(f"[dim]Press {keys_said} (Ctrl-C cancels the turn).[/dim]", highlight=False)

    async def _answer(self, c: ToolCall, q: QuestionDetails) -> Decision:
        """A question (its choices were shown with it): a choice's number or text, or the user's
        own words where they are taken. Ctrl-C or Ctrl-D dismisses it; the turn goes on."""
        inp = self.prompt.app.input
        self._held += [*get_typeahead(inp), *self._typeahead()]  # (never an answer: kept)
        clear_typeahead(inp)
        hint = f"{how_to_answer(q)} Ctrl-C dismisses the question."
        self.console.print(f"[dim]{markup(hint)}[/dim]", highlight=False)
        label: StyleAndTextTuples = [("bold ansiyellow", "Answer"), ("", " › ")]
        while True:
            try:
                text = await PromptSession[str]().prompt_async(label)
            except (KeyboardInterrupt, EOFError):
                self.console.print("[yellow]Question dismissed.[/yellow]")
                return Decision(c.id, "cancel")
            got = q.answer_for(text)
            if got is not None:
                return Decision(c.id, got[0], new_content=got[1])
            self.console.print(f"[dim]{markup(hint)}[/dim]", highlight=False)

    def _typeahead(self) -> list[KeyPress]:
        keys = take_typeahead(self.prompt.app.input)
        if keys and keys[-1].key != Keys.ControlM:
            # The terminal echoed them and left the cursor after them: the prompt starts below.
            self.console.print()
        return keys

    async def _edit(self, c: ToolCall) -> str | None:
        assert c.confirmation is not None
        d = c.confirmation.details
        if isinstance(d, ExecuteDetails):
            try:
                cmd = await PromptSession[str]().prompt_async("$ ", default=d.command)
            except (KeyboardInterrupt, EOFError):
                return None
            return cmd.strip() or None
        if isinstance(d, FileDiff):
            from prompt_toolkit.application import run_in_terminal

            result: list[str | None] = []
            await run_in_terminal(
                lambda: result.append(edit_in_editor(d.new_content, d.file_name, self.console))
            )
            return result[0] if result else None
        return None

    # --- the terminal's own commands ----------------------------------------------------------

    async def _local_command(self, text: str) -> bool:
        """Runs /exit, /thoughts, /approval, /status, and /help (the session's list, then the
        terminal's own); False for the session's other commands."""
        word, _, rest = text[1:].partition(" ")
        rest = rest.strip()
        if word in ("exit", "quit"):
            raise Leave()
        if word in ("help", "?"):  # the session's commands, then the terminal's own
            await self._turns(UserPrompt(text), [])
            self._list_local_commands()
            return True
        if word == "thoughts":
            if rest in ("on", "off"):
                self.renderer.show_thoughts = rest == "on"
                self.console.print(f"[dim]Thoughts are {'shown' if rest == 'on' else 'folded'}.[/dim]")
            elif self.renderer.last_thoughts:
                for t in self.renderer.last_thoughts:
                    self.console.print(styled(t, "dim italic"), highlight=False)
            else:
                self.console.print("[dim]No thoughts in the last turn.[/dim]")
            return True
        if word == "approval":
            if not rest:
                self.console.print(f"Approval mode: {self.backend.status.approval_mode}")
                return True
            why = await self.backend.set_approval_mode(rest)
            if why:
                self.console.print(styled(why, "red"), highlight=False)
            else:
                self.console.print(f"[dim]Approval mode: {self.backend.status.approval_mode}[/dim]")
            return True
        if word == "status":
            s = self.backend.status
            line = (
                f"model {s.model} · approval {s.approval_mode} · {_tokens(s.tokens, 0)}"
                f" · session {s.session_id}" + (f" · {s.where}" if s.where else "")
            )
            self.console.print(styled(line, layout=False), highlight=False, soft_wrap=True)
            return True
        return False

    def _list_local_commands(self) -> None:
        lines = ["This terminal's own commands:"]
        for c in LOCAL_COMMANDS:
            names = "/" + " /".join([c.name, *c.aliases])
            lines.append(f"  {names}  {c.description}")
        self.console.print("\n".join(lines), highlight=False, markup=False)


def take_typeahead(inp: TermInput) -> list[KeyPress]:
    """What waits unread on the terminal, as key presses, a line feed as Enter (see the module's
    docstring). Only reads what is there: it never waits."""
    try:
        if not os.isatty(inp.fileno()):
            return []
    except (OSError, ValueError, NotImplementedError):
        return []
    keys: list[KeyPress] = []
    with inp.raw_mode():  # a line not yet ended becomes readable too
        while True:
            got = inp.read_keys()
            if not got:
                break
            keys += got
        keys += inp.flush_keys()
    return [KeyPress(Keys.ControlM, "\r") if k.key == Keys.ControlJ else k for k in keys]


async def ask_key(message: StyleAndTextTuples, keys: str) -> str:
    """Shows `message` and waits for one key press: the key (lower case) if it is one of `keys`,
    else "" (the caller asks again). Ctrl-C raises KeyboardInterrupt, Ctrl-D EOFError."""
    pressed: list[str] = []

    def text() -> StyleAndTextTuples:
        return [*to_formatted_text(message), ("", "".join(pressed)), ("[SetCursorPosition]", "")]

    kb = KeyBindings()

    @kb.add("c-c")
    @kb.add("<sigint>")  # a SIGINT from elsewhere while the question is shown
    def _cancel(event: KeyPressEvent) -> None:
        event.app.exit(exception=KeyboardInterrupt())

    @kb.add("c-d")
    def _eof(event: KeyPressEvent) -> None:
        event.app.exit(exception=EOFError())

    @kb.add(Keys.Any)
    def _key(event: KeyPressEvent) -> None:
        data = event.data.lower() if len(event.data) == 1 and event.data.isprintable() else ""
        answer = data if data and data in keys else ""
        pressed.append(answer)
        event.app.exit(result=answer)

    app: Application[str] = Application(
        layout=Layout(Window(FormattedTextControl(text), dont_extend_height=True, wrap_lines=True)),
        key_bindings=kb,
        full_screen=False,
    )
    return await app.run_async()


def _tokens(total: int | None, context: int) -> str:
    if total is None:  # a remote conversation before its first turn ended here
        return "tokens: not yet known"
    return f"{total:,} tokens" + (f" (context {context:,})" if context else "")


async def chat(backend: Backend, console: Console, history_file: Path, **kw: Any) -> int:
    try:
        return await Chat(backend, console, history_file=history_file, **kw).run()
    finally:
        await backend.close()


class _Interruptible:
    """The terminal's backend as the turn driver drives it, with Ctrl-C bound to the driver's
    cancel while a turn runs (at a permission question the prompt reads Ctrl-C itself)."""

    def __init__(self, repl: Chat) -> None:
        self.repl = repl
        self.driver: TurnDriver | None = None
        self.presses = 0

    def advance(self, inp: Input, *, label: str | None = None) -> _SignalledTurn:
        return _SignalledTurn(self, self.repl.backend.start(inp))

    async def cancel(self) -> None:
        await self.repl.backend.end_waiting()

    async def settled_calls(self, ids: set[str]) -> list[ToolCall]:
        return []  # the terminal shows nothing more of calls a cancel settled


class _SignalledTurn:
    def __init__(self, owner: _Interruptible, turn: Any) -> None:
        self.owner = owner
        self.turn = turn
        self._cancelling: list[asyncio.Future[None]] = []
        self._gen: AsyncGenerator[Event, None] | None = None

    def __aiter__(self) -> AsyncIterator[Event]:
        self._gen = self._events()
        return self._gen

    async def _events(self) -> AsyncGenerator[Event, None]:
        owner, repl = self.owner, self.owner.repl
        loop = asyncio.get_running_loop()

        def on_sigint() -> None:
            owner.presses += 1
            if owner.presses == 1 and owner.driver is not None:
                repl.renderer.finish()
                repl.console.print("[yellow]Cancelling… (Ctrl-C again leaves)[/yellow]")
                self._cancelling.append(asyncio.ensure_future(owner.driver.cancel()))

        loop.add_signal_handler(signal.SIGINT, on_sigint)
        try:
            async for ev in self.turn:
                yield ev
                if isinstance(ev, NeedsInput | TurnEnd):
                    break
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            repl.renderer.finish()
            await self.turn.aclose()
            if self._cancelling:
                await asyncio.gather(*self._cancelling, return_exceptions=True)

    async def cancel(self) -> None:
        await self.turn.cancel()

    async def aclose(self) -> None:
        if self._gen is not None:
            await self._gen.aclose()


class _TerminalDoor(Door):
    """A turn as the terminal shows it, and each permission question asked inline (one key)."""

    def __init__(self, repl: Chat) -> None:
        self.repl = repl
        self.client_calls: list[ToolCall] = []

    async def show(self, event: Event) -> None:
        self.repl.backend.observe(event)
        self.repl.renderer.render(event)
        if isinstance(event, NeedsInput):
            self.client_calls = event.client_calls

    async def ask(self, call: ToolCall, driver: TurnDriver) -> None:
        if self.client_calls:
            self.client_calls = []
            self.repl.console.print(
                "[red]The session waits for a client tool this terminal cannot run.[/red]"
            )
            await driver.cancel()
            return
        decision = await self.repl._ask_one(call)
        if decision is None:  # Ctrl-C at the permission prompt
            await driver.cancel()
            self.repl.console.print("[yellow]Cancelled.[/yellow]")
            self.repl._armed = True
            return
        driver.answer(decision)
