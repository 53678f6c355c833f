"""A call in words, for doors whose clients read text rather than ToolCall objects (plain A2A
clients, MCP hosts): what a waiting call wants to do, a diff's size, and a question with its
choices. One wording for every
such door, so a request reads the same wherever it is asked."""

from __future__ import annotations

from devagent.agent.events import ExecuteDetails, FileDiff, FileDiffs, McpDetails, QuestionDetails, ToolCall


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def diff_summary(d: FileDiff) -> str:
    """`+3 -1 lines` from a FileDiff's unified diff (or "new file, N lines")."""
    if d.old_content is None:
        return f"new file, {_plural(len(d.new_content.splitlines()), 'line')}"
    if "\n+++ /dev/null" in d.formatted_diff:
        return f"deleted, {_plural(len(d.old_content.splitlines()), 'line')}"
    added = removed = 0
    for line in d.formatted_diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return f"+{added} -{removed} {'line' if added + removed == 1 else 'lines'}"


def request_text(call: ToolCall) -> str:
    """What the agent wants to do, in one line ("create demo.txt (new file, 1 line)"); for a
    subagent's call, which subagent asks ("... (for the subagent “fix the tests”)")."""
    details = call.confirmation.details if call.confirmation is not None else None
    if isinstance(details, FileDiff):
        verb = "create" if details.old_content is None else "change"
        name = call.args.get("path") or call.args.get("file_path") or details.file_name
        text = f"{verb} {name} ({diff_summary(details)})"
    elif isinstance(details, FileDiffs):
        each = ", ".join(f"{d.file_name} ({diff_summary(d)})" for d in details.files)
        text = f"change {len(details.files)} files: {each}"
    elif isinstance(details, ExecuteDetails):
        text = f"run `{details.command}` in {details.working_directory}"
    elif isinstance(details, McpDetails):
        text = f"call the tool {details.tool_name} of the MCP server {details.server_name}"
    else:
        return call.description or call.name  # names its subagent already
    subagent = subagent_name(call)
    return f"{text} (for the subagent “{subagent}”)" if subagent else text


def subagent_name(call: ToolCall) -> str:
    """The description of the subagent whose call this is ("" for the session's own calls)."""
    return call.description.split(": ", 1)[0] if call.parent_call_id else ""


def question_words(q: QuestionDetails) -> str:
    """A question as text: the question, then its choices numbered, one a line."""
    return "\n".join([q.question, *(f"{n}. {c}" for n, c in enumerate(q.choices, start=1))])


def how_to_answer(q: QuestionDetails) -> str:
    """How a text answer is read (`QuestionDetails.answer_for`), in words."""
    if not q.choices:
        return "Reply with your answer."
    if q.allow_free_text:
        return "Reply with the number or the text of a choice, or answer in your own words."
    return "Reply with the number or the text of a choice."
