"""A JSON schema for an A2A 1.0 message, made from the protocol's own definition.

A2A 1.0 defines its types in `a2a.proto`; its JSON schema (the one the TCK's CARD-STRUCT-001
checks a card against) is generated from that file and not published beside it. a2a-sdk ships
the same definition compiled (`a2a.types.a2a_pb2`), so the schema is built here from those
message descriptors, in ProtoJSON's terms: an object holds only the fields its message declares,
under their JSON (camelCase) names, each of its type; a oneof holds at most one member; fields
marked REQUIRED (`google.api.field_behavior`) must be there. Checked with `jsonschema`.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from google.api import field_behavior_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

_INTS = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_FIXED32,
}
_LONGS = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_SFIXED64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_FIXED64,
}
# Well-known types, as ProtoJSON writes them.
_WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array"},
    "google.protobuf.Timestamp": {"type": "string"},
}


def schema_for(message: Descriptor) -> dict[str, Any]:
    """The schema of `message`, with every message it uses under `$defs`."""
    defs: dict[str, Any] = {}
    _define(message, defs)
    return {"$ref": f"#/$defs/{message.full_name}", "$defs": defs}


def _define(message: Descriptor, defs: dict[str, Any]) -> None:
    if message.full_name in defs:
        return
    defs[message.full_name] = {}  # placed first: a message may refer to itself
    properties = {f.json_name: _field(f, defs) for f in message.fields}
    required = [f.json_name for f in message.fields if _required(f)]
    one_of = [
        {"not": {"required": [a.json_name, b.json_name]}}
        for o in message.oneofs
        if len(o.fields) > 1  # one member: proto3's `optional`, not a choice
        for a, b in combinations(o.fields, 2)
    ]
    definition: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "required": required,
    }
    if one_of:
        definition["allOf"] = one_of
    defs[message.full_name] = definition


def _required(field: FieldDescriptor) -> bool:
    behaviors = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
    return field_behavior_pb2.REQUIRED in behaviors


def _field(field: FieldDescriptor, defs: dict[str, Any]) -> dict[str, Any]:
    message = field.message_type
    if message is not None and message.GetOptions().map_entry:
        value = message.fields_by_name["value"]
        return {"type": "object", "additionalProperties": _single(value, defs)}
    if field.is_repeated:
        return {"type": "array", "items": _single(field, defs)}
    return _single(field, defs)


def _single(field: FieldDescriptor, defs: dict[str, Any]) -> dict[str, Any]:
    kind = field.type
    if kind == FieldDescriptor.TYPE_MESSAGE:
        message = field.message_type
        if message.full_name in _WELL_KNOWN:
            return _WELL_KNOWN[message.full_name]
        _define(message, defs)
        return {"$ref": f"#/$defs/{message.full_name}"}
    if kind == FieldDescriptor.TYPE_ENUM:
        values = field.enum_type.values
        return {"enum": [v.name for v in values] + [v.number for v in values]}
    if kind in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
        return {"type": "string"}
    if kind == FieldDescriptor.TYPE_BOOL:
        return {"type": "boolean"}
    if kind in _INTS:
        return {"type": "integer"}
    if kind in _LONGS:  # ProtoJSON writes 64-bit integers as strings; a number is accepted too
        return {"type": ["integer", "string"], "pattern": "^-?[0-9]+$"}
    return {"type": "number"}  # double, float
