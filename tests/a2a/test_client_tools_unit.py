"""The client-tools DataPart and text forms, parsed and matched without a server (C1 C4)."""

from __future__ import annotations

import pytest

from devagent.a2a import client_tools as ct
from devagent.agent.events import ToolCall, ToolKind


def _call(cid: str, name: str) -> ToolCall:
    return ToolCall(cid, name, {}, ToolKind.CLIENT, awaiting_client=True)


def test_c4_text_forms() -> None:
    assert ct.parse_text_results("What's the weather?") is None
    assert ct.parse_text_results("Tools are nice") is None
    one = ct.parse_text_results('Tool "get_weather" returned: {"t":\n 18}\nTool read_config failed: ENOENT')
    assert one is not None and not one.exact
    assert [(e.name, e.output, e.error) for e in one.entries] == [
        ("get_weather", {"t": 18}, None),
        ("read_config", None, "ENOENT"),
    ]
    plain = ct.parse_text_results('Tool "x" returned: just text')
    assert plain is not None and plain.entries[0].output == "just text"
    many = ct.parse_text_results(
        'Tool results: [{"name": "a", "result": 1}, {"name": "a", "error": {"message": "m"}}]'
    )
    assert many is not None and many.exact and [e.error for e in many.entries] == [None, "m"]
    with pytest.raises(ct.ToolResultsError, match="JSON list"):
        ct.parse_text_results("Tool results: not json")
    with pytest.raises(ct.ToolResultsError, match="neither"):
        ct.parse_text_results('Tool results: [{"name": "a"}]')


def test_c4_matching() -> None:
    waiting = [_call("1", "a"), _call("2", "b"), _call("3", "a")]
    entries = [
        ct.ResultIn(None, "a", output="first"),
        ct.ResultIn("2", "b", output="x"),
        ct.ResultIn(None, "a", error="e"),
    ]
    got = ct.match_results(entries, waiting, exact=True)
    assert [(r.call_id, r.output, r.error) for r in got] == [
        ("1", "first", None),
        ("2", "x", None),
        ("3", None, "e"),
    ]
    with pytest.raises(ct.ToolResultsError, match="missing results for tool calls 3"):
        ct.match_results(entries[:2], waiting, exact=True)
    assert len(ct.match_results(entries[:1], waiting, exact=False)) == 1
    with pytest.raises(ct.ToolResultsError, match="answered twice"):
        ct.match_results(
            [ct.ResultIn("2", None, output=1), ct.ResultIn("2", None, output=2)], waiting, exact=False
        )
    with pytest.raises(ct.ToolResultsError, match="no longer pending"):
        ct.match_results([ct.ResultIn("0", None, output=1)], waiting, exact=False, answered={"0"})
    with pytest.raises(ct.ToolResultsError, match="no call of tool 'c'"):
        ct.match_results([ct.ResultIn(None, "c", output=1)], waiting, exact=False)


def test_c1_definitions_structure() -> None:
    tools, rejected = ct.parse_definitions(
        [
            {
                "type": "function",
                "function": {"name": "ok", "description": "", "parameters": {"type": "object"}},
            },
            {"name": "flat", "description": "d", "parameters": {"type": "object"}},
            {"type": "function", "function": {"description": "d", "parameters": {}}},
        ]
    )
    assert [t.name for t in tools] == ["ok"]
    assert rejected == [("#1", "'type' must be \"function\""), ("#2", "missing 'function.name'")]
    assert ct.parse_definitions({"a": 1}) == ([], [("tools", "'tools' must be a list of tool definitions")])


def test_c1_c4_numbers_come_back_whole() -> None:
    data = {"tools": [{"parameters": {"maxLength": 5.0, "minimum": 0.5}}], "n": [3.0, -2.0, 1e300]}
    assert ct.plain_numbers(data) == {
        "tools": [{"parameters": {"maxLength": 5, "minimum": 0.5}}],
        "n": [3, -2, 1e300],
    }
    assert isinstance(ct.plain_numbers(3.0), int) and ct.plain_numbers(True) is True
