"""The sandboxes tests run commands in, made as the core makes them: bubblewrap where it runs
here (`bwrap_or_skip`), a provider for a core (`CoreConfig(sandboxes=...)`), and a session's
sandbox over a tool context's roots (`ToolContext(sandbox=...)`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.sandbox.base import Sandbox, SandboxProvider
from devagent.agent.sandbox.choose import provider_of
from devagent.agent.sandbox.local import Bubblewrap
from devagent.agent.sandbox.none import SandboxMissing
from devagent.agent.sandbox.probe import probe_bwrap


def bwrap_or_skip(**changes: Any) -> Bubblewrap:
    """This machine's bubblewrap with `changes` (network=True, hidden=...), or the test skips."""
    probed = probe_bwrap()
    if isinstance(probed, str):
        pytest.skip(f"bubblewrap cannot run here: {probed}")
    return replace(probed, **changes) if changes else probed


def provider(choice: Bubblewrap | SandboxMissing | None) -> SandboxProvider:
    """The core's sandboxes for a choice (None: commands run directly)."""
    return provider_of(choice)


def sandbox_of(
    choice: Bubblewrap | SandboxMissing | SandboxProvider | None, roots: Sequence[Path]
) -> Sandbox:
    """A session's sandbox over `roots` for a choice or a provider."""
    chosen = choice if hasattr(choice, "for_session") else provider_of(choice)  # type: ignore[arg-type]
    return chosen.for_session("test", roots)  # type: ignore[union-attr]
