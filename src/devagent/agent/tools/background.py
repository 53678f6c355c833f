"""The `background_process` tool: what a session does with the processes it started with
`run_shell_command` (`background: true`; `processes.py`): read their new output (waiting for a
line first, if asked), write to their input, list them, stop one.

Reading, listing and stopping run unasked in every approval mode, as reads do; writing to a
process's input is asked like a command unless the mode runs commands (`kind_for`)."""

from __future__ import annotations

from typing import Any

from devagent.agent.events import ConfirmationDetails, GenericDetails, ToolErrorType, ToolKind
from devagent.agent.tools._util import bool_arg, num_arg, opt_str_arg, parameter, parameters_schema, str_arg
from devagent.agent.tools.base import BackgroundProcesses, RunningProcess, Tool, ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.processes import BUFFER_CHARS

ACTIONS = ("output", "input", "list", "stop")
DEFAULT_WAIT = 30.0  # seconds `wait_for` waits when no `timeout` is given


class BackgroundProcessTool(Tool):
    name = "background_process"
    description = (
        "Work with the processes this session started with run_shell_command and `background: true`. "
        "`action`: `output` returns what the process printed since the last read; with `wait_for`, it "
        f"first waits until that text appears, the process ends, or `timeout` seconds pass (default "
        f"{DEFAULT_WAIT:g}); with `timeout` alone, until the process ends or the time passes. `input` "
        "writes `input` to the process's standard input (end it with \\n to send a line; "
        "`close_input` closes the input after it), then returns new output as `output` does. `list` "
        "shows this session's background processes. `stop` stops one, with everything it started. "
        f"Between two reads the newest {BUFFER_CHARS:,} characters of output are kept. For a `tty` "
        "process `output` returns its screen and the lines scrolled off, and `input` types keys: "
        "text, or a key's name (<Enter>, <Tab>, <Esc>, <BS>, <Up>, <F1>, <C-c>; <lt> is <)."
    )
    parameters = parameters_schema(
        ["action"],
        action=parameter("string", "What to do: output, input, list or stop.", enum=list(ACTIONS)),
        id=parameter("string", "The process's id (`bg1`), as run_shell_command returned it. Not for `list`."),
        input=parameter(
            "string",
            "For `input`: the text to write to the process's standard input (`tty`: keys, `1+1<Enter>`).",
        ),
        close_input=parameter(
            "boolean", "For `input`: close the process's input after writing (end of file)."
        ),
        wait_for=parameter(
            "string", "For `output` and `input`: wait until this text appears in the new output."
        ),
        timeout=parameter(
            "number",
            "For `output` and `input`: the most seconds to wait (at most the server's command timeout "
            "maximum).",
            exclusiveMinimum=0,
        ),
    )
    kind = ToolKind.EXECUTE

    def kind_for(self, args: dict[str, Any]) -> ToolKind:
        return ToolKind.EXECUTE if args.get("action") == "input" else ToolKind.READ

    def describe(self, args: dict[str, Any]) -> str:
        action, pid = args.get("action"), args.get("id", "")
        return {
            "output": f"Read the output of {pid}",
            "input": f"Write to the input of {pid}",
            "list": "List the background processes",
            "stop": f"Stop {pid}",
        }.get(str(action), "background_process")

    async def confirmation(self, args: dict[str, Any], ctx: ToolContext) -> ConfirmationDetails:
        pid = str_arg(args, "id")
        process = self._processes(ctx).get(pid)
        what = f"{pid} (`{process.command}`)" if process is not None else pid
        text = args.get("input", "")
        close = " and close its input" if args.get("close_input") is True else ""
        return GenericDetails(description=f"Write {text!r} to the input of {what}{close}")

    @staticmethod
    def _processes(ctx: ToolContext) -> BackgroundProcesses:
        if ctx.processes is None:
            raise ToolFailure("background processes are not available here", ToolErrorType.UNSUPPORTED)
        return ctx.processes

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        action = str_arg(args, "action")
        if action not in ACTIONS:
            raise ToolFailure(
                f"action must be one of {', '.join(ACTIONS)}, not {action!r}", ToolErrorType.INVALID_ARGUMENTS
            )
        processes = self._processes(ctx)
        if action == "list":
            listed = processes.all()
            lines = [p.summary() for p in listed]
            mine = {p.id for p in listed}
            records = ctx.state.background
            lines += [processes.gone(r["id"], records) for r in records if r["id"] not in mine]
            text = "\n".join(lines) if lines else "This session has no background processes."
            return ToolResult(text=text, data={"processes": [_data(p) for p in listed]})
        pid = str_arg(args, "id")
        process = processes.get(pid)
        if process is None:
            raise ToolFailure(processes.gone(pid, ctx.state.background), ToolErrorType.NOT_FOUND)
        if action == "stop":
            await process.stop("stopped on request")
            return self._result(process, "")
        if action == "input":
            await process.write(str_arg(args, "input", allow_empty=True), bool_arg(args, "close_input"))
        return await self._read(process, args, ctx)

    async def _read(self, process: RunningProcess, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """The process's new output, once `wait_for` appeared or it ended or the time passed."""
        until = opt_str_arg(args, "wait_for")
        asked = num_arg(args, "timeout")
        most = max(ctx.shell_timeout_max, ctx.shell_timeout)
        seconds = min(asked or (DEFAULT_WAIT if until else 0.0), most)
        found = await process.wait(until, seconds, ctx.cancelled)
        note = ""
        if until is not None and not found:
            why = "the process has ended" if process.ended else f"within {seconds:g} s"
            why = "the turn was cancelled" if ctx.cancelled.is_set() else why
            note = f"({until!r} did not appear: {why})"
        return self._result(process, note, found=found if until is not None else None)

    @staticmethod
    def _result(process: RunningProcess, note: str, found: bool | None = None) -> ToolResult:
        output = process.take_output()
        if not output.endswith("\n"):
            output += "\n"
        status = f"[{process.id}: {process.state}]"
        return ToolResult(
            text=output + "\n".join(filter(None, [status, note])),
            data={**_data(process), **({"found": found} if found is not None else {})},
        )


def _data(process: RunningProcess) -> dict[str, Any]:
    return {
        "id": process.id,
        "command": process.command,
        "state": process.state,
        "exit_code": process.exit_code if process.ended else None,
        "sandboxed": process.sandboxed,
        **({"tty": {"rows": process.tty.rows, "cols": process.tty.cols}} if process.tty is not None else {}),
    }
