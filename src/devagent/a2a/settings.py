"""Server-side settings of the A2A adapter (flags of `devagent serve`)."""

from __future__ import annotations

import ipaddress
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from devagent.common.identity import OidcSettings
from devagent.common.identity.settings import IDENTITY_PREFIX
from devagent.common.jsonlimits import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_DEPTH

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 41242
# The HTTP+JSON binding (A2A 1.0 at REST_PREFIX, v0.3 at REST_PREFIX/v1), beside JSON-RPC at `/`
# and the Gemini CLI routes, which share no path with it.
REST_PREFIX = "/rest"


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class A2ASettings:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    # Directories a client's AgentSettings.workspace_path must lie in. Empty: the current
    # directory. The first one is the workspace of clients that send no AgentSettings.
    workspace_roots: list[Path] = field(default_factory=list)
    # token -> user name (the owner of the tasks created with it). Empty: one is generated.
    tokens: dict[str, str] = field(default_factory=dict)
    public_url: str = ""  # the URL the card advertises; default http://host:port
    # The gRPC binding's port (None: no gRPC; 0: a free port, chosen by `resolve_grpc_port`).
    grpc_port: int | None = None
    allow_private_webhooks: bool = False  # push to loopback/private addresses
    push_timeout: float = 10.0
    push_max_attempts: int = 5
    push_backoff: float = 0.5  # first retry delay, doubled on each attempt
    # How often a replica looks in the database for notifications other replicas queued or left
    # behind (its own are sent at once), and how long a claim on one lasts: a replica that died
    # holding one delays it by up to this long. Kept well above push_timeout.
    push_poll_interval: float = 2.0
    push_lease: float = 60.0
    # With PostgreSQL: log each turn's live events for the other replicas (tasks/resubscribe through
    # a replica that does not run the turn). Off only for a deployment of one replica.
    replica_events: bool = True
    # The approval mode of a conversation a plain A2A client (one without the development-tool
    # extension) starts: "ask" (it is asked in words), "deny" (edits and commands are refused, as
    # in plan mode) or "server" (the server's own mode). Never more than the server's mode allows.
    plain_approval: str = "ask"
    # The card for a client that does not say which protocol version it speaks (no `A2A-Version`):
    # "0.3", as A2A 1.0 says to assume, or "1.0" where every such client speaks 1.0.
    card_default_version: str = "0.3"
    # Serve the MCP door too, over streamable HTTP at /mcp behind the same tokens.
    mcp: bool = False
    # Serve the web console at /ui: same origin and tokens as A2A.
    console: bool = True
    agent_name: str = "devagent"
    interrupted_task_timeout: float | None = 600.0  # release parked input-required tasks from memory
    # Limits on what a client sends, far above what a real client needs: the
    # request body (HTTP 413), JSON nesting (checked before parsing), parts and tool definitions
    # in one message, streams a token may hold open at once (every binding's; 0: no limit).
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_json_depth: int = DEFAULT_MAX_DEPTH
    max_parts: int = 1000
    max_tools: int = 512
    max_streams_per_token: int = 32

    # The token that reads /metrics with each caller's spend (`--metrics-token`; a Prometheus
    # scraper's): valid for /metrics alone. Callers' tokens read the totals only.
    metrics_token: str = ""

    # The operator's map of identities (`--token NAME=T`) to their own workspace roots
    # (`--workspace-for NAME=DIR`); identities not in it get a folder of their own under each
    # root, on a server with named tokens.
    workspace_for: dict[str, list[Path]] = field(default_factory=dict)
    # Not a setting: what the server does with a caller's folder it just made (the core's
    # sandboxes give it to the user their commands run as, set when the core opens).
    give_folder: Callable[[Path], None] = field(default=lambda _folder: None, compare=False, repr=False)
    # Not a setting: whether the process is stopping (set by `serve`), so a held long poll answers
    # at once instead of holding the graceful shutdown up.
    stopping: Callable[[], bool] = field(default=lambda: False, compare=False, repr=False)

    # The operator's identity provider (DEVAGENT_OIDC_*): its access tokens are accepted beside
    # the static tokens, each naming the identity `oidc:<claim>`. None: static tokens only.
    oidc: OidcSettings | None = None

    def __post_init__(self) -> None:
        self.workspace_roots = [Path(p).resolve() for p in (self.workspace_roots or [Path.cwd()])]
        self.workspace_for = {n: [Path(p).resolve() for p in ps] for n, ps in self.workspace_for.items()}

    @property
    def per_identity(self) -> bool:
        """Whether callers' files are kept apart: the tokens name two identities or more
        (`--token alice=T1 --token bob=T2`), or the operator maps identities to roots. With one
        identity there is no one to keep apart, and its workspaces are the roots themselves."""
        return bool(self.workspace_for) or self.oidc is not None or len(set(self.tokens.values())) > 1

    @property
    def oidc_resolved(self) -> OidcSettings | None:
        """The IdP settings with this server's URL as the audience when the operator names none
        (the resource a client asks its token for: RFC 8707, and the MCP door's metadata)."""
        return self.oidc.with_audiences(self.base_url) if self.oidc is not None else None

    def roots_for(self, identity: str) -> list[Path]:
        """The workspace roots of a caller: the operator's mapping for it, else,
        on a server with named tokens, its own folder under each root (created 0700 on first
        use), else the roots. A caller's AgentSettings.workspace_path must lie in these; the first
        is its workspace when it names none. One identity never names another's folder or a root
        itself."""
        if identity in self.workspace_for:
            return self.workspace_for[identity]
        if not self.per_identity or not identity:
            return self.workspace_roots
        folder = identity_folder(identity)
        own = [root / folder for root in self.workspace_roots]
        for d in own:
            if not d.is_dir():
                d.parent.mkdir(mode=0o711, exist_ok=True)  # `.oidc` (identity_folder)
                d.mkdir(mode=0o700, exist_ok=True)
                self.give_folder(d)
        return own

    def check_identities(self) -> None:
        """ValueError for an identity name that cannot be a folder name, or a mapped root that is
        not a directory."""
        for name in set(self.tokens.values()):
            check_identity(name)
        for name in self.workspace_for:
            if not name.startswith(IDENTITY_PREFIX):  # an IdP's identity is never a token's name
                check_identity(name)
        for name, roots in self.workspace_for.items():
            for r in roots:
                if not r.is_dir():
                    raise ValueError(f"--workspace-for {name}={r}: not a directory")

    def ensure_token(self) -> str | None:
        """Generates a token when none is configured; returns it (to print) or None."""
        if self.tokens or self.oidc is not None:
            return None
        tok = secrets.token_urlsafe(24)
        self.tokens = {tok: "user"}
        return tok

    def check_metrics_token(self) -> None:
        """ValueError when the metrics token is also a caller's token (it must name no caller)."""
        if self.metrics_token and self.metrics_token in self.tokens:
            raise ValueError("--metrics-token must differ from every --token")

    def check_bind(self) -> None:
        """A server bound beyond loopback refuses to start without credentials."""
        if not self.tokens and self.oidc is None and not is_loopback_host(self.host):
            raise ValueError(
                f"refusing to listen on {self.host} without a token: pass --token or DEVAGENT_TOKEN, "
                "or name an identity provider (DEVAGENT_OIDC_ISSUER)"
            )

    def resolve_grpc_port(self) -> None:
        """A gRPC port of 0 becomes a free one now, so that the card can name it before the
        gRPC server (loaded with the rest of the app) binds it."""
        if self.grpc_port == 0:
            import socket

            with socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET) as s:
                s.bind((self.host, 0))
                self.grpc_port = s.getsockname()[1]

    @property
    def grpc_connect_host(self) -> str:
        """Where this process reaches its own gRPC server (a wildcard bind: on loopback)."""
        if self.host in ("", "0.0.0.0"):
            return "127.0.0.1"
        return "::1" if self.host == "::" else self.host

    @property
    def grpc_url(self) -> str:
        """Where the card says gRPC is served: the origin of the server's URL (gRPC is served on
        its port too, shared_port.py), so that every interface is on the card's origin."""
        from urllib.parse import urlsplit

        parts = urlsplit(self.base_url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def grpc_address(self) -> str:
        """The gRPC server's own port as a gRPC target, `host:port` (printed at the start)."""
        from urllib.parse import urlsplit

        host = urlsplit(self.base_url).hostname or self.host
        host = host if ":" not in host else f"[{host}]"
        return f"{host}:{self.grpc_port}"

    @property
    def base_url(self) -> str:
        if self.public_url:
            return self.public_url.rstrip("/")
        host = self.host if ":" not in self.host else f"[{self.host}]"
        if host in ("0.0.0.0", "[::]"):
            host = "127.0.0.1"
        return f"http://{host}:{self.port}"


_IDENTITY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")


def identity_folder(identity: str) -> str:
    """The folder, under each workspace root, of an identity: a static token's name itself; an IdP
    identity's under `.oidc/` (no static name starts with '.'), as its claim where that is a
    folder name too, else as `@` and a digest of it (`@` is in no claim kept as it is)."""
    if not identity.startswith(IDENTITY_PREFIX):
        check_identity(identity)
        return identity
    claim = identity.removeprefix(IDENTITY_PREFIX)
    if _IDENTITY.fullmatch(claim) and claim not in (".", ".."):
        return f".oidc/{claim}"
    import hashlib

    return ".oidc/@" + hashlib.sha256(claim.encode()).hexdigest()[:40]


def check_identity(name: str) -> None:
    """An identity name is a folder name of the workspace roots: letters, digits, `.`, `_`, `-`."""
    if not _IDENTITY.fullmatch(name) or name in (".", ".."):
        raise ValueError(
            f"the identity name {name!r} (--token NAME=T) must be letters, digits, '.', '_' or '-' "
            "(at most 64, not starting with '.' or '-'): it names the identity's workspace folder"
        )


def _items(values: list[str]) -> list[str]:
    """The items of a repeatable flag whose values may also be comma-separated lists, stripped,
    empty ones left out."""
    return [item.strip() for v in values for item in v.split(",") if item.strip()]


def parse_workspace_for(values: list[str]) -> dict[str, list[Path]]:
    """`--workspace-for NAME=DIR` (repeatable; DEVAGENT_WORKSPACE_FOR comma-separated): the
    roots of an identity. ValueError for an item without NAME= or DIR."""
    out: dict[str, list[Path]] = {}
    for item in _items(values):
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ValueError(f"--workspace-for {item!r}: give NAME=DIR")
        out.setdefault(name.strip(), []).append(Path(path.strip()).expanduser())
    return out


def parse_token_args(values: list[str]) -> dict[str, str]:
    """`--token T` (owner "user") or `--token NAME=T`, repeatable; also the DEVAGENT_TOKEN value
    (comma-separated)."""
    out: dict[str, str] = {}
    for item in _items(values):
        name, sep, tok = item.partition("=")
        if sep and name and tok:
            out[tok] = name
        else:
            out[item] = "user"
    return out
