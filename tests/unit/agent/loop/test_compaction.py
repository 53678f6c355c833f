"""Automatic compaction (issue 24 item 1), through the real OpenAI provider path against a fake
server that enforces a small context window: it answers HTTP 400 `context_length_exceeded`, as
providers do, to any request larger than its window."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from devagent.agent.events import Notice, StatusUpdate, TurnEnd, UserPrompt
from devagent.agent.history.transcript import fit_result
from devagent.agent.loop.compact import COMPACT_PROMPT
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, Reply

WINDOW = 8192  # tokens
BIG = "".join(f"line {i:05d} of a large file, padded to be long enough to matter\n" for i in range(400))


def request_tokens(body: dict[str, Any]) -> int:
    """The fake's measure of a request: its messages and tools as JSON, four characters a token."""
    return len(json.dumps(body["messages"]) + json.dumps(body.get("tools") or [])) // 4


class SmallWindow:
    def __init__(self) -> None:
        self.turn_sizes: list[int] = []  # the tokens of each request of a turn (not the summaries')
        self.summaries = 0
        self.too_large = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        size = request_tokens(body)
        usage = {"prompt_tokens": size, "completion_tokens": 20, "total_tokens": size + 20}
        if size > WINDOW:
            self.too_large += 1
            return Reply(status=400, error_message="context_length_exceeded: the request is too large")
        last = body["messages"][-1]
        content = last.get("content") or ""
        text = content if isinstance(content, str) else json.dumps(content)
        if COMPACT_PROMPT[:40] in text:
            self.summaries += 1
            return Reply(
                text=[f"Summary {self.summaries}: the user asks for big.txt each turn."], usage=usage
            )
        self.turn_sizes.append(size)
        if last["role"] == "user":
            return Reply(
                tool_calls=[FakeToolCall(f"c{len(self.turn_sizes)}", "read_file", {"path": "big.txt"})]
            )
        return Reply(text=["Read it."], usage=usage)


async def test_issue24_200_turns_with_large_tool_outputs_on_an_8k_window(
    core_factory: Any, workspace: Path
) -> None:
    """200 turns, each reading a file larger than the window: every request fits the window
    (none refused), the conversation is compacted again and again, the request size stays flat,
    and the client is told (a notice, the window in StatusUpdate)."""
    (workspace / "big.txt").write_text(BIG)
    fake = SmallWindow()
    async with FakeOpenAI(fake) as base_url:
        core = await core_factory(
            "openai-compatible:fake-model",
            model_base_url=base_url,
            model_api_key="k",
            context_tokens=WINDOW,
            approval_mode="yolo",
            # the fixed prefix (system prompt and tools) plus one cut result must fit 8k: without
            # the `task` and `web_fetch` tools it has the few hundred tokens of room this test was
            # measured with (the shell tool's terminal, `tty`, took the room web_fetch gives back)
            subagent_depth=0,
            web_fetch=False,
        )
        s = await core.create_session([workspace], approval_mode="yolo")
        notices: list[str] = []
        windows: set[int] = set()
        for turn in range(200):
            events = [e async for e in s.advance(UserPrompt(f"turn {turn}: read big.txt"))]
            end = events[-1]
            assert isinstance(end, TurnEnd) and end.reason == "finished", (turn, end)
            notices += [e.text for e in events if isinstance(e, Notice)]
            windows |= {e.max_context_tokens for e in events if isinstance(e, StatusUpdate)}
    assert fake.too_large == 0
    assert fake.summaries >= 20, fake.summaries
    assert len([n for n in notices if n.startswith("Compacted the conversation")]) == fake.summaries
    assert windows == {WINDOW}
    sizes = fake.turn_sizes
    assert max(sizes) <= WINDOW
    # flat: the last hundred turns' requests are no larger than the first hundred's (within the
    # few tokens the growing turn numbers add)
    assert max(sizes[200:]) <= max(sizes[:200]) * 1.01, (max(sizes[:200]), max(sizes[200:]))
    # the file's result was cut to fit, with a note the model can act on
    messages = await s.messages()
    stored = json.dumps([str(m) for m in messages])
    assert "characters cut here" in stored


def test_issue24_a_result_larger_than_a_quarter_of_the_window_is_cut_with_a_note() -> None:
    cut = fit_result(BIG, WINDOW)
    assert len(cut) < WINDOW * 4 // 4 + 400
    assert cut.startswith(BIG[:1000]) and cut.endswith(BIG[-500:])
    assert "characters cut here" in cut
    assert fit_result("small", WINDOW) == "small"
