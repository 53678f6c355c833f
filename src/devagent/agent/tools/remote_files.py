"""The file tools over a sandbox whose workspace is not a folder of this host (`Sandbox.files_here`
is False: a container's own volume, a worker on another machine). It is the session's file backend
(`ToolBackends.files`, the seam an editor's buffers use too), so read_file, write_file, edit and
apply_patch reach the files through it; list_directory, glob, grep and read_many_files ask it for
walks and contents. Nothing here opens a path of this host.

Paths keep the names the session knows (under its first workspace root; the sandbox maps them to
its own, `Sandbox.show_path`). A path is first checked by its words (no `..` or absolute path
leaves the root); then the sandbox's own file operations resolve it inside, symbolic links
included, and refuse what leads out. What changes a file is also checked against the sandbox's
real path of it (`real`), so a link cannot carry a write into `.git/`. Walks and bulk reads are
small POSIX commands run in the sandbox (`find`, `tar`, `realpath`: a minimal Debian has them):
one command per walk or batch, never one per file."""

from __future__ import annotations

import io
import os
import shlex
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Protocol

from devagent.agent.events import ToolErrorType
from devagent.agent.sandbox.base import Limits, SandboxError, Streams
from devagent.agent.sandbox.confine import TEMP_PREFIX
from devagent.agent.tools.backends import ToolBackends
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace

if TYPE_CHECKING:
    from devagent.agent.sandbox.base import Sandbox

COMMAND_SECONDS = 60.0  # a walk or a batch read that takes longer is stopped (a hang guard)
OUTPUT_LIMIT = 2**20
FETCH_MAX_BYTES = 64 * 1024 * 1024  # what one batch read brings over at most

# The folder `$2` resolved inside (symbolic links followed), refused outside the workspace `$1`,
# then entered; the rest of the script runs there. Exit 2: missing; 3: outside; 6: not a folder.
_ENTER = r"""root=$1; p=$(realpath -m -- "$2") || exit 3; shift 2
case "$p" in "$root"|"$root"/*) ;; *) echo "outside the workspace" >&2; exit 3;; esac
[ -e "$p" ] || exit 2; [ -d "$p" ] || exit 6; cd -- "$p" || exit 2
"""
# Each entry: its type, its target's type (links), size, mtime, and path from the folder.
WALK = _ENTER + r"""exec find . "$@" -printf '%y %Y %s %T@ %P\0'"""
# The named files (relative, NUL-separated on the input) as a tar stream; links stay links.
FETCH = _ENTER + "exec tar --null --verbatim-files-from --no-recursion -T - -cf -"
# The real path of each argument (NUL-separated), "" for one that cannot be resolved.
REAL = r"""for a; do realpath -m -z -- "$a" 2>/dev/null || printf '\0'; done"""


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry a walk found: `kind` as find's %y (f, d, l...), `target` its link's target kind
    (as %Y: N for a dangling link), its size, mtime and path from the walk's folder."""

    kind: str
    target: str
    size: int
    mtime: float
    rel: str


class _WithBackends(Protocol):
    """What `remote_files` reads of a tool's context (`ToolContext`)."""

    @property
    def backends(self) -> ToolBackends: ...


def remote_files(ctx: _WithBackends) -> SandboxFiles | None:
    """The session's files through its sandbox, when they are not on this host; else None (the
    tools work on the folder here, as always)."""
    files = ctx.backends.files
    return files if isinstance(files, SandboxFiles) else None


class SandboxFiles:
    """A `FileBackend` (and more) over a sandbox whose workspace is elsewhere."""

    def __init__(self, sandbox: Sandbox, workspace: Workspace) -> None:
        self.sandbox = sandbox
        self.workspace = workspace
        self.root = workspace.primary
        self.inside_root = PurePosixPath(sandbox.show_path(self.root))

    # --- paths ---------------------------------------------------------------------------------

    def resolve(self, path: str | Path, *, must_exist: bool = False) -> Path:
        """The path a tool argument names under the first root, by its words; a path that leaves
        it is refused (other roots are not in the sandbox). `must_exist` is the caller's to check."""
        del must_exist
        p = Path(os.path.normpath(self.workspace.absolute(path)))
        if p == self.root or p.is_relative_to(self.root):
            return p
        named = self.outside(str(p))  # the sandbox's own name of it (`/workspace/...`)
        if named is not None:
            return named
        raise ToolFailure(
            f"path {str(path)!r} is outside the workspace ({self.root}, {self.inside_root} in the "
            "session's sandbox)",
            ToolErrorType.PATH_OUTSIDE_WORKSPACE,
        )

    def inside(self, path: Path) -> str:
        return self.sandbox.show_path(path)

    def outside(self, inside: str) -> Path | None:
        """The session's name for a path inside the sandbox, None when it is not in the workspace."""
        p = PurePosixPath(inside)
        if p == self.inside_root:
            return self.root
        if p.is_relative_to(self.inside_root):
            return self.root / p.relative_to(self.inside_root)
        return None

    async def real(self, paths: Sequence[Path]) -> list[Path | None]:
        """Each path's real path, resolved inside the sandbox (None: it leads out)."""
        code, out, err = await self.run(REAL, [self.inside(p) for p in paths])
        if code != 0:
            raise ToolFailure(
                f"the sandbox could not resolve the paths: {_said(err)}", ToolErrorType.OS_ERROR
            )
        found = out.split(b"\0")[: len(paths)]
        return [self.outside(r.decode(errors="surrogateescape")) if r else None for r in found]

    async def checked_real(self, path: Path, shown: str | Path) -> Path:
        """`path`'s real path for a change: refused when it leads out or names what no tool may
        change (`Workspace.check_writable`, by the words and by the real path)."""
        self.workspace.check_writable(path, shown)
        (real,) = await self.real([path])
        if real is None:
            raise ToolFailure(
                f"{str(shown)!r} leads outside the workspace (a symbolic link)",
                ToolErrorType.PATH_OUTSIDE_WORKSPACE,
            )
        self.workspace.check_writable(real, shown)
        return real

    # --- files ---------------------------------------------------------------------------------

    async def read_bytes(self, path: Path, shown: str | Path | None = None) -> bytes:
        try:
            return await self.sandbox.read_bytes_async(path)
        except (OSError, SandboxError) as e:
            raise failure(e, shown if shown is not None else self.workspace.display(path)) from e

    async def read_text(self, path: Path) -> str | None:
        """The file's text (invalid UTF-8 replaced), None when there is no such file."""
        try:
            data = await self.sandbox.read_bytes_async(path)
        except FileNotFoundError:
            return None
        except (OSError, SandboxError) as e:
            raise failure(e, self.workspace.display(path)) from e
        return data.decode("utf-8", errors="replace")

    async def write_text(self, path: Path, content: str) -> None:
        await self.write_bytes(path, content.encode("utf-8", errors="surrogatepass"))

    async def write_bytes(self, path: Path, data: bytes) -> None:
        try:
            await self.sandbox.write_atomic_async(path, data)
        except (OSError, SandboxError) as e:
            raise failure(e, self.workspace.display(path)) from e

    async def stat(self, path: Path) -> os.stat_result | None:
        try:
            return await self.sandbox.stat_async(path)
        except FileNotFoundError:
            return None
        except (OSError, SandboxError) as e:
            raise failure(e, self.workspace.display(path)) from e

    async def delete(self, path: Path) -> None:
        """Removes the file; a missing one is fine."""
        try:
            await self.sandbox.delete_async(path)
        except FileNotFoundError:
            return
        except (OSError, SandboxError) as e:
            raise failure(e, self.workspace.display(path)) from e

    # --- walks and batches, as commands in the sandbox ----------------------------------------------

    async def walk(self, folder: Path, find_args: Sequence[str], shown: str) -> list[Entry]:
        """The entries `find` gives under `folder` (after `find_args`: prunes, depth)."""
        code, out, err = await self.run(WALK, [str(self.inside_root), self.inside(folder), *find_args])
        if code != 0:
            raise _walk_failure(code, err, shown)
        entries = []
        for record in out.split(b"\0"):
            parts = record.decode(errors="surrogateescape").split(" ", 4)
            if len(parts) != 5 or not parts[4]:
                continue
            kind, target, size, mtime, rel = parts
            if rel.rsplit("/", 1)[-1].startswith(TEMP_PREFIX):
                continue
            entries.append(Entry(kind, target, int(size or 0), float(mtime or 0), rel))
        return entries

    async def fetch(self, folder: Path, rels: Sequence[str]) -> tuple[dict[str, bytes], bool]:
        """The regular files `rels` (relative to `folder`) read in one batch: what was read, and
        whether some were left out (over FETCH_MAX_BYTES, or not regular files any more)."""
        if not rels:
            return {}, False
        listing = b"".join(b"./" + r.encode(errors="surrogateescape") + b"\0" for r in rels)
        code, out, err = await self.run(FETCH, [str(self.inside_root), self.inside(folder)], listing)
        if code not in (0, 1, 2) or not out:  # tar's 1 and 2: some file changed or vanished meanwhile
            raise _walk_failure(code, err, self.workspace.display(folder))
        import tarfile  # late: only a batch read needs it

        got: dict[str, bytes] = {}
        with tarfile.open(fileobj=io.BytesIO(out), mode="r:") as archive:
            for member in archive:
                if not member.isreg():
                    continue
                data = archive.extractfile(member)
                if data is not None:
                    got[member.name.removeprefix("./")] = data.read()
        return got, len(got) < len(rels)

    async def run(
        self, script: str, args: Sequence[str], data: bytes | None = None
    ) -> tuple[int, bytes, bytes]:
        """`sh -c script` with `args` in the sandbox, at the workspace's root: its exit code,
        output and errors."""
        command = shlex.join(["sh", "-c", script, "sh", *args])
        try:
            started = await self.sandbox.start(
                command,
                cwd=str(self.root),
                env={},
                limits=Limits(timeout=COMMAND_SECONDS),
                stdin="pipe" if data is not None else "closed",
                streams=Streams(errors=True, limit=OUTPUT_LIMIT),
            )
        except SandboxError as e:
            raise ToolFailure(f"the session's sandbox cannot run this: {e}", ToolErrorType.OS_ERROR) from e
        out, err = await started.proc.communicate(data)
        return started.proc.returncode or 0, out, err


def failure(e: BaseException, shown: str | Path) -> ToolFailure:
    """A sandbox file operation's failure as the model should read it."""
    what = str(shown)
    if "outside the workspace" in str(e):
        return ToolFailure(
            f"{what!r} leads outside the workspace (a symbolic link or a path out of it)",
            ToolErrorType.PATH_OUTSIDE_WORKSPACE,
        )
    if isinstance(e, FileNotFoundError):
        return ToolFailure(f"{what!r} does not exist", ToolErrorType.NOT_FOUND)
    if isinstance(e, IsADirectoryError):
        return ToolFailure(
            f"{what!r} is a directory; use list_directory or glob to see its files",
            ToolErrorType.IS_DIRECTORY,
        )
    if isinstance(e, NotADirectoryError):
        return ToolFailure(f"{what!r} is not a directory", ToolErrorType.NOT_A_DIRECTORY)
    return ToolFailure(f"{what!r}: {e}", ToolErrorType.OS_ERROR)


def _walk_failure(code: int, err: bytes, shown: str) -> ToolFailure:
    if code == 2:
        return ToolFailure(f"{shown!r} does not exist", ToolErrorType.NOT_FOUND)
    if code == 3:
        return ToolFailure(f"{shown!r} leads outside the workspace", ToolErrorType.PATH_OUTSIDE_WORKSPACE)
    if code == 6:
        return ToolFailure(f"{shown!r} is not a directory", ToolErrorType.NOT_A_DIRECTORY)
    return ToolFailure(f"{shown!r} could not be read in the sandbox: {_said(err)}", ToolErrorType.OS_ERROR)


def _said(err: bytes) -> str:
    return err.decode(errors="replace").strip()[-300:] or "no reason given"


def pruned(skip_dirs: frozenset[str], depth: int | None = None) -> list[str]:
    """find's arguments for a walk: the folders in `skip_dirs` not entered (nor listed), at most
    `depth` levels, regular files and links only unless `depth` (a listing shows folders too)."""
    args = ["-mindepth", "1"]
    if depth is not None:
        args += ["-maxdepth", str(depth)]
    if skip_dirs:
        names: list[str] = []
        for d in sorted(skip_dirs):
            names += ["-o", "-name", d] if names else ["-name", d]
        args += ["(", "-type", "d", "(", *names, ")", "-prune", ")", "-o"]
    if depth is None:
        args += ["(", "-type", "f", "-o", "-type", "l", ")"]
    else:
        args += ["-true"]
    return args


def within_batch(entries: Sequence[Entry]) -> list[str]:
    """The paths of the first entries whose sizes together fit in one batch read
    (FETCH_MAX_BYTES), in their order."""
    out: list[str] = []
    total = 0
    for e in entries:
        total += e.size
        if total > FETCH_MAX_BYTES and out:
            break
        out.append(e.rel)
    return out


def is_regular(entry: Entry) -> bool:
    return entry.kind == "f" or (entry.kind == "l" and entry.target == "f")


def is_dir_mode(status: os.stat_result | None) -> bool:
    return status is not None and stat.S_ISDIR(status.st_mode)
