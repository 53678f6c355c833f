"""Real files in Claude Code's formats (custom commands, agent types, skills, a plugin's hooks),
MIT-licensed public files described by the README beside them. They live outside the repository
and are never copied into it: `$DEVAGENT_CLAUDE_FORMATS` when set, else the first
`shared/data/claude-formats/` found in a folder above the checkout (`../shared/data/...` beside a
clone, as CI has it), else this machine's `/work/shared/data/claude-formats/`. Tests that need them
are marked `needs_data` and skip when they are missing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_IN_SHARED = Path("shared", "data", "claude-formats")
# Where the files are looked for, in order, when $DEVAGENT_CLAUDE_FORMATS is not set.
PLACES = (*(folder / _IN_SHARED for folder in ROOT.parents), Path("/work") / _IN_SHARED)


def _data() -> Path:
    if named := os.environ.get("DEVAGENT_CLAUDE_FORMATS"):
        return Path(named)
    return next((p for p in PLACES if (p / "README.md").is_file()), PLACES[0])


DATA = _data()
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"the real Claude Code files are not at {DATA}")


def copy_into(config_dir: Path, kind: str) -> Path:
    """The `kind` folder (commands, agents, skills) of devagent's config folder `config_dir`,
    holding the real files: copied into the test's temporary folder, since devagent reads a user's
    command and type files following no link."""
    return Path(shutil.copytree(DATA / kind, config_dir / kind))
