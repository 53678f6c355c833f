"""`devagent serve`: flags to settings, then the server. Kept apart from `devagent.cli` so the
command line's own module stays small."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from devagent.a2a.settings import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    A2ASettings,
    parse_token_args,
    parse_workspace_for,
)

# A2ASettings field -> environment variable (server-only settings without a flag)
PUSH_ENV = {
    "push_timeout": "DEVAGENT_PUSH_TIMEOUT",
    "push_max_attempts": "DEVAGENT_PUSH_MAX_ATTEMPTS",
    "push_backoff": "DEVAGENT_PUSH_BACKOFF",
    "push_poll_interval": "DEVAGENT_PUSH_POLL_INTERVAL",
    "push_lease": "DEVAGENT_PUSH_LEASE",
}

# A2ASettings field -> environment variable: limits on what a client sends (issue 12 item 2)
LIMIT_ENV = {
    "max_body_bytes": "DEVAGENT_MAX_BODY_BYTES",
    "max_json_depth": "DEVAGENT_MAX_JSON_DEPTH",
    "max_parts": "DEVAGENT_MAX_PARTS",
    "max_tools": "DEVAGENT_MAX_TOOLS",
    "max_streams_per_token": "DEVAGENT_MAX_STREAMS_PER_TOKEN",  # also --max-streams-per-token
}
# limits where 0 means "no limit"
ZERO_IS_UNLIMITED = frozenset(("max_streams_per_token",))


def limit_settings_from_env(environ: dict[str, str] | None = None) -> dict[str, int]:
    """The limits given in the environment; ValueError names a bad one."""
    from devagent.common.jsonlimits import positive_int_from_env

    out: dict[str, int] = {}
    for name, var in LIMIT_ENV.items():
        value = positive_int_from_env(var, environ, zero=name in ZERO_IS_UNLIMITED)
        if value is not None:
            out[name] = value
    return out


def push_settings_from_env(environ: dict[str, str] | None = None) -> dict[str, float | int]:
    """The push settings given in the environment; ValueError names a bad one."""
    env = os.environ if environ is None else environ
    out: dict[str, float | int] = {}
    for name, var in PUSH_ENV.items():
        raw = env.get(var, "").strip()
        if not raw:
            continue
        try:
            value: float | int = int(raw) if name == "push_max_attempts" else float(raw)
        except ValueError:
            raise ValueError(f"{var} must be a number, not {raw!r}") from None
        if value <= 0:
            raise ValueError(f"{var} must be positive")
        out[name] = value
    return out


def serve_command(
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    grpc_port: int | None = None,
    workspace_roots: list[Path] | None = None,
    db: str | None = None,
    tokens: list[str] | None = None,
    workspace_for: list[str] | None = None,
    model: str | None = None,
    approval: str | None = None,
    allow_private_webhooks: bool = False,
    public_url: str | None = None,
    lease_seconds: float | None = None,
    sandbox: bool | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    log_level: str = "warning",
    log_format: str = "text",
    max_streams_per_token: int | None = None,
    mcp: bool = False,
    console: bool = True,
    metrics_token: str | None = None,
) -> int:
    from devagent.config import ConfigError, load_config
    from devagent.preflight import StartError, check_db_url, check_model, report

    try:
        config = load_config(
            {
                "db_url": db,
                "default_model": model,
                "model_base_url": base_url,
                "model_api_key": api_key,
                "approval_mode": approval,
                "lease_seconds": lease_seconds,
            }
        )
    except ConfigError as e:
        print(f"devagent: {e}", file=sys.stderr)
        return 2
    if log_format not in ("text", "json"):
        print(f"devagent: --log-format must be text or json, not {log_format!r}", file=sys.stderr)
        return 2
    if not 0 <= port <= 65535:
        print(f"devagent: --port {port} is not a port: give 1-65535, or 0 for any free port", file=sys.stderr)
        return 2
    if grpc_port is not None and not 0 <= grpc_port <= 65535:
        print(f"devagent: --grpc-port {grpc_port} is not a port: give 1-65535 or 0", file=sys.stderr)
        return 2
    try:  # what can be known without the database or a provider, before anything listens
        check_model(config)
        check_db_url(config.db_url)
    except StartError as e:
        return report("devagent", e)
    roots = list(workspace_roots or [])
    for r in roots:
        if not r.is_dir():
            print(f"devagent: workspace root {r} is not a directory", file=sys.stderr)
            return 2
    try:
        push = push_settings_from_env()
        limits = limit_settings_from_env()
    except ValueError as e:
        print(f"devagent: {e}", file=sys.stderr)
        return 2
    if max_streams_per_token is not None:  # the flag over the environment
        if max_streams_per_token < 0:
            print("devagent: --max-streams-per-token must be 0 (no limit) or more", file=sys.stderr)
            return 2
        limits["max_streams_per_token"] = max_streams_per_token
    plain_approval = os.environ.get("DEVAGENT_PLAIN_APPROVAL", "ask").strip().lower()
    if plain_approval not in ("ask", "deny", "server"):
        print(
            f"devagent: DEVAGENT_PLAIN_APPROVAL must be ask, deny or server, not {plain_approval!r}",
            file=sys.stderr,
        )
        return 2
    replica_events = os.environ.get("DEVAGENT_REPLICA_EVENTS", "on").strip().lower()
    if replica_events not in ("on", "off", "true", "false", "1", "0"):
        print(f"devagent: DEVAGENT_REPLICA_EVENTS must be on or off, not {replica_events!r}", file=sys.stderr)
        return 2
    card_version = os.environ.get("DEVAGENT_CARD_VERSION", "0.3").strip()
    if card_version not in ("0.3", "1.0"):
        print(f"devagent: DEVAGENT_CARD_VERSION must be 0.3 or 1.0, not {card_version!r}", file=sys.stderr)
        return 2
    token_values = list(tokens or [])
    if not token_values and os.environ.get("DEVAGENT_TOKEN"):
        token_values = [os.environ["DEVAGENT_TOKEN"]]
    mapping = list(workspace_for or [])
    if not mapping and os.environ.get("DEVAGENT_WORKSPACE_FOR"):
        mapping = [os.environ["DEVAGENT_WORKSPACE_FOR"]]
    try:
        mapped = parse_workspace_for(mapping)
    except ValueError as e:
        print(f"devagent: {e}", file=sys.stderr)
        return 2
    settings = A2ASettings(
        host=host,
        port=port,
        grpc_port=grpc_port,
        workspace_roots=roots,
        workspace_for=mapped,
        tokens=parse_token_args(token_values),
        allow_private_webhooks=allow_private_webhooks,
        public_url=public_url or "",
        replica_events=replica_events in ("on", "true", "1"),
        plain_approval=plain_approval,
        card_default_version=card_version,
        mcp=mcp,
        console=console,
        metrics_token=(metrics_token or "").strip(),
        **push,  # type: ignore[arg-type]
        **limits,  # type: ignore[arg-type]
    )
    try:
        settings.check_bind()
        settings.check_metrics_token()
        settings.check_identities()  # issue 20 item 4: names become workspace folders
    except ValueError as e:
        print(f"devagent: {e}", file=sys.stderr)
        return 2
    from devagent import telemetry
    from devagent.a2a.server import start_preload

    # Decided before the preload imports the a2a SDK, whose own tracing follows devagent's.
    telemetry.configure(config.traces, config.trace_content)
    start_preload()  # the server's imports, in a thread, while the sandbox is probed and uvicorn starts
    from devagent.agent.tools.shell import SandboxError, setup_sandbox

    try:
        # Every root hidden, the operator's mapped ones too: a session's command sees its own
        # workspace only.
        identity_roots = [r for roots in settings.workspace_for.values() for r in roots]
        line = setup_sandbox(sandbox, config, "serve", hide=[*settings.workspace_roots, *identity_roots])
        print(line, file=sys.stderr, flush=True)
        _warn_unwritable_roots(settings, identity_roots)
    except SandboxError as e:
        print(f"devagent: {e}", file=sys.stderr)
        return 2
    from devagent.a2a.observe import configure_logging
    from devagent.a2a.server import run_server

    configure_logging(log_format)  # one line per request and per turn, at info level
    try:
        run_server(config, settings, log_level=log_level)
    except KeyboardInterrupt:
        pass
    except StartError as e:
        return report("devagent", e)
    except OSError as e:
        print(f"devagent: cannot listen on {host}:{port}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0


def _warn_unwritable_roots(settings: A2ASettings, identity_roots: list[Path]) -> None:
    """Says at start which roots callers work in directly that the sandbox user cannot write (a
    root-owned checkout under a root server): every command there would be refused until the
    operator gives the folder to that user. Folders the server makes per identity are given to it."""
    from devagent.agent.tools.shell import active_sandbox

    sandbox = active_sandbox()
    if sandbox is None:
        return
    direct = identity_roots if settings.per_identity else [*settings.workspace_roots, *identity_roots]
    for root in direct:
        if (why := sandbox.unwritable([root], str(root))) is not None:
            print(f"Shell sandbox: commands in {root} will be refused: {why}.", file=sys.stderr)
