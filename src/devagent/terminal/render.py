"""Renders the core's events in a terminal with Rich: the answer as Markdown while it streams,
thoughts folded to one dim line (or shown whole), tool calls with their live output and diffs."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from devagent.agent.api import (
    ExecuteDetails,
    FileDiff,
    FileDiffs,
    GenericDetails,
    McpDetails,
    NeedsInput,
    Notice,
    QuestionDetails,
    StatusUpdate,
    TextDelta,
    ThoughtDelta,
    ToolCall,
    ToolCallStatus,
    ToolCallUpdate,
    TurnEnd,
)
from devagent.terminal.controls import markup, styled, visible

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

# The streamed Markdown is redrawn at most this often (the last state is always drawn).
REDRAW_SECONDS = 0.08
MARKS = {"SUCCEEDED": "[green]✓[/green]", "FAILED": "[red]✗[/red]", "CANCELLED": "[yellow]⊘[/yellow]"}


class Renderer:
    """Turns events into terminal output. `markdown`: render the answer as Markdown (a terminal),
    else write it as it comes (a pipe). `show_thoughts`: print thoughts whole instead of one line."""

    def __init__(
        self, console: Console, *, markdown: bool = True, show_thoughts: bool = False, sandboxed: bool = False
    ) -> None:
        self.console = console
        self.sandboxed = sandboxed  # local shell commands run in the sandbox: say so with each
        self.markdown = markdown and console.is_terminal
        self.show_thoughts = show_thoughts
        self.last_thoughts: list[str] = []  # the thoughts of the current (or last) turn, for /thoughts
        self._text = ""  # the answer block being streamed
        self._thought = ""  # the thought block being streamed
        self._thought_subject = ""
        self._live: Live | None = None
        self._drawn = 0.0
        self._shown: set[str] = set()  # calls whose header was printed
        self._live_seen: dict[str, str] = {}  # call id -> live output printed so far
        self._error_shown = False  # an error notice of this turn was printed

    # --- blocks -------------------------------------------------------------------------------

    def new_turn(self, *, markdown: bool = True) -> None:
        self.last_thoughts = []
        self._error_shown = False
        self.markdown = markdown and self.console.is_terminal

    def finish(self) -> None:
        """Close the block being streamed (before a prompt, a tool call, a notice)."""
        if self._thought:
            self._end_thought()
        if self._text:
            self._end_text()

    def _end_text(self) -> None:
        if self._live is not None:
            self._live.update(self._markdown(self._text), refresh=True)
            self._live.stop()
            self._live = None
        elif not self.markdown:
            self.console.file.write("\n")
            self.console.file.flush()
        self._text = ""

    def _end_thought(self) -> None:
        if self._live is not None:
            self._live.stop()  # transient: the "thinking" line goes away
            self._live = None
        text = self._thought.strip()
        if not self._thought_subject and text.startswith("**") and "**" in text[2:]:
            # a Gemini-style bold title: "**Planning** the rest"
            end = text.index("**", 2)
            self._thought_subject = text[2:end].strip()
        self.last_thoughts.append(text)
        if self.show_thoughts:
            self.console.print(styled(text, "dim italic"), highlight=False)
        else:
            head = self._thought_subject or (text.splitlines() or [""])[0]
            if len(head) > 90:
                head = head[:89] + "…"
            self.console.print(
                f"[dim]✻ {markup(head, layout=False)}  (/thoughts shows it)[/dim]", highlight=False
            )
        self._thought = ""
        self._thought_subject = ""

    def _markdown(self, text: str) -> RenderableType:
        from rich.markdown import Markdown

        return Markdown(visible(text))

    def _start_live(self, renderable: RenderableType, *, transient: bool) -> None:
        from rich.live import Live

        self._live = Live(
            renderable,
            console=self.console,
            auto_refresh=False,
            transient=transient,
            vertical_overflow="visible",
        )
        self._live.start(refresh=True)
        self._drawn = time.monotonic()

    def _redraw(self, renderable: RenderableType) -> None:
        assert self._live is not None
        now = time.monotonic()
        refresh = now - self._drawn >= REDRAW_SECONDS
        self._live.update(renderable, refresh=refresh)
        if refresh:
            self._drawn = now

    # --- events -------------------------------------------------------------------------------

    def render(self, ev: Any) -> None:
        if isinstance(ev, TextDelta):
            self._on_text(ev.text)
        elif isinstance(ev, ThoughtDelta):
            self._on_thought(ev)
        elif isinstance(ev, ToolCallUpdate):
            self.finish()
            self._on_call(ev.call)
        elif isinstance(ev, Notice):
            self.finish()
            style = {"info": "cyan", "warning": "yellow", "error": "red"}[ev.level]
            self._error_shown = self._error_shown or ev.level == "error"
            self.console.print(styled(ev.text, style), highlight=False, soft_wrap=True)
        elif isinstance(ev, NeedsInput | TurnEnd):
            self.finish()
            if isinstance(ev, TurnEnd) and ev.reason != "finished":
                self._on_end(ev)
        elif isinstance(ev, StatusUpdate):
            pass  # the status line shows it

    def _on_text(self, text: str) -> None:
        if self._thought:
            self._end_thought()
        if not self.markdown:
            self._text += text
            self.console.file.write(visible(text))
            self.console.file.flush()
            return
        if not self._text:
            self._text = text
            self._start_live(self._markdown(text), transient=False)
            return
        self._text += text
        self._redraw(self._markdown(self._text))

    def _on_thought(self, ev: ThoughtDelta) -> None:
        if self._text:
            self._end_text()
        if ev.subject and not self._thought_subject:
            self._thought_subject = ev.subject
        self._thought += ev.text
        if not self.console.is_terminal:
            return
        from rich.text import Text

        tail = " ".join(self._thought.split())[-80:]
        line = Text(f"✻ thinking… {visible(tail, layout=False)}", style="dim italic")
        if self._live is None:
            self._start_live(line, transient=True)
        else:
            self._redraw(line)

    def _on_call(self, call: ToolCall) -> None:
        c = self.console
        if call.id not in self._shown:
            self.render_call_header(call)
        if call.status is ToolCallStatus.EXECUTING and call.live_output:
            before = self._live_seen.get(call.id, "")
            # live output is the whole output so far (replace, do not append): print what is new
            new = call.live_output[len(before) :] if call.live_output.startswith(before) else call.live_output
            if new:
                c.file.write(visible(new))
                c.file.flush()
            self._live_seen[call.id] = call.live_output
        elif call.status.terminal:
            seen = self._live_seen.pop(call.id, None)
            if seen is not None and not seen.endswith("\n"):
                c.file.write("\n")
            detail = ""
            if call.error is not None:
                detail = (
                    f": {call.error.message.strip().splitlines()[0] if call.error.message.strip() else ''}"
                )
            elif call.output is not None and call.output.diff is None and seen is None:
                first = call.output.text.strip().splitlines()
                if first:
                    detail = f": {first[0][:100]}" + (" …" if len(first) > 1 else "")
            line = (
                f"{MARKS[call.status.value]} {markup(call.name, layout=False)}{markup(detail, layout=False)}"
            )
            c.print(line, highlight=False)
            if call.output is not None and call.output.diff is not None:
                self._diff(call.output.diff.formatted_diff)

    def render_call_header(self, call: ToolCall) -> None:
        """The call's one line, and for a permission request what it is about."""
        self._shown.add(call.id)
        self.console.print(
            f"[bold blue]●[/bold blue] {markup(call.description or call.name, layout=False)}", highlight=False
        )
        if call.status is ToolCallStatus.PENDING and call.confirmation is not None:
            self.show_request(call)

    def show_request(self, call: ToolCall) -> None:
        """What a permission request is about: the diff, the command, the MCP tool; a question's
        choices, numbered."""
        assert call.confirmation is not None
        d = call.confirmation.details
        if isinstance(d, FileDiff | FileDiffs):
            self._diff(d.formatted_diff or "(no change)")
        elif isinstance(d, ExecuteDetails):
            where = (
                f"   (in {d.working_directory}{', sandboxed' if self.sandboxed else ''})"
                if d.working_directory
                else ""
            )
            self.console.print(styled(f"  $ {d.command}{where}", "dim"), highlight=False)
        elif isinstance(d, McpDetails):
            said = (
                f"  {markup(d.tool_name, layout=False)} from MCP server {markup(d.server_name, layout=False)}"
            )
            self.console.print(f"[dim]{said}[/dim]", highlight=False)
        elif isinstance(d, GenericDetails) and "\n" in d.description:
            # A change of several files as a remote server words it: a line, then the diffs.
            head, _, rest = d.description.partition("\n")
            self.console.print(f"  [dim]{markup(head, layout=False)}[/dim]", highlight=False)
            self._diff(rest.strip("\n"))
        elif isinstance(d, QuestionDetails):
            from rich.text import Text

            lines = [styled(f"  {n}. {choice}") for n, choice in enumerate(d.choices, start=1)]
            if d.question not in (call.description or ""):  # (shortened in the call's line)
                lines.insert(0, styled(f"  {d.question}"))
            if lines:
                self.console.print(Text("\n").join(lines), highlight=False)

    def _diff(self, diff: str) -> None:
        from rich.syntax import Syntax

        self.console.print(Syntax(visible(diff or ""), "diff", theme="ansi_dark", background_color="default"))

    def _on_end(self, ev: TurnEnd) -> None:
        if ev.reason == "cancelled":
            self.console.print("[yellow]Cancelled.[/yellow]")
        elif ev.reason == "max_steps_reached":
            self.console.print(
                "[yellow]Stopped: the turn reached its step limit; say 'go on' to continue.[/yellow]"
            )
        elif ev.reason == "interrupted":
            self.console.print("[yellow]The turn was interrupted; send a message to go on.[/yellow]")
        elif ev.error and not self._error_shown:
            self.console.print(f"[red]Error: {markup(ev.error)}[/red]", highlight=False)
