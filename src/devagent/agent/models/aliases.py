"""Claude Code's model names, as its files give them (a subagent type's or a custom command's
`model`), turned into a devagent model spec on the provider the session already uses:

- `inherit` (or nothing): the session's model;
- a family alias, `sonnet`, `opus` or `haiku`, or a Claude model id (`claude-sonnet-4-0`, whose
  family is in its name): on the `anthropic` provider the id itself, else the model the operator
  maps that family to on the session's provider (`[model_aliases.PROVIDER]`, built-in ones for
  `anthropic`);
- a devagent spec (`openai:gpt-4.1`) as it is.

A name with no counterpart on the session's provider is the session's model, with a notice saying
so: a file written for Claude Code never stops a turn for its model's name."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devagent.agent.models.errors import ModelConfigError
from devagent.agent.models.providers import DEMO_SPEC, canonical_provider, parse_model_spec, shown_name

INHERIT = "inherit"
FAMILIES = ("sonnet", "opus", "haiku")
# The families on Anthropic's own API, where the operator has not said otherwise.
BUILT_IN: dict[str, dict[str, str]] = {
    "anthropic": {"sonnet": "claude-sonnet-4-5", "opus": "claude-opus-4-1", "haiku": "claude-haiku-4-5"},
}
_CLAUDE_ID = re.compile(r"^claude-[a-z0-9.-]+$")

Aliases = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class Resolved:
    spec: str  # the devagent model spec to use
    notice: str = ""  # why the asked-for model is not used, when it is not


def resolve(value: str, current: str, aliases: Aliases) -> Resolved:
    """The spec for a file's `model: value` in a session whose model is `current` (its spec)."""
    value = value.strip()
    if not value or value.lower() == INHERIT:
        return Resolved(current)
    if value == DEMO_SPEC or (":" in value and canonical_provider(value.partition(":")[0]) is not None):
        return Resolved(value)
    provider = _provider(current)
    lowered = value.lower()
    if provider == "anthropic" and _CLAUDE_ID.match(lowered):
        return Resolved(f"anthropic:{value}")
    family = lowered if lowered in FAMILIES else next((f for f in FAMILIES if f in lowered), "")
    name = {**BUILT_IN.get(provider, {}), **aliases.get(provider, {})}.get(family) if family else None
    if name:
        return Resolved(f"{provider}:{name}")
    where = f"the provider {provider!r}" if provider else "this session's provider"
    return Resolved(
        current,
        f"the model {value!r} has no counterpart on {where} (the operator maps Claude's model names "
        f"with the `model_aliases` setting): {shown_name(current) or 'the default model'} is used",
    )


def _provider(spec: str) -> str:
    try:
        return parse_model_spec(spec)[0]
    except ModelConfigError:
        return ""


def parse_aliases(value: Any) -> dict[str, dict[str, str]]:
    """The `model_aliases` setting: {provider: {sonnet|opus|haiku: model name on it}}. ValueError
    says what is wrong."""
    if not isinstance(value, Mapping):
        raise ValueError('expected a table such as {"openrouter": {"sonnet": "anthropic/claude-sonnet-4.5"}}')
    found: dict[str, dict[str, str]] = {}
    for prefix, table in value.items():
        provider = canonical_provider(str(prefix))
        if provider is None:
            raise ValueError(f"{prefix!r} is not a model provider")
        if not isinstance(table, Mapping):
            raise ValueError(f"[{prefix}]: expected a table of sonnet, opus, haiku")
        for family, name in table.items():
            if family not in FAMILIES:
                raise ValueError(f"[{prefix}]: {family!r} is not one of {', '.join(FAMILIES)}")
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"[{prefix}].{family}: expected a model name")
            found.setdefault(provider, {})[family] = name.strip()
    return found
