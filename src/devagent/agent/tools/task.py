"""The `task` tool: hand a piece of work to a subagent, a session of its own with its own
context, in the same workspace, whose final answer is the tool's result. The work itself is the
core's (`devagent.agent.subagents.runner`, reached through `ToolContext.subagents`); this module is what
the model sees."""

from __future__ import annotations

from typing import Any

from devagent.agent.events import ToolErrorType, ToolKind
from devagent.agent.tools._util import parameter, parameters_schema, str_arg
from devagent.agent.tools.base import Tool, ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure

DESCRIPTION = (
    "Hand self-contained work to a subagent: a fresh agent in this workspace with its own context, "
    "whose final report is the result. Calls in one step run in parallel. The `prompt` is all it "
    "knows: say what to do and what to report. Types (`agent`):"
)


class Task(Tool):
    name = "task"
    description = DESCRIPTION + "\n- general-purpose: your tools."
    kind = ToolKind.INTERNAL
    parameters = parameters_schema(
        ["description", "prompt"],
        description=parameter("string", "A few words naming the work, shown to the user."),
        prompt=parameter("string", "The whole task."),
        agent=parameter("string", "The type (default general-purpose)."),
    )

    def describe(self, args: dict[str, Any]) -> str:
        what = args.get("description")
        agent = args.get("agent") or "general-purpose"
        return f"Subagent ({agent}): {what}" if isinstance(what, str) and what.strip() else "Subagent"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        str_arg(args, "description")
        str_arg(args, "prompt")
        if ctx.subagents is None:
            raise ToolFailure("subagents are not available here", ToolErrorType.UNAVAILABLE)
        return await ctx.subagents.run(args, ctx)


def task_tool(listing: str) -> Task:
    """The `task` tool of a session whose subagent types are `listing` (one line each)."""
    cls: type[Task] = type("Task", (Task,), {"description": f"{DESCRIPTION}\n{listing}"})
    return cls()
