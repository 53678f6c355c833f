"""`devagent run --output-format json|stream-json` as a script runs it: a real subprocess, standard
input not a terminal, a scripted model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.core_helpers import ask_call, shell_call, write_call
from tests.unit.test_cli import DEVAGENT, run, write_script

ANSWER = 'Done: wrote x.txt.\n<b>"quoted"</b> $(rm -rf /) \\ end'


def lines(stdout: str) -> list[dict[str, Any]]:
    """Every line of the output parsed on its own, as a reader of the stream does."""
    return [json.loads(line) for line in stdout.splitlines()]


def headless(tmp_path: Path, workspace: Path, fmt: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run(["run", *args, "-w", str(workspace), "--output-format", fmt], tmp_path)


def stream_args(workspace: Path, *args: str) -> list[str]:
    return ["run", *args, "-w", str(workspace), "--output-format", "stream-json"]


def used(tokens_in: int, tokens_out: int) -> dict[str, Any]:
    return {"usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}}


def writing_script(tmp_path: Path) -> str:
    return write_script(
        tmp_path,
        [
            [{"thinking": "write the file"}, write_call("x.txt", "hello\n", cid="w1"), used(100, 10)],
            [{"text": ANSWER}, used(200, 20)],
        ],
    )


def test_issue32_item4_stream_json_lines_init_events_and_result(tmp_path: Path, workspace: Path) -> None:
    spec = writing_script(tmp_path)
    settings = tmp_path / "config.toml"  # the operator's prices: USD per million tokens
    settings.write_text("[prices.scripted]\ninput = 1000\noutput = 2000\n")
    out = run(
        ["--config", str(settings), *stream_args(workspace, "write x", "-m", spec, "-a", "yolo")], tmp_path
    )
    assert out.returncode == 0, out.stderr
    events = lines(out.stdout)
    init, result = events[0], events[-1]
    assert init["type"] == "system" and init["subtype"] == "init"
    assert init["model"] == spec and init["workspace"] == str(workspace.resolve())
    assert "write_file" in init["tools"] and init["session_id"]
    assert all("type" in e for e in events)
    thoughts = "".join(e["text"] for e in events if e.get("subtype") == "thinking")
    assert thoughts == "write the file"
    calls = [e for e in events if e["type"] == "tool_call" and e["call_id"] == "w1"]
    assert calls[-1]["status"] == "succeeded" and calls[-1]["tool"] == "write_file"
    assert "".join(e["text"] for e in events if e.get("subtype") == "text") == ANSWER
    assert result["type"] == "result" and result["subtype"] == "success" and not result["is_error"]
    assert result["result"] == ANSWER  # the model's text, JSON-escaped and intact
    assert result["session_id"] == init["session_id"]
    assert result["usage"]["requests"] == 2 and result["num_turns"] == 2
    assert result["usage"]["input_tokens"] == 300 and result["usage"]["output_tokens"] == 30
    assert result["cost_usd"] == pytest.approx(300 * 0.001 + 30 * 0.002)
    assert result["session_cost_usd"] == pytest.approx(result["cost_usd"])
    assert sum(e["usage"]["requests"] for e in events if e["type"] == "usage") == 2
    assert (workspace / "x.txt").read_text() == "hello\n"


def test_issue32_item4_json_prints_the_result_alone(tmp_path: Path, workspace: Path) -> None:
    spec = writing_script(tmp_path)
    out = run(
        ["run", "write x", "-w", str(workspace), "-m", spec, "-a", "yolo", "--output-format", "json"],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    [result] = lines(out.stdout)
    assert result["type"] == "result" and result["result"] == ANSWER and result["usage"]["output_tokens"] > 0


def test_issue32_item4_prompt_from_stdin(tmp_path: Path, workspace: Path) -> None:
    spec = write_script(tmp_path, [[{"text": "ok"}]])
    argv = ["run", "-", "-w", str(workspace), "-m", spec, "--output-format", "json"]
    env = {**os.environ, "DEVAGENT_DATA_DIR": str(tmp_path / "data"), "NO_COLOR": "1"}
    piped = "summarise the piped report\n"
    out = subprocess.run(DEVAGENT + argv, input=piped, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    listed = run(["sessions", "--json", "-w", str(workspace)], tmp_path)
    assert json.loads(listed.stdout)[0]["title"].startswith("summarise the piped report")


def test_issue32_item4_permission_not_asked_then_resume_with_the_answer(
    tmp_path: Path, workspace: Path
) -> None:
    spec = writing_script(tmp_path)
    out = run(["run", "write x", "-w", str(workspace), "-m", spec, "--output-format", "json"], tmp_path)
    assert out.returncode == 4, out.stderr
    [result] = lines(out.stdout)
    assert result["subtype"] == "permission_required"
    [pending] = result["pending"]
    assert (
        pending["call_id"] == "w1" and pending["tool"] == "write_file" and "x.txt" in pending["description"]
    )
    assert {"proceed_once", "cancel"} <= {o["id"] for o in pending["options"]}
    assert not (workspace / "x.txt").exists()

    sid = result["session_id"]
    argv = [
        "run",
        "--resume",
        sid,
        "--answer",
        "w1=allow",
        "-w",
        str(workspace),
        "--output-format",
        "stream-json",
    ]
    again = run(argv, tmp_path)
    assert again.returncode == 0, again.stderr
    events = lines(again.stdout)
    assert events[0]["session_id"] == sid and events[0]["resumed"] is True
    assert events[-1]["subtype"] == "success" and events[-1]["result"] == ANSWER
    assert (workspace / "x.txt").read_text() == "hello\n"


def test_issue32_item4_stream_json_shows_the_permission_request(tmp_path: Path, workspace: Path) -> None:
    spec = writing_script(tmp_path)
    out = run(
        ["run", "write x", "-w", str(workspace), "-m", spec, "--output-format", "stream-json"], tmp_path
    )
    assert out.returncode == 4
    events = lines(out.stdout)
    [asked] = [e for e in events if e["type"] == "permission_request"]
    assert asked["requests"][0]["call_id"] == "w1"
    assert events[-1]["pending"][0]["call_id"] == "w1"


def test_issue32_item4_continue_answers_the_latest_session(tmp_path: Path, workspace: Path) -> None:
    spec = writing_script(tmp_path)
    first = run(["run", "write x", "-w", str(workspace), "-m", spec], tmp_path)
    assert first.returncode == 4 and "not a terminal" in first.stdout + first.stderr
    out = run(["run", "--continue", "--deny", "-w", str(workspace), "--output-format", "json"], tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    [result] = lines(out.stdout)
    assert result["subtype"] == "success" and result["result"] == ANSWER
    assert not (workspace / "x.txt").exists()  # denied: never written
    later = run(["run", "--continue", "now", "-w", str(workspace), "--output-format", "json"], tmp_path)
    assert json.loads(later.stdout)["session_id"] == result["session_id"]  # the same session goes on


def test_issue32_item4_errors_are_json_results(tmp_path: Path, workspace: Path) -> None:
    bad_model = run(
        ["run", "hi", "-w", str(workspace), "-m", "nosuch:x", "--output-format", "json"], tmp_path
    )
    assert bad_model.returncode != 0
    [result] = lines(bad_model.stdout)
    assert result["subtype"] == "error_during_execution" and result["outcome"] == "error"
    assert result["is_error"] and "nosuch" in result["error"]
    bad_flag = run(["run", "hi", "--output-format=stream-json", "--no-such-flag"], tmp_path)
    assert bad_flag.returncode == 2 and lines(bad_flag.stdout)[-1]["outcome"] == "error"
    no_answer = run(["run", "hi", "--allow", "-w", str(workspace), "--output-format", "json"], tmp_path)
    assert no_answer.returncode == 2 and "--resume" in lines(no_answer.stdout)[0]["error"]
    model_fails = write_script(tmp_path, [[{"error": {"message": "quota exceeded", "status": 429}}]])
    failed = run(["run", "hi", "-w", str(workspace), "-m", model_fails, "--output-format", "json"], tmp_path)
    assert failed.returncode == 1 and "quota exceeded" in lines(failed.stdout)[0]["error"]


def test_issue32_item4_a_question_waits_and_its_answer_is_given_by_resume(
    tmp_path: Path, workspace: Path
) -> None:
    spec = write_script(tmp_path, [[ask_call("Which colour?", ["red", "blue"], cid="q1")], [{"text": "ok"}]])
    out = headless(tmp_path, workspace, "json", "pick", "-m", spec)
    assert out.returncode == 4, out.stdout + out.stderr
    [pending] = json.loads(out.stdout)["pending"]
    assert pending["call_id"] == "q1" and pending["question"]["choices"] == ["red", "blue"]
    sid = json.loads(out.stdout)["session_id"]
    again = headless(tmp_path, workspace, "stream-json", "--resume", sid, "--answer", "q1=blue")
    assert again.returncode == 0, again.stdout + again.stderr
    [done] = [e for e in lines(again.stdout) if e.get("call_id") == "q1" and e["status"] == "succeeded"]
    assert "blue" in done["output"]


def test_issue32_item4_interrupt_ends_with_a_cancelled_result(tmp_path: Path, workspace: Path) -> None:
    spec = write_script(tmp_path, [[shell_call("sleep 120", cid="s1")], [{"text": "never"}]])
    env = {**os.environ, "DEVAGENT_DATA_DIR": str(tmp_path / "data"), "NO_COLOR": "1"}
    argv = DEVAGENT + stream_args(workspace, "wait", "-m", spec, "-a", "yolo", "--no-sandbox")
    p = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert p.stdout is not None
        for line in p.stdout:  # the command runs once its call says so
            e = json.loads(line)
            if e["type"] == "tool_call" and e["status"] == "executing":
                break
        p.send_signal(signal.SIGINT)
        rest, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    result = lines(rest)[-1]
    assert p.returncode == 130
    assert result["type"] == "result" and result["outcome"] == "cancelled" and result["session_id"]
    assert result["subtype"] == "error_during_execution"  # Claude Code's subtype for it
