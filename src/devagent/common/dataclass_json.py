"""A dataclass as the JSON object of its fields (what the core stores of its state)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any


def fields_json(obj: Any, *, leave_out: Collection[str] = ()) -> dict[str, Any]:
    """Each field of the dataclass instance `obj` by name, in the order they are declared (but
    those in `leave_out`); a dataclass in a field, alone or in a list, the same way. Other values
    are not copied: the object holds them still."""
    return {f.name: _value(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.name not in leave_out}


def _value(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return fields_json(value)
    if isinstance(value, list):
        return [_value(v) for v in value]
    return value
