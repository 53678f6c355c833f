"""A setting that is a table of named tables ([mcp_servers.NAME], [remote_agents.NAME]): in the
settings file a TOML table, in an environment variable its JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def named_tables(raw: Any, what: str, items: str) -> Mapping[str, Any]:
    """`raw` (a mapping, its JSON text, or None) as a mapping; ValueError names `what` and says
    it holds `items` by name."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as e:
            raise ValueError(f"{what}: not valid JSON ({e})") from None
    if not isinstance(raw, Mapping):
        raise ValueError(f"{what} must be a table of {items} by name")
    return raw
