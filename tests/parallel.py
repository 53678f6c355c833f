"""How the suite is spread over parallel processes (pytest-xdist; scripts/test runs it with
`-n 3 --dist loadfile`): a file's tests run together in one process, in their order (some share a
module's server), and the tests that drive container engines, network namespaces or workers all
run in one process, one after another: they share the engines' state (the images, a private
dockerd per process, the machine's namespaces). Those come first, being the longest unit.

xdist's own `loadgroup` would say this with markers, but it renames items through an attribute
pytest 9 no longer reads, so the grouping is a scheduler of the suite's own."""

from __future__ import annotations

from typing import Any

import pytest

SERIAL_FOLDERS = ("tests/sandbox/", "tests/workers/")
SERIAL_FILES = ("tests/replicas/test_issue40_container_replicas.py",)
ENGINES = "engines"


def unit_of(nodeid: str) -> str:
    """The unit a test runs in: the engines' one, or its file's."""
    path = nodeid.split("::", 1)[0]
    return ENGINES if path.startswith(SERIAL_FOLDERS) or path in SERIAL_FILES else path


def engines_first(items: list[pytest.Item]) -> None:
    """The engines' tests moved to the front (each process collects the same order)."""
    items.sort(key=lambda item: unit_of(item.nodeid) != ENGINES)  # stable: the rest keep their order


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return ByUnit(config, log)
