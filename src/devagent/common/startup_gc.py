"""Python's cyclic garbage collector while a process starts: off while it imports, then frozen.

A door's start imports about 1,500 modules: some 200,000 objects (modules, classes, functions
and their dicts) that live as long as the process. While they are made, the collector runs again
and again (a young pass every 700 new objects, full passes over all of them as the heap grows)
and finds almost nothing: a full collection once the A2A server's modules are imported frees about
1,100 objects of those 200,000. That work was ~15% of the imports' CPU (median of 8 interleaved
runs importing the A2A server, the core and the provider layer: 1,030 ms with it on, 855 ms off).

So `quiet()`, the first thing `devagent`'s entry point does, turns the collector off, and
`settled()`, once the process has loaded what it serves with, turns it back on after
`gc.freeze()`: every object alive then moves to the permanent generation, which no collection
walks again, so the full collections a long-running server makes later walk only what it made
while working. What freezing costs: the few import-time objects that are cyclic garbage stay
(about a thousand; reference counting still frees everything else as it always does).

The collector is never off for long: without a `settled()` (a short command, or a door that does
not say when it is ready) a timer thread calls it `SETTLE_WITHIN` seconds after `quiet()`. Python
code that calls `gc.disable()` or `gc.enable()` itself is left alone: `settled()` only turns on
what `quiet()` turned off."""

from __future__ import annotations

import gc
import threading

SETTLE_WITHIN = 10.0  # seconds: the longest the collector stays off after `quiet()`

_lock = threading.Lock()
_quieted = False
_timer: threading.Timer | None = None


def quiet() -> None:
    """Turn the collector off for the process's start (if it is on), until `settled()`."""
    global _quieted, _timer
    with _lock:
        if _quieted or not gc.isenabled():
            return
        gc.disable()
        _quieted = True
        _timer = threading.Timer(SETTLE_WITHIN, settled)
        _timer.daemon = True
        _timer.name = "devagent-gc-settle"
        _timer.start()


def settled() -> None:
    """The process has loaded what it serves with: freeze what is alive, turn the collector on
    again. Does nothing unless `quiet()` turned it off (and only once)."""
    global _quieted, _timer
    with _lock:
        if not _quieted:
            return
        _quieted = False
        timer, _timer = _timer, None
        gc.freeze()
        gc.enable()
    if timer is not None and timer is not threading.current_thread():
        timer.cancel()


def quieted() -> bool:
    """Whether the collector is off since `quiet()`, waiting for `settled()`."""
    return _quieted
