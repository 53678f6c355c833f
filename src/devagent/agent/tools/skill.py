"""The skill tool: a skill's instructions and the list of its files (`devagent.agent.tools.skill_catalog`).
Offered only to a session that has skills. It runs nothing: the files it lists are read with the
file tools (a user's skill folder is a read-only root of the session's workspace), and a skill's
scripts are run, if at all, as ordinary commands under the approval policy."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from devagent.agent.events import ToolErrorType, ToolKind
from devagent.agent.tools._util import SKIP_DIRS, in_thread, parameter, parameters_schema, str_arg, walk_files
from devagent.agent.tools.base import Tool, ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.skill_catalog import Skill, Skills
from devagent.agent.tools.workspace import Workspace

MAX_FILES = 200


class SkillTool(Tool):
    name = "skill"
    description = (
        'Load a skill listed under "Skills" in your instructions: returns its instructions, its '
        "folder and the files in it. Call it when a task matches a skill's description, before you "
        "start. Read the skill's files with read_file (by their path in the folder); run its scripts "
        "with run_shell_command, as any command."
    )
    parameters = parameters_schema(["name"], name=parameter("string", "The skill's name, as listed."))
    kind = ToolKind.READ

    def __init__(self, skills: Skills) -> None:
        self.skills = skills

    def describe(self, args: dict[str, Any]) -> str:
        return f"Load the skill {args.get('name', '')}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        name = str_arg(args, "name").strip()
        skill = self.skills.get(name)
        if skill is None:
            known = ", ".join(self.skills.names()) or "none"
            raise ToolFailure(
                f"there is no skill {name!r}; the skills are: {known}", ToolErrorType.INVALID_ARGUMENTS
            )
        files, more = await in_thread(skill_files, skill, ctx.workspace)
        listing = "\n".join(f"- {f}" for f in files) or "(none)"
        if more:
            listing += f"\n[only the first {MAX_FILES} files are listed]"
        text = (
            f'<skill name="{skill.name}" folder="{skill.folder}">\n{skill.body}\n</skill>\n\n'
            f"Files in {skill.folder} (read them with read_file as {skill.folder}/PATH):\n{listing}"
        )
        data = {"name": skill.name, "folder": str(skill.folder), "origin": skill.origin, "files": files}
        return ToolResult(text=text, data=data)


def skill_files(skill: Skill, workspace: Workspace) -> tuple[list[str], bool]:
    """The files of the skill's folder (relative paths, sorted, SKILL.md left out, hidden ones
    and those of hidden folders too) and whether there were more than MAX_FILES. A symlink is
    listed only when it resolves to a file inside the folder."""
    files: list[str] = []
    try:
        with workspace.locate(skill.folder, readable=True) as loc:
            fd = loc.open_dir()
    except (OSError, ToolFailure):
        return [], False
    try:
        walk = walk_files(fd, skill.folder, skip_dirs=SKIP_DIRS, follow_file_links=True)
        with contextlib.closing(walk):
            for entry in walk:
                rel = entry.path.relative_to(skill.folder)
                if rel.as_posix() == "SKILL.md" or any(p.startswith(".") for p in rel.parts):
                    continue
                if entry.is_link and not _inside(workspace, entry.path, skill.folder):
                    continue
                if len(files) == MAX_FILES:
                    return files, True
                files.append(rel.as_posix())
    finally:
        os.close(fd)
    return files, False


def _inside(workspace: Workspace, path: Path, folder: Path) -> bool:
    """Whether the symlink `path` leads, by the confined walk, to a file inside `folder`."""
    try:
        real = workspace.resolve(path, must_exist=True, readable=True)
    except ToolFailure:
        return False
    return real.is_relative_to(folder) and real.is_file()
