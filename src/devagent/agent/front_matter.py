"""Markdown files with YAML front matter (subagent types, custom slash commands): the front
matter split from the body, and a small file read through the workspace's confined walk when it
is a workspace's. The front matter is data: it is parsed with `yaml.safe_load`, never run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devagent.agent.tools.base import Workspace


def split(text: str, *, required: bool) -> tuple[dict[str, Any], str]:
    """The front matter (a mapping) and the body. Without a first line `---` the whole text is
    the body (or, when `required`, an error). ValueError says what is wrong."""
    import yaml  # late: only read when such a file exists

    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        if required:
            raise ValueError("the file starts with a line `---` and YAML front matter")
        return {}, text.lstrip("\ufeff")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise ValueError("the front matter has no closing `---` line")
    try:
        meta = yaml.safe_load("".join(lines[1:end])) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"the front matter is not valid YAML: {e}") from None
    except RecursionError:  # a repository's file nested deep enough to exhaust the stack
        raise ValueError("the front matter is nested too deeply") from None
    if not isinstance(meta, dict):
        raise ValueError("the front matter must be a mapping (key: value lines)")
    return meta, "".join(lines[end + 1 :])


def read_small(path: Path, workspace: Workspace | None, max_bytes: int) -> str:
    """A UTF-8 file of at most `max_bytes`; a workspace's through its confined walk."""
    # late: the file helpers (tools/_util) are only needed when such a folder exists
    from devagent.agent.tools._util import read_bytes

    data = read_bytes(path, workspace)
    if len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes} bytes")
    return data.decode("utf-8")
