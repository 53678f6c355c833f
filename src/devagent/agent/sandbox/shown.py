"""Folders outside the workspace a sandboxed command is shown, read-only: the user's skill folders
(their scripts run as commands, while the sandbox hides the config folder that holds them), never
one that holds what devagent keeps away."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

USER_SKILLS = "skills"  # the skills folder in the user's config folder
SKILL_FILE = "SKILL.md"


def user_folders(config_dir: Path) -> list[Path]:
    """The real folders in the user's skills folder that hold a SKILL.md, unchecked: what the
    shell sandbox, which hides the config folder, shows read-only so that their scripts run."""
    folder = config_dir / USER_SKILLS
    try:
        names = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    except OSError:
        return []
    real = [Path(os.path.realpath(folder / name)) for name in names]
    return [p for p in real if (p / SKILL_FILE).is_file()]


def not_holding(folders: Iterable[Path], kept_away: Iterable[Path]) -> tuple[Path, ...]:
    """The folders that hold none of `kept_away` (devagent's settings and data, the home folder,
    key folders): a skill linked to such a folder opens it neither to the file tools nor to the
    sandbox."""
    away = list(kept_away)
    return tuple(f for f in folders if not any(p.is_relative_to(f) for p in away))
