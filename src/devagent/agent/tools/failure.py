"""The failure a tool reports to the model: a message it should read and may recover from, with
its type (`ToolErrorType`, which the doors carry to clients)."""

from __future__ import annotations

from devagent.agent.events import ToolErrorType
from devagent.common.errors import DevagentError


class ToolFailure(DevagentError):
    """A tool call failed in a way the model should read and may recover from."""

    def __init__(self, message: str, type: ToolErrorType = ToolErrorType.TOOL_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.type = type
