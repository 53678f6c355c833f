"""Settings: command-line flags over `DEVAGENT_*` environment variables over the settings file over
the defaults. The README's settings table lists every key.

The settings file is the operator's: the one `--config` (`DEVAGENT_CONFIG`) names,
else the user's own `$XDG_CONFIG_HOME/devagent/config.toml` (`~/.config/devagent/config.toml`).
Nothing is read from the current directory or a workspace: a repository cannot reconfigure
devagent (its approval mode, its MCP commands, where its API key goes)."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from devagent.agent.api import (
    APPROVAL_MODES,
    DIAGNOSTICS_MODES,
    SANDBOX_ENGINES,
    SYNTAX_CHECK_MODES,
    CoreConfig,
    HooksFileError,
    check_edit_tools,
    check_env_pass,
    check_model_family,
    load_hooks,
    sandbox_backend_setting,
    sandbox_setting,
    sandbox_workspace_setting,
    user_config_dir,
    web_search_setting,
)
from devagent.common.errors import DevagentError
from devagent.common.identity.settings import OIDC_FILE_KEYS
from devagent.global_flags import lent
from devagent.telemetry import TRACE_MODES

# setting name -> (environment variable, toml key in [devagent])
SETTINGS: dict[str, tuple[str, str]] = {
    "db_url": ("DEVAGENT_DB", "db"),
    "data_dir": ("DEVAGENT_DATA_DIR", "data_dir"),
    "default_model": ("DEVAGENT_MODEL", "model"),
    "model_base_url": ("DEVAGENT_BASE_URL", "base_url"),
    "model_api_key": ("DEVAGENT_API_KEY", "api_key"),
    "approval_mode": ("DEVAGENT_APPROVAL", "approval_mode"),
    "allowed_approval_modes": ("DEVAGENT_ALLOWED_APPROVAL_MODES", "allowed_approval_modes"),
    "allow_client_model": ("DEVAGENT_ALLOW_CLIENT_MODEL", "allow_client_model"),
    "max_steps": ("DEVAGENT_MAX_STEPS", "max_steps"),
    "subagents_parallel": ("DEVAGENT_SUBAGENTS_PARALLEL", "subagents_parallel"),
    "subagent_depth": ("DEVAGENT_SUBAGENT_DEPTH", "subagent_depth"),
    "subagent_workspace_models": ("DEVAGENT_SUBAGENT_WORKSPACE_MODELS", "subagent_workspace_models"),
    # Claude Code's model names per provider: [model_aliases.PROVIDER] tables; the variable holds JSON.
    "model_aliases": ("DEVAGENT_MODEL_ALIASES", "model_aliases"),
    # Remote A2A agents: [remote_agents.NAME] tables (top level or under [devagent]); the variable holds JSON.
    "remote_agents": ("DEVAGENT_REMOTE_AGENTS", "remote_agents"),
    "remote_agent_timeout": ("DEVAGENT_REMOTE_AGENT_TIMEOUT", "remote_agent_timeout"),
    "shell_timeout": ("DEVAGENT_SHELL_TIMEOUT", "shell_timeout"),
    "edit_syntax_check": ("DEVAGENT_EDIT_SYNTAX_CHECK", "edit_syntax_check"),  # warn | refuse | off
    "edit_diagnostics": ("DEVAGENT_EDIT_DIAGNOSTICS", "edit_diagnostics"),  # warn | refuse | off
    "shell_timeout_max": ("DEVAGENT_SHELL_TIMEOUT_MAX", "shell_timeout_max"),
    "shell_background_idle": ("DEVAGENT_SHELL_BACKGROUND_IDLE", "shell_background_idle"),
    "shell_background_per_caller": ("DEVAGENT_SHELL_BACKGROUND_PER_CALLER", "shell_background_per_caller"),
    "shell_outputs_mb": ("DEVAGENT_SHELL_OUTPUTS_MB", "shell_outputs_mb"),
    "sandbox": ("DEVAGENT_SANDBOX", "sandbox"),  # auto | on | off (shell commands in bubblewrap)
    "sandbox_backend": ("DEVAGENT_SANDBOX_BACKEND", "sandbox_backend"),  # local | container | worker
    "sandbox_network": ("DEVAGENT_SANDBOX_NETWORK", "sandbox_network"),
    "sandbox_read": ("DEVAGENT_SANDBOX_READ", "sandbox_read"),
    "sandbox_hide": ("DEVAGENT_SANDBOX_HIDE", "sandbox_hide"),
    "sandbox_user": ("DEVAGENT_SANDBOX_USER", "sandbox_user"),
    "sandbox_engine": ("DEVAGENT_SANDBOX_ENGINE", "sandbox_engine"),  # podman | docker
    # Container templates: [sandbox_templates.NAME] tables; the variable holds JSON.
    "sandbox_templates": ("DEVAGENT_SANDBOX_TEMPLATES", "sandbox_templates"),
    "sandbox_keep_seconds": ("DEVAGENT_SANDBOX_KEEP_SECONDS", "sandbox_keep_seconds"),
    "sandbox_warm": ("DEVAGENT_SANDBOX_WARM", "sandbox_warm"),
    "sandbox_idle_seconds": ("DEVAGENT_SANDBOX_IDLE_SECONDS", "sandbox_idle_seconds"),
    "sandbox_workspace": ("DEVAGENT_SANDBOX_WORKSPACE", "sandbox_workspace"),  # host | volume
    "worker_tokens": ("DEVAGENT_WORKER_TOKENS", "worker_tokens"),  # NAME=TOKEN, comma-separated
    "worker_pool": ("DEVAGENT_WORKER_POOL", "worker_pool"),
    "worker_template": ("DEVAGENT_WORKER_TEMPLATE", "worker_template"),
    "worker_lease_seconds": ("DEVAGENT_WORKER_LEASE_SECONDS", "worker_lease_seconds"),
    "worker_wait_seconds": ("DEVAGENT_WORKER_WAIT_SECONDS", "worker_wait_seconds"),
    "worker_poll_seconds": ("DEVAGENT_WORKER_POLL_SECONDS", "worker_poll_seconds"),
    "env_pass": ("DEVAGENT_ENV_PASS", "env_pass"),
    "command_memory_mb": ("DEVAGENT_COMMAND_MEMORY_MB", "command_memory_mb"),
    "command_processes": ("DEVAGENT_COMMAND_PROCESSES", "command_processes"),
    "memory_file": ("DEVAGENT_MEMORY_FILE", "memory_file"),
    "hooks_file": ("DEVAGENT_HOOKS_FILE", "hooks_file"),  # Claude Code's hooks JSON
    "edit_tools": ("DEVAGENT_EDIT_TOOLS", "edit_tools"),
    "model_family": ("DEVAGENT_MODEL_FAMILY", "model_family"),
    "sessions_in_memory": ("DEVAGENT_SESSIONS_IN_MEMORY", "sessions_in_memory"),
    "cache_idle_seconds": ("DEVAGENT_CACHE_IDLE_SECONDS", "cache_idle_seconds"),
    "lease_seconds": ("DEVAGENT_LEASE_SECONDS", "lease_seconds"),
    "client_tool_allow": ("DEVAGENT_CLIENT_TOOLS_ALLOW", "client_tools_allow"),
    "client_tool_deny": ("DEVAGENT_CLIENT_TOOLS_DENY", "client_tools_deny"),
    # MCP servers: [mcp_servers.NAME] tables (top level or under [devagent]); the variable holds JSON.
    "mcp_servers": ("DEVAGENT_MCP_SERVERS", "mcp_servers"),
    "mcp_client_commands": ("DEVAGENT_MCP_CLIENT_COMMANDS", "mcp_client_commands"),
    "mcp_client_http": ("DEVAGENT_MCP_CLIENT_HTTP", "mcp_client_http"),
    "mcp_client_url_prefixes": ("DEVAGENT_MCP_CLIENT_URL_PREFIXES", "mcp_client_url_prefixes"),
    "mcp_client_private_urls": ("DEVAGENT_MCP_CLIENT_PRIVATE_URLS", "mcp_client_private_urls"),
    "outbound_allow": ("DEVAGENT_OUTBOUND_ALLOW", "outbound_allow"),
    "web_fetch": ("DEVAGENT_WEB_FETCH", "web_fetch"),
    "web_search": ("DEVAGENT_WEB_SEARCH", "web_search"),  # off | native | the URL of a search service
    "web_search_key": ("DEVAGENT_WEB_SEARCH_KEY", "web_search_key"),
    "mcp_start_timeout": ("DEVAGENT_MCP_START_TIMEOUT", "mcp_start_timeout"),
    "mcp_call_timeout": ("DEVAGENT_MCP_CALL_TIMEOUT", "mcp_call_timeout"),
    "context_tokens": ("DEVAGENT_CONTEXT_TOKENS", "context_tokens"),
    "compact_at": ("DEVAGENT_COMPACT_AT", "compact_at"),
    "prompt_cache": ("DEVAGENT_PROMPT_CACHE", "prompt_cache"),
    "budget_tokens_per_day": ("DEVAGENT_BUDGET_TOKENS_PER_DAY", "budget_tokens_per_day"),
    "budget_concurrent_turns": ("DEVAGENT_BUDGET_CONCURRENT_TURNS", "budget_concurrent_turns"),
    "budgets": ("DEVAGENT_BUDGETS", "budgets"),
    "budget_usd_per_day": ("DEVAGENT_BUDGET_USD_PER_DAY", "budget_usd_per_day"),
    "max_cost_usd_per_task": ("DEVAGENT_MAX_COST_USD_PER_TASK", "max_cost_usd_per_task"),
    # Prices: [prices."provider:model"] tables (top level or under [devagent]); the variable holds JSON.
    "prices": ("DEVAGENT_PRICES", "prices"),
    "traces": ("DEVAGENT_TRACES", "traces"),  # auto | on | off (OpenTelemetry over OTLP/HTTP)
    "trace_content": ("DEVAGENT_TRACE_CONTENT", "trace_content"),
    "repository_remotes": ("DEVAGENT_REPOSITORY_REMOTES", "repository_remotes"),
    # Git credentials per remote: [git_credentials."PREFIX"] tables; the variable holds JSON.
    "git_credentials": ("DEVAGENT_GIT_CREDENTIALS", "git_credentials"),
    "result_branch_pattern": ("DEVAGENT_RESULT_BRANCH_PATTERN", "result_branch_pattern"),
    "repository_setup": ("DEVAGENT_REPOSITORY_SETUP", "repository_setup"),
}


# Settings written as tables of their own, which may stand beside [devagent] at the top level.
_TABLES = ("mcp_servers", "model_aliases", "prices", "remote_agents", "git_credentials", "sandbox_templates")


# Keys of `devagent serve` alone, beside the core's in [devagent]: the identity provider's
# (`oidc_*`, devagent.common.identity.settings). The file's reader accepts them; the server reads
# their values with `serve_file_settings`, under its flags and the environment as every setting.
SERVE_FILE_KEYS = OIDC_FILE_KEYS


class ConfigError(DevagentError, ValueError):
    pass


def config_file(environ: Mapping[str, str], flag: str | Path | None = None) -> Path | None:
    """The settings file to read: the operator's (the `--config` flag, else `DEVAGENT_CONFIG`),
    else the user's own config.toml in their config folder, else none. Never one from the current
    directory."""
    explicit = environ.get("DEVAGENT_CONFIG") if flag is None else flag
    if explicit:
        p = Path(explicit).expanduser()
        if not p.is_file():
            raise ConfigError(f"the settings file {p} (--config, DEVAGENT_CONFIG) is not a file")
        return p.resolve()
    p = user_config_dir(environ) / "config.toml"
    return p.resolve() if p.is_file() else None


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _convert(name: str, value: Any, where: str | None = None) -> Any:
    """`value` as the type of setting `name`. `where` is how the user spelled it (the toml key or
    the environment variable); a bad value is a ConfigError naming it and the expected type."""
    kinds = {f.name: f.type for f in fields(CoreConfig)}
    kind = str(kinds[name])
    label = where or name

    def bad(expected: str) -> ConfigError:
        return ConfigError(f"setting {label}: expected {expected}, not {value!r}")

    if name == "data_dir":
        if not isinstance(value, str):
            raise bad("a directory path (a string)")
        return Path(value).expanduser()
    if name == "mcp_servers":
        from devagent.agent.api import parse_servers  # late: the MCP client stays off the doors' start

        try:
            return {n: spec.to_json() for n, spec in parse_servers(value).items()}
        except ValueError as e:  # the message names the server; the value may hold secrets
            raise ConfigError(str(e)) from None
    if name == "remote_agents":
        from devagent.agent.api import parse_remote_agents  # late: off the doors' start

        try:
            return parse_remote_agents(value)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    if name == "git_credentials":
        from devagent.agent.api import parse_git_credentials  # late: off the doors' start

        example = '{"https://git.example.com/": {"token_env": "GIT_TOKEN"}}'
        return _table(value, label, example, parse_git_credentials)
    if name == "model_aliases":
        from devagent.agent.api import parse_aliases  # late: the model layer's names

        example = '{"openrouter": {"sonnet": "anthropic/claude-sonnet-4.5"}}'
        return _table(value, label, example, parse_aliases)
    if name == "prices":
        from devagent.agent.api import parse_prices  # late: the model layer's names

        return _table(value, label, '{"openai:gpt-4.1": {"input": 2, "output": 8}}', parse_prices)
    if name == "sandbox_templates":
        from devagent.agent.api import parse_sandbox_templates  # late: off the doors' start

        return _table(
            value,
            label,
            '{"default": {"image": "localhost/dev:1", "memory_mb": 2048}}',
            parse_sandbox_templates,
        )
    if name == "sandbox_engine":
        if value not in SANDBOX_ENGINES:
            raise bad(" or ".join(SANDBOX_ENGINES))
        return value
    return _convert_plain(kind, value, bad)


def _convert_plain(kind: str, value: Any, bad: Callable[[str], ConfigError]) -> Any:
    """`value` as a setting of the plain type `kind` (a tuple of strings, bool, int, float or an
    optional string); `bad(expected)` is the error naming the setting as the user spelled it."""
    if "tuple" in kind:
        if isinstance(value, list | tuple):
            items = list(value)
        elif isinstance(value, str):
            items = value.split(",")
        else:
            raise bad("a list of strings")
        return tuple(str(i).strip() for i in items if str(i).strip())
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower() if isinstance(value, str | int) else None
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise bad("true or false")
    if kind == "int":
        if isinstance(value, bool) or isinstance(value, float):
            raise bad("a whole number")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise bad("a whole number") from None
    if kind == "float":
        if isinstance(value, bool):
            raise bad("a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise bad("a number") from None
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad("a string")
    return str(value)


def _table(value: Any, label: str, example: str, parse: Callable[[Any], Any]) -> Any:
    """A table setting: the settings file's table, or its environment variable's JSON (such as
    `example`), read by `parse` (whose ValueError names what is wrong)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise ConfigError(f"setting {label}: expected JSON such as {example}, not {value!r}") from e
    try:
        return parse(value)
    except ValueError as e:
        raise ConfigError(f"setting {label}: {e}") from None


def _unknown(key: str, known: list[str], where: str, table: bool = False) -> ConfigError:
    """An unknown setting, with the nearest known one when there is a close match."""
    import difflib

    near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]!r}?" if near else f"; known settings: {', '.join(sorted(known))}"
    what = f"table [{key}]" if table else f"setting {key!r}"
    return ConfigError(f"{where}: unknown {what}{hint}")


def _check_keys(doc: Mapping[str, Any], path: Path) -> None:
    """Every key of the file is a known setting: a typo is an error, never silently ignored."""
    keys = [key for _env, key in SETTINGS.values()] + list(SERVE_FILE_KEYS)
    top = doc.get("devagent")
    if isinstance(top, Mapping):
        for key in doc:  # beside [devagent], only the tables below are read
            if key not in ("devagent", *_TABLES):
                raise _unknown(key, ["devagent", *_TABLES], str(path), isinstance(doc[key], Mapping))
        section: Mapping[str, Any] = top
        where = f"{path} [devagent]"
    else:
        if top is not None:
            raise ConfigError(f"{path}: devagent must be a table ([devagent]), not {top!r}")
        section = doc
        where = str(path)
    for key in section:
        if key not in keys:
            raise _unknown(key, keys, where, isinstance(section[key], Mapping))


def _read_file(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {e}") from e


def serve_file_settings(path: Path | None) -> dict[str, Any]:
    """The settings file's `devagent serve` keys (SERVE_FILE_KEYS) as written there, by key."""
    if path is None:
        return {}
    doc = _read_file(path)
    section = doc.get("devagent", doc)
    return {key: section[key] for key in SERVE_FILE_KEYS if key in section}


def _syntax_check_setting(value: str) -> str:
    value = value.strip().lower()
    if value not in SYNTAX_CHECK_MODES:
        raise ValueError(f"edit_syntax_check must be one of {', '.join(SYNTAX_CHECK_MODES)}, not {value!r}")
    return value


def _diagnostics_setting(value: str) -> str:
    value = value.strip().lower()
    if value not in DIAGNOSTICS_MODES:
        raise ValueError(f"edit_diagnostics must be one of {', '.join(DIAGNOSTICS_MODES)}, not {value!r}")
    return value


def _normalise(config: CoreConfig) -> None:
    """The settings a function checks and puts in their one spelling (`sandbox`, `edit_tools`,
    `web_search`, `edit_syntax_check`); a ConfigError names the variable and the key of a bad one."""
    checks: tuple[tuple[str, Callable[[Any], Any]], ...] = (
        ("sandbox", sandbox_setting),
        ("sandbox_backend", sandbox_backend_setting),
        ("sandbox_workspace", sandbox_workspace_setting),
        ("edit_tools", check_edit_tools),
        ("model_family", check_model_family),
        ("web_search", web_search_setting),
        ("edit_syntax_check", _syntax_check_setting),
        ("edit_diagnostics", _diagnostics_setting),
    )
    for name, check in checks:
        try:
            setattr(config, name, check(getattr(config, name)))
        except ValueError as e:
            var, key = SETTINGS[name]
            raise ConfigError(f"{e} ({var}, {key} in the settings file)") from None


def _check_budgets(config: CoreConfig) -> None:
    if config.budget_tokens_per_day < 0 or config.budget_concurrent_turns < 0:
        raise ConfigError("budget_tokens_per_day and budget_concurrent_turns must be 0 (no limit) or more")
    for what, amount in (
        ("budget_usd_per_day (DEVAGENT_BUDGET_USD_PER_DAY)", config.budget_usd_per_day),
        ("max_cost_usd_per_task (DEVAGENT_MAX_COST_USD_PER_TASK)", config.max_cost_usd_per_task),
    ):
        if not 0 <= amount < float("inf"):
            raise ConfigError(f"{what} must be 0 (no limit) or a positive number of dollars")
    for entry in config.budgets:
        _name, eq, limits = entry.partition("=")
        parts = limits.split("/")
        whole = [p.strip() or "0" for p in parts[:2]]
        dollars = parts[2].strip() if len(parts) == 3 else "0"
        if not eq or len(parts) > 3 or not all(v.isdigit() for v in whole) or not _dollars(dollars):
            raise ConfigError(
                f"budgets (DEVAGENT_BUDGETS): {entry!r} is not NAME=TOKENS/TURNS or NAME=TOKENS/TURNS/USD "
                "(e.g. ci=200000/2 or ci=0/2/5.50; 0 for no limit)"
            )


def _check_hooks(config: CoreConfig) -> None:
    """The hooks file is read now, so a mistake in it stops the start, not a turn; a relative
    path is the settings file's folder's (or, from a flag or the environment, the current one's)."""
    if not config.hooks_file:
        return
    path = Path(config.hooks_file).expanduser()
    if not path.is_absolute():
        base = config.config_path.parent if config.config_path is not None else Path.cwd()
        path = base / path
    config.hooks_file = str(path.resolve())
    try:
        load_hooks(path)
    except HooksFileError as e:
        raise ConfigError(f"hooks_file (DEVAGENT_HOOKS_FILE): {e}") from None


def _dollars(text: str) -> bool:
    try:
        return 0 <= float(text or "0") < float("inf")
    except ValueError:
        return False


def load_config(
    overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> CoreConfig:
    """The settings: `overrides` (the command line's flags by setting name, None: not given;
    `config_path` names the settings file) over `environ`'s `DEVAGENT_*` (default `os.environ`)
    over the settings file over the defaults. ConfigError names a bad value."""
    env = os.environ if environ is None else environ
    flags = {k: v for k, v in lent().settings().items() if v is not None}
    flags.update((k, v) for k, v in (overrides or {}).items() if v is not None)
    values: dict[str, Any] = {}
    path = config_file(env, flags.pop("config_path", None))
    if path is not None:
        doc = _read_file(path)
        _check_keys(doc, path)
        section = doc.get("devagent", doc)
        for name, (_env, key) in SETTINGS.items():
            if key in section:
                values[name] = _convert(name, section[key], f"{key} in {path}")
        for table in _TABLES:  # top level beside [devagent]
            if table not in values and table in doc:
                values[table] = _convert(table, doc[table], f"[{table}] in {path}")
    for name, (var, key) in SETTINGS.items():
        if env.get(var):
            values[name] = _convert(name, env[var], f"{var} ({key})")
    for name, value in flags.items():
        values[name] = _convert(name, value)
    config = CoreConfig(**values, config_path=path)
    try:
        check_env_pass(config.env_pass)
    except ValueError as e:
        raise ConfigError(f"env_pass (DEVAGENT_ENV_PASS): {e}") from None
    if config.command_memory_mb < 0 or config.command_processes < 0:
        raise ConfigError("command_memory_mb and command_processes must be 0 (no limit) or more")
    _normalise(config)
    _check_budgets(config)
    _check_hooks(config)
    _check_values(config)
    _check_repositories(config)
    return config


def _check_repositories(config: CoreConfig) -> None:
    from devagent.agent.api import check_repository_settings  # late: off the doors' start

    try:
        check_repository_settings(config)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _check_values(config: CoreConfig) -> None:
    """The settings whose values must lie in a range or a set (ConfigError names the bad one)."""
    if config.context_tokens < 0 or (0 < config.context_tokens < 1024):
        raise ConfigError(
            "context_tokens (DEVAGENT_CONTEXT_TOKENS) must be 0 (the model's size) or 1024 or more"
        )
    if not 0.1 <= config.compact_at <= 0.95:
        raise ConfigError(
            "compact_at (DEVAGENT_COMPACT_AT) must be a share of the context between 0.1 and 0.95"
        )
    config.traces = config.traces.strip().lower()
    if config.traces not in TRACE_MODES:
        modes = ", ".join(TRACE_MODES)
        raise ConfigError(f"traces (DEVAGENT_TRACES) must be one of {modes}, not {config.traces!r}")
    if config.approval_mode not in APPROVAL_MODES:
        raise ConfigError(f"approval mode {config.approval_mode!r} is not one of {', '.join(APPROVAL_MODES)}")
    bad = [m for m in config.allowed_approval_modes if m not in APPROVAL_MODES]
    if bad:
        raise ConfigError(f"allowed approval modes: {bad} not among {', '.join(APPROVAL_MODES)}")
    try:
        config.outbound_networks()
    except ValueError as e:
        raise ConfigError(f"outbound_allow (DEVAGENT_OUTBOUND_ALLOW): {e}") from None
    if not (config.shell_timeout > 0 and config.shell_timeout_max > 0):
        raise ConfigError("shell_timeout and shell_timeout_max must be positive numbers of seconds")
    if (
        config.shell_background_idle < 0
        or config.shell_outputs_mb < 0
        or config.shell_background_per_caller < 0
    ):
        raise ConfigError(
            "shell_background_idle, shell_background_per_caller and shell_outputs_mb must be 0 (off) or more"
        )
    if config.sandbox_keep_seconds < 0:
        raise ConfigError(
            "sandbox_keep_seconds (DEVAGENT_SANDBOX_KEEP_SECONDS) must be 0 (keep forever) or more"
        )
    if config.cache_idle_seconds < 0:
        raise ConfigError("cache_idle_seconds (DEVAGENT_CACHE_IDLE_SECONDS) must be 0 (off) or more")
    if config.max_steps < 1:
        raise ConfigError("max_steps must be at least 1")
    if config.subagents_parallel < 1:
        raise ConfigError("subagents_parallel (DEVAGENT_SUBAGENTS_PARALLEL) must be at least 1")
    if config.subagent_depth < 0:
        raise ConfigError("subagent_depth (DEVAGENT_SUBAGENT_DEPTH) must be 0 or more")
    if not config.remote_agent_timeout > 0:
        raise ConfigError(
            "remote_agent_timeout (DEVAGENT_REMOTE_AGENT_TIMEOUT) must be a positive number of seconds"
        )
    if not config.lease_seconds > 0:
        raise ConfigError("lease_seconds must be a positive number of seconds (DEVAGENT_LEASE_SECONDS)")
