"""Run by tests/remote/test_adk_client.py with tests/remote/py/.venv's Python (google-adk):
Google ADK's RemoteA2aAgent, as the root agent of an ADK Runner, sends one prompt to the A2A
agent whose card is at argv[1] (a bearer token from DEVAGENT_TOKEN), and prints one JSON line:
{"texts": [the text of every event's content], "error": null | what failed}."""

import asyncio
import json
import os
import sys


async def main(card_url: str, prompt: str) -> dict[str, object]:
    import httpx
    from google.adk.agents.remote_a2a_agent import RemoteA2aAgent
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    headers = {"Authorization": f"Bearer {os.environ['DEVAGENT_TOKEN']}"}
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        agent = RemoteA2aAgent(name="devagent", agent_card=card_url, httpx_client=http)
        sessions = InMemorySessionService()
        runner = Runner(agent=agent, app_name="adk-test", session_service=sessions)
        session = await sessions.create_session(app_name="adk-test", user_id="u")
        texts: list[str] = []
        error = None
        try:
            message = types.Content(role="user", parts=[types.Part(text=prompt)])
            async for event in runner.run_async(user_id="u", session_id=session.id, new_message=message):
                if event.error_message:
                    error = event.error_message
                for part in (event.content.parts if event.content else None) or []:
                    if part.text:
                        texts.append(part.text)
        except Exception as e:  # the test reads what failed
            error = f"{type(e).__name__}: {e}"
        return {"texts": texts, "error": error}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))), flush=True)
