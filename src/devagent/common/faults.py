"""Crash points for the kill tests.

A promise about crashes ("a pause survives", "a call runs at most once", "a write is never
half done") is tested by killing a real process exactly at the point the promise is about. The
code marks such points with `crash_point("name")`; a process started with
`DEVAGENT_CRASH_AT=name` (several names: comma-separated; `name@N`: the N-th time the point is
reached, 1 by default) sends itself SIGKILL there: no cleanup, no flush, as a power cut or an
OOM kill would.

Without the variable a crash point costs one dictionary look-up on a module constant.
"""

from __future__ import annotations

import os
import signal

_POINTS: dict[str, int] = {}
for _item in filter(None, (s.strip() for s in os.environ.get("DEVAGENT_CRASH_AT", "").split(","))):
    _name, _, _count = _item.partition("@")
    _POINTS[_name] = int(_count or 1)
_SEEN: dict[str, int] = {}


def crash_point(name: str) -> None:
    """SIGKILL this process here if `DEVAGENT_CRASH_AT` names this point (see the module doc)."""
    if not _POINTS or name not in _POINTS:
        return
    _SEEN[name] = seen = _SEEN.get(name, 0) + 1
    if seen == _POINTS[name]:
        os.kill(os.getpid(), signal.SIGKILL)
