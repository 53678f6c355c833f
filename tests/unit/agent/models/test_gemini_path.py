"""G1: a session over pydantic-ai's real Google (Gemini) code path, against a fake Gemini API.

A thought, text and a function call (with its thought signature) stream in the first response;
the second request must carry the function call back with its signature and the function response.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.core_helpers import ask_about_the_readme, assert_read_the_readme
from tests.fakes.gemini_server import FakeGemini


def script(body: dict[str, Any]) -> tuple[list[list[dict[str, Any]]], dict[str, int]]:
    responses = [
        p["functionResponse"] for c in body["contents"] for p in c["parts"] if "functionResponse" in p
    ]
    if not responses:
        return [
            [{"text": "I need the README.", "thought": True}],
            [{"text": "Reading it."}],
            [
                {
                    "functionCall": {"name": "read_file", "args": {"path": "README.md"}},
                    "thoughtSignature": "c2lnLWc=",
                }
            ],
        ], {
            "promptTokenCount": 30,
            "candidatesTokenCount": 15,
            "thoughtsTokenCount": 5,
            "totalTokenCount": 50,
        }
    text = str(responses[0]["response"])
    said = "Hello." if "Hello." in text else "?"
    return [[{"text": "It says: " + said}]], {
        "promptTokenCount": 60,
        "cachedContentTokenCount": 24,  # Gemini caches implicitly: read from its cache
        "candidatesTokenCount": 7,
        "totalTokenCount": 67,
    }


async def test_g1_gemini_session_round_trip(core_factory: Any, workspace: Path) -> None:
    fake = FakeGemini(script)
    async with fake as base_url:
        events = await ask_about_the_readme(core_factory, "google:gemini-fake", base_url, workspace)
    assert all(p.endswith("gemini-fake:streamGenerateContent") for p in fake.paths), fake.paths
    end = assert_read_the_readme(events, "I need the README.", "It says: Hello.")
    assert end.usage.input_tokens == 90 and end.usage.reasoning_tokens == 5
    assert end.usage.cache_read_tokens == 24  # issue 24 item 2: reported as the others are

    first, second = fake.requests
    assert "devagent" in str(first.get("systemInstruction"))
    names = {f["name"] for t in first["tools"] for f in t.get("functionDeclarations", [])}
    assert {"read_file", "write_file", "run_shell_command"} <= names
    model_turn = next(c for c in second["contents"] if c["role"] == "model")
    call_part = next(p for p in model_turn["parts"] if "functionCall" in p)
    assert call_part["functionCall"]["name"] == "read_file"
    assert call_part.get("thoughtSignature") == "c2lnLWc="
    response_part = next(p for c in second["contents"] for p in c["parts"] if "functionResponse" in p)
    assert response_part["functionResponse"]["name"] == "read_file"
