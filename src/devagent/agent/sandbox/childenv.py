"""The environment of every program the agent starts: shell commands, sandboxed
or not, and the MCP servers of the operator and of clients.

devagent's own process holds secrets: bearer tokens (`DEVAGENT_TOKEN`), the database URL with its
password (`DEVAGENT_DB`), provider keys (`OPENAI_API_KEY`, ...). A command the model runs must see
none of them, so a child gets an allow-list, never a copy of `os.environ` with some names removed:
a name the list does not know (a new provider, an operator's own secret) stays out by default.

The list: PATH, LANG, LANGUAGE, LC_*, TERM, TZ, USER, LOGNAME, SHELL and HOME (the sandbox gives
commands a HOME of their own), plus the names the operator passes with `env_pass`
(`DEVAGENT_ENV_PASS`; a trailing `*` matches a prefix). devagent's own variables and the provider
variables it reads are never passed, whatever `env_pass` says: `check_env_pass` refuses them by
name when the settings are loaded, and a pattern skips them.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping

BASE_NAMES = ("PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "HOME")
BASE_PREFIXES = ("LC_",)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@functools.cache
def _provider_names() -> frozenset[str]:
    from devagent.agent.models.providers import (
        PROVIDERS,  # late: the provider table, off the doors' start path
    )

    names: set[str] = set()
    for info in PROVIDERS.values():
        names.update(info.key_env)
        names.update(info.base_url_env)
    return frozenset(names)


def is_devagents(name: str) -> bool:
    """Whether `name` is one of devagent's own settings or a provider variable it reads."""
    return name.startswith("DEVAGENT") or name in _provider_names()


def check_env_pass(names: Iterable[str]) -> None:
    """ValueError naming the entries of `env_pass` that would hand a child devagent's own secrets."""
    bad = [n for n in names if not n.endswith("*") and is_devagents(n)]
    if bad:
        raise ValueError(
            f"{', '.join(bad)}: devagent's own settings and provider keys are never passed to "
            "the programs the agent starts"
        )
    for n in names:
        if not n.rstrip("*") or not all(c.isalnum() or c == "_" for c in n.rstrip("*")):
            raise ValueError(f"{n!r} is not a variable name (letters, digits, _; a trailing * for a prefix)")


def child_env(
    passed: Iterable[str] = (),
    *,
    home: str | None = None,
    extra: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for a program the agent starts: the allow-list's names found in `environ`
    (default `os.environ`), the operator's `passed` names (a trailing `*`: a prefix), `home` as
    HOME when given, then `extra` (devagent's own settings for the child, e.g. PAGER)."""
    source = os.environ if environ is None else environ
    names = [n for n in passed if not n.endswith("*")]
    prefixes = (*BASE_PREFIXES, *(n[:-1] for n in passed if n.endswith("*")))
    env: dict[str, str] = {}
    for name, value in source.items():
        if name in BASE_NAMES or name in names or name.startswith(prefixes):
            if value.startswith("()"):  # an exported bash function: code, not a value
                continue
            env[name] = value
    for name in list(env):
        if is_devagents(name):
            del env[name]
    env.setdefault("PATH", DEFAULT_PATH)
    if home is not None:
        env["HOME"] = home
    env.update(extra or {})
    return env
