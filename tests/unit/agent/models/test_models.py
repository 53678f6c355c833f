"""G1: the model layer — specs, defaults, lazy imports, the scripted and demo models, and the real
OpenAI provider code path against a fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.direct import model_request_stream
from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponseStreamEvent,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
    ToolReturnPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.tools import ToolDefinition

from devagent.agent.models.errors import ModelConfigError
from devagent.agent.models.providers import DEMO_SPEC, create_model, default_model_spec, parse_model_spec
from devagent.agent.models.scripted import DemoModel, ScriptedModel, parse_script
from tests.fakes.openai_server import FakeOpenAI, FakeToolCall, Reply

TOOLS = [
    ToolDefinition(
        name=name,
        description=f"the {name} tool",
        parameters_json_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    )
    for name in ("read_file", "grep", "list_directory", "write_file")
]
PARAMS = ModelRequestParameters(function_tools=TOOLS, allow_text_output=True)


async def stream(
    model: Model, messages: list[ModelMessage], params: ModelRequestParameters = PARAMS
) -> tuple[list[ModelResponseStreamEvent], ModelResponse]:
    """What the agent loop does: open a stream, read its events, then the whole response."""
    events: list[ModelResponseStreamEvent] = []
    async with model_request_stream(model, messages, model_request_parameters=params) as s:
        async for event in s:
            events.append(event)
    return events, s.get()


def write_script(tmp_path: Path, data: Any, name: str = "script.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def returns(*pairs: tuple[str, str, str]) -> ModelRequest:
    return ModelRequest(
        parts=[ToolReturnPart(name, content, tool_call_id=cid) for name, content, cid in pairs]
    )


# --- specs -----------------------------------------------------------------------------------------


class TestSpecs:
    @pytest.mark.parametrize(
        ("spec", "expected"),
        [
            ("openai:gpt-4.1", ("openai", "gpt-4.1")),
            ("gemini:gemini-2.5-pro", ("google", "gemini-2.5-pro")),
            ("kimi:kimi-k2", ("moonshot", "kimi-k2")),
            ("OLLAMA:qwen3:8b", ("ollama", "qwen3:8b")),  # the model name may hold colons
            ("openrouter:anthropic/claude-sonnet-4.5", ("openrouter", "anthropic/claude-sonnet-4.5")),
            ("scripted:/tmp/x.json", ("scripted", "/tmp/x.json")),
            ("demo", ("demo", "")),
        ],
    )
    def test_parse(self, spec: str, expected: tuple[str, str]) -> None:
        assert parse_model_spec(spec) == expected

    @pytest.mark.parametrize(
        ("spec", "words"),
        [
            ("gpt-4.1", ["no provider", "provider:model"]),
            ("nosuch:model", ["Unknown model provider 'nosuch'", "openai", "anthropic", "ollama"]),
            ("openai:", ["incomplete", "model name"]),
            ("scripted:", ["script file"]),
        ],
    )
    def test_parse_errors(self, spec: str, words: list[str]) -> None:
        with pytest.raises(ModelConfigError) as err:
            create_model(spec, environ={})
        for w in words:
            assert w in str(err.value)
        assert isinstance(err.value, ValueError)

    @pytest.mark.parametrize(
        ("spec", "env_names"),
        [
            ("openai:gpt-4.1", ["OPENAI_API_KEY"]),
            ("anthropic:claude-sonnet-4-5", ["ANTHROPIC_API_KEY"]),
            ("google:gemini-2.5-flash", ["GEMINI_API_KEY", "GOOGLE_API_KEY"]),
            ("gemini:gemini-2.5-flash", ["GEMINI_API_KEY", "GOOGLE_API_KEY"]),
            ("deepseek:deepseek-chat", ["DEEPSEEK_API_KEY"]),
            ("moonshot:kimi-k2", ["MOONSHOTAI_API_KEY"]),
            ("openrouter:x/y", ["OPENROUTER_API_KEY"]),
        ],
    )
    def test_missing_key_says_what_to_set(self, spec: str, env_names: list[str]) -> None:
        with pytest.raises(ModelConfigError) as err:
            create_model(spec, environ={})
        for name in env_names:
            assert name in str(err.value)
        assert "--api-key" in str(err.value)

    def test_openai_compatible_needs_a_base_url(self) -> None:
        with pytest.raises(ModelConfigError, match=r"DEVAGENT_BASE_URL.*--base-url"):
            create_model("openai-compatible:m", environ={})

    def test_openai(self) -> None:
        from pydantic_ai.models.openai import OpenAIChatModel

        m = create_model("openai:gpt-4.1", environ={"OPENAI_API_KEY": "sk-test"})
        assert isinstance(m, OpenAIChatModel)
        assert m.model_name == "gpt-4.1"
        assert m.base_url.startswith("https://api.openai.com")
        assert m.client.api_key == "sk-test"
        # OPENAI_BASE_URL is honoured; flags override the environment
        env = {"OPENAI_API_KEY": "sk-env", "OPENAI_BASE_URL": "http://proxy.test/v1"}
        m = create_model("openai:gpt-4.1", environ=env)
        assert isinstance(m, OpenAIChatModel)
        assert m.base_url == "http://proxy.test/v1/"
        m = create_model("openai:gpt-4.1", base_url="http://flag.test/v1", api_key="sk-flag", environ=env)
        assert isinstance(m, OpenAIChatModel)
        assert (m.base_url, m.client.api_key) == ("http://flag.test/v1/", "sk-flag")

    def test_anthropic_and_google(self) -> None:
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.models.google import GoogleModel

        a = create_model("anthropic:claude-sonnet-4-5", environ={"ANTHROPIC_API_KEY": "k"})
        assert isinstance(a, AnthropicModel) and a.model_name == "claude-sonnet-4-5"
        for env in ({"GEMINI_API_KEY": "g"}, {"GOOGLE_API_KEY": "g"}):
            g = create_model("gemini:gemini-2.5-flash", environ=env)
            assert isinstance(g, GoogleModel) and g.model_name == "gemini-2.5-flash"

    @pytest.mark.parametrize(
        ("spec", "url"),
        [
            ("ollama:qwen3", "http://127.0.0.1:11434/v1/"),
            ("vllm:Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1/"),
            ("llamacpp:local", "http://127.0.0.1:8080/v1/"),
        ],
    )
    def test_local_servers_default_urls_and_no_strict_tools(self, spec: str, url: str) -> None:
        from pydantic_ai.models.openai import OpenAIChatModel

        m = create_model(spec, environ={})
        assert isinstance(m, OpenAIChatModel)
        assert m.base_url == url
        assert m.profile.get("openai_supports_strict_tool_definition") is False
        m = create_model(spec, base_url="http://gpu.box:9000/v1", environ={})
        assert isinstance(m, OpenAIChatModel) and m.base_url == "http://gpu.box:9000/v1/"

    def test_openai_compatible(self) -> None:
        from pydantic_ai.models.openai import OpenAIChatModel

        env = {"DEVAGENT_BASE_URL": "http://srv.test/v1"}
        m = create_model("openai-compatible:my-model", environ=env)
        assert isinstance(m, OpenAIChatModel)
        assert m.base_url == "http://srv.test/v1/"
        assert m.client.api_key == "none"  # no key needed: a placeholder is sent
        assert m.profile.get("openai_supports_strict_tool_definition") is False
        m = create_model("openai-compatible:my-model", environ={**env, "DEVAGENT_API_KEY": "secret"})
        assert isinstance(m, OpenAIChatModel) and m.client.api_key == "secret"

    def test_named_openai_compatible_providers(self) -> None:
        from pydantic_ai.models.openai import OpenAIChatModel

        ds = create_model("deepseek:deepseek-chat", environ={"DEEPSEEK_API_KEY": "k"})
        assert isinstance(ds, OpenAIChatModel) and "deepseek" in ds.base_url
        for key in ("MOONSHOTAI_API_KEY", "MOONSHOT_API_KEY"):
            k = create_model("kimi:kimi-k2-0905-preview", environ={key: "k"})
            assert isinstance(k, OpenAIChatModel) and "moonshot" in k.base_url
        orr = create_model("openrouter:openai/gpt-4.1", environ={"OPENROUTER_API_KEY": "k"})
        assert isinstance(orr, OpenAIChatModel) and "openrouter" in orr.base_url

    def test_demo_and_scripted(self, tmp_path: Path) -> None:
        assert isinstance(create_model("demo", environ={}), DemoModel)
        path = write_script(tmp_path, [[{"text": "hi"}]])
        m = create_model(f"scripted:{path}", environ={})
        assert isinstance(m, ScriptedModel) and m.model_name == "scripted:script.json"


class TestDefaultModelSpec:
    def test_devagent_model_wins(self) -> None:
        spec, why = default_model_spec({"DEVAGENT_MODEL": "ollama:qwen3", "OPENAI_API_KEY": "k"})
        assert spec == "ollama:qwen3" and "DEVAGENT_MODEL" in why

    @pytest.mark.parametrize(
        ("env", "spec"),
        [
            ({"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}, "openai:gpt-4.1"),
            ({"ANTHROPIC_API_KEY": "k", "GEMINI_API_KEY": "k"}, "anthropic:claude-sonnet-4-5"),
            ({"GEMINI_API_KEY": "k"}, "google:gemini-2.5-flash"),
            ({"GOOGLE_API_KEY": "k"}, "google:gemini-2.5-flash"),
        ],
    )
    def test_first_key_found(self, env: dict[str, str], spec: str) -> None:
        got, why = default_model_spec(env)
        assert got == spec and "_API_KEY" in why

    def test_nothing_configured_means_demo(self) -> None:
        spec, why = default_model_spec({"OPENAI_API_KEY": "  "})
        assert spec == DEMO_SPEC
        for words in ("offline demo model", "DEVAGENT_MODEL=provider:model", "openai:gpt-4.1", "--model"):
            assert words in why


def test_importing_models_imports_no_provider() -> None:
    code = (
        "import devagent.agent.models.providers, sys; "
        "bad = [m for m in ('pydantic_ai', 'openai', 'anthropic', 'google.genai') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- the scripted model --------------------------------------------------------------------------

SCRIPT = {
    "steps": [
        {
            "items": [
                {"thinking": "The user wants two files searched at once."},
                {"text": "Let me look at both of them."},
                {"tool_call": {"name": "read_file", "args": {"path": "README.md"}}},
                {"tool_call": {"name": "grep", "args": {"pattern": "TODO", "path": "src"}, "id": "grep-1"}},
                {"usage": {"input_tokens": 123, "output_tokens": 45, "reasoning_tokens": 7}},
            ]
        },
        {"items": [{"text": "Results:\n{last_tool_results}\nfor: {last_user}"}]},
    ]
}


class TestScriptedModel:
    async def test_placeholders_are_filled_in_tool_call_arguments(self, tmp_path: Path) -> None:
        """A script can name a file after the prompt (bench/turn_parts.py writes a new one each
        turn): every string of the arguments, at any depth, has its placeholders filled."""
        args = {"path": "out/{last_user}.txt", "lines": ["{last_user}", "{x}"], "n": 1, "flag": True}
        script = {"steps": [{"items": [{"tool_call": {"name": "write_file", "args": args}}]}]}
        model = create_model(f"scripted:{write_script(tmp_path, script)}", environ={})
        _, response = await stream(model, [ModelRequest.user_text_prompt("turn 7")])
        (call,) = response.parts
        assert isinstance(call, ToolCallPart)
        assert call.args_as_dict() == {
            "path": "out/turn 7.txt",
            "lines": ["turn 7", "{x}"],
            "n": 1,
            "flag": True,
        }

    async def test_text_thinking_parallel_calls_and_exact_usage(self, tmp_path: Path) -> None:
        model = create_model(f"scripted:{write_script(tmp_path, SCRIPT)}", environ={})
        history: list[ModelMessage] = [ModelRequest.user_text_prompt("find the TODOs")]
        events, response = await stream(model, history)

        thinking, text, call1, call2 = response.parts
        assert (
            isinstance(thinking, ThinkingPart)
            and thinking.content == "The user wants two files searched at once."
        )
        assert isinstance(text, TextPart) and text.content == "Let me look at both of them."
        assert isinstance(call1, ToolCallPart) and isinstance(call2, ToolCallPart)
        assert (call1.tool_name, call1.args_as_dict(), call1.tool_call_id) == (
            "read_file",
            {"path": "README.md"},
            "call_0_0",
        )
        assert (call2.tool_name, call2.args_as_dict(), call2.tool_call_id) == (
            "grep",
            {"pattern": "TODO", "path": "src"},
            "grep-1",
        )
        # exactly what the script says
        assert (response.usage.input_tokens, response.usage.output_tokens) == (123, 45)
        assert response.usage.output_reasoning_tokens == 7
        assert response.finish_reason == "tool_call"

        # streamed in pieces, like a real provider
        deltas = [e.delta for e in events if isinstance(e, PartDeltaEvent)]
        assert sum(isinstance(d, TextPartDelta) for d in deltas) >= 1
        assert sum(isinstance(d, ThinkingPartDelta) for d in deltas) >= 1
        arg_deltas = [d for d in deltas if isinstance(d, ToolCallPartDelta) and d.args_delta]
        assert len(arg_deltas) >= 2  # each call's arguments come in 2+ chunks
        starts = [e.part.part_kind for e in events if isinstance(e, PartStartEvent)]
        assert starts == ["thinking", "text", "tool-call", "tool-call"]
        assert sum(isinstance(e, PartEndEvent) for e in events) == 4

        # step 1 follows the tool results, with the placeholders filled
        history += [
            response,
            returns(("read_file", "# Readme", "call_0_0"), ("grep", "a.py:1: TODO", "grep-1")),
        ]
        _, answer = await stream(model, history)
        assert answer.parts == [TextPart(content="Results:\n# Readme\na.py:1: TODO\nfor: find the TODOs")]
        # no usage in the script: a plausible estimate
        assert answer.usage.input_tokens > 0 and answer.usage.output_tokens > 0

    async def test_resumed_history_continues_the_script(self, tmp_path: Path) -> None:
        """The step is the number of responses already in the history, so a new process (a new
        model object) picks up where the old one stopped."""
        path = write_script(tmp_path, SCRIPT)
        _, first = await stream(
            create_model(f"scripted:{path}", environ={}), [ModelRequest.user_text_prompt("x")]
        )
        history = [ModelRequest.user_text_prompt("x"), first, returns(("read_file", "r", "call_0_0"))]
        _, second = await stream(create_model(f"scripted:{path}", environ={}), history)
        assert isinstance(second.parts[0], TextPart) and second.parts[0].content.startswith("Results:\nr\n")

    async def test_missing_step(self, tmp_path: Path) -> None:
        path = write_script(tmp_path, [[{"text": "only one"}]])
        model = create_model(f"scripted:{path}", environ={})
        history: list[ModelMessage] = [ModelRequest.user_text_prompt("a")]
        _, r = await stream(model, history)
        with pytest.raises(ModelAPIError, match=rf"scripted model: {path} has no step 1"):
            await stream(model, [*history, r, ModelRequest.user_text_prompt("b")])

    async def test_error_item(self, tmp_path: Path) -> None:
        script = [
            [{"error": {"message": "overloaded", "status": 503}}],
            [{"text": "partial "}, {"error": {"message": "stream broke"}}],
            [{"error": {"message": "no status", "status": None}}],
        ]
        model = ScriptedModel(parse_script(script))
        with pytest.raises(ModelHTTPError) as err:
            await stream(model, [ModelRequest.user_text_prompt("a")])
        assert err.value.status_code == 503 and "overloaded" in str(err.value)

        fake_response = ModelResponse(parts=[TextPart("earlier")])
        history: list[ModelMessage] = [
            ModelRequest.user_text_prompt("a"),
            fake_response,
            ModelRequest.user_text_prompt("b"),
        ]
        events: list[ModelResponseStreamEvent] = []
        with pytest.raises(ModelHTTPError) as err:
            async with model_request_stream(model, history, model_request_parameters=PARAMS) as s:
                async for e in s:
                    events.append(e)
        assert err.value.status_code == 500 and err.value.in_stream
        assert any(isinstance(e, PartStartEvent) for e in events)  # the text before the error arrived

        history += [fake_response, ModelRequest.user_text_prompt("c")]
        with pytest.raises(ModelAPIError, match="no status") as err2:
            await stream(model, history)
        assert not isinstance(err2.value, ModelHTTPError)

    async def test_sleep_can_be_cancelled(self) -> None:
        model = ScriptedModel(parse_script([[{"text": "before"}, {"sleep": 30}, {"text": "after"}]]))
        task = asyncio.create_task(stream(model, [ModelRequest.user_text_prompt("a")]))
        await asyncio.sleep(0.05)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def test_issue28_touch_marks_the_step_and_wait_for_holds_it(self, tmp_path: Path) -> None:
        steps = [[{"touch": f"{tmp_path}/at-{{last_user}}"}, {"wait_for": f"{tmp_path}/go"}, {"text": "on"}]]
        model = ScriptedModel(parse_script(steps))
        task = asyncio.create_task(stream(model, [ModelRequest.user_text_prompt("p7")]))
        while True:  # until the step is being played
            if (tmp_path / "at-p7").exists():
                break
            await asyncio.sleep(0.01)
        assert not task.done()  # held until the test says
        (tmp_path / "go").touch()
        _, response = await task
        assert response.parts == [TextPart(content="on")]

    async def test_stream_cancel_marks_the_response_interrupted(self) -> None:
        model = ScriptedModel(parse_script([[{"text": "before and more"}, {"sleep": 30}]]))
        async with model.request_stream([ModelRequest.user_text_prompt("a")], None, PARAMS) as s:
            async for e in s:
                if isinstance(e, PartStartEvent):
                    await s.cancel()
                    break
        assert s.get().state == "interrupted"

    async def test_non_streamed_request(self) -> None:
        model = ScriptedModel(parse_script([[{"text": "hi"}]]))
        r = await model.request([ModelRequest.user_text_prompt("a")], None, PARAMS)
        assert r.parts == [TextPart(content="hi")]

    @pytest.mark.parametrize(
        ("data", "where"),
        [
            ({"step": []}, "$.step"),
            ({"steps": []}, "steps"),
            ({"steps": [{"item": []}]}, "steps[0].item"),
            ({"steps": [{"items": [{"text": 3}]}]}, "steps[0].items[0].text"),
            (
                {"steps": [{"items": [{"tool_call": {"name": "x", "args": [1]}}]}]},
                "steps[0].items[0].tool_call.args",
            ),
            ({"steps": [[{"text": "a"}], [{"tool_call": {"args": {}}}]]}, "steps[1][0].tool_call.name"),
            ({"steps": [[{"usage": {"input_tokens": -1}}]]}, "steps[0][0].usage.input_tokens"),
            ({"steps": [[{"usage": {"tokens": 1}}]]}, "steps[0][0].usage.tokens"),
            ({"steps": [[{"error": {"message": "m", "status": 200}}]]}, "steps[0][0].error.status"),
            ({"steps": [[{"sleep": "1"}]]}, "steps[0][0].sleep"),
            ({"steps": [[{"touch": ""}]]}, "steps[0][0].touch"),
            ({"steps": [[{"wait_for": 3}]]}, "steps[0][0].wait_for"),
            ({"steps": [[{"shout": "x"}]]}, "steps[0][0].shout"),
            ({"steps": [[{"text": "a", "thinking": "b"}]]}, "steps[0][0]"),
        ],
    )
    def test_invalid_script_names_the_json_path(self, tmp_path: Path, data: Any, where: str) -> None:
        path = write_script(tmp_path, data)
        with pytest.raises(ModelConfigError) as err:
            create_model(f"scripted:{path}", environ={})
        assert f"at {where}:" in str(err.value)
        assert path in str(err.value)

    def test_unreadable_or_not_json(self, tmp_path: Path) -> None:
        with pytest.raises(ModelConfigError, match="cannot read"):
            create_model(f"scripted:{tmp_path / 'missing.json'}", environ={})
        bad = tmp_path / "bad.json"
        bad.write_text("{ nope", encoding="utf-8")
        with pytest.raises(ModelConfigError, match=r"not valid JSON \(line 1"):
            create_model(f"scripted:{bad}", environ={})

    def test_docs_example_is_valid(self) -> None:
        """The full example in docs/scripted-model.md parses."""
        doc = (Path(__file__).parents[4] / "docs" / "scripted-model.md").read_text(encoding="utf-8")
        block = doc.split("```json\n", 1)[1].split("```", 1)[0]
        steps = parse_script(json.loads(block))
        assert len(steps) >= 3


# --- the demo model ------------------------------------------------------------------------------


class TestDemoModel:
    async def test_lists_the_workspace_then_explains(self) -> None:
        model = create_model("demo", environ={})
        history: list[ModelMessage] = [ModelRequest.user_text_prompt("What does this project do?")]
        _, first = await stream(model, history)
        assert isinstance(first.parts[0], ThinkingPart)
        call = first.parts[1]
        assert isinstance(call, ToolCallPart)
        assert (call.tool_name, call.args_as_dict()) == ("list_directory", {"path": "."})

        history += [first, returns(("list_directory", "README.md\nsrc/\npyproject.toml", call.tool_call_id))]
        _, answer = await stream(model, history)
        (text,) = answer.parts
        assert isinstance(text, TextPart)
        for words in ("offline demo model", "README.md", "pyproject.toml", "What does this project do?"):
            assert words in text.content
        assert "DEVAGENT_MODEL" in text.content and "--model" in text.content
        assert answer.usage.input_tokens > 0 and answer.usage.output_tokens > 0

        # a second prompt in the same conversation starts over, with a fresh call id
        history += [answer, ModelRequest.user_text_prompt("again")]
        _, again = await stream(model, history)
        assert isinstance(again.parts[1], ToolCallPart) and again.parts[1].tool_call_id == "call_2_0"

    async def test_write_prompt_proposes_demo_txt(self) -> None:
        _, r = await stream(DemoModel(), [ModelRequest.user_text_prompt("write hello world")])
        call = r.parts[-1]
        assert isinstance(call, ToolCallPart) and call.tool_name == "write_file"
        assert call.args_as_dict() == {"path": "demo.txt", "content": "hello world\n"}

    async def test_without_tools_it_answers_directly(self) -> None:
        params = ModelRequestParameters(allow_text_output=True)
        _, r = await stream(DemoModel(), [ModelRequest.user_text_prompt("hi {last_user}")], params)
        (text,) = r.parts
        assert isinstance(text, TextPart) and "hi {last_user}" in text.content and "--model" in text.content


# --- the real OpenAI provider code path against the fake server --------------------------------


def fake_script(body: dict[str, Any]) -> Reply:
    if not any(m.get("role") == "tool" for m in body["messages"]):
        return Reply(
            reasoning=["I should read ", "the README."],
            tool_calls=[FakeToolCall("call_a", "read_file", {"path": "README.md"}, chunks=3)],
            usage={
                "prompt_tokens": 42,
                "completion_tokens": 17,
                "total_tokens": 59,
                "completion_tokens_details": {"reasoning_tokens": 6},
            },
        )
    result = next(m["content"] for m in body["messages"] if m.get("role") == "tool")
    return Reply(text=["The README ", f"says: {result}"], usage={"prompt_tokens": 80, "completion_tokens": 9})


async def test_openai_compatible_provider_against_fake_server() -> None:
    fake = FakeOpenAI(fake_script)
    async with fake as base_url:
        model = create_model("openai-compatible:fake-model", base_url=base_url, environ={})
        history: list[ModelMessage] = [ModelRequest.user_text_prompt("What does the README say?")]
        events, first = await stream(model, history)

        thinking, call = first.parts
        assert isinstance(thinking, ThinkingPart) and thinking.content == "I should read the README."
        assert isinstance(call, ToolCallPart)
        assert (call.tool_name, call.args_as_dict(), call.tool_call_id) == (
            "read_file",
            {"path": "README.md"},
            "call_a",
        )
        assert any(isinstance(e, PartDeltaEvent) and isinstance(e.delta, ThinkingPartDelta) for e in events)
        assert (first.usage.input_tokens, first.usage.output_tokens) == (42, 17)
        assert first.usage.output_reasoning_tokens == 6

        history += [first, returns(("read_file", "Hello from the README", "call_a"))]
        _, second = await stream(model, history)
        assert second.parts == [TextPart(content="The README says: Hello from the README")]
        assert (second.usage.input_tokens, second.usage.output_tokens) == (80, 9)

    first_body, second_body = fake.requests
    assert first_body["model"] == "fake-model" and first_body["stream"] is True
    assert first_body["stream_options"] == {"include_usage": True}
    tools = {t["function"]["name"]: t for t in first_body["tools"]}
    assert set(tools) == {"read_file", "grep", "list_directory", "write_file"}
    # strict-compatible schemas, yet no `strict`: local servers often reject it
    assert all("strict" not in t["function"] for t in tools.values())

    assistant, tool = second_body["messages"][1:3]
    assert assistant["role"] == "assistant"
    assert assistant["reasoning_content"] == "I should read the README."  # Kimi/DeepSeek need it back
    assert assistant["tool_calls"][0]["id"] == "call_a"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"path": "README.md"}
    assert tool == {"role": "tool", "tool_call_id": "call_a", "content": "Hello from the README"}


async def test_http_error_from_the_server_is_a_model_http_error() -> None:
    async with FakeOpenAI(lambda body: Reply(status=400, error_message="bad tool schema")) as base_url:
        model = create_model("openai-compatible:fake-model", base_url=base_url, environ={})
        with pytest.raises(ModelHTTPError) as err:
            await stream(model, [ModelRequest.user_text_prompt("hi")])
    assert err.value.status_code == 400 and "bad tool schema" in str(err.value)


@pytest.mark.filterwarnings(
    "ignore:Pydantic serializer warnings"
)  # dumping the loose chunk's string `created`
def test_streamed_chunks_are_built_as_the_sdk_builds_them() -> None:
    """Issue 14: a chunk that validates strictly is built by pydantic-core; one that does not goes to
    the SDK's loose constructor, as before. Either way the model equals the SDK's own."""
    import httpx2
    from openai import AsyncOpenAI
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk

    create_model("openai-compatible:m", base_url="http://127.0.0.1:9/v1", environ={})  # applies the patch
    client = AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    response = httpx2.Response(200)
    head = {"id": "c", "object": "chat.completion.chunk", "created": 1700000000, "model": "m"}

    def choice(delta: dict[str, Any], finish: Any = None, **more: Any) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "finish_reason": finish, **more}

    chunks: list[dict[str, Any]] = [
        {**head, "choices": [choice({"role": "assistant", "reasoning_content": "hm"})], "extra": {"a": 1}},
        {**head, "choices": [choice({"content": "Hello"})]},
        {
            **head,
            "choices": [
                choice(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "x",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ]
                    }
                )
            ],
        },
        {
            **head,
            "choices": [choice({}, "tool_calls")],
            "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6},
        },
        {
            **head,
            "choices": [
                choice(
                    {"content": "x"},
                    logprobs={"content": [{"token": "x", "logprob": -1, "bytes": [120], "top_logprobs": []}]},
                )
            ],
        },
        {**head, "choices": [choice({}, "eos")]},  # not a declared finish reason: the SDK's constructor
        {**head, "choices": None},  # malformed (pydantic-ai issue 5165): the SDK's constructor
        {**head, "created": "1700000000", "choices": []},  # a string: kept as the SDK keeps it
        # issue 39: a usage without total_tokens (loose servers): the rest validated, the usage loose
        {**head, "choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 9}},
        {**head, "choices": [choice({}, "stop")], "usage": {"prompt_tokens": "4", "extra_tokens": 1}},
        {**head, "created": "x", "choices": [], "usage": {"prompt_tokens": 40}},  # neither part strict
    ]
    for data in chunks:
        built = client._process_response_data(data=data, cast_to=ChatCompletionChunk, response=response)
        loose = construct_type(type_=ChatCompletionChunk, value=data)
        assert type(built) is ChatCompletionChunk
        assert built == loose and built.model_dump() == loose.model_dump()
        assert built.model_dump(exclude_unset=True) == loose.model_dump(exclude_unset=True)
        assert built.to_dict() == loose.to_dict() and built.model_extra == loose.model_extra
    first = client._process_response_data(data=chunks[0], cast_to=ChatCompletionChunk, response=response)
    assert "extra" in first.model_fields_set  # built by validation (the loose constructor leaves extras out)
    odd = client._process_response_data(data=chunks[5], cast_to=ChatCompletionChunk, response=response)
    assert odd.choices[0].finish_reason == "eos"


async def test_request_body_is_what_the_sdk_would_send() -> None:
    """Issue 14: the wrapper around the OpenAI SDK's body transform gives what the SDK's own walk
    gives, the first time a body's shape is seen and after (when the walk is skipped)."""
    from openai._utils import _transform
    from openai.resources.chat.completions import completions
    from openai.types.chat import completion_create_params

    create_model("openai-compatible:m", base_url="http://127.0.0.1:9/v1", environ={})  # applies the patch
    kind = completion_create_params.CompletionCreateParamsStreaming
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    bodies: list[dict[str, Any]] = [
        {"messages": [{"role": "user", "content": "hi"}], "model": "m", "stream": True, "tools": [tool]},
        {"messages": [{"role": "user", "content": "again"}], "model": "n", "stream": True, "tools": [tool]},
        {
            "messages": [{"role": "user", "content": "x"}],
            "model": "m",
            "stream_options": {"include_usage": True},
        },
        {"messages": [{"role": "user", "content": "x"}], "model": "m", "stop": ("a", "b")},  # not plain JSON
    ]
    from openai import omit

    bodies += [{**b, "temperature": omit, "seed": omit} for b in bodies]  # as the SDK's create() passes them
    for body in bodies * 2:
        sent = await completions.async_maybe_transform(body, kind)
        assert sent == await _transform.async_maybe_transform(body, kind)


def test_serve_cold_start_imports_no_provider_and_no_pydantic_ai() -> None:
    """The A2A app (what `serve` loads before it answers) leaves pydantic-ai and the provider SDKs
    to the first turn: they take a second or more to import."""
    code = (
        "import devagent.a2a.app, devagent.cli, sys; "
        "bad = [m for m in ('pydantic_ai', 'openai', 'anthropic', 'google.genai') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
