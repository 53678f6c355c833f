"""What devagent's MCP server tells a host about itself in `initialize` (the SDK's server and the
fast start's own answer say the same)."""

INSTRUCTIONS = (
    "devagent is a coding agent with its own workspace. Give it a task with devagent_start; "
    "it reads, edits and runs commands in the workspace, asking permission where its policy "
    "says, and returns its answer, the files it changed and a session id. Go on with "
    "devagent_continue (a new prompt, or the answer to a permission it waits for)."
)
