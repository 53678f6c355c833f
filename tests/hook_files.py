"""Hooks files for the tests (Claude Code's format): the pieces, a file of them, a settings file
naming it, and a hook that logs the events it reads (`hook_logger.py`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

LOGGER = Path(__file__).with_name("hook_logger.py")


def command(text: str, **more: Any) -> dict[str, Any]:
    return {"type": "command", "command": text, **more}


def group(matcher: str, *commands: dict[str, Any]) -> dict[str, Any]:
    return {"matcher": matcher, "hooks": list(commands)}


def blocking(matcher: str, reason: str) -> dict[str, Any]:
    """A group whose hook blocks with exit 2 and `reason` on stderr."""
    return group(matcher, command(f"echo '{reason}' >&2; exit 2"))


def logger(log: Path) -> dict[str, Any]:
    """A hook appending `[event, what it is about]` to `log`, a JSON line per event."""
    return command(f"{sys.executable} {LOGGER} >> {log}")


def logged(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def write_hooks(tmp_path: Path, hooks: dict[str, Any], *, settings_file: bool = False) -> Path:
    """hooks.json in `tmp_path` with `hooks` (inside a whole Claude Code settings file when
    `settings_file`, else the hooks object alone)."""
    path = tmp_path / "hooks.json"
    path.write_text(json.dumps({"permissions": {"allow": []}, "hooks": hooks} if settings_file else hooks))
    return path


def settings_with_hooks(tmp_path: Path, hooks: dict[str, Any], *, settings_file: bool = False) -> Path:
    """A devagent settings file (config.toml) whose `hooks_file` holds `hooks`."""
    settings = tmp_path / "config.toml"
    settings.write_text(f'hooks_file = "{write_hooks(tmp_path, hooks, settings_file=settings_file)}"\n')
    return settings
