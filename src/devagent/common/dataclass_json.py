"""A dataclass as the JSON object of its fields (what the core stores of its state)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

_PLAIN = frozenset((str, int, float, bool, type(None), dict))
_NAMES: dict[type, tuple[str, ...]] = {}  # a dataclass's field names, read once


def fields_json(obj: Any, *, leave_out: Collection[str] = ()) -> dict[str, Any]:
    """Each field of the dataclass instance `obj` by name, in the order they are declared (but
    those in `leave_out`); a dataclass in a field, alone or in a list, the same way. Other values
    are not copied: the object holds them still."""
    return {name: _value(getattr(obj, name)) for name in _names(type(obj)) if name not in leave_out}


def _names(cls: type) -> tuple[str, ...]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _value(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is list:
        return [_value(v) for v in value]
    if dataclasses.is_dataclass(value):
        return fields_json(value)
    return value
