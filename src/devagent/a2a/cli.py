"""`devagent serve`: flags to settings, then the server. Kept apart from `devagent.cli` so the
command line's own module stays small."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devagent import telemetry
from devagent.a2a import server
from devagent.a2a.observe import configure_logging
from devagent.a2a.settings import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    A2ASettings,
    parse_token_args,
    parse_workspace_for,
)
from devagent.agent.api import SandboxError, setup_sandbox
from devagent.common.identity.settings import oidc_settings
from devagent.common.jsonlimits import positive_int_from_env
from devagent.config import ConfigError, load_config, serve_file_settings
from devagent.preflight import StartError, check_db_url, check_model, report

if TYPE_CHECKING:
    from devagent.agent.api import CoreConfig

# A2ASettings field -> environment variable (server-only settings without a flag)
PUSH_ENV = {
    "push_timeout": "DEVAGENT_PUSH_TIMEOUT",
    "push_max_attempts": "DEVAGENT_PUSH_MAX_ATTEMPTS",
    "push_backoff": "DEVAGENT_PUSH_BACKOFF",
    "push_poll_interval": "DEVAGENT_PUSH_POLL_INTERVAL",
    "push_lease": "DEVAGENT_PUSH_LEASE",
}

# A2ASettings field -> environment variable: limits on what a client sends
LIMIT_ENV = {
    "max_body_bytes": "DEVAGENT_MAX_BODY_BYTES",
    "max_json_depth": "DEVAGENT_MAX_JSON_DEPTH",
    "max_parts": "DEVAGENT_MAX_PARTS",
    "max_tools": "DEVAGENT_MAX_TOOLS",
    "max_streams_per_token": "DEVAGENT_MAX_STREAMS_PER_TOKEN",  # also --max-streams-per-token
}
# limits where 0 means "no limit"
ZERO_IS_UNLIMITED = frozenset(("max_streams_per_token",))


def limit_settings_from_env(environ: Mapping[str, str] | None = None) -> dict[str, int]:
    """The limits given in the environment; ValueError names a bad one."""
    out: dict[str, int] = {}
    for name, var in LIMIT_ENV.items():
        value = positive_int_from_env(var, environ, zero=name in ZERO_IS_UNLIMITED)
        if value is not None:
            out[name] = value
    return out


def push_settings_from_env(environ: Mapping[str, str] | None = None) -> dict[str, float | int]:
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


def _check_listen_flags(port: int, grpc_port: int | None, log_format: str) -> None:
    """ValueError names a flag with a value the server cannot use."""
    if log_format not in ("text", "json"):
        raise ValueError(f"--log-format must be text or json, not {log_format!r}")
    if not 0 <= port <= 65535:
        raise ValueError(f"--port {port} is not a port: give 1-65535, or 0 for any free port")
    if grpc_port is not None and not 0 <= grpc_port <= 65535:
        raise ValueError(f"--grpc-port {grpc_port} is not a port: give 1-65535 or 0")


def _choice(
    environ: Mapping[str, str],
    var: str,
    default: str,
    allowed: tuple[str, ...],
    said: str,
    *,
    lower: bool = True,
) -> str:
    """One of `allowed` from the variable (in lower case, unless not `lower`), else ValueError."""
    value = environ.get(var, default).strip()
    value = value.lower() if lower else value
    if value not in allowed:
        raise ValueError(f"{var} must be {said}, not {value!r}")
    return value


def server_env_settings(environ: Mapping[str, str], max_streams_per_token: int | None) -> dict[str, Any]:
    """The A2ASettings fields the environment gives (push, limits, the plain clients' approval,
    replica events, the card's default version), `--max-streams-per-token` over its variable;
    ValueError names a bad one."""
    out: dict[str, Any] = {**push_settings_from_env(environ), **limit_settings_from_env(environ)}
    if max_streams_per_token is not None:  # the flag over the environment
        if max_streams_per_token < 0:
            raise ValueError("--max-streams-per-token must be 0 (no limit) or more")
        out["max_streams_per_token"] = max_streams_per_token
    out["plain_approval"] = _choice(
        environ, "DEVAGENT_PLAIN_APPROVAL", "ask", ("ask", "deny", "server"), "ask, deny or server"
    )
    replica_events = _choice(
        environ, "DEVAGENT_REPLICA_EVENTS", "on", ("on", "off", "true", "false", "1", "0"), "on or off"
    )
    out["replica_events"] = replica_events in ("on", "true", "1")
    out["card_default_version"] = _choice(
        environ, "DEVAGENT_CARD_VERSION", "0.3", ("0.3", "1.0"), "0.3 or 1.0", lower=False
    )
    return out


def _flag_or_env(values: list[str] | None, environ: Mapping[str, str], var: str) -> list[str]:
    """A repeatable flag's values, else the one its environment variable holds."""
    given = list(values or [])
    if not given and environ.get(var):
        given = [environ[var]]
    return given


@dataclass(slots=True)
class ServeFlags:
    """The flags of `devagent serve`; None (or nothing) where a flag is not given: the
    environment's value, else the setting's."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    grpc_port: int | None = None
    workspace_roots: list[Path] = field(default_factory=list)
    db: str | None = None
    tokens: list[str] | None = None
    workspace_for: list[str] | None = None
    model: str | None = None
    approval: str | None = None
    allow_private_webhooks: bool = False
    public_url: str | None = None
    lease_seconds: float | None = None
    sandbox: bool | None = None
    sandbox_backend: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    log_level: str = "warning"
    log_format: str = "text"
    max_streams_per_token: int | None = None
    mcp: bool = False
    console: bool = True
    metrics_token: str | None = None
    worker_tokens: list[str] | None = None  # --worker-token NAME=TOKEN
    # the identity provider's flags, by OidcSettings field (devagent.common.identity.settings)
    oidc: dict[str, str | None] = field(default_factory=dict)


def serve_settings(
    environ: Mapping[str, str], flags: ServeFlags, config_path: Path | None = None
) -> A2ASettings:
    """The server's settings from its flags, the environment where a flag is not given, and the
    settings file (`config_path`) for the keys it may hold; ValueError says what is wrong."""
    for r in flags.workspace_roots:
        if not r.is_dir():
            raise ValueError(f"workspace root {r} is not a directory")
    from_env = server_env_settings(environ, flags.max_streams_per_token)
    mapped = parse_workspace_for(_flag_or_env(flags.workspace_for, environ, "DEVAGENT_WORKSPACE_FOR"))
    settings = A2ASettings(
        host=flags.host,
        port=flags.port,
        grpc_port=flags.grpc_port,
        workspace_roots=list(flags.workspace_roots),
        workspace_for=mapped,
        tokens=parse_token_args(_flag_or_env(flags.tokens, environ, "DEVAGENT_TOKEN")),
        allow_private_webhooks=flags.allow_private_webhooks,
        public_url=flags.public_url or "",
        mcp=flags.mcp,
        console=flags.console,
        metrics_token=(flags.metrics_token or "").strip(),
        oidc=oidc_settings(
            environ, serve_file_settings(config_path), flags.oidc, str(config_path or "the settings file")
        ),
        **from_env,
    )
    settings.check_bind()
    settings.check_metrics_token()
    settings.check_identities()  # names become workspace folders
    return settings


def serve_command(flags: ServeFlags) -> int:
    """`devagent serve`: the flags checked, then the server until it is stopped; the exit code."""
    overrides = {
        "db_url": flags.db,
        "default_model": flags.model,
        "model_base_url": flags.base_url,
        "model_api_key": flags.api_key,
        "approval_mode": flags.approval,
        "lease_seconds": flags.lease_seconds,
        "sandbox_backend": flags.sandbox_backend,
        "worker_tokens": tuple(flags.worker_tokens) if flags.worker_tokens else None,
    }
    try:
        config = load_config(overrides)
        _check_listen_flags(flags.port, flags.grpc_port, flags.log_format)
    except (ConfigError, ValueError) as e:
        print(f"devagent: {e}", file=sys.stderr)
        return 2
    try:  # what can be known without the database or a provider, before anything listens
        check_model(config)
        check_db_url(config.db_url)
    except StartError as e:
        return report("devagent", e)
    try:
        settings = serve_settings(os.environ, flags, config.config_path)
        _check_worker_tokens(config, settings)
    except ValueError as e:
        print(f"devagent: {e}", file=sys.stderr)
        return 2
    return _serve(
        config, settings, sandbox=flags.sandbox, log_format=flags.log_format, log_level=flags.log_level
    )


def _check_worker_tokens(config: CoreConfig, settings: A2ASettings) -> None:
    """ValueError when a worker's token is malformed or is also a caller's or the metrics token:
    a worker's token opens the workers' door only."""
    from devagent.a2a.worker_routes import parse_worker_tokens

    workers = parse_worker_tokens(config.worker_tokens)
    if set(workers) & {*settings.tokens, settings.metrics_token}:
        raise ValueError(
            "a worker's token (--worker-token) must differ from every caller's and the metrics token"
        )


def _serve(
    config: CoreConfig, settings: A2ASettings, *, sandbox: bool | None, log_format: str, log_level: str
) -> int:
    """Tracing decided, the server's imports started, the shell sandbox set up; then the server
    runs until it is stopped."""
    # Decided before the preload imports the a2a SDK, whose own tracing follows devagent's.
    telemetry.configure(config.traces, config.trace_content)
    server.start_preload()  # the server's imports, in a thread, while the sandbox is probed, uvicorn starts
    try:
        # Every root hidden, the operator's mapped ones too: a session's command sees its own
        # workspace only.
        identity_roots = [r for roots in settings.workspace_for.values() for r in roots]
        roots = [*settings.workspace_roots, *identity_roots]
        line = setup_sandbox(sandbox, config, "serve", hide=roots, owned_by=roots)
        print(line, file=sys.stderr, flush=True)
        _warn_unwritable_roots(config, settings, identity_roots)
    except SandboxError as e:
        print(f"devagent: {e}", file=sys.stderr)
        return 2
    configure_logging(log_format)  # one line per request and per turn, at info level
    try:
        server.run_server(config, settings, log_level=log_level)
    except KeyboardInterrupt:
        pass
    except StartError as e:
        return report("devagent", e)
    except OSError as e:
        where = f"{settings.host}:{settings.port}"
        print(f"devagent: cannot listen on {where}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0


def _warn_unwritable_roots(config: CoreConfig, settings: A2ASettings, identity_roots: list[Path]) -> None:
    """Says at start which roots callers work in directly that the sandbox user cannot write (a
    root-owned checkout under a root server): every command there would be refused until the
    operator gives the folder to that user. Folders the server makes per identity are given to it."""
    sandboxes = config.sandboxes
    if sandboxes is None:
        return
    direct = identity_roots if settings.per_identity else [*settings.workspace_roots, *identity_roots]
    for root in direct:
        if (why := sandboxes.refuses(root)) is not None:
            print(f"Shell sandbox: commands in {root} will be refused: {why}.", file=sys.stderr)
