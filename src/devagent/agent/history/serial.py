"""Stored forms of the core's tool-call pieces (confirmation requests, outputs)."""

from __future__ import annotations

import dataclasses
from typing import Any

from devagent.agent.events import (
    ConfirmationDetails,
    ConfirmationRequest,
    ExecuteDetails,
    FileDiff,
    FileDiffs,
    GenericDetails,
    McpDetails,
    PermissionOption,
    QuestionDetails,
    ToolOutput,
)
from devagent.agent.state import CallResult

_DETAIL_KINDS: dict[str, type[Any]] = {
    "execute": ExecuteDetails,
    "file_edit": FileDiff,
    "file_edits": FileDiffs,
    "mcp": McpDetails,
    "generic": GenericDetails,
    "question": QuestionDetails,
}


def details_kind(details: ConfirmationDetails) -> str:
    for kind, cls in _DETAIL_KINDS.items():
        if isinstance(details, cls):
            return kind
    raise TypeError(f"unknown confirmation details {type(details).__name__}")


def confirmation_to_json(c: ConfirmationRequest) -> dict[str, Any]:
    return {
        "options": [dataclasses.asdict(o) for o in c.options],
        "details": {"kind": details_kind(c.details), **dataclasses.asdict(c.details)},
    }


def confirmation_from_json(d: dict[str, Any]) -> ConfirmationRequest:
    details = dict(d["details"])
    cls = _DETAIL_KINDS[details.pop("kind")]
    return ConfirmationRequest(
        options=[PermissionOption(**o) for o in d["options"]],
        details=diff_from_json(details) if cls is FileDiffs else cls(**details),
    )


def diff_from_json(d: dict[str, Any]) -> FileDiff | FileDiffs:
    """A stored diff: one file's fields, or `files` holding several."""
    if "files" in d:
        return FileDiffs([FileDiff(**f) for f in d["files"]])
    return FileDiff(**d)


def output_from_result(r: CallResult) -> ToolOutput:
    return ToolOutput(text=r.text, diff=diff_from_json(r.diff) if r.diff else None, data=r.data)
