"""The flags every devagent command and door takes anywhere on its line before `--`: `--config`
(the settings file), `--context-tokens` (the model's context window) and `--debug` (tracebacks).

`take` lifts them out of the command line as values; the commands hand `settings()` to
`load_config` with their own flags, and `debug` to `preflight.report`. The process environment is
never written, so what a flag says stays with the command that read it.

Imports nothing of devagent's and nothing heavy: the stdio doors read it on their fast start."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

# The flags that take a value: `--flag VALUE` or `--flag=VALUE`.
_VALUED = ("--config", "--context-tokens")


@dataclass(frozen=True, slots=True)
class GlobalFlags:
    config: str | None = None  # --config: the settings file (over DEVAGENT_CONFIG)
    context_tokens: str | None = None  # --context-tokens (over DEVAGENT_CONTEXT_TOKENS)
    debug: bool = False  # --debug: an error's traceback too (as DEVAGENT_DEBUG=1)

    def settings(self) -> dict[str, Any]:
        """The flags as `load_config` overrides (None: not given)."""
        return {"config_path": self.config, "context_tokens": self.context_tokens or None}


def take(argv: list[str], *, keep_debug: bool = False) -> tuple[list[str], GlobalFlags]:
    """The line without the global flags, and their values. `--debug` stays in the line with
    `keep_debug` (the stdio doors' own `--debug` also turns their logging up)."""
    debug = "--debug" in argv
    if debug and not keep_debug:
        argv = [a for a in argv if a != "--debug"]
    values: dict[str, str] = {}
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out += argv[i:]
            break
        name, eq, value = a.partition("=")
        if name in _VALUED and eq:
            values[name] = value
        elif a in _VALUED and i + 1 < len(argv):
            values[a] = argv[i + 1]
            i += 2
            continue
        else:
            out.append(a)
        i += 1
    flags = GlobalFlags(values.get("--config"), values.get("--context-tokens"), debug)
    return out, flags


# `devagent serve` loads its settings and reports its start-up errors inside a2a/cli.py's
# `serve_command`, which takes no global flags: while it runs, they are lent here, where
# `load_config` and `preflight.report` find them beneath what their callers pass.
_lent: ContextVar[GlobalFlags | None] = ContextVar("devagent_lent_flags", default=None)


@contextmanager
def lend(flags: GlobalFlags) -> Iterator[None]:
    """The global flags, for the loading and reporting done within (by `serve_command`)."""
    token = _lent.set(flags)
    try:
        yield
    finally:
        _lent.reset(token)


def lent() -> GlobalFlags:
    """The flags `lend` gave, else none."""
    return _lent.get() or GlobalFlags()
