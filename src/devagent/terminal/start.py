"""`devagent chat` and `devagent sessions`: settings checked, the backend opened, errors told in one
line (exit 2: a value given is wrong; 1: something named cannot be reached)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devagent.agent.api import (
    NANO,
    CoreConfig,
    SandboxError,
    Usage,
    runs_sandboxed,
    setup_sandbox,
    usage_dollars,
    utc_day,
)
from devagent.config import ConfigError, load_config
from devagent.global_flags import GlobalFlags
from devagent.preflight import StartError, check_model, open_core, report
from devagent.terminal.backend import LocalBackend, latest_session_id, open_local_session

# The per-caller usage table's columns, in the order `devagent sessions` prints them (the store's
# USAGE_KINDS; not imported from there, so that this module loads without SQLAlchemy).
_SPEND_COLUMNS = ("input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens", "requests")


def _config(overrides: dict[str, Any], flags: GlobalFlags) -> Any:
    try:
        return load_config({**flags.settings(), **overrides})
    except ConfigError as e:
        raise StartError(str(e), 2) from e


def local_config(
    flags: GlobalFlags,
    db: str | None,
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    approval: str | None,
    max_steps: int | None,
    sandbox_backend: str | None = None,
    /,
) -> Any:
    """The settings of a run in this process (`chat`, `run`): the command's flags (passed in this
    order, under the names the commands give them) over the environment and the settings file.
    StartError (usage) when they are wrong."""
    overrides = {
        "db_url": db,
        "default_model": model,
        "model_base_url": base_url,
        "model_api_key": api_key,
        "approval_mode": approval,
        "max_steps": max_steps,
        "sandbox_backend": sandbox_backend,
    }
    return _config(overrides, flags)


def start_sandbox(flag: bool | None, config: Any, workspace: Path) -> None:
    """The shell sandbox of a run in this process in `workspace`, said on stderr when the flag or
    the settings ask for it. StartError (usage) when it cannot be had."""
    try:
        line = setup_sandbox(flag, config, "run", owned_by=[workspace.resolve()])
    except SandboxError as e:
        raise StartError(str(e), 2) from e
    if flag or config.sandbox:
        print(line, file=sys.stderr)


def chat_command(
    *,
    workspace: Path | None,
    model: str | None,
    approval: str | None,
    session: str | None,
    cont: bool,
    url: str | None,
    token: str | None,
    db: str | None,
    base_url: str | None,
    api_key: str | None,
    max_steps: int | None,
    sandbox: bool | None,
    thoughts: bool,
    flags: GlobalFlags,
    sandbox_backend: str | None = None,
) -> int:
    try:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise StartError(
                "chat needs a terminal (standard input and output); for a script use: devagent run PROMPT", 2
            )
        if session and cont:
            raise StartError("--session and --continue both name a session: give one", 2)
        opts = _ChatOptions(session, cont, model, base_url, approval, thoughts, flags.debug)
        if url:  # the workspace is a path on the server's machine
            return _remote(url, token, workspace, opts)
        workspace = workspace or Path(".")
        if not workspace.is_dir():
            raise StartError(f"workspace {workspace} is not a directory", 2)
        config = local_config(flags, db, model, base_url, api_key, approval, max_steps, sandbox_backend)
        start_sandbox(sandbox, config, workspace)
        if model or not (session or cont):  # a resumed session keeps its own model
            check_model(config)
        return asyncio.run(_local(config, workspace, opts))
    except StartError as e:
        return report("devagent", e, flags.debug)


@dataclass(frozen=True, slots=True)
class _ChatOptions:
    """What `chat` was asked for besides where it runs: the session to go on with (`--session`, or
    the workspace's last with `--continue`), its model, the model's base URL and the approval
    mode, the thoughts shown whole, and `--debug`."""

    session: str | None
    cont: bool
    model: str | None
    base_url: str | None
    approval: str | None
    thoughts: bool
    debug: bool


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False)


async def _local(config: Any, workspace: Path, opts: _ChatOptions) -> int:
    from devagent.terminal.repl import chat  # late: prompt_toolkit

    core = await open_core(config)
    try:
        session_id = opts.session
        if opts.cont:
            session_id = await latest_session_id(core, workspace)
            if session_id is None:
                raise StartError(
                    f"no stored session in {workspace.resolve()} to continue (start one with: devagent chat)",
                    2,
                )
        s, resumed = await open_local_session(
            core, config, workspace, session_id, opts.model, base_url=opts.base_url
        )
        if resumed and opts.approval:  # --approval given: the resumed session goes on in that mode
            await s.set_approval_mode(opts.approval)
    except BaseException:
        await core.close()
        raise
    backend = LocalBackend(core, s)
    return await chat(
        backend,
        _console(),
        config.data_dir / "chat_history",
        show_thoughts=opts.thoughts,
        sandboxed=runs_sandboxed(s.sandbox),
        debug=opts.debug,
    )


def _remote(url: str, token: str | None, workspace: Path | None, opts: _ChatOptions) -> int:
    if opts.cont:
        raise StartError("--continue is for local sessions; with --url give --session CONTEXT_ID", 2)
    from devagent.terminal.remote import RemoteBackend  # late: the a2a SDK and httpx, for --url only
    from devagent.terminal.repl import chat  # late: prompt_toolkit

    async def main() -> int:
        # a relative --workspace is taken from here (the same machine); none: the server's first root
        where = workspace.resolve() if workspace is not None and not workspace.is_absolute() else workspace
        backend = await RemoteBackend.connect(
            url, token, workspace=where, context_id=opts.session, model=opts.model, approval=opts.approval
        )
        history = CoreConfig().data_dir / "chat_history"
        return await chat(backend, _console(), history, show_thoughts=opts.thoughts, debug=opts.debug)

    return asyncio.run(main())


def sessions_command(
    *, workspace: Path | None, limit: int, db: str | None, as_json: bool, flags: GlobalFlags
) -> int:
    try:
        config = _config({"db_url": db}, flags)
        rows, spend = asyncio.run(_list(config, workspace, limit))
    except StartError as e:
        return report("devagent", e, flags.debug)
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        where = f" in {workspace.resolve()}" if workspace else ""
        print(f"No stored sessions{where}. Start one with: devagent chat")
        return 0
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from devagent.terminal.controls import styled

    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("id", "workspace", "title", "caller", "tokens", "cost", "last activity"):
        table.add_column(col, overflow="fold" if col != "title" else "ellipsis")
    for r in rows:
        u = Usage.from_json(r["usage"])
        table.add_row(
            r["id"],
            styled(r["workspace"], layout=False),  # stored text, never markup nor controls
            styled(r["title"], layout=False) if r["title"] else Text("(no prompt yet)", style="dim"),
            styled(r["identity"] or "-", layout=False),
            f"{u.input_tokens + u.output_tokens:,}",
            _cost_cell(u.cost_usd, u.unpriced_requests, u.requests),
            _ago(r["updated_at"]),
        )
    console = Console(highlight=False)
    console.print(table)
    if spend:
        per = Table(box=None, header_style="bold", pad_edge=False, title="Usage per caller (UTC days)")
        for col in ("day", "caller", "input", "cached", "cache writes", "output", "requests", "cost"):
            per.add_column(col)
        for s in spend:
            per.add_row(
                s["day"],
                styled(s["identity"] or "-", layout=False),
                *(f"{int(s.get(k, 0)):,}" for k in _SPEND_COLUMNS),
                _cost_cell(int(s["cost_nanousd"]) / NANO, int(s["unpriced_requests"]), int(s["requests"])),
            )
        console.print()
        console.print(per)
    return 0


async def _list(
    config: Any, workspace: Path | None, limit: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The sessions (newest first), and the spend per caller of the last days."""
    core = await open_core(config)
    try:
        want = str(workspace.resolve()) if workspace else None
        out: list[dict[str, Any]] = []
        for sid, state, updated in await core.store.list_sessions(limit=None if want else limit):
            roots = state.get("workspace_roots") or []
            ws = roots[0] if roots else ""
            if want is not None and ws != want:
                continue
            out.append(
                {
                    "id": sid,
                    "workspace": ws,
                    "title": state.get("title", ""),
                    "model": state.get("model", ""),
                    "status": state.get("status", ""),
                    "identity": state.get("identity", ""),
                    "usage": state.get("usage") or {},
                    # the session a subagent works for ("" for any other)
                    "subagent_of": (state.get("subagent_of") or {}).get("session", ""),
                    "updated_at": updated,
                }
            )
            if len(out) >= limit:
                break
        spend = [r for r in await core.store.usage() if r["day"] >= utc_day(time.time() - 6 * 86400)]
        return out, spend
    finally:
        await core.close()


def _cost_cell(dollars: float, unpriced: int, requests: int) -> str:
    """A cost as `devagent sessions` shows it: dollars, `?` when no request had a known price,
    `>= $...` when some had none (their cost is unknown)."""
    if requests and unpriced >= requests:
        return "?"
    return (">= " if unpriced else "") + usage_dollars(dollars)


def _ago(t: float) -> str:
    d = max(0.0, time.time() - t)
    if d < 60:
        return "just now"
    if d < 3600:
        return f"{int(d // 60)} min ago"
    if d < 86400:
        return f"{int(d // 3600)} h ago"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))
