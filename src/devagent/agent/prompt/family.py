"""Which family a model belongs to, and which tools and output caps each family is given.

Models are trained on particular tools: OpenAI's GPT and codex models on the V4A patch format of
`apply_patch`, Anthropic's and Google's on exact search-and-replace edits. Each gets the tool it
knows; the scripted and demo models get both, so scripts can exercise either. The operator may
override the choice (`edit_tools`). Small local models (a family only the operator names, with
`model_family`) get a lighter tool set and shorter command output."""

from __future__ import annotations

import functools

from devagent.agent.models.errors import ModelConfigError
from devagent.agent.models.providers import parse_model_spec
from devagent.agent.tools.output import HEAD_CHARS, TAIL_CHARS

FAMILIES = ("openai", "anthropic", "gemini", "small", "scripted", "other")
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
# The tools a small model is not offered: each costs definitions and prompt a small window lacks,
# for work such a model seldom does well (delegating, fetching pages, juggling processes).
SMALL_HIDDEN = frozenset(
    {"read_many_files", "background_process", "save_memory", "web_fetch", "web_search", "task", "skill"}
)
# The head and tail of a long command output each family's model gets, in characters (the rest:
# output.HEAD_CHARS and output.TAIL_CHARS).
OUTPUT_CAPS = {"small": (3_000, 6_000)}


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


def family_of(spec: str, named: tuple[str, ...] = ()) -> str:
    """The family of a model spec with the operator's `model_family` entries applied: `SPEC=FAMILY`
    for one model (a SPEC ending in `*` for every model it starts), a bare `FAMILY` for every
    model; the first entry that matches decides, else the family its name shows."""
    for entry in named:
        pattern, eq, family = entry.rpartition("=")
        if not eq or pattern == spec or (pattern.endswith("*") and spec.startswith(pattern[:-1])):
            return family
    return model_family(spec)


def check_model_family(value: tuple[str, ...]) -> tuple[str, ...]:
    """The operator's `model_family` entries, checked."""
    for entry in value:
        pattern, eq, family = entry.rpartition("=")
        if family not in FAMILIES or (eq and not pattern):
            raise ValueError(
                f"model_family: {entry!r} is not FAMILY or SPEC=FAMILY (FAMILY one of {', '.join(FAMILIES)})"
            )
    return value


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
def hidden_tools(family: str, choice: str = "auto") -> frozenset[str]:
    """The built-in tools a model of `family` is not offered: the editing tools it was not
    trained on, and for a small model the heavier tools."""
    offered = editing_tools(family, choice)
    hidden = frozenset(t for t in EDITING_TOOLS if t not in offered)
    return hidden | SMALL_HIDDEN if family == "small" else hidden


def output_caps(family: str) -> tuple[int, int]:
    """The head and tail of a long command output a model of `family` gets, in characters."""
    return OUTPUT_CAPS.get(family, (HEAD_CHARS, TAIL_CHARS))


def check_edit_tools(value: str) -> str:
    """The operator's `edit_tools` setting, checked."""
    value = value.strip().lower() or "auto"
    if value not in EDIT_TOOL_CHOICES:
        raise ValueError(f"edit_tools must be one of {', '.join(EDIT_TOOL_CHOICES)}, not {value!r}")
    return value
