"""common/late_import.py: the core's heavy modules imported late by two threads at once (a door's
loading thread and its event loop's first message) wait for each other instead of racing into a
half-run module (issue 39: start-up moved the threads' timing, and CI met such a race)."""

from __future__ import annotations

import sys
import threading
import types
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from devagent.common.late_import import late_import


@pytest.fixture
def package(tmp_path: Path) -> Iterator[tuple[str, types.ModuleType]]:
    """A package whose `__init__` imports its module `b` and `b` imports the package back (the
    shape of uvicorn's `__init__` and `main`), and a gate module with the events its code waits
    on; both forgotten afterwards."""
    name = f"late_{uuid.uuid4().hex[:8]}"
    gate = types.ModuleType(f"{name}_gate")
    gate.a_in = threading.Event()  # type: ignore[attr-defined]
    gate.b_running = threading.Event()  # type: ignore[attr-defined]
    gate.release = threading.Event()  # type: ignore[attr-defined]
    sys.modules[gate.__name__] = gate
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text(
        f"import {gate.__name__} as gate\n"
        "gate.a_in.set()\n"
        # long enough for `b` to start in a thread that does not wait for this import (which is
        # what would break); a thread that does wait never sets it, and this goes on after 1 s
        "gate.b_running.wait(1)\n"
        "from .b import VALUE\n"
        "READY = True\n"
    )
    (root / "b.py").write_text(
        f"import {gate.__name__} as gate\ngate.b_running.set()\nimport {name}\nVALUE = 1\n"
    )
    (root / "slow.py").write_text(f"import {gate.__name__} as gate\ngate.release.wait(60)\nDONE = True\n")
    sys.path.insert(0, str(tmp_path))
    try:
        yield name, gate
    finally:
        gate.release.set()
        sys.path.remove(str(tmp_path))
        for key in [k for k in sys.modules if k.startswith(name)]:
            del sys.modules[key]


def _in_thread(target: str, results: dict[str, object]) -> threading.Thread:
    def run() -> None:
        try:
            results[target] = late_import(target)
        except BaseException as e:  # what the thread met is the finding
            results[target] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_issue39_a_cycle_entered_from_both_ends_by_two_threads_gives_both_whole_modules(
    package: tuple[str, types.ModuleType],
) -> None:
    name, gate = package
    results: dict[str, object] = {}
    first = _in_thread(name, results)
    assert gate.a_in.wait(60)  # the package's __init__ runs, in the first thread
    second = _in_thread(f"{name}.b", results)
    first.join(60)
    second.join(60)
    assert not first.is_alive() and not second.is_alive()
    package_module, b = results[name], results[f"{name}.b"]
    assert isinstance(package_module, types.ModuleType), package_module
    assert isinstance(b, types.ModuleType), b
    assert package_module.READY is True and b.VALUE == 1


def test_issue39_a_complete_module_is_returned_while_another_thread_imports(
    package: tuple[str, types.ModuleType],
) -> None:
    name, gate = package
    results: dict[str, object] = {}
    slow = _in_thread(f"{name}.slow", results)  # holds the late-import lock until released
    reader = _in_thread("json", results)  # loaded long ago: no wait for the slow import
    reader.join(60)
    assert not reader.is_alive() and results["json"] is sys.modules["json"]
    later: dict[str, object] = {}
    waiting = _in_thread(f"{name}.slow", later)  # the same module, half-run: waits, then finds it whole
    gate.release.set()
    slow.join(60)
    waiting.join(60)
    assert getattr(results[f"{name}.slow"], "DONE", False) is True
    assert getattr(later[f"{name}.slow"], "DONE", False) is True
