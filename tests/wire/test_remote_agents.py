"""A remote A2A agent's question through the wire door: a `devagent wire` whose `reviewer` type is
a second real `devagent serve`; the remote's permission request reaches the wire client as a
QuestionRequest naming the remote agent, the client's words go back on the remote task, and the
remote's answer is the task call's result; a remote's progress lines reach it as text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.a2a.procs import TOKEN, serve_args, serving
from tests.a2a.test_remote_agents import _folder, _remote_settings
from tests.core_helpers import task_call, write_call, write_script
from tests.fakes.stepping_a2a_agent import stepping_a2a_agent
from tests.remote.test_progress_and_cancel import ANSWER, LINES, STEPS, delegating_script
from tests.wire.conftest import WireProc, text_of
from tests.wire.test_ask_user import initialize


def test_issue31_item4_wire_answers_a_remote_agents_question(
    start_wire: Callable[..., WireProc], wire_env: dict[str, str], tmp_path: Path
) -> None:
    remote_ws = _folder(tmp_path / "remote" / "ws", "remote\n")
    steps: list[Any] = [
        {"items": [write_call("notes.txt", "hello\n", "w1")]},
        {"items": [{"text": "I wrote notes.txt."}]},
    ]
    remote_spec = write_script(tmp_path / "remote.json", steps)
    remote_args = serve_args(f"sqlite+aiosqlite:///{tmp_path / 'remote.db'}", remote_ws, remote_spec, "ask")
    with serving(remote_args, tmp_path / "remote.log") as remote:
        config = tmp_path / "wire.toml"
        config.write_text(_remote_settings("reviewer", remote.url + ".well-known/agent-card.json"))
        wire_env.update({"DEVAGENT_CONFIG": str(config), "REMOTE_TOKEN": TOKEN})
        parent = write_script(
            tmp_path / "parent.json",
            [
                {
                    "items": [
                        task_call("ask the remote", "write notes.txt with hello", "t1", agent="reviewer")
                    ]
                },
                {"items": [{"text": "parent: {last_tool_results}"}]},
            ],
        )
        w = start_wire(script=Path(parent.removeprefix("scripted:")))
        initialize(w, True)
        w.prompt("delegate")
        _, req = w.until_request("QuestionRequest", timeout=60)
        [question] = req["params"]["payload"]["questions"]
        assert question["question"].startswith("reviewer: ") and "notes.txt" in question["question"], question
        assert not (remote_ws.parent / "notes.txt").exists()
        w.respond(req["id"], {"request_id": req["id"], "answers": {question["question"]: "yes"}})
        after, end = w.until(lambda m: m.get("id") == "p1" and "method" not in m, timeout=60)
        assert end["result"] == {"status": "finished"}, end
        assert (remote_ws.parent / "notes.txt").read_text() == "hello\n"
        # the remote's progress line (its edit starting), then the parent's answer
        assert text_of(after) == "reviewer: Editing notes.txt\nparent: I wrote notes.txt."
        assert w.close() == 0


def test_issue38_item6_wire_shows_a_remote_agents_progress_one_line_each(
    start_wire: Callable[..., WireProc], wire_env: dict[str, str], tmp_path: Path
) -> None:
    """The remote's progress lines reach the wire client as text, a line each, naming the remote
    agent, before the parent's answer."""
    with stepping_a2a_agent(STEPS, ANSWER) as remote:
        config = tmp_path / "wire.toml"
        config.write_text(_remote_settings("stepper", remote.card_url))
        wire_env.update({"DEVAGENT_CONFIG": str(config), "REMOTE_TOKEN": TOKEN})
        w = start_wire(script=Path(delegating_script(tmp_path / "parent.json").removeprefix("scripted:")))
        initialize(w, True)
        w.prompt("go")
        after, end = w.until(lambda m: m.get("id") == "p1" and "method" not in m, timeout=60)
        assert end["result"] == {"status": "finished"}, end
        assert text_of(after) == "".join(f"{line}\n" for line in LINES) + f"parent: {ANSWER}"
        assert w.close() == 0
