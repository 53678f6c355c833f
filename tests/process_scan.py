"""Looking for processes from outside, as a user would: by what their command line holds."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import process_ended


def running(marker: str, *, argument: bool = False) -> list[int]:
    """The live processes (zombies left out) whose command line holds `marker` (`argument`: as one
    whole argument), found in /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        hit = marker.encode() in (cmdline.split(b"\0") if argument else cmdline)
        if hit and not process_ended(int(entry)):
            found.append(int(entry))
    return found
