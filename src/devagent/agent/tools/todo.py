"""The todo tool: the model's plan for the current task, kept in the session state so clients
can show it and it survives a restart."""

from __future__ import annotations

from typing import Any

from devagent.agent.events import ToolErrorType, ToolKind
from devagent.agent.tools._util import parameter, parameters_schema
from devagent.agent.tools.base import Tool, ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure

STATUSES = ("pending", "in_progress", "completed", "cancelled")
_MARKS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]", "cancelled": "[-]"}


def render_todos(todos: list[dict[str, Any]]) -> str:
    if not todos:
        return "The todo list is empty."
    lines = []
    for i, t in enumerate(todos, start=1):
        suffix = {"in_progress": "  (in progress)", "cancelled": "  (cancelled)"}.get(t["status"], "")
        lines.append(f"{i}. {_MARKS.get(t['status'], '[ ]')} {t['description']}{suffix}")
    return "\n".join(lines)


def _validate(args: dict[str, Any]) -> list[dict[str, Any]]:
    if not isinstance(args, dict):
        raise ToolFailure("the arguments must be a JSON object", ToolErrorType.INVALID_ARGUMENTS)
    raw = args.get("todos")
    if not isinstance(raw, list):
        raise ToolFailure(
            "the argument 'todos' must be a list of {description, status}", ToolErrorType.INVALID_ARGUMENTS
        )
    todos: list[dict[str, Any]] = []
    for i, item in enumerate(raw, start=1):
        if not isinstance(item, dict):
            raise ToolFailure(
                f"todo {i} must be an object with description and status", ToolErrorType.INVALID_ARGUMENTS
            )
        description = item.get("description")
        status = item.get("status", "pending")
        if not isinstance(description, str) or not description.strip():
            raise ToolFailure(f"todo {i} needs a non-empty description", ToolErrorType.INVALID_ARGUMENTS)
        if status not in STATUSES:
            raise ToolFailure(
                f"todo {i} has status {status!r}; use one of {', '.join(STATUSES)}",
                ToolErrorType.INVALID_ARGUMENTS,
            )
        todos.append({"description": " ".join(description.split()), "status": status})
    active = sum(1 for t in todos if t["status"] == "in_progress")
    if active > 1:
        raise ToolFailure(
            f"{active} todos are in_progress; at most one may be in progress at a time",
            ToolErrorType.INVALID_ARGUMENTS,
        )
    return todos


class WriteTodos(Tool):
    name = "write_todos"
    description = (
        "Write the todo list of the current task, replacing the previous one. Use it for work of "
        "several steps: list the steps, mark the one you are doing `in_progress` (at most one), and "
        "mark steps `completed` (or `cancelled`) as soon as they are done, sending the whole list each "
        "time. The user sees the list. Skip it for simple one-step requests."
    )
    parameters = parameters_schema(
        ["todos"],
        todos={
            "type": "array",
            "description": "The complete list, in order. An empty list clears it.",
            "items": parameters_schema(
                ["description", "status"],
                description=parameter("string", "What the step does."),
                status=parameter(
                    "string",
                    "pending, in_progress (at most one), completed or cancelled.",
                    enum=list(STATUSES),
                ),
            ),
        },
    )
    kind = ToolKind.INTERNAL

    def describe(self, args: dict[str, Any]) -> str:
        todos = args.get("todos") if isinstance(args, dict) else None
        n = len(todos) if isinstance(todos, list) else 0
        return f"Update the todo list ({n} item{'s' if n != 1 else ''})"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        todos = _validate(args)
        ctx.state.todos = todos
        text = render_todos(todos)
        return ToolResult(text="Todo list updated:\n" + text if todos else text, data={"todos": todos})
