"""The worker's token kept to the worker process. It is read once from its variable, then:

- removed from the process's environment (`unsetenv`), so no program the worker starts inherits
  it (they get the clean child environment anyway, agent/sandbox/childenv.py);
- overwritten in the environment block the kernel gave the process at its start, which
  `/proc/PID/environ` shows whatever `unsetenv` did (it only drops the pointer): even a reader
  allowed to open that file finds the name with an empty value;
- guarded by the process being made non-dumpable (Linux `prctl(PR_SET_DUMPABLE, 0)`): another
  process of the same user can no longer open its `/proc/PID/environ` or `mem`, nor ptrace it, nor
  get a core dump of it (root, or CAP_SYS_PTRACE, still can; the value is already overwritten).
  A program the worker starts becomes dumpable again at its own exec, as usual.
"""

from __future__ import annotations

import ctypes
import os
import sys

PR_SET_DUMPABLE = 4


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _overwrite_initial(name: str) -> None:
    """The value of `name` in the process's initial environment block set to NUL bytes (where
    the C library still points at it there, as it does for a variable inherited at exec)."""
    libc = _libc()
    if libc is None:
        return
    libc.getenv.restype = ctypes.c_void_p
    libc.getenv.argtypes = [ctypes.c_char_p]
    libc.strlen.restype = ctypes.c_size_t
    libc.strlen.argtypes = [ctypes.c_void_p]
    where = libc.getenv(name.encode())
    if where:
        ctypes.memset(where, 0, libc.strlen(where))


def take_secret(name: str) -> str:
    """The value of the variable `name` (stripped), gone from the environment afterwards (see the
    module's doc); "" when it is not set."""
    value = os.environ.get(name, "")
    if value:
        _overwrite_initial(name)
    os.environ.pop(name, None)
    return value.strip()


def make_undumpable() -> str | None:
    """This process made non-dumpable; why not where that could not be done, else None."""
    libc = _libc()
    if libc is None:
        return "not Linux: the process stays dumpable"
    libc.prctl.restype = ctypes.c_int
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return f"prctl(PR_SET_DUMPABLE) failed: {os.strerror(ctypes.get_errno())}"
    return None
