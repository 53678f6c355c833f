"""`devagent run --output-format stream-json` read by claude-agent-sdk's own message parser: every
line devagent prints goes through `parse_message`, as a tool built on Claude Code's stream reads
it. Real subprocesses, a scripted model, nothing of the real HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest

from tests.core_helpers import call, write_call
from tests.unit.test_cli import write_script

sdk = pytest.importorskip("claude_agent_sdk")
from claude_agent_sdk import (  # noqa: E402
    AssistantMessage,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from claude_agent_sdk._internal.message_parser import parse_message  # noqa: E402

DEVAGENT = [sys.executable, "-m", "devagent"]
OWN_TYPES = {"step", "tool_call", "usage", "notice", "permission_request"}  # devagent's own lines
PRICES = "[prices.scripted]\ninput = 1000\noutput = 2000\n"  # USD per million tokens
ANSWER = 'Wrote x.txt; "missing.txt" is not there.'


def hermetic_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
    env.update(
        HOME=str(home), XDG_CONFIG_HOME=str(tmp_path / "xdg"), DEVAGENT_DATA_DIR=str(tmp_path / "data")
    )
    env["NO_COLOR"] = "1"
    return env


def devagent_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    settings = tmp_path / "config.toml"
    settings.write_text(PRICES)
    argv = [*DEVAGENT, "--config", str(settings), "run", *args]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        env=hermetic_env(tmp_path),
        stdin=subprocess.DEVNULL,
    )


def parsed(stdout: str) -> list[tuple[dict[str, Any], Any]]:
    """Every line, raw and as the SDK's parser reads it (a malformed Claude Code line raises);
    devagent's own line types are the only ones the parser skips."""
    out = []
    for text in stdout.splitlines():
        raw = json.loads(text)
        message = parse_message(raw)
        assert (message is None) == (raw["type"] in OWN_TYPES), raw
        out.append((raw, message))
    return out


def of_type(lines: list[tuple[dict[str, Any], Any]], kind: type) -> list[Any]:
    return [m for _, m in lines if isinstance(m, kind)]


def blocks(lines: list[tuple[dict[str, Any], Any]], kind: type) -> list[Any]:
    found = []
    for m in of_type(lines, AssistantMessage) + of_type(lines, UserMessage):
        found += [b for b in m.content if isinstance(b, kind)]
    return found


def test_issue38_item5_every_stream_json_line_parses_with_the_claude_agent_sdk(
    tmp_path: Path, workspace: Path
) -> None:
    spec = write_script(
        tmp_path,
        [
            [
                {"thinking": "write the file, then look for the other"},
                {"text": "Writing it."},
                write_call("x.txt", "hello\n", cid="w1"),
                call("read_file", {"path": "missing.txt"}, "r1"),
                {"usage": {"input_tokens": 100, "output_tokens": 10}},
            ],
            [{"text": ANSWER}, {"usage": {"input_tokens": 200, "output_tokens": 20}}],
        ],
    )
    out = devagent_run(
        tmp_path, "write x", "-w", str(workspace), "-m", spec, "-a", "yolo", "--output-format", "stream-json"
    )
    assert out.returncode == 0, out.stderr
    lines = parsed(out.stdout)

    init_raw, init = lines[0]
    assert isinstance(init, SystemMessage) and init.subtype == "init"
    sid = init.data["session_id"]
    assert init.data["cwd"] == str(workspace.resolve()) and init.data["model"] == spec
    assert "write_file" in init.data["tools"] and init.data["permissionMode"] == "bypassPermissions"
    assert init_raw["approval_mode"] == "yolo"  # devagent's own field beside Claude Code's

    assistants = of_type(lines, AssistantMessage)
    assert assistants and all(m.session_id == sid and m.model == spec for m in assistants)
    assert all(m.parent_tool_use_id is None for m in assistants)
    [thought] = blocks(lines, ThinkingBlock)
    assert thought.thinking == "write the file, then look for the other"
    assert [b.text for b in blocks(lines, TextBlock)] == ["Writing it.", ANSWER]  # each block whole
    uses = {b.id: b for b in blocks(lines, ToolUseBlock)}
    assert uses["w1"].name == "write_file" and uses["w1"].input == {"path": "x.txt", "content": "hello\n"}
    assert uses["r1"].name == "read_file" and uses["r1"].input == {"path": "missing.txt"}
    results = {b.tool_use_id: b for b in blocks(lines, ToolResultBlock)}
    assert results["w1"].is_error is False and "x.txt" in results["w1"].content
    assert results["r1"].is_error is True and "missing.txt" in results["r1"].content
    sequence = []  # each call's tool_use line comes before its tool_result line
    for _, m in lines:
        if isinstance(m, (AssistantMessage, UserMessage)) and isinstance(m.content, list):
            sequence += [("use", b.id) for b in m.content if isinstance(b, ToolUseBlock)]
            sequence += [("result", b.tool_use_id) for b in m.content if isinstance(b, ToolResultBlock)]
    for cid in ("w1", "r1"):
        assert sequence.index(("use", cid)) < sequence.index(("result", cid))

    result_raw, result = lines[-1]
    assert isinstance(result, ResultMessage)
    assert result.subtype == "success" and result.is_error is False and result.result == ANSWER
    assert result.session_id == sid and result.num_turns == 2
    assert result.total_cost_usd == pytest.approx(300 * 0.001 + 30 * 0.002)
    assert (
        result.usage is not None
        and result.usage["input_tokens"] == 300
        and result.usage["output_tokens"] == 30
    )
    assert result.duration_ms >= result.duration_api_ms >= 0
    # devagent's own fields stay beside Claude Code's
    assert result_raw["outcome"] == "success" and result_raw["cost_usd"] == pytest.approx(
        result.total_cost_usd
    )
    assert result_raw["usage"]["requests"] == 2
    assert result.stop_reason == "end_turn" and result_raw["finish_reason"] == "stop"
    assert (workspace / "x.txt").read_text() == "hello\n"


def test_issue38_item5_max_steps_is_claude_codes_error_max_turns(tmp_path: Path, workspace: Path) -> None:
    spec = write_script(tmp_path, [[write_call("x.txt", "a\n", cid="w1")], [{"text": "never asked"}]])
    out = devagent_run(
        tmp_path,
        "go",
        "-w",
        str(workspace),
        "-m",
        spec,
        "-a",
        "yolo",
        "--max-steps",
        "1",
        "--output-format",
        "stream-json",
    )
    assert out.returncode == 3, out.stdout + out.stderr
    lines = parsed(out.stdout)
    result_raw, result = lines[-1]
    assert isinstance(result, ResultMessage)
    assert result.subtype == "error_max_turns" and result.is_error is True and result.num_turns == 1
    assert result_raw["outcome"] == "max_steps" and result.errors and "1 model steps" in result.errors[0]
    assert result_raw["terminal_reason"] == "max_turns"
    assert [b.tool_use_id for b in blocks(lines, ToolResultBlock)] == ["w1"]


def test_issue38_item5_a_permission_pause_parses_and_keeps_devagents_pending(
    tmp_path: Path, workspace: Path
) -> None:
    spec = write_script(tmp_path, [[write_call("x.txt", "a\n", cid="w1")], [{"text": "ok"}]])
    out = devagent_run(tmp_path, "go", "-w", str(workspace), "-m", spec, "--output-format", "stream-json")
    assert out.returncode == 4, out.stdout + out.stderr
    lines = parsed(out.stdout)
    [use] = blocks(lines, ToolUseBlock)
    assert use.id == "w1" and use.input == {"path": "x.txt", "content": "a\n"}
    assert not blocks(lines, ToolResultBlock)  # it waits: no result yet
    [asked] = [raw for raw, _ in lines if raw["type"] == "permission_request"]
    assert asked["requests"][0]["call_id"] == "w1"
    result_raw, result = lines[-1]
    assert (
        isinstance(result, ResultMessage) and result.subtype == "permission_required" and not result.is_error
    )
    assert result_raw["outcome"] == "permission_required" and result_raw["pending"][0]["call_id"] == "w1"
    assert not (workspace / "x.txt").exists()


def test_issue38_item5_include_partial_messages_streams_each_piece_as_a_stream_event(
    tmp_path: Path, workspace: Path
) -> None:
    spec = write_script(tmp_path, [[{"thinking": "a long thought to stream"}, {"text": ANSWER}]])
    args = ["go", "-w", str(workspace), "-m", spec, "--output-format", "stream-json"]
    out = devagent_run(tmp_path, *args, "--include-partial-messages")
    assert out.returncode == 0, out.stderr
    lines = parsed(out.stdout)
    events = [m.event for m in of_type(lines, StreamEvent)]
    assert all(m.session_id == lines[0][1].data["session_id"] for m in of_type(lines, StreamEvent))
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    texts = [d["text"] for d in deltas if d["type"] == "text_delta"]
    assert len(texts) > 1 and "".join(texts) == ANSWER  # piece by piece, as it streamed
    thought = "".join(d["thinking"] for d in deltas if d["type"] == "thinking_delta")
    assert thought == "a long thought to stream"
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 2
    assert [b.text for b in blocks(lines, TextBlock)] == [ANSWER]  # the whole block comes too
    refused = devagent_run(tmp_path, "go", "-w", str(workspace), "-m", spec, "--include-partial-messages")
    assert refused.returncode == 2 and "--output-format stream-json" in refused.stderr


def read_until_result(stdout: IO[str]) -> list[tuple[dict[str, Any], Any]]:
    got = []
    for text in stdout:
        raw = json.loads(text)
        got.append((raw, parse_message(raw)))
        if raw["type"] == "result":
            return got
    raise AssertionError(f"the output ended before a result line: {got}")


def test_issue38_item5_input_format_stream_json_is_a_turn_a_line_in_one_session(
    tmp_path: Path, workspace: Path
) -> None:
    spec = write_script(
        tmp_path,
        [
            [{"text": "first: {last_user}"}, {"usage": {"input_tokens": 10, "output_tokens": 1}}],
            [{"text": "second: {last_user}"}, {"usage": {"input_tokens": 20, "output_tokens": 2}}],
        ],
    )
    settings = tmp_path / "config.toml"
    settings.write_text(PRICES)
    argv = [*DEVAGENT, "--config", str(settings), "run", "-w", str(workspace), "-m", spec]
    argv += ["--input-format", "stream-json", "--output-format", "stream-json"]
    p = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=hermetic_env(tmp_path),
    )
    try:
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write(
            json.dumps({"type": "user", "message": {"role": "user", "content": "hello there"}}) + "\n"
        )
        p.stdin.flush()
        first = read_until_result(p.stdout)  # answered while standard input is still open
        blocks_in = [{"type": "text", "text": "and"}, {"type": "text", "text": "again"}]
        p.stdin.write(
            "\n" + json.dumps({"type": "user", "message": {"role": "user", "content": blocks_in}}) + "\n"
        )
        p.stdin.close()
        second = read_until_result(p.stdout)
        rest, err = p.stdout.read(), p.stderr.read() if p.stderr else ""
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert rest == ""
    r1, r2 = first[-1][1], second[-1][1]
    assert isinstance(r1, ResultMessage) and isinstance(r2, ResultMessage)
    assert r1.result == "first: hello there" and r2.result == "second: and\nagain"
    assert r1.session_id == r2.session_id  # one session: the second turn's model saw the first
    assert isinstance(first[0][1], SystemMessage) and first[0][1].data["session_id"] == r1.session_id
    assert first[0][0]["resumed"] is False and second[0][0]["resumed"] is True
    assert r2.total_cost_usd == pytest.approx(30 * 0.001 + 3 * 0.002)  # the run's so far
    assert second[-1][0]["cost_usd"] == pytest.approx(20 * 0.001 + 2 * 0.002)  # this turn's


def test_issue38_item5_input_format_stream_json_refuses_what_it_cannot_read(
    tmp_path: Path, workspace: Path
) -> None:
    needs_stream_out = devagent_run(
        tmp_path, "-w", str(workspace), "--input-format", "stream-json", "--output-format", "json"
    )
    assert needs_stream_out.returncode == 2 and "--output-format stream-json" in needs_stream_out.stderr
    spec = write_script(tmp_path, [[{"text": "never"}]])
    argv = [*DEVAGENT, "run", "-w", str(workspace), "-m", spec, "--input-format", "stream-json"]
    argv += ["--output-format", "stream-json"]
    bad = subprocess.run(
        argv,
        input='{"type": "control_request", "request_id": "1"}\n',
        capture_output=True,
        text=True,
        timeout=120,
        env=hermetic_env(tmp_path),
    )
    assert bad.returncode == 2, bad.stderr
    result_raw, result = parsed(bad.stdout)[-1]
    assert isinstance(result, ResultMessage) and result.is_error and "control_request" in result_raw["error"]


CLAUDE = Path(sdk.__file__).parent / "_bundled" / "claude"  # the Claude Code build the SDK wheel carries


def claude_code_runs() -> bool:
    if not CLAUDE.exists():
        return False
    try:
        done = subprocess.run([str(CLAUDE), "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and "Claude Code" in done.stdout


def conversation(m: Any) -> tuple[Any, ...] | None:
    """What a parsed message says of the conversation (None: not part of it, as Claude Code's
    `thinking_tokens` system lines or devagent's own lines)."""
    if isinstance(m, SystemMessage):
        return ("system",) if m.subtype == "init" else None
    if isinstance(m, AssistantMessage | UserMessage):
        said: list[tuple[Any, ...]] = []
        for b in m.content:
            if isinstance(b, TextBlock):
                said.append(("text", b.text))
            elif isinstance(b, ThinkingBlock):
                said.append(("thinking", b.thinking))
            elif isinstance(b, ToolUseBlock):
                said.append(("tool_use",))
            elif isinstance(b, ToolResultBlock):
                said.append(("tool_result", bool(b.is_error)))
        return (type(m).__name__, *said)
    if isinstance(m, ResultMessage):
        return ("result", m.subtype, m.is_error, m.result, m.stop_reason)
    return None


async def claude_code_stream(tmp_path: Path) -> str:
    """`claude -p --output-format stream-json --verbose` on a fake Anthropic API: a thought, a text,
    a file written, a missing file read, an answer."""
    from tests.fakes.anthropic_server import FakeAnthropic
    from tests.npm import run_headless

    cwd, home = tmp_path / "cc", tmp_path / "cc-home"
    cwd.mkdir()
    home.mkdir()

    def script(body: dict[str, Any]) -> tuple[list[Any], tuple[int, int]]:
        if not any(m.get("role") == "assistant" for m in body.get("messages") or []):
            write = {"file_path": str(cwd / "x.txt"), "content": "hello\n"}
            read = {"file_path": str(cwd / "missing.txt")}
            blocks = [("thinking", "write it", "sig"), ("text", "Writing it.")]
            return [
                *blocks,
                ("tool_use", "toolu_1", "Write", write),
                ("tool_use", "toolu_2", "Read", read),
            ], (100, 10)
        return [("text", ANSWER)], (200, 20)

    async with FakeAnthropic(script) as url:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "fake-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "NO_COLOR": "1",
        }
        argv = [str(CLAUDE), "-p", "write x", "--output-format", "stream-json", "--verbose"]
        argv += ["--permission-mode", "acceptEdits", "--allowedTools", "Write,Read"]
        code, out, err = await run_headless(argv, cwd, env, 240)
    assert code == 0, err[-2000:]
    return out


async def test_issue38_item5_the_same_conversation_reads_as_claude_codes_own_stream(
    tmp_path: Path, workspace: Path
) -> None:
    """Claude Code itself (the build claude-agent-sdk bundles) and devagent run the same
    conversation; through the SDK's parser both streams say the same, message for message."""
    if not claude_code_runs():
        pytest.skip("the Claude Code build bundled with claude-agent-sdk does not run here")
    theirs = [conversation(m) for _, m in parsed_any(await claude_code_stream(tmp_path))]
    spec = write_script(
        tmp_path,
        [
            [
                {"thinking": "write it"},
                {"text": "Writing it."},
                write_call("x.txt", "hello\n", cid="w1"),
                call("read_file", {"path": "missing.txt"}, "r1"),
            ],
            [{"text": ANSWER}],
        ],
    )
    args = ["write x", "-w", str(workspace), "-m", spec, "-a", "yolo", "--output-format", "stream-json"]
    out = devagent_run(tmp_path, *args)
    assert out.returncode == 0, out.stderr
    ours = [conversation(m) for _, m in parsed(out.stdout)]
    assert in_order(ours) == in_order(theirs)


def in_order(said: list[tuple[Any, ...] | None]) -> list[Any]:
    """The conversation, the results of calls that ran together as a set (they end in any order)."""
    out: list[Any] = []
    for c in said:
        if c is None:
            continue
        if c[0] == "UserMessage" and out and isinstance(out[-1], list):
            out[-1] = sorted([*out[-1], c])
        else:
            out.append([c] if c[0] == "UserMessage" else c)
    return out


def parsed_any(stdout: str) -> list[tuple[dict[str, Any], Any]]:
    return [(json.loads(t), parse_message(json.loads(t))) for t in stdout.splitlines() if t.strip()]
