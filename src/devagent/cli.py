"""The `devagent` command line (Typer + Rich).

Heavy modules (the core's store, models, the servers) are imported inside the commands, so
`devagent --help` and `devagent version` stay instant and each front door pays only for itself.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from devagent import __version__
from devagent.common import startup_gc
from devagent.global_flags import GlobalFlags, lend, take
from devagent.patches import httpx as httpx_patch
from devagent.preflight import StartError, check_model, open_core, report

if TYPE_CHECKING:
    from devagent.agent.api import ToolCall

app = typer.Typer(
    name="devagent",
    help="devagent: an open, self-hostable coding agent (A2A server, wire mode, terminal).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="provider:model (openai:gpt-4.1, anthropic:…, google:…, ollama:…, scripted:FILE, demo)",
    ),
]
BaseUrlOpt = Annotated[str | None, typer.Option("--base-url", help="Base URL of an OpenAI-compatible server")]
ApiKeyOpt = Annotated[str | None, typer.Option("--api-key", help="API key for the model provider")]
# Claude Code's headless stream flags, for `devagent run`
InputFormatOpt = Annotated[
    str,
    typer.Option(
        "--input-format",
        help="text | stream-json (turns as user messages on standard input; needs stream-json output)",
    ),
]
PartialOpt = Annotated[
    bool,
    typer.Option(
        "--include-partial-messages",
        help="With stream-json output: text and thinking also as they stream (stream_event lines)",
    ),
]
DbOpt = Annotated[str | None, typer.Option("--db", help="Database URL (default: SQLite under ~/.devagent)")]
SandboxBackendOpt = Annotated[
    str | None,
    typer.Option(
        "--sandbox-backend",
        help="Where sandboxed commands run: local (bubblewrap on this host; the default, or the "
        "sandbox_backend setting); container is not built into this version",
    ),
]
SandboxOpt = Annotated[
    bool | None,
    typer.Option(
        "--sandbox/--no-sandbox",
        help="Run shell commands in the bubblewrap sandbox (default: the sandbox setting, else on for serve "
        "when bwrap works, off for run)",
    ),
]


def _version_flag(value: bool) -> None:
    if value:
        typer.echo(f"devagent {__version__}")
        raise typer.Exit(0)


@app.callback()
def _options(
    ctx: typer.Context,
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_version_flag, is_eager=True, help="Print the version and exit"),
    ] = None,
    debug: Annotated[
        bool, typer.Option("--debug", help="Print the traceback of an error (also DEVAGENT_DEBUG=1)")
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="The settings file (also DEVAGENT_CONFIG; default: ~/.config/devagent/config.toml). "
            "Never read from the current directory",
        ),
    ] = None,
    context_tokens: Annotated[
        int | None,
        typer.Option(
            "--context-tokens",
            help="The model's context window in tokens (also DEVAGENT_CONTEXT_TOKENS; default: the "
            "model's known size, else 128000); conversations compact before they fill it",
        ),
    ] = None,
) -> None:
    """devagent: an open, self-hostable coding agent (A2A server, wire mode, terminal)."""
    if ctx.obj is None:  # the app run without main(), which takes these flags out of any place
        tokens = None if context_tokens is None else str(context_tokens)
        ctx.obj = GlobalFlags(str(config) if config else None, tokens, debug)


def _flags(ctx: typer.Context) -> GlobalFlags:
    """The global flags of this command line (main() or the callback put them in the context)."""
    return ctx.obj if isinstance(ctx.obj, GlobalFlags) else GlobalFlags()


@app.command()
def version() -> None:
    """Print devagent's version."""
    typer.echo(f"devagent {__version__}")


@app.command()
def commands() -> None:
    """List the slash commands: the built-in ones, yours and the current folder's (docs/commands.md)."""
    # late: the command registry, not for --help
    from devagent.agent.api import CommandInfo, Workspace, user_config_dir, with_custom

    def walk(cmds: list[CommandInfo], prefix: str) -> None:
        for c in cmds:
            if c.handler is not None:
                typer.echo(f"{prefix + c.name:<18} {c.description}")
            walk(c.sub_commands, f"{prefix}{c.name} ")

    walk(with_custom(user_config_dir(), Workspace([Path.cwd()])).list(), "/")


# `devagent run`'s repository flags (docs/repositories.md)
RepoOpt = Annotated[
    str | None,
    typer.Option(
        "--repo",
        help="Clone this repository (one the settings' repository_remotes allow) "
        "into a new folder under --workspace and work there",
    ),
]
RefOpt = Annotated[str | None, typer.Option("--ref", help="The branch, tag or commit --repo starts at")]
SetupOpt = Annotated[
    str | None,
    typer.Option("--setup", help="A setup the settings' repository_setup names, run after the clone"),
]
PushOpt = Annotated[
    bool,
    typer.Option("--push", help="Push the result as a new branch (result_branch_pattern) after the turn"),
]


@app.command()
def run(
    ctx: typer.Context,
    prompt: Annotated[
        str | None, typer.Argument(help="What to do ('-' reads it from standard input)")
    ] = None,
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="Workspace root")] = Path("."),
    model: ModelOpt = None,
    approval: Annotated[
        str | None, typer.Option("--approval", "-a", help="ask | auto-edit | yolo | plan (default: ask)")
    ] = None,
    resume: Annotated[
        str | None, typer.Option("--resume", "--session", "-r", help="Continue this stored session")
    ] = None,
    cont: Annotated[
        bool, typer.Option("--continue", "-c", help="Continue the last session of this workspace")
    ] = False,
    output_format: Annotated[
        str,
        typer.Option("--output-format", help="text | json (the result) | stream-json (events and result)"),
    ] = "text",
    input_format: InputFormatOpt = "text",
    partial: PartialOpt = False,
    answers: Annotated[
        list[str] | None,
        typer.Option(
            "--answer", help="CALL_ID=OPTION (allow, always, deny, an option id, a question's answer)"
        ),
    ] = None,
    allow: Annotated[
        bool, typer.Option("--allow", help="Allow every call the resumed session waits for")
    ] = False,
    deny: Annotated[
        bool, typer.Option("--deny", help="Refuse every call the resumed session waits for")
    ] = False,
    db: DbOpt = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="Model steps per turn")] = None,
    sandbox: SandboxOpt = None,
    repo: RepoOpt = None,
    ref: RefOpt = None,
    setup: SetupOpt = None,
    push: PushOpt = False,
    sandbox_backend: SandboxBackendOpt = None,
) -> None:
    """Run one task: streams text, thoughts and tool calls (or JSON with --output-format), asks
    permission at a terminal; a permission that cannot be asked leaves the session waiting (exit 4).
    With --repo URL --ref REF the workspace is cloned; the JSON result holds the `patch` (and the
    `branch` with --push)."""
    # late: the settings, the sandbox and the JSON output, not loaded for `devagent --help`
    from devagent.terminal.headless import FORMATS, emit, error_result
    from devagent.terminal.start import local_config, start_sandbox

    flags = _flags(ctx)
    as_json = output_format in ("json", "stream-json")
    try:
        if output_format not in FORMATS:
            raise StartError(f"--output-format {output_format!r}: choose text, json or stream-json", 2)
        _check_stream_flags(input_format, output_format, partial, prompt, bool(answers) or allow or deny)
        req = _run_request(
            prompt, workspace, resume, cont, model, output_format, answers or [], allow, deny, input_format
        )
        req.approval, req.input_format, req.partial, req.base_url = approval, input_format, partial, base_url
        req.repository, req.push = _repository_flags(repo, ref, setup, push, bool(resume or cont)), push
        config = local_config(flags, db, model, base_url, api_key, approval, max_steps, sandbox_backend)
        if not workspace.is_dir():
            raise StartError(f"workspace {workspace} is not a directory", 2)
        start_sandbox(sandbox, config, workspace)  # asked for: says what came of it
        if model or not (resume or cont):  # a resumed session keeps its own model unless --model is given
            check_model(config)
        code = asyncio.run(_run(config, req))
    except (StartError, ValueError) as e:
        err = e if isinstance(e, StartError) else StartError(str(e), 2)
        if as_json:
            emit(error_result(err.message, err.session_id))
        raise typer.Exit(report("devagent", err, flags.debug)) from None
    except KeyboardInterrupt:  # a second Ctrl-C while the turn was being cancelled
        typer.echo("devagent: cancelled (Ctrl-C).", err=True)
        raise typer.Exit(130) from None
    raise typer.Exit(code)


def _repository_flags(repo: str | None, ref: str | None, setup: str | None, push: bool, resumed: bool) -> Any:
    """The repository `--repo URL --ref REF [--setup NAME] [--push]` ask for (None: none), checked."""
    from devagent.agent.api import parse_repository  # late: as in run()

    if repo is None:
        if ref is not None or setup is not None:
            raise StartError("--ref and --setup go with --repo URL", 2)
        if push and not resumed:
            raise StartError("--push goes with --repo URL (or --resume of a session cloned from one)", 2)
        return None
    if resumed:
        raise StartError(
            "--repo starts a new session: a resumed one keeps its repository (--push works there)", 2
        )
    if ref is None:
        raise StartError("--repo needs --ref (the branch, tag or commit to start at)", 2)
    return parse_repository({"url": repo, "ref": ref, "setup": setup or ""}, push=push)


def _check_stream_flags(
    input_format: str, output_format: str, partial: bool, prompt: str | None, answering: bool
) -> None:
    """Claude Code's stream flags, as it takes them: `--include-partial-messages` with stream-json
    output; `--input-format stream-json` reads every turn from standard input, with stream-json
    output and no prompt or answer on the command line."""
    if partial and output_format != "stream-json":
        raise StartError("--include-partial-messages needs --output-format stream-json", 2)
    if input_format not in ("text", "stream-json"):
        raise StartError(f"--input-format {input_format!r}: choose text or stream-json", 2)
    if input_format == "text":
        return
    if output_format != "stream-json":
        raise StartError("--input-format stream-json needs --output-format stream-json", 2)
    if prompt is not None:
        raise StartError("--input-format stream-json reads the prompts from standard input: give none", 2)
    if answering:
        raise StartError(
            "--input-format stream-json gives new turns: answer a waiting session in a run of its own", 2
        )


def _run_request(
    prompt: str | None,
    workspace: Path,
    resume: str | None,
    cont: bool,
    model: str | None,
    output_format: str,
    answers: list[str],
    allow: bool,
    deny: bool,
    input_format: str = "text",
) -> Any:
    """The run the flags ask for, checked (StartError or ValueError says what is wrong)."""
    from devagent.terminal.headless import RunRequest, parse_answers  # late: as in run()

    if resume and cont:
        raise StartError("--resume and --continue cannot both be given", 2)
    given, rest = parse_answers(answers, allow, deny)
    if (given or rest) and not (resume or cont):
        raise StartError(
            "--answer, --allow and --deny answer a stored session: give --resume ID or --continue", 2
        )
    if prompt == "-":
        prompt = sys.stdin.read()
    if prompt is not None and not prompt.strip():
        raise StartError("the prompt is empty", 2)
    if prompt is None and not (resume or cont) and input_format != "stream-json":
        raise StartError(
            "Missing argument 'PROMPT' ('-' reads it from standard input; see 'devagent run --help')",
            2,
        )
    return RunRequest(prompt, workspace, resume, cont, model, output_format, given, rest)


async def _run(config: Any, req: Any) -> int:
    """The run: its session opened (new, resumed or continued), its turn in the output format
    asked for (terminal/run_text.py, terminal/headless.py)."""
    from devagent.agent.api import InputError  # late: as in run()
    from devagent.terminal.backend import latest_session_id, open_local_session  # late: as in run()
    from devagent.terminal.headless import preset_decisions, run_json  # late: as in run()
    from devagent.terminal.run_text import announce_model, run_text  # late: as in run()

    core = await open_core(config)
    ran: str | None = None  # the session this run opened, which it ends
    try:
        session_id = req.session_id
        if req.cont:
            session_id = await latest_session_id(core, req.workspace)
            if session_id is None:
                raise StartError(f"no stored session in {req.workspace.resolve()} to continue", 2)
        if not session_id and req.output_format == "text":
            announce_model(core)
        try:
            s, resumed = await open_local_session(
                core,
                config,
                req.workspace,
                session_id,
                req.model,
                base_url=req.base_url,
                unknown_hint="its id is printed when a run starts",
                repository=req.repository,
            )
            ran = s.id
            if resumed and req.approval:  # --approval given: the resumed session goes on in that mode
                await s.set_approval_mode(req.approval)
            waiting = _check_waiting(s.waiting_calls() if resumed else [], req)
        except StartError as e:  # the result names the session it could not go on with
            e.session_id = e.session_id or ran
            raise
        except InputError as e:  # a repository refused (usage) or one that could not be cloned
            raise StartError(str(e), 2 if e.code == "repository_refused" else 1) from None
        preset = preset_decisions(waiting, req.given, req.rest)
        if req.output_format != "text":
            return await run_json(s, req, waiting, preset, core.default_model)
        code = await run_text(s, req, waiting, preset, core.default_model, resumed)
        await _say_repository(s, req)
        return code
    finally:
        if ran is not None:
            await core.end_session(ran)
        await core.close()


async def _say_repository(s: Any, req: Any) -> None:
    """A text run of a repository session: where its workspace is and what became of its result,
    on standard error (the patch is in the workspace; `--output-format json` returns it)."""
    from devagent.terminal.headless import repository_json  # late: as in run()

    if not s.state.repository or s.state.status != "idle":
        return
    got = await repository_json(s, req.push)
    where = got.get("workspace", "")
    if "repository_error" in got:
        print(f"devagent: {got['repository_error']} (the workspace is {where})", file=sys.stderr)
    elif got.get("branch"):
        print(
            f"devagent: pushed branch {got['branch']} ({got['commit'][:12]}); workspace {where}",
            file=sys.stderr,
        )
    else:
        print(f"devagent: {len(got.get('files', []))} files changed in {where}", file=sys.stderr)


def _check_waiting(waiting: list[ToolCall], req: Any) -> list[ToolCall]:
    """The calls a resumed session waits for, when the flags fit them (else StartError)."""
    prompted = req.prompt is not None or req.input_format == "stream-json"  # prompts come on stdin
    if waiting and prompted:
        ids = ", ".join(c.id for c in waiting)
        raise StartError(
            f"the session waits for answers to {ids}: answer them (--answer CALL_ID=OPTION, --allow or "
            "--deny) without a prompt",
            2,
        )
    if not waiting and (req.given or req.rest):
        raise StartError(
            "the session waits for no answers (--answer, --allow and --deny have nothing to answer)", 2
        )
    if not waiting and not prompted:
        raise StartError("what to do? give a prompt (the session waits for no answers)", 2)
    return waiting


ApprovalOpt = Annotated[
    str | None, typer.Option("--approval", "-a", help="ask | auto-edit | yolo | plan (default: ask)")
]


@app.command()
def chat(
    ctx: typer.Context,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            "-w",
            help="Workspace root (default: the current directory; with --url, your first root on the server)",
        ),
    ] = None,
    model: ModelOpt = None,
    approval: ApprovalOpt = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--resume", "--session", "-r", help="Continue this stored session (--url: its context id)"
        ),
    ] = None,
    cont: Annotated[
        bool, typer.Option("--continue", "-c", help="Continue the last session of this workspace")
    ] = False,
    url: Annotated[
        str | None, typer.Option("--url", help="Talk to a remote devagent serve (A2A) at this URL")
    ] = None,
    token: Annotated[
        str | None, typer.Option("--token", envvar="DEVAGENT_TOKEN", help="Bearer token of the --url server")
    ] = None,
    db: DbOpt = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="Model steps per turn")] = None,
    sandbox: SandboxOpt = None,
    sandbox_backend: SandboxBackendOpt = None,
    thoughts: Annotated[
        bool, typer.Option("--thoughts/--fold-thoughts", help="Show thoughts whole (default: one line)")
    ] = False,
) -> None:
    """Talk with devagent in the terminal: streamed answers, tool calls, permission prompts, slash
    commands (`devagent` alone in a terminal does the same)."""
    from devagent.terminal.start import chat_command  # late: each command loads its own modules

    raise typer.Exit(
        chat_command(
            workspace=workspace,
            model=model,
            approval=approval,
            session=session,
            cont=cont,
            url=url,
            token=token,
            db=db,
            base_url=base_url,
            api_key=api_key,
            max_steps=max_steps,
            sandbox=sandbox,
            sandbox_backend=sandbox_backend,
            thoughts=thoughts,
            flags=_flags(ctx),
        )
    )


@app.command()
def sessions(
    ctx: typer.Context,
    workspace: Annotated[
        Path | None, typer.Option("--workspace", "-w", help="Only the sessions of this workspace")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many (the most recent first)")] = 20,
    db: DbOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """List stored sessions: id, workspace, title, last activity (`chat --session ID` continues one)."""
    from devagent.terminal.start import sessions_command  # late: each command loads its own modules

    raise typer.Exit(
        sessions_command(workspace=workspace, limit=limit, db=db, as_json=as_json, flags=_flags(ctx))
    )


# The stdio doors' commands take every flag after their name as theirs (`--help` included).
_DOOR_FLAGS = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}

# The options of `devagent serve`.
HostOpt = Annotated[str, typer.Option("--host", help="Address to listen on")]
PortOpt = Annotated[int, typer.Option("--port", envvar="CODER_AGENT_PORT", help="Port (0: any free port)")]
GrpcPortOpt = Annotated[
    int | None,
    typer.Option("--grpc-port", help="Also serve A2A's gRPC binding on this port (0: any free port)"),
]
WorkspaceRootOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--workspace-root",
        envvar="CODER_AGENT_WORKSPACE_PATH",
        help="Directory clients' workspaces must lie in (repeatable)",
    ),
]
ServeTokenOpt = Annotated[
    list[str] | None,
    typer.Option("--token", help="Bearer token, or NAME=TOKEN (repeatable; default $DEVAGENT_TOKEN)"),
]
WorkspaceForOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--workspace-for",
        help="NAME=DIR: the workspace root of identity NAME (repeatable; default "
        "$DEVAGENT_WORKSPACE_FOR; otherwise, with named tokens, each identity gets ROOT/NAME)",
    ),
]
ServeApprovalOpt = Annotated[
    str | None, typer.Option("--approval", help="Default approval mode: ask | auto-edit | yolo | plan")
]
PrivateWebhooksOpt = Annotated[
    bool, typer.Option("--allow-private-webhooks", help="Allow push notifications to private addresses")
]
PublicUrlOpt = Annotated[str | None, typer.Option("--public-url", help="URL the agent card advertises")]
LeaseSecondsOpt = Annotated[
    float | None,
    typer.Option(
        "--lease-seconds",
        help="Seconds before another replica takes over the turns of one that died (default 10)",
    ),
]
LogFormatOpt = Annotated[
    str,
    typer.Option(
        "--log-format",
        envvar="DEVAGENT_LOG_FORMAT",
        help="Log lines (one per request and per turn) as text or json",
    ),
]
MaxStreamsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-streams-per-token",
        help="Streams one token may hold open at once, all bindings together (0: no limit; "
        "default 32, or $DEVAGENT_MAX_STREAMS_PER_TOKEN)",
    ),
]
McpOpt = Annotated[
    bool, typer.Option("--mcp", help="Also serve the MCP door (streamable HTTP) at /mcp, same tokens")
]
ConsoleOpt = Annotated[
    bool,
    typer.Option(
        "--console/--no-console",
        envvar="DEVAGENT_CONSOLE",
        help="Serve the web console at /ui (same tokens as A2A)",
    ),
]
MetricsTokenOpt = Annotated[
    str | None,
    typer.Option(
        "--metrics-token",
        envvar="DEVAGENT_METRICS_TOKEN",
        help="Bearer token that reads /metrics with each caller's spend (callers' tokens read "
        "totals only); valid for /metrics alone",
    ),
]

OidcIssuerOpt = Annotated[
    str | None,
    typer.Option(
        "--oidc-issuer",
        help="The team's identity provider (OpenID Connect issuer URL): its access tokens are "
        "accepted beside --token on every door (docs/identity.md)",
    ),
]
OidcAudienceOpt = Annotated[
    str | None,
    typer.Option("--oidc-audience", help="What a token's aud must name (comma-separated; default the URL)"),
]
OidcIdentityClaimOpt = Annotated[
    str | None, typer.Option("--oidc-identity-claim", help="The claim naming the caller (default sub)")
]
OidcRolesClaimOpt = Annotated[
    str | None,
    typer.Option("--oidc-roles-claim", help="Where a caller's roles are (a claim or dotted path)"),
]
OidcOperatorRoleOpt = Annotated[
    str | None,
    typer.Option("--oidc-operator-role", help="The role that makes a caller an operator (default operator)"),
]
OidcGroupsClaimOpt = Annotated[
    str | None,
    typer.Option("--oidc-groups-claim", help="Where a caller's groups are (a claim or dotted path)"),
]
OidcSharedGroupsOpt = Annotated[
    str | None,
    typer.Option(
        "--oidc-shared-groups",
        help="Groups whose members read each other's tasks: GROUP or GROUP=read, GROUP=approve "
        "to answer each other's permission requests too (comma-separated)",
    ),
]
# No flag for the client secret: a command line is readable by every user of the host.
OidcClientIdOpt = Annotated[
    str | None,
    typer.Option(
        "--oidc-client-id",
        help="The console's client at the IdP (its secret: DEVAGENT_OIDC_CLIENT_SECRET or the "
        "settings file, never a flag)",
    ),
]


WorkerTokenOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--worker-token",
        help="A worker's token, NAME=TOKEN, repeatable (also DEVAGENT_WORKER_TOKENS, worker_tokens): "
        "opens /workers/v1/ only (sandbox_backend = worker)",
    ),
]


@app.command()
def serve(
    ctx: typer.Context,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 41242,
    grpc_port: GrpcPortOpt = None,
    workspace_root: WorkspaceRootOpt = None,
    db: DbOpt = None,
    token: ServeTokenOpt = None,
    workspace_for: WorkspaceForOpt = None,
    model: ModelOpt = None,
    approval: ServeApprovalOpt = None,
    allow_private_webhooks: PrivateWebhooksOpt = False,
    public_url: PublicUrlOpt = None,
    lease_seconds: LeaseSecondsOpt = None,
    sandbox: SandboxOpt = None,
    sandbox_backend: SandboxBackendOpt = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = None,
    log_format: LogFormatOpt = "text",
    max_streams_per_token: MaxStreamsOpt = None,
    mcp: McpOpt = False,
    console: ConsoleOpt = True,
    metrics_token: MetricsTokenOpt = None,
    worker_token: WorkerTokenOpt = None,
    oidc_issuer: OidcIssuerOpt = None,
    oidc_audience: OidcAudienceOpt = None,
    oidc_identity_claim: OidcIdentityClaimOpt = None,
    oidc_roles_claim: OidcRolesClaimOpt = None,
    oidc_operator_role: OidcOperatorRoleOpt = None,
    oidc_client_id: OidcClientIdOpt = None,
    oidc_groups_claim: OidcGroupsClaimOpt = None,
    oidc_shared_groups: OidcSharedGroupsOpt = None,
) -> None:
    """Serve A2A (v0.3 and 1.0, development-tool extension) over HTTP; see docs/a2a.md and, for
    several replicas on one PostgreSQL database, docs/deploy.md."""
    from devagent.a2a.cli import ServeFlags, serve_command  # late: each command loads its own modules

    flags = ServeFlags(
        host=host,
        port=port,
        grpc_port=grpc_port,
        workspace_roots=workspace_root or [],
        db=db,
        tokens=token,
        workspace_for=workspace_for,
        model=model,
        approval=approval,
        allow_private_webhooks=allow_private_webhooks,
        public_url=public_url,
        lease_seconds=lease_seconds,
        sandbox=sandbox,
        sandbox_backend=sandbox_backend,
        base_url=base_url,
        api_key=api_key,
        log_format=log_format,
        max_streams_per_token=max_streams_per_token,
        mcp=mcp,
        console=console,
        metrics_token=metrics_token,
        worker_tokens=worker_token,
        oidc={
            "issuer": oidc_issuer,
            "audiences": oidc_audience,
            "identity_claim": oidc_identity_claim,
            "roles_claim": oidc_roles_claim,
            "operator_role": oidc_operator_role,
            "client_id": oidc_client_id,
            "groups_claim": oidc_groups_claim,
            "shared_groups": oidc_shared_groups,
        },
    )
    with lend(_flags(ctx)):  # serve_command loads its settings and reports its errors itself
        code = serve_command(flags)
    raise typer.Exit(code)


@app.command()
def worker(
    ctx: typer.Context,
    server: Annotated[str, typer.Option("--server", help="The devagent server's URL (http or https)")],
    pool: Annotated[str, typer.Option("--pool", help="The pool this worker serves")] = "default",
    capacity: Annotated[int, typer.Option("--capacity", help="Sessions this worker holds at once")] = 4,
    backend: Annotated[
        str, typer.Option("--backend", help="Its own sandbox backend: local (bubblewrap) or container")
    ] = "local",
    template: Annotated[
        list[str] | None,
        typer.Option("--template", help="A template it offers (repeatable; default: default)"),
    ] = None,
    state_dir: Annotated[
        Path | None, typer.Option("--state-dir", help="Where the sessions' workspaces are kept")
    ] = None,
    idle_seconds: Annotated[
        float,
        typer.Option("--idle-seconds", help="Give back a session idle this long (its room is another's)"),
    ] = 300.0,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help="Read the token from this file, waiting until it is not empty (a pod started for one "
            "session by `devagent dispatcher`: its downward-API file); instead of DEVAGENT_WORKER_TOKEN",
        ),
    ] = None,
) -> None:
    """Run sessions' tool calls for a devagent server (sandbox_backend = worker): connects out
    to --server (no inbound port, no database); its token is read from DEVAGENT_WORKER_TOKEN."""
    from devagent.worker.cli import WorkerFlags, worker_command  # late: each command loads its own

    flags = WorkerFlags(server, pool, capacity, backend, list(template or []), state_dir)
    flags.idle_seconds = idle_seconds
    flags.token_file = token_file
    with lend(_flags(ctx)):
        code = worker_command(flags)
    raise typer.Exit(code)


@app.command()
def dispatcher(
    ctx: typer.Context,
    server: Annotated[str, typer.Option("--server", help="The devagent server's URL (http or https)")],
    namespace: Annotated[
        str, typer.Option("--namespace", help="The namespace of the SandboxClaims (default: the pod's own)")
    ] = "",
    warm_pool: Annotated[
        str, typer.Option("--warm-pool", help="The SandboxWarmPool each claim takes its pod from")
    ] = "devagent-worker",
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="A kubeconfig file (default: the pod's service account)"),
    ] = None,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between looks")] = 1.0,
) -> None:
    """Give each session of a worker pool that waits for a sandbox a pod of its own through
    kubernetes-sigs/agent-sandbox (one SandboxClaim per session, deleted when the session lets
    its sandbox go). Its token (a dispatcher's) is read from DEVAGENT_DISPATCHER_TOKEN."""
    from devagent.dispatcher.cli import DispatcherFlags, dispatcher_command

    flags = DispatcherFlags(server, namespace, warm_pool, kubeconfig, interval)
    with lend(_flags(ctx)):
        code = dispatcher_command(flags)
    raise typer.Exit(code)


workers_app = typer.Typer(help="The workers' tokens kept in the server's database.", no_args_is_help=True)
token_app = typer.Typer(help="Add, revoke or list workers' tokens (no restart needed).", no_args_is_help=True)
workers_app.add_typer(token_app, name="token")
app.add_typer(workers_app, name="workers")
WorkersDbOpt = Annotated[
    str | None, typer.Option("--db", help="The server's database URL (default: the settings')")
]


@token_app.command("add")
def token_add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The token's name (the workers it opens are known by it)")],
    pool: Annotated[
        str, typer.Option("--pool", help="The only pool its workers may serve (default: any)")
    ] = "",
    dispatcher: Annotated[
        bool,
        typer.Option(
            "--dispatcher",
            help="A dispatcher's token (devagent dispatcher; --pool required): it starts one pod per "
            "waiting session of the pool and runs no calls itself",
        ),
    ] = False,
    db: WorkersDbOpt = None,
) -> None:
    """A new worker's token, printed once (the database keeps only its hash)."""
    from devagent.worker.cli import token_command

    with lend(_flags(ctx)):
        code = token_command("add-dispatcher" if dispatcher else "add", name, pool, db)
    raise typer.Exit(code)


@token_app.command("revoke")
def token_revoke(ctx: typer.Context, name: Annotated[str, typer.Argument()], db: WorkersDbOpt = None) -> None:
    """Revoke a stored worker's token: refused from the next request on, its workers' leases end."""
    from devagent.worker.cli import token_command

    with lend(_flags(ctx)):
        code = token_command("revoke", name, "", db)
    raise typer.Exit(code)


@token_app.command("list")
def token_list(ctx: typer.Context, db: WorkersDbOpt = None) -> None:
    """The stored workers' tokens: names, pools, live or revoked (never the tokens)."""
    from devagent.worker.cli import token_command

    with lend(_flags(ctx)):
        code = token_command("list", "", "", db)
    raise typer.Exit(code)


@app.command(context_settings=_DOOR_FLAGS, add_help_option=False)
def wire(ctx: typer.Context) -> None:
    """Serve wire mode (JSON-RPC over stdio); `devagent wire --help` lists the flags.

    devagent wire --work-dir DIR [--session ID] [--model M] [--base-url URL] [--api-key KEY] [--yolo];
    `devagent --wire …` is the same."""
    raise typer.Exit(_stdio_door("wire")(list(ctx.args), _flags(ctx)))


@app.command(context_settings=_DOOR_FLAGS, add_help_option=False)
def acp(ctx: typer.Context) -> None:
    """Serve the Agent Client Protocol on stdio, for editors (Zed, JetBrains, Neovim, Emacs).

    devagent acp [--work-dir DIR] [--model M] [--approval MODE] [--session ID]; `devagent acp --help`
    lists the flags."""
    raise typer.Exit(_stdio_door("acp")(list(ctx.args), _flags(ctx)))


@app.command(context_settings=_DOOR_FLAGS, add_help_option=False)
def mcp(ctx: typer.Context) -> None:
    """Serve devagent as an MCP server on stdio, for MCP hosts (Claude, Cursor, VS Code, Codex, ...).

    devagent mcp [--work-dir DIR] [--model M] [--approval MODE] [--db URL]; `devagent mcp --help`
    lists the flags."""
    raise typer.Exit(_stdio_door("mcp")(list(ctx.args), _flags(ctx)))


@app.command()
def info(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Also send the model one short request (exit 1 if it fails)")
    ] = False,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = None,
) -> None:
    """Print versions and the resolved configuration: model, provider URL, settings file, database,
    sandbox, workspace roots (never a key); --model and the model flags as run and chat take them."""
    from devagent.info import print_info  # late: each command loads its own modules

    given = {"default_model": model, "model_base_url": base_url, "model_api_key": api_key}
    raise typer.Exit(print_info(as_json, check, {**_flags(ctx).settings(), **given}))


def main() -> None:
    """Entry point. `devagent --wire …` (the flag form existing wire clients launch) goes to wire mode.

    Every error a user can cause ends as one line on stderr and exit code 2 (usage) or 1 (runtime);
    `--debug` anywhere on the line (or DEVAGENT_DEBUG=1) also prints the traceback."""
    startup_gc.quiet()  # no cyclic collection while the command imports (common/startup_gc.py)
    httpx_patch.skip_command_line_client()  # a client this process never runs, not imported
    argv = sys.argv[1:]
    wire_mode = "--wire" in argv or argv[:1] == ["wire"]
    acp_mode = argv[:1] == ["acp"]
    mcp_mode = argv[:1] == ["mcp"]
    # the stdio doors' own --debug also turns their logging up
    argv, flags = take(argv, keep_debug=wire_mode or acp_mode or mcp_mode)
    try:
        door = "wire" if wire_mode else "mcp" if mcp_mode else "acp" if acp_mode else None
        if door is not None:  # fast path, no Typer parsing: a client waits for `initialize`
            code: Any = _stdio_door(door)(argv, flags)
        else:
            os.environ.setdefault("PYTHONUNBUFFERED", "1")
            if not argv and sys.stdin.isatty() and sys.stdout.isatty():
                argv = ["chat"]  # `devagent` alone in a terminal opens the interactive session
            code = _typer_main(argv, flags)
    except KeyboardInterrupt:
        print("devagent: cancelled (Ctrl-C).", file=sys.stderr)
        code = 130
    except Exception as e:
        code = report("devagent", e, flags.debug)
    raise SystemExit(code if isinstance(code, int) else 0)


def _stdio_door(name: str) -> Callable[[list[str], GlobalFlags], int]:
    """The command line of the stdio door `name` (wire, acp or mcp), which parses the door's own
    flags and serves it."""
    # late: each door loads only its own modules
    if name == "wire":
        from devagent.wire.cli import wire_from_argv

        return wire_from_argv
    if name == "acp":
        from devagent.acp.cli import acp_from_argv

        return acp_from_argv
    from devagent.mcp.cli import mcp_from_argv

    return mcp_from_argv


def _typer_main(argv: list[str], flags: GlobalFlags) -> Any:
    """Typer without its own error handling: a usage error is one line, not a framed box. The
    commands find the global flags in their context's `obj`."""
    from typer._click import exceptions as click  # Typer's own copy of Click's exceptions

    try:
        return app(args=argv, prog_name="devagent", standalone_mode=False, obj=flags)
    except click.NoArgsIsHelpError as e:
        typer.echo(e.ctx.get_help() if e.ctx else e.format_message())
        return 0
    except click.UsageError as e:
        where = e.ctx.command_path if e.ctx is not None else "devagent"
        message = e.format_message().replace("\n", " ")
        print(f"{where}: {message} (see '{where} --help')", file=sys.stderr)
        from devagent.terminal.headless import emit, error_result, json_format  # late: a JSON run's only

        if json_format(argv):  # a script reads the error as the result it waits for
            emit(error_result(message))
        return 2
    except typer.Abort:
        print("devagent: cancelled.", file=sys.stderr)
        return 130
    except click.ClickException as e:
        print(f"devagent: {e.format_message()}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    main()
