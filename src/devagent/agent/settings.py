"""The core's settings (`CoreConfig`) and the facts about paths they imply: a leaf module every
layer may read (the settings file loader fills it; the core, its tools and the doors read it)."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from devagent.common.netpolicy import IPNetwork, parse_networks

# How much each approval mode lets run without asking.
PERMISSIVENESS = {"plan": 0, "ask": 1, "auto-edit": 2, "yolo": 3}


class Budget(NamedTuple):
    """A caller's budget; 0 means no limit."""

    tokens_per_day: int
    concurrent_turns: int
    usd_per_day: float


def requested_cap(value: object) -> float | None:
    """A caller's `max_cost_usd` (its cap on each task's cost) as a door received it: None when
    not given, else a number of US dollars (0: none of the caller's; the operator's
    `max_cost_usd_per_task` applies anyway). ValueError, for the door's error, when it is not one."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"max_cost_usd must be a number of US dollars, 0 or more, not {value!r}")
    return float(value)


def utc_day(ts: float | None = None) -> str:
    """The UTC day budgets and usage per caller are counted by."""
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


# A shell command's timeout when it names none, and the most it may name (seconds), as Claude Code
# has them: long enough for most builds and test runs, short enough to end a command that hangs.
SHELL_TIMEOUT = 120.0
SHELL_TIMEOUT_MAX = 600.0


@dataclass
class CoreConfig:
    """Server-side settings of the core. Adapters never widen these on a client's say-so."""

    db_url: str = ""  # "" -> sqlite file under data_dir
    data_dir: Path = field(default_factory=lambda: Path.home() / ".devagent")
    default_model: str = ""  # "" -> environment, then the offline demo model
    model_base_url: str | None = None
    model_api_key: str | None = None
    approval_mode: str = "ask"  # the default mode of new sessions
    # Modes a client may choose beyond those no more permissive than `approval_mode` (which it may
    # always choose). A client asking for another gets the default.
    allowed_approval_modes: tuple[str, ...] = ()
    allow_client_model: bool = True  # may a client pick the model of its session
    max_steps: int = 50  # model requests per turn
    # Subagents (the `task` tool, devagent/agent/subagents/runner.py): how many of one step's `task` calls
    # run at once, how deep subagents may nest (0: no `task` tool; 1: a session's subagents start
    # none of their own), and whether a workspace's subagent types may choose their model (the
    # types in the user's config folder always may).
    subagents_parallel: int = 4
    subagent_depth: int = 1
    subagent_workspace_models: bool = False
    # Claude Code's model names in its files (`sonnet`, `opus`, `haiku`) on each provider:
    # {provider: {family: model name}} over the built-in ones (devagent/agent/models/aliases.py).
    model_aliases: dict[str, dict[str, str]] = field(default_factory=dict)
    # Remote A2A agents as subagent types (devagent/agent/subagents/remote.py): {name: {card_url, and
    # bearer_token_env | api_key_header + api_key_env | oauth_token_url + oauth_client_id +
    # oauth_client_secret_env (+ oauth_scope)}}, and how long one exchange with one may take.
    remote_agents: dict[str, dict[str, str]] = field(default_factory=dict)
    remote_agent_timeout: float = 600.0
    # Shell commands (devagent/agent/tools/shell.py): the timeout of a command that names none, and
    # the most a command may ask for (a larger one is lowered to it).
    shell_timeout: float = SHELL_TIMEOUT
    shell_timeout_max: float = SHELL_TIMEOUT_MAX
    # Background processes (devagent/agent/tools/processes.py) are stopped after this many seconds
    # in which their session ran no turn and no call used them (0: never for that reason).
    shell_background_idle: float = 1800.0
    # The most background processes one caller (an identity; the local user is one) may have
    # running or starting at once across its sessions in this server process (0: no limit of its
    # own; each session runs at most 8 in any case).
    shell_background_per_caller: int = 16
    # The whole output of long commands is saved under data_dir/outputs for read_file: at most
    # this many MiB in all, the oldest removed first (0: not saved).
    shell_outputs_mb: int = 512
    # What a write or edit that introduces a syntax error does (tools/syntax.py): warn (written,
    # the errors in its result), refuse (nothing written, the errors returned) or off (no check).
    edit_syntax_check: str = "warn"
    # What a write or edit does when the project's own checkers (a language server, else ruff for
    # Python; tools/diagnostics.py) find problems it introduced: warn (written, the problems in
    # its result), refuse (undone, the problems returned) or off (not checked).
    edit_diagnostics: str = "warn"
    # Shell sandbox (devagent/agent/sandbox/): auto | on | off; "" is the
    # command's default (auto for `serve`, off for `run` and `wire`). The network inside it is
    # off unless `sandbox_network`.
    sandbox: str = ""
    # Where sandboxed commands run: local (bubblewrap on this host), container (a container per
    # session) or worker (a `devagent worker` elsewhere holds each session's sandbox).
    sandbox_backend: str = "local"
    sandbox_network: bool = False
    # Directories a sandboxed command may read although they are in the server's home (which it
    # cannot read): toolchains beyond those on PATH.
    sandbox_read: tuple[str, ...] = ()
    # Files and folders no sandboxed command may read, beyond those devagent hides itself (token
    # files, keys elsewhere on the machine).
    sandbox_hide: tuple[str, ...] = ()
    # The unprivileged user sandboxed commands run as where the server runs as root: a name, a
    # uid or uid:gid; "" is nobody.
    sandbox_user: str = ""
    # The container backend (agent/sandbox/container.py): the engine's command ("podman" or
    # "docker"); the templates a session's container is made from ({name: {image, memory_mb,
    # pids, network, ...}}, `parse_sandbox_templates`; the one named "default", else the first,
    # unless the operator names another); how many started containers per template wait in the
    # warm pool; after how many idle seconds a session's container is stopped (its volume stays).
    sandbox_engine: str = "podman"
    sandbox_templates: dict[str, dict[str, Any]] = field(default_factory=dict)
    # After how many seconds without activity in the store a session's container and its volume
    # are removed for good (agent/sandbox/sweep.py; 0: never, and nothing is swept): a server
    # never learns that a conversation is over, so without it each one keeps a stopped container.
    sandbox_keep_seconds: float = 7 * 86400.0
    sandbox_warm: int = 0
    sandbox_idle_seconds: float = 300.0
    # Where a container session's workspace lives: "host" (its first workspace root, a folder of
    # this host, is bind-mounted as /workspace) or "volume" (a named volume of the engine's own:
    # nothing of it on this host, the file tools work through the container, and replicas on one
    # engine need no shared filesystem).
    sandbox_workspace: str = "host"
    # The worker backend (`sandbox_backend = "worker"`, agent/sandbox/worker.py): the workers'
    # bearer tokens the server accepts ("NAME=TOKEN"; more are kept hashed in the store by
    # `devagent workers token add`), the pool this server's sessions go to, the template a worker
    # must offer ("": any), how long a worker's lease lasts unrenewed (a worker killed is replaced
    # after this long), and how long a call waits for a worker to connect or have room.
    worker_tokens: tuple[str, ...] = ()
    worker_pool: str = "default"
    worker_template: str = ""
    worker_lease_seconds: float = 15.0
    worker_wait_seconds: float = 120.0
    # How long a worker's poll is held open when no call is queued (below the idle limit of any
    # proxy or balancer between the workers and the servers).
    worker_poll_seconds: float = 25.0
    # What every program the agent starts gets from the server's environment beyond the
    # allow-list (devagent/agent/sandbox/childenv.py): names, or prefixes ending in `*`.
    env_pass: tuple[str, ...] = ()
    # Per-command limits of shell commands run here (0: none): data memory in MiB, and processes
    # of the server's user (not enforced for root, which the kernel exempts).
    command_memory_mb: int = 4096
    command_processes: int = 1024
    memory_file: str = "AGENTS.md"
    # Hooks (devagent/agent/hooks/): the file of commands run at points of every session, in
    # Claude Code's hooks JSON; "" for none. Only ever from the settings, never a workspace.
    hooks_file: str = ""
    # Which editing tools models get: auto (by model family: apply_patch for OpenAI's GPT and
    # codex models, edit for the others, both for the scripted and demo models) | edit |
    # apply_patch | both.
    edit_tools: str = "auto"
    # The family of models whose name does not show it, or overriding what it shows (a prompt,
    # tools and output caps per family; devagent/agent/prompt/family.py): "FAMILY" for every model,
    # "SPEC=FAMILY" for one (a SPEC ending in `*` for every model it starts); FAMILY is openai,
    # anthropic, gemini, small (a lighter tool set and a shorter prompt), scripted or other.
    model_family: tuple[str, ...] = ()
    sessions_in_memory: int = 256  # idle sessions kept loaded (the rest are reloaded on demand)
    # Idle sessions and cached stored tasks unused this long are let go too, and the memory they
    # held goes back to the system (common/memory.py); 0: kept until evicted.
    cache_idle_seconds: float = 300.0
    # A process changes a session only while it holds the session's lease in the database; a
    # running turn renews it every third of this. A process that died is replaced after this long
    # (at once when it ran on this host).
    lease_seconds: float = 10.0
    client_tool_allow: tuple[str, ...] = ()  # empty: every name allowed
    client_tool_deny: tuple[str, ...] = ()
    # MCP (devagent/agent/mcp/manager.py): the operator's servers, given to every session
    # ({name: {command, args, env, cwd} | {url, headers}}), and what a client may name for its session.
    mcp_servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    mcp_client_commands: tuple[str, ...] = ()  # stdio commands a client may start; empty: none
    mcp_client_http: bool = True  # may a client name streamable-HTTP servers
    mcp_client_url_prefixes: tuple[str, ...] = ()  # non-empty: a client's server URL must start with one
    # May a client name MCP servers at loopback/private addresses (SSRF guard, like webhooks)?
    mcp_client_private_urls: bool = False
    # Networks (CIDR) the operator allows client-named destinations in, webhooks, MCP servers and
    # web_fetch alike, although they are not global (devagent/common/netpolicy.py): e.g. "10.20.0.0/16".
    outbound_allow: tuple[str, ...] = ()
    # The web tools (devagent/agent/tools/web.py): may the model fetch URLs (public addresses, and
    # the networks of `outbound_allow`; asked like a command), and web search: off, native (the
    # provider's own search tool, for models that have one) or the URL of a SearXNG-compatible
    # search service (`?q=...&format=json`), sent `web_search_key` as a bearer token.
    web_fetch: bool = True
    web_search: str = "off"
    web_search_key: str | None = None
    mcp_start_timeout: float = 30.0
    mcp_call_timeout: float = 300.0
    # The model's context window in tokens (0: the known size of the session's model, else
    # 128,000), and the share of it past which a session compacts before its next model request
    # (devagent/agent/loop/compact.py).
    context_tokens: int = 0
    compact_at: float = 0.8
    # Mark prompt-cache breakpoints on Anthropic requests: the tool
    # definitions, the system prompt and the conversation so far are read from the provider's
    # cache by the next request. Other providers cache by themselves.
    prompt_cache: bool = True
    # Budgets per caller (0: none): tokens (input and output) per UTC day, turns running at
    # once, and USD per UTC day, for every identity; `budgets` overrides them per identity
    # ("NAME=TOKENS/TURNS[/USD]", "" for the local user's). Turns hold slots in the store while
    # they run (devagent/store/slots.py); tokens and dollars are checked before every model request.
    budget_tokens_per_day: int = 0
    budget_concurrent_turns: int = 0
    budgets: tuple[str, ...] = ()
    budget_usd_per_day: float = 0.0
    # The most one task (a turn, across its pauses, its subagents included) may cost in USD: the
    # cap of every task, and the ceiling of the cap a caller sets for its own (0: none).
    max_cost_usd_per_task: float = 0.0
    # The operator's prices (USD per million tokens) over the built-in ones, by model spec or
    # provider: {spec: {input, cached_input, cache_write, output}} (devagent/agent/models/prices.py).
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    # Traces (devagent/telemetry.py): auto (on when OTEL_EXPORTER_OTLP_ENDPOINT or
    # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT names a collector) | on | off; and whether spans may
    # carry prompts, answers, tool arguments and results.
    traces: str = "auto"
    trace_content: bool = False
    # Sessions from a repository (devagent/agent/repository/): the remotes a caller may name (URL
    # prefixes, or patterns where `*` is one path segment; empty: none), the operator's git
    # credentials per remote prefix ({prefix: {token_env | token_file (+ username) | helper}}),
    # the branch a result is pushed to ({session}, {identity}), and the setup scripts a caller may
    # choose (NAME=/path/to/script or NAME=repo:PATH; `default` runs when it names none).
    repository_remotes: tuple[str, ...] = ()
    git_credentials: dict[str, dict[str, str]] = field(default_factory=dict)
    result_branch_pattern: str = "devagent/{session}"
    repository_setup: tuple[str, ...] = ()
    # Not a setting: the settings file that was read (the operator's `--config`, or the user's
    # own), which no tool may change.
    config_path: Path | None = None
    # Not a setting: the sandboxes a door set up for the core that opens with these settings
    # (`sandbox.choose.setup_sandbox`, from the settings and the door's flags); None, the core
    # chooses from the settings alone when it opens.
    # Typed loosely: the settings sit below sandbox/ and import nothing of it; `AgentCore` reads
    # it as a `SandboxProvider`.
    sandboxes: Any = field(default=None, compare=False, repr=False)

    def budget_for(self, identity: str) -> Budget:
        """A caller's budget: its entry in `budgets`, else the settings for every caller. An entry
        without dollars (`NAME=TOKENS/TURNS`) keeps `budget_usd_per_day`."""
        for entry in self.budgets:
            name, _, limits = entry.partition("=")
            if name.strip() == identity:
                tokens, turns, usd = [*limits.split("/"), "", ""][:3]
                dollars = float(usd) if usd.strip() else self.budget_usd_per_day
                return Budget(int(tokens or 0), int(turns or 0), dollars)
        return Budget(self.budget_tokens_per_day, self.budget_concurrent_turns, self.budget_usd_per_day)

    def outbound_networks(self) -> tuple[IPNetwork, ...]:
        return parse_networks(self.outbound_allow)

    def resolved_db_url(self) -> str:
        if self.db_url:
            return self.db_url
        # Private state: the data directory is created 0700 (its database holds
        # transcripts); an existing one is left as its owner set it, the database file is 0600.
        if not self.data_dir.exists():
            self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.data_dir.chmod(0o700)  # mkdir's mode is reduced by the umask
        return f"sqlite+aiosqlite:///{self.data_dir / 'devagent.db'}"

    def protected_paths(self) -> tuple[Path, ...]:
        """What configures devagent or holds its state: no tool writes there, in any approval mode,
        and a sandboxed command cannot read it. The data directory, the user's
        config folder, the settings file read, and a SQLite database file with its companions
        wherever it is. Real paths, and a path is protected with everything under it."""
        return self.protected_dirs() + self.protected_files()

    def protected_dirs(self) -> tuple[Path, ...]:
        return _real(self.data_dir, user_config_dir())

    def protected_files(self) -> tuple[Path, ...]:
        """The settings file and a SQLite database's files (whether they exist yet or not)."""
        paths = [] if self.config_path is None else [self.config_path]
        db = sqlite_file(self.db_url)
        if db is not None:
            paths += [db, *(db.with_name(db.name + s) for s in ("-wal", "-shm", "-journal"))]
        return _real(*paths)


def _real(*paths: Path) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(Path(os.path.realpath(p.expanduser())) for p in paths))


SANDBOX_ENGINES = ("podman", "docker")
# A container template's keys and their types: what the operator may set (container.Template).
TEMPLATE_KEYS: dict[str, type] = {
    "image": str,
    "memory_mb": int,
    "pids": int,
    "network": str,
    "tmp_mb": int,
    "user": str,
    "nofile": int,
    "nproc": int,
    "workspace_mb": int,
}


def parse_sandbox_templates(raw: Any) -> dict[str, dict[str, Any]]:
    """The operator's `sandbox_templates` checked: names of letters, digits, `-` and `_`, each a
    table with an `image` and only the known keys (TEMPLATE_KEYS), whole numbers of 0 or more
    (memory_mb and pids at least 1: a container is never unlimited). ValueError says what is wrong."""
    if not isinstance(raw, Mapping):
        raise ValueError("sandbox_templates: expected tables [sandbox_templates.NAME] with an image")
    out: dict[str, dict[str, Any]] = {}
    for name, entry in raw.items():
        if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
            raise ValueError(f"sandbox_templates: {name!r} is not a template name (letters, digits, - and _)")
        if not isinstance(entry, Mapping) or not isinstance(entry.get("image"), str) or not entry["image"]:
            raise ValueError(f"sandbox_templates.{name}: expected a table with an image")
        unknown = sorted(set(entry) - set(TEMPLATE_KEYS))
        if unknown:
            raise ValueError(
                f"sandbox_templates.{name}: unknown key {unknown[0]!r}; known: {', '.join(TEMPLATE_KEYS)}"
            )
        for key, value in entry.items():
            kind = TEMPLATE_KEYS[key]
            if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(
                    f"sandbox_templates.{name}.{key}: expected a whole number of 0 or more, not {value!r}"
                )
            if kind is str and not isinstance(value, str):
                raise ValueError(f"sandbox_templates.{name}.{key}: expected a string, not {value!r}")
        for key in ("memory_mb", "pids"):
            if entry.get(key) == 0:
                raise ValueError(f"sandbox_templates.{name}.{key}: must be at least 1")
        out[name] = dict(entry)
    return out


def user_config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The user's own devagent config folder: $XDG_CONFIG_HOME/devagent or ~/.config/devagent."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "devagent"


def sqlite_file(db_url: str) -> Path | None:
    """The file of a SQLite database URL (`sqlite+aiosqlite:///path`), None for another database
    or an in-memory one."""
    scheme, sep, rest = db_url.partition(":///")
    if not sep or not scheme.split("+", 1)[0] == "sqlite":
        return None
    path = rest.split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    return Path(path) if os.path.isabs(path) else Path(os.path.abspath(path))
