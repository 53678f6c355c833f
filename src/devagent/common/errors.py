"""The one base of devagent's own exceptions.

Every exception class the project defines derives from `DevagentError`, so "one of ours" is one
`except` and a reader finds every kind by searching for the base. The subclasses live where they
are raised (a tool failure in `agent/tools/base.py`, a bad configuration in `config.py`, ...); this
module sits in `common/` so the store and the doors can derive from it too.

A subclass that was a `ValueError`, an `OSError` (or another built-in kind) keeps it as a second
base, so code that catches the built-in kind still catches it. One class stays outside:
`agent/tools/html_text.py` runs as a program of its own, with nothing of devagent on its path.
"""

from __future__ import annotations


class DevagentError(Exception):
    """An error devagent itself defines (see the module doc)."""
