"""What `devagent acp` was started with: the server's settings and the operator's flags, shared by
the stdio start (server.py) and the SDK's side (agent.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from devagent.acp.listing import PAGE_SIZE
from devagent.common.jsonlimits import DEFAULT_MAX_DEPTH, DEFAULT_MAX_LINE_BYTES

if TYPE_CHECKING:
    from devagent.agent.api import CoreConfig


@dataclass(slots=True)
class AcpOptions:
    config: CoreConfig  # the server's settings (flags over DEVAGENT_* over the settings file)
    work_dir: Path | None = None  # the operator's workspace root; None: each session's cwd
    session_id: str | None = None  # `--session`: the first session/new continues this session
    model: str | None = None
    max_json_depth: int = DEFAULT_MAX_DEPTH
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    list_page_size: int = PAGE_SIZE  # sessions per `session/list` page (`DEVAGENT_ACP_PAGE_SIZE`)
