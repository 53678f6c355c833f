"""The size of what every request of a session carries before its messages, per model family:
the system prompt and the tool definitions, in characters and estimated tokens.

Tokens are estimated as characters / 4 (English prose and JSON with OpenAI's and Anthropic's
tokenizers come close to that; no tokenizer file can be downloaded here). The workspace is empty
(no AGENTS.md), so these are the floors a project's guides add to.

    .venv/bin/python bench/prompt_size.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from devagent.agent.core import AgentCore
from devagent.agent.settings import CoreConfig

# Each family's model, and the operator's `model_family` entries it is measured with (a small
# model's family is named by the operator).
MODELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "openai": ("openai:gpt-5-codex", ()),
    "anthropic": ("anthropic:claude-sonnet-4-5", ()),
    "gemini": ("google:gemini-2.5-pro", ()),
    "scripted/demo": ("demo", ()),
    "other": ("ollama:qwen3", ()),
    "small": ("ollama:qwen3:4b", ("small",)),
}


async def sizes(spec: str, named: tuple[str, ...], tmp: Path) -> tuple[int, int, int]:
    """The system prompt's characters, the tool definitions' (as the requests carry them, in
    the family's words), and the number of tools."""
    workspace = tmp / "ws"
    workspace.mkdir(exist_ok=True)
    db = f"sqlite+aiosqlite:///{tmp / (spec.replace(':', '_') + '.db')}"
    config = CoreConfig(db_url=db, default_model=spec, model_api_key="k", model_family=named)
    core = await AgentCore.open(config)
    try:
        session = await core.create_session([workspace])
        params = await session.request_parameters()
        system = "".join(p.content for p in params.instruction_parts)
        definitions = json.dumps(
            [
                {"name": t.name, "description": t.description, "parameters": t.parameters_json_schema}
                for t in params.function_tools
            ]
        )
        return len(system), len(definitions), len(params.function_tools)
    finally:
        await core.close()


async def main() -> None:
    head = ("family", "tools", "system chars", "~tokens", "tool defs chars", "~tokens")
    print(f"{head[0]:<14} {head[1]:>5} {head[2]:>12} {head[3]:>8} {head[4]:>15} {head[5]:>8}")
    with tempfile.TemporaryDirectory() as d:
        for family, (spec, named) in MODELS.items():
            system, defs, n = await sizes(spec, named, Path(d))
            print(f"{family:<14} {n:>5} {system:>12} {system // 4:>8} {defs:>15} {defs // 4:>8}")


if __name__ == "__main__":
    asyncio.run(main())
