"""Validation of tools a client supplies (A2A DataParts, wire `initialize`).

A definition is `{name, description, parameters}` with a JSON Schema object for the parameters.
Every refused definition comes back with its reason; nothing is dropped silently.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from devagent.agent.state import ClientTool

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def validate_client_tools(
    definitions: Iterable[Any],
    *,
    builtin_names: Iterable[str],
    allow: Iterable[str] = (),
    deny: Iterable[str] = (),
) -> tuple[list[ClientTool], list[tuple[str, str]]]:
    """Split definitions into accepted tools and `(name, reason)` refusals. A later definition of
    the same name replaces an earlier one."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    builtins = set(builtin_names)
    allowed = set(allow)
    denied = set(deny)
    accepted: dict[str, ClientTool] = {}
    rejected: list[tuple[str, str]] = []
    for i, d in enumerate(definitions):
        if not isinstance(d, dict):
            rejected.append((f"#{i}", "a tool definition must be an object"))
            continue
        name = d.get("name")
        if not isinstance(name, str) or not name:
            rejected.append((f"#{i}", "missing 'name'"))
            continue
        if not NAME_RE.match(name):
            rejected.append((name, "name must be 1-64 characters of letters, digits, '_' or '-'"))
            continue
        if name in builtins:
            rejected.append((name, "conflicts with builtin tool"))
            continue
        if name in denied or (allowed and name not in allowed):
            rejected.append((name, "not allowed by server policy"))
            continue
        description = d.get("description", "")
        if not isinstance(description, str):
            rejected.append((name, "'description' must be a string"))
            continue
        params = d.get("parameters", {"type": "object", "properties": {}})
        if params is None:
            params = {"type": "object", "properties": {}}
        if not isinstance(params, dict):
            rejected.append((name, "'parameters' must be a JSON Schema object"))
            continue
        if params.get("type", "object") != "object":
            rejected.append((name, "'parameters' must be a JSON Schema with type 'object'"))
            continue
        try:
            Draft202012Validator.check_schema(params)
        except SchemaError as e:
            rejected.append((name, f"invalid JSON Schema: {e.message}"))
            continue
        params = {"type": "object", **params}
        params.setdefault("properties", {})
        accepted.pop(name, None)
        accepted[name] = ClientTool(name=name, description=description, parameters=params)
    return list(accepted.values()), rejected


def validate_arguments(schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    """The first problem of `args` against `schema`, as a readable message, or None."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(schema).iter_errors(args), key=lambda e: list(e.path))
    if not errors:
        return None
    e = errors[0]
    where = "/".join(str(p) for p in e.path)
    return f"{where}: {e.message}" if where else e.message
