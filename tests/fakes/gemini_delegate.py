"""A scripted Gemini model that delegates to a remote A2A agent, for `FakeGemini`.

Gemini CLI offers its subagents, remote A2A agents among them, through one tool, `invoke_agent`
(`agent_name`, `prompt`). This model:

- asked by the user, calls `invoke_agent` with the task for the agent;
- given the agent's answer, if it asks permission (its text says "Reply yes"), calls
  `invoke_agent` again with `answer` (in words, as a model would; Gemini CLI keeps the taskId of
  a task that waits for input);
- otherwise ends the turn with a text naming what the agent said.

`delegations` records every `prompt` it sent, in order.
"""

from __future__ import annotations

import json
from typing import Any


class DelegatingModel:
    def __init__(self, agent: str, task: str, answer: str = "yes") -> None:
        self.agent = agent
        self.task = task
        self.answer = answer
        self.delegations: list[str] = []
        self.results: list[str] = []

    def _call(self, prompt: str) -> list[dict[str, Any]]:
        self.delegations.append(prompt)
        return [
            {"functionCall": {"name": "invoke_agent", "args": {"agent_name": self.agent, "prompt": prompt}}}
        ]

    def __call__(self, body: dict[str, Any]) -> tuple[list[list[dict[str, Any]]], dict[str, int]]:
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
        last = body["contents"][-1]
        responses = [p["functionResponse"] for p in last.get("parts", []) if "functionResponse" in p]
        if not responses:
            return [self._call(self.task)], usage
        said = json.dumps([r.get("response") for r in responses])
        self.results.append(said)
        if "Reply yes" in said:
            return [self._call(self.answer)], usage
        return [[{"text": f"The agent is done: {said[:200]}"}]], usage
