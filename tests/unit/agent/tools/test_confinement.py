"""G4, issue 12 item 1: the file tools are confined by construction. Every path is walked from an
open workspace-root descriptor (openat2 RESOLVE_BENEATH, or component by component with
O_NOFOLLOW) and the final open or rename happens relative to the open parent directory, so a
directory swapped for a symlink to outside while the tools run redirects nothing. Every test runs
with both resolvers: the openat2 fast path and the component-by-component walk."""

from __future__ import annotations

import asyncio
import ctypes
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.sandbox import confine as _confine
from devagent.agent.state import SessionState
from devagent.agent.tools import builtin_tools
from devagent.agent.tools import search as search_mod
from devagent.agent.tools.base import ToolContext, ToolResult
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.workspace import Workspace

TOOLS = builtin_tools()


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "openat2":
        if not _confine.openat2_available():
            pytest.skip("openat2 is not available here")
    else:
        monkeypatch.setattr(_confine, "USE_OPENAT2", False)
    return str(request.param)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "deep").mkdir(parents=True)
    (root / "src" / "a.txt").write_text("inside a\n")
    return root


def make_ctx(root: Path) -> ToolContext:
    return ToolContext(
        workspace=Workspace([root]), state=SessionState(workspace_roots=[str(root)]), call_id="c1"
    )


async def run(name: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return await TOOLS[name].run(args, ctx)


# --- symlinks, `..` and absolute paths ------------------------------------------------------------


async def test_g4_issue12_item1_symlinks_inside_keep_working(ws: Path, resolver: str) -> None:
    """G4, issue 12 item 1: symlinks whose targets stay inside (relative, absolute, through `..`,
    to a directory or a file) are followed by the same confined rule, for reads and writes."""
    (ws / "alias").symlink_to("src", target_is_directory=True)
    (ws / "abs.txt").symlink_to(ws / "src" / "a.txt")
    (ws / "src" / "deep" / "up.txt").symlink_to("../a.txt")
    (ws / "chain").symlink_to("alias/deep", target_is_directory=True)
    ctx = make_ctx(ws)
    for path in ["alias/a.txt", "abs.txt", "src/deep/up.txt", "chain/../a.txt", "src/deep/../a.txt"]:
        res = await run("read_file", {"path": path}, ctx)
        assert res.text == "1\tinside a\n", path
    await run("write_file", {"path": "alias/new.txt", "content": "via alias\n"}, ctx)
    assert (ws / "src" / "new.txt").read_text() == "via alias\n"
    await run("edit", {"path": "abs.txt", "old_string": "inside a", "new_string": "edited"}, ctx)
    assert (ws / "src" / "a.txt").read_text() == "edited\n"  # the target, replaced by rename
    assert (ws / "abs.txt").is_symlink()
    listing = await run("list_directory", {}, ctx)
    assert "alias/ -> src" in listing.text.splitlines()
    found = await run("glob", {"pattern": "*.txt", "path": "alias"}, ctx)
    assert sorted(found.data["files"]) == ["src/a.txt", "src/new.txt"]
    hits = await run("read_many_files", {"paths": ["src/deep"]}, ctx)
    assert hits.data["files"] == ["src/deep/up.txt"]


@pytest.mark.parametrize(
    "path",
    ["esc/secret.txt", "esc_file", "src/deep/esc_rel", "src/esc_abs/secret.txt"],
)
async def test_g4_issue12_item1_symlinks_pointing_outside_refused(
    ws: Path, outside: Path, resolver: str, path: str
) -> None:
    """G4, issue 12 item 1: a symlink leading out (to a directory or a file, relative or
    absolute) is refused for reads and writes, and nothing outside changes."""
    (ws / "esc").symlink_to(outside, target_is_directory=True)
    (ws / "esc_file").symlink_to(outside / "secret.txt")
    (ws / "src" / "deep" / "esc_rel").symlink_to("../../../outside/secret.txt")
    (ws / "src" / "esc_abs").symlink_to(outside, target_is_directory=True)
    ctx = make_ctx(ws)
    for name, args in [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "pwned\n"}),
        ("edit", {"path": path, "old_string": "TOP", "new_string": "pwned"}),
        ("read_many_files", {"paths": [path]}),
        ("grep", {"pattern": "SECRET", "path": path}),
    ]:
        with pytest.raises(ToolFailure) as info:
            await run(name, args, ctx)
        assert info.value.type == "path_outside_workspace", (name, info.value.message)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


@pytest.mark.parametrize(
    "path", ["../outside/secret.txt", "src/../../outside/secret.txt", "src/deep/../../../outside/x.txt"]
)
async def test_g4_issue12_item1_dotdot_out_refused(ws: Path, outside: Path, resolver: str, path: str) -> None:
    """G4, issue 12 item 1: `..` components that leave the root are refused (`..` that stays
    inside, like `src/deep/../a.txt`, is resolved beneath the root as openat2 does)."""
    ctx = make_ctx(ws)
    for name, args in [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "pwned\n"}),
        ("list_directory", {"path": path.rsplit("/", 1)[0]}),
        ("glob", {"pattern": "*", "path": path.rsplit("/", 1)[0]}),
    ]:
        with pytest.raises(ToolFailure) as info:
            await run(name, args, ctx)
        assert info.value.type == "path_outside_workspace", (name, info.value.message)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_g4_issue12_item1_absolute_paths_outside_refused(
    ws: Path, outside: Path, resolver: str
) -> None:
    """G4, issue 12 item 1: absolute paths outside every root are refused; inside ones work."""
    ctx = make_ctx(ws)
    for path in [str(outside / "secret.txt"), "/etc/passwd", str(ws) + "/../outside/secret.txt"]:
        with pytest.raises(ToolFailure) as info:
            await run("read_file", {"path": path}, ctx)
        assert info.value.type == "path_outside_workspace", path
        with pytest.raises(ToolFailure) as info:
            await run("write_file", {"path": path, "content": "x"}, ctx)
        assert info.value.type == "path_outside_workspace", path
    res = await run("read_file", {"path": str(ws / "src" / "a.txt")}, ctx)
    assert res.text == "1\tinside a\n"


async def test_g4_issue12_item1_hard_link_read_but_never_written_through(
    ws: Path, outside: Path, resolver: str
) -> None:
    """G4, issue 12 item 1 (documented): a hard link inside to a file outside is the same file, so
    it is read; a write replaces the name by rename and the outside file keeps its content."""
    os.link(outside / "secret.txt", ws / "hard.txt")
    ctx = make_ctx(ws)
    assert (await run("read_file", {"path": "hard.txt"}, ctx)).text == "1\tTOP SECRET\n"
    await run("write_file", {"path": "hard.txt", "content": "mine\n"}, ctx)
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


# --- the swap race ----------------------------------------------------------------------------------

AT_FDCWD = -100
RENAME_EXCHANGE = 2


def _exchanger() -> Any:
    """renameat2(RENAME_EXCHANGE) through ctypes, or None where libc or the file system lacks it."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    return fn


class Swapper(threading.Thread):
    """Exchanges the directory `a` and the symlink `b` (to outside) until stopped: with
    renameat2(RENAME_EXCHANGE) (atomic), else by three renames."""

    def __init__(self, a: Path, b: Path) -> None:
        super().__init__(daemon=True)
        self.a, self.b = os.fsencode(a), os.fsencode(b)
        self.tmp = os.fsencode(a) + b".swap"
        self.stop = threading.Event()
        self.swaps = 0
        self.exchange = _exchanger()
        self.error: BaseException | None = None

    def swap(self) -> None:
        if self.exchange is not None:
            if self.exchange(AT_FDCWD, self.a, AT_FDCWD, self.b, RENAME_EXCHANGE) == 0:
                return
            err = ctypes.get_errno()
            if err not in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: fall back to renames
                raise OSError(err, os.strerror(err))
            self.exchange = None
        os.rename(self.a, self.tmp)
        os.rename(self.b, self.a)
        os.rename(self.tmp, self.b)

    def run(self) -> None:
        try:
            while not self.stop.is_set() and self.swaps < 1_000_000:
                self.swap()
                self.swaps += 1
        except BaseException as e:  # pragma: no cover - reported by the test
            self.error = e


@pytest.mark.parametrize("grep_engine", ["python", "ripgrep"])
async def test_g4_issue12_item1_swap_race_nothing_read_or_written_outside(
    tmp_path: Path, resolver: str, grep_engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G4, issue 12 item 1: while a thread exchanges a workspace directory with a symlink to an
    outside directory over and over, hundreds of read_file, write_file, list_directory, glob,
    grep and read_many_files calls on that directory never return the outside file's marker or
    name, and the outside directory is unchanged. Refusals are fine (the path pointed outside at
    that moment); the assertions do not depend on how the timing falls."""
    if grep_engine == "ripgrep":
        if search_mod.ripgrep() is None:
            pytest.skip("ripgrep is not installed")
    else:
        monkeypatch.setattr(search_mod, "USE_RIPGREP", False)
    marker = f"OUTSIDE-{uuid.uuid4().hex}"
    ws = tmp_path / "ws"
    sub = ws / "sub"
    sub.mkdir(parents=True)
    (sub / "f.txt").write_text("inside\nneedle inside\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "f.txt").write_text(f"{marker}\nneedle {marker}\n")
    (out / f"{marker}.txt").write_text(f"{marker}\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (ws / "link").symlink_to(out, target_is_directory=True)
    # The target of the swaps: sub is the directory, then the symlink to outside, and so on.
    ctx = make_ctx(ws)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": "sub/f.txt"}),
        ("write_file", {"path": "sub/w.txt", "content": "written\n"}),
        ("list_directory", {"path": "sub"}),
        ("glob", {"pattern": "sub/*.txt"}),
        ("grep", {"pattern": "needle", "path": "sub"}),
        ("read_many_files", {"paths": ["sub/f.txt", "sub/*.txt"]}),
        ("edit", {"path": "sub/e.txt", "old_string": "", "new_string": "created\n"}),
    ]
    ran = refused = 0
    per_tool: dict[str, list[int]] = {name: [0, 0] for name, _ in calls}
    swapper = Swapper(sub, ws / "link")
    swapper.start()
    try:
        for i in range(700):
            name, args = calls[i % len(calls)]
            ran += 1
            per_tool[name][0] += 1
            try:
                res = await run(name, args, ctx)
            except ToolFailure as e:
                refused += 1
                per_tool[name][1] += 1
                assert marker not in e.message
                continue
            assert marker not in res.text, (name, res.text)
            assert marker not in repr(res.data), (name, res.data)
            if name == "edit":
                # created; remove it again (wherever it is inside) so the next edit creates again
                for d in (ws / "sub", ws / "link"):
                    if not d.is_symlink():
                        (d / "e.txt").unlink(missing_ok=True)
            await asyncio.sleep(0)
    finally:
        swapper.stop.set()
        swapper.join()
    assert swapper.error is None, swapper.error
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    print(
        f"\nswap race ({resolver}, grep {grep_engine}): {swapper.swaps} swaps, {ran} tool calls, "
        f"{refused} refused, {ran - refused} ran inside; per tool (calls, refused): {per_tool}"
    )
    assert after == before  # nothing written, created or removed outside
    assert swapper.swaps > 0
