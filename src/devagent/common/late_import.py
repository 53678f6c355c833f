"""Late imports of heavy modules, one thread at a time.

A door loads the core's heavy modules in a thread while its event loop goes on answering
(`devagent.agent.api.load_core`), and the loop may need one of those modules meanwhile: a first
message asks for a session before the thread is done. Python's import locks are per module, so two
threads that enter one import cycle from different ends (pydantic-ai and its providers have many)
wait on each other, and the import system breaks that wait by handing one of them a half-run module
("cannot import name ... from partially initialized module ..."). Every late import of the core's
modules goes through `late_import`, which holds one lock for the whole import: a second thread
waits for the first one's import to end (time it would have spent importing anyway) and then finds
the module complete. A module already complete is returned without the lock, so a reader of a
loaded module never waits for another thread's import.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

_ONE_AT_A_TIME = threading.RLock()  # re-entrant: a late import may import another late


def _complete(module: ModuleType | None) -> bool:
    # `__spec__._initializing` is the flag the import system itself sets while a module's code
    # runs, and reads to decide whether an importer must wait for it: the same test, here.
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


def late_import(name: str) -> ModuleType:
    """The module `name`, imported now if it is not yet, while no other late import runs."""
    module = sys.modules.get(name)
    if _complete(module):
        assert module is not None
        return module
    with _ONE_AT_A_TIME:
        return importlib.import_module(name)
