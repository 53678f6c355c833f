"""httpx patch: its command-line client left unimported.

Written for httpx 0.28.1 (`WRITTEN_FOR`, the pin in pyproject.toml). `httpx/__init__.py` imports
its own command-line client (`httpx._main`, which loads Click, Rich and Pygments) whenever those
are installed, as they are beside devagent's terminal, and defines a stub `main` when that import
fails. `skip_command_line_client` makes it fail: devagent never runs httpx's command line, and
every start-up of devagent's pays for it otherwise: importing httpx took 112 ms of CPU without
the patch, 68 ms with it (bench/library_patches.py, the least of 7 fresh processes).
"""

from __future__ import annotations

import sys

WRITTEN_FOR = "0.28.1"

COMMAND_LINE_MODULE = "httpx._main"


def skip_command_line_client() -> None:
    """Before httpx is imported: its command-line client module counts as unimportable."""
    sys.modules.setdefault(COMMAND_LINE_MODULE, None)  # type: ignore[arg-type]
