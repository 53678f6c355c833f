"""Property-based fuzzing of wire mode's decoder (issue 12 items 3 and 8): whatever line a client
sends, `WireServer.handle_line` does not raise, every line it sends is one JSON-RPC message, every
error is a proper error object without Python internals, and the server still answers
`initialize` afterwards. In process, with the core never loaded (a prompt that gets through
waits for it), so a few hundred examples take seconds; the real subprocess is fuzzed with deep
nesting and overlong lines in test_limits.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devagent.config import load_config
from devagent.stdio import json_line
from devagent.wire import messages as m
from devagent.wire.server import OverlongLine, WireOptions, WireServer
from tests.a2a.test_fuzz import LEAK, cut_short, json_bytes, json_leaf, json_value


class Captured:
    """Stands in for the protocol output: keeps what the server sends, as the bytes it would
    write."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def send(self, msg: m.JSON) -> None:
        self.lines.append(json_line(msg))

    async def drain(self) -> None:
        return None


tool_def = st.fixed_dictionaries(
    {},
    optional={"name": st.text(max_size=12) | json_leaf, "description": json_value, "parameters": json_value},
)
content_part = st.fixed_dictionaries(
    {}, optional={"type": st.sampled_from(["text", "image_url", "x"]) | json_leaf, "text": json_value}
)
params = (
    st.fixed_dictionaries(
        {},
        optional={
            "protocol_version": st.sampled_from(["1.0", "1.1", "1.2", "9"]) | json_leaf,
            "client": st.fixed_dictionaries({}, optional={"name": json_leaf, "version": json_leaf})
            | json_value,
            "external_tools": st.lists(tool_def, max_size=3) | json_value,
            "user_input": st.text(max_size=10) | st.lists(content_part, max_size=3) | json_value,
        },
    )
    | json_value
)
request = st.fixed_dictionaries(
    {
        "jsonrpc": st.just("2.0"),
        "id": st.integers(min_value=0, max_value=10**6) | st.text(max_size=8),
        "method": st.sampled_from(["initialize", "prompt", "cancel"]),
        "params": params,
    }
)
anything = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.just("2.0") | json_leaf,
        "id": json_value,
        "method": st.sampled_from(["initialize", "prompt", "cancel", "event"]) | json_value,
        "params": params,
        "result": json_value,
        "error": st.fixed_dictionaries({}, optional={"code": json_leaf, "message": json_leaf}) | json_value,
    },
)


line = st.one_of(
    *(request.map(json_bytes) for _ in range(2)),
    anything.map(json_bytes),
    json_value.map(json_bytes),
    st.binary(max_size=64),
    st.integers(min_value=1, max_value=3000).map(lambda n: b"[" * n + b"]" * n),
    cut_short(request),
)


def _check(raw: bytes) -> None:
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1, raw
    msg = json.loads(raw)
    assert msg.get("jsonrpc") == "2.0", msg
    if "error" in msg:
        err = msg["error"]
        assert isinstance(err, dict), msg
        assert isinstance(err.get("code"), int) and isinstance(err.get("message"), str), msg
        assert not LEAK.search(json.dumps(err)), msg


async def _feed(work_dir: Path, lines: list[bytes]) -> list[bytes]:
    out = Captured()
    server = WireServer(WireOptions(work_dir=work_dir, config=load_config({})), out)  # type: ignore[arg-type]
    server._load_task = asyncio.get_running_loop().create_future()  # the core never comes
    server._start_loading = lambda: None  # type: ignore[method-assign]
    try:
        for raw in lines:
            server.handle_line(raw)
            await asyncio.sleep(0)
        server.handle_line(
            json_bytes(
                {
                    "jsonrpc": "2.0",
                    "id": "last",
                    "method": "initialize",
                    "params": {"protocol_version": "1.2"},
                }
            )
        )
        await asyncio.sleep(0)
    finally:
        for t in list(server._tasks):
            t.cancel()
        await asyncio.gather(*server._tasks, return_exceptions=True)
    return out.lines


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(lines=st.lists(line, min_size=1, max_size=4))
def test_wire_decoder_fuzz(tmp_path: Path, lines: list[bytes]) -> None:
    """issue 12 items 3 and 8: 300 generated sequences of lines (requests with wrong params,
    anything in the envelope, any JSON, nesting up to 3,000 deep, random bytes, cut JSON)."""
    sent = asyncio.run(_feed(tmp_path, lines))
    for raw in sent:
        _check(raw)
    last = json.loads(sent[-1])
    assert last["id"] == "last" and "result" in last, last


def test_wire_decoder_overlong_line(tmp_path: Path) -> None:
    """The reader's stand-in for an overlong line is answered like any refused line."""
    sent = asyncio.run(_feed(tmp_path, [OverlongLine()]))
    first = json.loads(sent[0])
    assert first["error"]["code"] == -32600 and "longer than" in first["error"]["message"]
