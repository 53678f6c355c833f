"""Edit a proposed file content in the user's editor ("edit first" at a permission prompt)."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def edit_in_editor(content: str, name: str, console: Console) -> str | None:
    """Opens `content` in $VISUAL / $EDITOR (vi by default); what the user saved, or None if the
    editor failed."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    suffix = Path(name).suffix or ".txt"
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as f:
        f.write(content)
        path = f.name
    try:
        result = subprocess.run([*shlex.split(editor), path], check=False)
        if result.returncode != 0:
            console.print(f"[red]The editor exited with {result.returncode}; nothing was changed.[/red]")
            return None
        return Path(path).read_text()
    finally:
        os.unlink(path)
