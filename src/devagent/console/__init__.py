"""The web console (`/ui`): a page for people to watch, approve and steer the sessions of a shared
`devagent serve`.

The page is static (no build step: plain ES modules, checked in under `static/`), served with a
Content-Security-Policy that allows only its own scripts and styles. It reads sessions through
two small read-only routes here (`/ui/api/...`, which show the core's stored view of a session:
the conversation, the calls it waits on and the files it changed) and acts only through A2A
itself: approvals, follow-up prompts, slash commands, new sessions and cancels are the
development-tool extension's JSON-RPC requests to `/`, with the same bearer token, so every
action takes the one path every other client takes, on whichever replica answers.
"""

from devagent.console.routes import CONSOLE_PREFIX, console_routes, is_public_path

__all__ = ["CONSOLE_PREFIX", "console_routes", "is_public_path"]
