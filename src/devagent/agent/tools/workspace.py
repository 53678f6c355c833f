"""A session's workspace roots as the file tools see them: how a path a tool is given resolves
inside them, and the confined walk every file operation goes through."""

from __future__ import annotations

import os
from pathlib import Path

from devagent.agent.events import ToolErrorType
from devagent.agent.sandbox.confine import Located, Outside, locate
from devagent.agent.tools.failure import ToolFailure


class Workspace:
    """The workspace roots of a session. Relative paths are taken from the first root; a path
    that leaves every root, directly, by `..` or through a symlink, is refused.

    Every file tool opens files through `locate`: the path is walked from an open
    descriptor of a root, symlinks inside the workspace followed by that same rule, and the result
    is the open parent directory, so the final open (O_NOFOLLOW) or rename happens relative to a
    directory that is certainly inside, whatever is swapped meanwhile (`_confine`). `resolve` gives
    the real path a string names, for display and to name the file again later; it is never
    opened as a string.

    Beside the roots, `read_only_roots`: folders the session may read through `read_file` but
    never write (the saved whole output of its long commands, under the data directory which the
    sandbox hides; the user's skill folders, which it shows read-only). Only the reads that ask for
    them (`readable=True`) reach them; a write there is refused."""

    def __init__(
        self, roots: list[Path], protected: tuple[Path, ...] = (), read_only_roots: tuple[Path, ...] = ()
    ) -> None:
        if not roots:
            raise ValueError("a workspace needs at least one root")
        self.roots = [Path(os.path.realpath(r)) for r in roots]
        self.read_only_roots = [Path(os.path.realpath(r)) for r in read_only_roots]
        # What configures devagent or holds its state (CoreConfig.protected_paths, real paths):
        # never written by a tool, whatever the approval mode.
        self.protected = protected

    @property
    def primary(self) -> Path:
        return self.roots[0]

    def absolute(self, path: str | Path) -> Path:
        """A path argument made absolute (from the first root), checked for the obvious mistakes."""
        if isinstance(path, Path):
            return path if path.is_absolute() else self.primary / path
        if not isinstance(path, str) or not path.strip():
            raise ToolFailure("a path is required", ToolErrorType.INVALID_ARGUMENTS)
        if "\x00" in path:
            raise ToolFailure("the path contains a NUL byte", ToolErrorType.INVALID_ARGUMENTS)
        p = Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)
        return p if p.is_absolute() else self.primary / p

    def _outside(self, path: str | Path, readable: bool) -> ToolFailure:
        if not readable and self.in_read_only_root(path):
            return self._read_only(path)
        return ToolFailure(
            f"path {str(path)!r} is outside the workspace roots ({', '.join(map(str, self.roots))})",
            ToolErrorType.PATH_OUTSIDE_WORKSPACE,
        )

    @staticmethod
    def _read_only(path: str | Path) -> ToolFailure:
        return ToolFailure(
            f"{str(path)!r} is read-only: read it with read_file; no tool writes there",
            ToolErrorType.READ_ONLY_PATH,
        )

    def in_read_only_root(self, path: str | Path) -> bool:
        """Whether `path` names something in a read-only root (by its words: a file there is
        still opened through the confined walk)."""
        try:
            p = Path(os.path.normpath(self.absolute(path)))
        except ToolFailure:
            return False
        return any(p.is_relative_to(r) for r in self.read_only_roots)

    def locate(
        self, path: str | Path, *, create_dirs: bool = False, missing_ok: bool = False, readable: bool = False
    ) -> Located:
        """The open parent directory of `path` and its final name (see `_confine.locate`); the
        caller closes it. Refused with a ToolFailure when the path leaves the roots (with
        `readable`, the read-only roots count as roots); other OSErrors (a missing parent
        directory, a symlink loop) are the caller's to word."""
        roots = [*self.roots, *self.read_only_roots] if readable else self.roots
        try:
            return locate(roots, self.absolute(path), create_dirs=create_dirs, missing_ok=missing_ok)
        except Outside as e:
            raise self._outside(path, readable) from e

    def resolve(self, path: str | Path, *, must_exist: bool = False, readable: bool = False) -> Path:
        """The real path `path` names inside the roots (symlinks inside followed, by the rule of
        `locate`; with `readable`, the read-only roots too), or a ToolFailure."""
        try:
            with self.locate(path, missing_ok=True, readable=readable) as loc:
                exists = loc.lstat() is not None
                real = loc.path
        except OSError as e:
            raise ToolFailure(f"{str(path)!r}: {e.strerror or e}", ToolErrorType.OS_ERROR) from e
        if must_exist and not exists:
            raise ToolFailure(f"{str(path)!r} does not exist", ToolErrorType.NOT_FOUND)
        return real

    def check_writable(self, real: Path, shown: str | Path | None = None) -> None:
        """A ToolFailure when a tool may not change the file at the real path `real`, in any
        approval mode: devagent's own configuration and state (its settings file,
        data folder, database), and git's own files (`.git/`: its config and hooks choose programs
        that later `git` commands run, which would turn an edit into running code), and a file
        named `HEAD`: with it, `config`, `objects/` and `refs/` make any folder a git directory
        whose configuration git would read."""
        what = str(shown if shown is not None else self.display(real))
        if any(real.is_relative_to(r) for r in self.read_only_roots):
            raise self._read_only(what)
        for p in self.protected:
            if real == p or real.is_relative_to(p):
                raise ToolFailure(
                    f"{what!r} configures devagent or holds its data; no tool may change it",
                    ToolErrorType.PROTECTED_PATH,
                )
        inside = next((real.relative_to(r) for r in self.roots if real.is_relative_to(r)), None)
        if inside is not None and ".git" in inside.parts:
            raise ToolFailure(
                f"{what!r} is inside a .git directory, which only git itself may change: "
                "use git commands (run_shell_command) instead",
                ToolErrorType.PROTECTED_PATH,
            )
        if inside is not None and inside.name == "HEAD":
            raise ToolFailure(
                f"{what!r}: a file named HEAD makes its folder a git directory, which only git "
                "itself may create: use git commands (run_shell_command) instead",
                ToolErrorType.PROTECTED_PATH,
            )

    def display(self, path: Path) -> str:
        """A path as the user should read it: relative to its root where possible."""
        for root in self.roots:
            if path == root:
                return "."
            if path.is_relative_to(root):
                return str(path.relative_to(root))
        return str(path)

    def contains(self, path: Path) -> bool:
        """Whether `path` resolves inside the roots (by the rule of `locate`)."""
        try:
            self.resolve(path)
        except ToolFailure as e:
            return e.type != ToolErrorType.PATH_OUTSIDE_WORKSPACE
        return True
