"""`devagent info`: the versions, and the configuration as devagent resolves it from the global
flags (`--config`, `--context-tokens`), the `DEVAGENT_*` variables, the settings file and the
defaults: the model and where its requests go, the settings file, the database, the shell sandbox,
the workspace roots `serve` would use. Never a key: only whether one is set, and where from.
`--check` sends the model one small request.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from devagent.agent.api import (
    PROVIDERS,
    ModelConfigError,
    SandboxError,
    check_model_spec,
    choose_sandbox,
    create_model,
    default_model_spec,
    describe_model_error,
    load_hooks,
)
from devagent.config import ConfigError, load_config
from devagent.preflight import safe_url
from devagent.wire.cli import info as versions


def resolved(
    environ: dict[str, str] | None = None, settings: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The resolved configuration, as `devagent info --json` prints it (besides the versions);
    `settings`: the global flags, as `load_config` overrides."""
    env = dict(os.environ if environ is None else environ)
    config = load_config(settings, environ=env)
    if settings and settings.get("default_model"):
        spec, why = config.default_model, "--model"
    elif config.default_model:
        spec, why = config.default_model, "DEVAGENT_MODEL or model in the settings file"
    else:
        spec, why = default_model_spec(env)
    model: dict[str, Any] = {"spec": spec, "chosen_by": why}
    try:
        provider, _name, key, url = check_model_spec(
            spec, base_url=config.model_base_url, api_key=config.model_api_key, environ=env
        )
    except ModelConfigError as e:
        model["problem"] = str(e)
    else:
        info = PROVIDERS.get(provider)
        model["provider"] = provider
        if info is not None:
            model["url"] = safe_url(url) if url else "(the provider's default)"
            model["api_key"] = _key_source(config.model_api_key, key, info.key_env, env)
    return {
        "settings_file": str(config.config_path) if config.config_path else None,
        "model": model,
        "database": safe_url(config.db_url) if config.db_url else _default_db(config.data_dir),
        "data_dir": str(config.data_dir),
        "sandbox": {cmd: _sandbox_line(config, cmd) for cmd in ("serve", "run")},
        "workspace_roots": _serve_roots(env),
        "hooks": _hooks(config.hooks_file),
    }


def _hooks(path: str) -> dict[str, Any]:
    """The hooks file and how many commands each of its events runs (at most)."""
    if not path:
        return {"file": None}
    hook_set = load_hooks(path)  # read already by load_config: it is valid
    counts = {event: sum(len(g.hooks) for g in groups) for event, groups in hook_set.groups.items()}
    return {"file": path, **counts}


def _key_source(given: str | None, key: str | None, names: tuple[str, ...], env: dict[str, str]) -> str:
    if not key:
        return "not set"
    if given:
        return "set (DEVAGENT_API_KEY or api_key in the settings file)"
    found = next((n for n in names if env.get(n, "").strip()), "")
    return f"set ({found})" if found else "set"


def _default_db(data_dir: Path) -> str:
    return f"sqlite+aiosqlite:///{data_dir / 'devagent.db'} (the default)"


def _sandbox_line(config: Any, command: str) -> str:
    try:
        return choose_sandbox(None, config, command)[1]
    except SandboxError as e:
        return f"Shell sandbox: cannot start: {e}"


def _serve_roots(env: dict[str, str]) -> list[str]:
    """The workspace roots `devagent serve` takes without --workspace-root."""
    given = shlex.split(env.get("CODER_AGENT_WORKSPACE_PATH", ""))
    return [str(Path(p).expanduser().resolve()) for p in given] or [str(Path.cwd().resolve())]


def check_model(
    environ: dict[str, str] | None = None, settings: Mapping[str, Any] | None = None
) -> tuple[bool, str]:
    """One small request to the configured model: (it answered, the line to print)."""
    env = dict(os.environ if environ is None else environ)
    config = load_config(settings, environ=env)
    spec = config.default_model or default_model_spec(env)[0]
    try:
        model = create_model(spec, base_url=config.model_base_url, api_key=config.model_api_key, environ=env)
    except ModelConfigError as e:
        return False, f"model check: {spec}: {e}"
    url = getattr(model, "base_url", None)
    started = time.monotonic()
    try:
        asyncio.run(_ask(model))
    except Exception as e:
        return False, f"model check: {spec} failed. {describe_model_error(e, str(url) if url else None)}"
    where = f" at {url}" if url else ""
    return True, f"model check: {spec}{where} answered in {time.monotonic() - started:.1f} s"


async def _ask(model: Any) -> None:
    """A short request, streamed as the sessions stream theirs, read to its end."""
    from pydantic_ai import messages as pm
    from pydantic_ai.direct import model_request_stream
    from pydantic_ai.settings import ModelSettings

    request = pm.ModelRequest(parts=[pm.UserPromptPart("Answer with the one word: ok")])
    async with model_request_stream(model, [request], model_settings=ModelSettings(max_tokens=16)) as stream:
        async for _ev in stream:
            pass


def print_info(as_json: bool, check: bool, settings: Mapping[str, Any] | None = None) -> int:
    """`devagent info [--json] [--check] [--model M ...]`; the exit code (1 when the check failed).
    `settings`: the global flags and the model flags, as `load_config` overrides."""
    try:
        data: dict[str, Any] = {**versions(), **resolved(settings=settings)}
    except ConfigError as e:
        print(f"devagent: {e}", file=sys.stderr)
        return 2
    ok, line = check_model(settings=settings) if check else (True, "")
    if check:
        data["model_check"] = {"ok": ok, "message": line}
    if as_json:
        sys.stdout.write(json.dumps(data) + "\n")
        return 0 if ok else 1
    for key, value in data.items():
        if key == "model_check":
            continue
        if isinstance(value, dict) and all(v is None for v in value.values()):
            sys.stdout.write(f"{key}: none\n")  # (hooks without a hooks file)
        elif isinstance(value, dict):
            sys.stdout.write(f"{key}:\n")
            for k, v in value.items():
                sys.stdout.write(f"  {k}: {v if v is not None else '(none)'}\n")
        elif isinstance(value, list):
            sys.stdout.write(f"{key}: {', '.join(value)}\n")
        else:
            sys.stdout.write(f"{key}: {value if value is not None else '(none)'}\n")
    if check:
        print(line, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1
