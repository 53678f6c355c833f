"""The tool descriptions a model family reads in place of the tools' own: a few, in the words the
family was trained on, and short ones for small models (whose window the definitions fill). The
rest of a definition (what the shell tool says of the sandbox, the JSON schema) stays the tool's."""

from __future__ import annotations

DESCRIPTIONS: dict[str, dict[str, str]] = {
    "openai": {
        "write_todos": "Update the plan of the current task (your `update_plan`), replacing the previous "
        "one: short steps, each `pending`, `in_progress` (at most one), `completed` or `cancelled`, "
        "the whole list each time. The user sees it. Skip it for simple one-step requests.",
    },
    "anthropic": {
        "write_todos": "Write the todo list of the current task (like TodoWrite), replacing the previous "
        "one: each item `pending`, `in_progress` (exactly one while you work) or `completed` (mark it "
        "as soon as it is done) or `cancelled`, the whole list each time. The user sees the list. "
        "Use it for tasks of three steps or more; skip it for a single simple step.",
    },
    "small": {
        "read_file": "Read a file. Each line starts with its number and a tab, which are not part of "
        "the file. Use `offset` and `limit` for part of a long file.",
        "write_file": "Write a whole file, replacing it (read it first), or create it.",
        "edit": "Replace `old_string` with `new_string` in a file. `old_string` must be copied exactly "
        "from the file and occur once (or set `replace_all`). An empty `old_string` creates the file.",
        "list_directory": "List a directory: folders (ending in `/`), then files.",
        "glob": "Find files by glob pattern, such as `**/*.py`.",
        "grep": "Search file contents with a regular expression; returns `file:line:text` lines.",
        "run_shell_command": "Run a command with `bash -c` in the workspace and return its output and "
        "exit code. There is no stdin; the command is killed after `timeout` seconds.",
        "write_todos": "Write the todo list of the current task, replacing the previous one; at most "
        "one item `in_progress`.",
        "ask_user": "Ask the user a question you cannot answer with the other tools, and wait for "
        "the answer. Offer `choices` when there are a few options.",
    },
}


def described(family: str, name: str, own: str, definition: str) -> str:
    """A tool's description for a model of `family`: `definition` (what the tool says of itself
    now) with its own part `own` in the family's words, where the family has some."""
    words = DESCRIPTIONS.get(family, {}).get(name)
    if words is None or not definition.startswith(own):
        return definition
    return words + definition[len(own) :]
