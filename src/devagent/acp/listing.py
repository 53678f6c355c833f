"""`session/list`: the stored sessions an editor may open, as ACP's `SessionInfo`s, a page at a time
(plain JSON, standard library only; `agent.py` reads the rows from the store and validates the answer).

Listed are the local user's sessions (identity "": the terminal's and every stdio door's, never a
server caller's), top-level ones (a subagent's session is its parent's business), that were prompted
at least once (an editor opens a session whenever its agent panel opens: one left empty has nothing
to show), and, when `devagent acp` has a `--work-dir`, only those of that folder. The most recently
active come first, ties by id. `cwd` keeps the sessions whose workspace root is that folder.

The cursor is opaque to the editor: it names the last session of the page (its last activity and
id) and the `cwd` it was listed for, and the next page starts after it. A session that is active
between two pages moves to the top and is not listed again further down; one made in between is on
a new first page. A cursor devagent did not give, or given for another `cwd`, is refused.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from devagent.common.errors import DevagentError

JSON = dict[str, Any]

# Sessions per page when the operator sets none (`DEVAGENT_ACP_PAGE_SIZE`).
PAGE_SIZE = 50


class ListingError(DevagentError, ValueError):
    """A `session/list` request that cannot be answered: a relative `cwd`, a bad cursor."""


@dataclass(frozen=True, slots=True)
class Listed:
    """One session as the list shows it."""

    id: str
    cwd: str  # its first workspace root
    title: str
    updated: float  # last activity, seconds since the epoch

    def key(self) -> tuple[float, str]:
        """Its place in the list: the most recent first, then by id."""
        return (-self.updated, self.id)

    def info(self) -> JSON:
        when = iso_time(self.updated)
        return {"sessionId": self.id, "cwd": self.cwd, "title": self.title, "updatedAt": when}


def visible(rows: Iterable[tuple[str, dict[str, Any], float]], work_dir: Path | None) -> list[Listed]:
    """The store's rows (id, state, last activity) this editor may see, in the list's order."""
    only = str(work_dir) if work_dir is not None else None
    out: list[Listed] = []
    for sid, state, updated in rows:
        roots = state.get("workspace_roots") or []
        if state.get("identity") or state.get("subagent_of") or not state.get("title") or not roots:
            continue
        if only is not None and roots[0] != only:
            continue
        out.append(Listed(sid, str(roots[0]), str(state["title"]), float(updated)))
    return sorted(out, key=Listed.key)


def page(sessions: list[Listed], *, cwd: str | None, cursor: str | None, size: int) -> JSON:
    """The `session/list` answer: the page of `sessions` (in the list's order) after `cursor`,
    of those in `cwd` when one is given, and the cursor of the next page when there is one."""
    want = _folder(cwd)
    if want is not None:
        sessions = [s for s in sessions if s.cwd == want]
    if cursor:
        after = _read_cursor(cursor, want or "")
        sessions = [s for s in sessions if s.key() > after]
    shown = sessions[:size]
    result: JSON = {"sessions": [s.info() for s in shown]}
    if len(sessions) > size:
        result["nextCursor"] = _make_cursor(shown[-1], want or "")
    return result


def iso_time(seconds: float) -> str:
    """ISO 8601 in UTC to the second: 2026-03-01T09:30:00Z."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _folder(cwd: str | None) -> str | None:
    """The filter as the store keeps workspace roots (absolute, links resolved)."""
    if not cwd:
        return None
    if not os.path.isabs(cwd):
        raise ListingError(f"cwd must be an absolute path, not {cwd!r}")
    return str(Path(cwd).resolve())


def _make_cursor(last: Listed, cwd: str) -> str:
    raw = json.dumps([last.updated, last.id, cwd], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _read_cursor(cursor: str, cwd: str) -> tuple[float, str]:
    """The place after which the page starts (as `Listed.key`)."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        updated, sid, listed_for = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise ListingError("the cursor is not one devagent gave (start again without it)") from None
    if not isinstance(updated, int | float) or not isinstance(sid, str) or not isinstance(listed_for, str):
        raise ListingError("the cursor is not one devagent gave (start again without it)")
    if listed_for != cwd:
        raise ListingError("the cursor was given for another cwd (start again without it)")
    return (-float(updated), sid)
