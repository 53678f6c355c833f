"""Which family a model belongs to, and which editing tools each family is given.

Models are trained on particular tools: OpenAI's GPT and codex models on the V4A patch format of
`apply_patch`, Anthropic's and Google's on exact search-and-replace edits. Each gets the tool it
knows; the scripted and demo models get both, so scripts can exercise either. The operator may
override the choice (`edit_tools`)."""

from __future__ import annotations

import functools

from devagent.agent.model_errors import ModelConfigError
from devagent.agent.models import parse_model_spec

FAMILIES = ("openai", "anthropic", "gemini", "scripted", "other")
EDIT_TOOL_CHOICES = ("auto", "edit", "apply_patch", "both")
EDITING_TOOLS = ("edit", "apply_patch")

# Name fragments that identify a family when the provider does not (OpenRouter, local servers).
_NAME_MARKS: tuple[tuple[str, str], ...] = (
    ("claude", "anthropic"),
    ("gemini", "gemini"),
    ("codex", "openai"),
    ("gpt-", "openai"),
)
_OPENAI_PREFIXES = ("gpt", "o1", "o3", "o4", "codex", "chatgpt")


def model_family(spec: str) -> str:
    """The family of a model spec (`provider:name`, `demo`): one of FAMILIES."""
    try:
        provider, name = parse_model_spec(spec)
    except ModelConfigError:
        return "other"
    name = name.lower()
    if provider in ("demo", "scripted"):
        return "scripted"
    if provider == "anthropic":
        return "anthropic"
    if provider == "google":
        return "gemini"
    if provider == "openai":
        return "openai" if name.startswith(_OPENAI_PREFIXES) else "other"
    for mark, family in _NAME_MARKS:
        if mark in name:
            return family
    return "other"


def editing_tools(family: str, choice: str = "auto") -> tuple[str, ...]:
    """The editing tools a model of `family` is offered, given the operator's `edit_tools`."""
    if choice == "both":
        return EDITING_TOOLS
    if choice in EDITING_TOOLS:
        return (choice,)
    if family == "scripted":
        return EDITING_TOOLS
    return ("apply_patch",) if family == "openai" else ("edit",)


@functools.lru_cache(maxsize=64)
def hidden_tools(spec: str, choice: str = "auto") -> frozenset[str]:
    """The built-in editing tools a model of this spec is not offered."""
    offered = editing_tools(model_family(spec), choice)
    return frozenset(t for t in EDITING_TOOLS if t not in offered)


def check_edit_tools(value: str) -> str:
    """The operator's `edit_tools` setting, checked."""
    value = value.strip().lower() or "auto"
    if value not in EDIT_TOOL_CHOICES:
        raise ValueError(f"edit_tools must be one of {', '.join(EDIT_TOOL_CHOICES)}, not {value!r}")
    return value
