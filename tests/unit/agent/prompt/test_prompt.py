"""The system prompt: its text per model family (snapshots), the editing tools each family is
offered, the environment it states, the nested AGENTS.md files, and its stability."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from devagent.agent.events import TurnEnd, UserPrompt
from devagent.agent.prompt import guides
from devagent.agent.prompt.environment import git_state
from devagent.agent.prompt.family import (
    SMALL_HIDDEN,
    check_model_family,
    editing_tools,
    family_of,
    model_family,
)
from devagent.agent.prompt.instructions import LOOP_WALK_MAX_FILES
from devagent.agent.tools.output import HEAD_CHARS, TAIL_CHARS
from devagent.config import ConfigError, load_config
from tests.core_helpers import call_then_text, calls_by_id, collect, result_text, shell_call, write_script

SNAPSHOTS = Path(__file__).parent / "prompt_snapshots"
# The model each family's snapshot is taken with (no request is made: the key is never used).
FAMILY_MODELS = {
    "openai": "openai:gpt-5-codex",
    "anthropic": "anthropic:claude-sonnet-4-5",
    "gemini": "google:gemini-2.5-pro",
    "scripted": "demo",
    "other": "ollama:qwen3",
    "small": "ollama:qwen3:4b",
}
# The settings each family's snapshot is taken with: the operator names a small model's family.
FAMILY_CONFIG: dict[str, dict[str, Any]] = {"small": {"model_family": ("ollama:qwen3:4b=small",)}}
FIXED_ENVIRONMENT = "- (the environment, fixed for the snapshot)"


@pytest.mark.parametrize(
    ("spec", "family"),
    [
        ("openai:gpt-4.1", "openai"),
        ("openai:gpt-5-codex", "openai"),
        ("openai:o3", "openai"),
        ("openrouter:openai/gpt-5", "openai"),
        ("vllm:openai/gpt-oss-20b", "openai"),
        ("anthropic:claude-sonnet-4-5", "anthropic"),
        ("openrouter:anthropic/claude-sonnet-4.5", "anthropic"),
        ("google:gemini-2.5-flash", "gemini"),
        ("gemini:gemini-2.5-pro", "gemini"),
        ("demo", "scripted"),
        ("scripted:/tmp/x.json", "scripted"),
        ("ollama:qwen3", "other"),
        ("deepseek:deepseek-chat", "other"),
        ("nonsense", "other"),
    ],
)
def test_issue30_item9_model_family_of_a_spec(spec: str, family: str) -> None:
    assert model_family(spec) == family


def test_issue30_item9_editing_tools_per_family_and_the_operators_override() -> None:
    assert editing_tools("openai") == ("apply_patch",)
    assert editing_tools("anthropic") == ("edit",)
    assert editing_tools("gemini") == ("edit",)
    assert editing_tools("other") == ("edit",)
    assert editing_tools("scripted") == ("edit", "apply_patch")
    assert editing_tools("openai", "edit") == ("edit",)
    assert editing_tools("anthropic", "apply_patch") == ("apply_patch",)
    assert editing_tools("gemini", "both") == ("edit", "apply_patch")


async def _session_of(core_factory: Any, workspace: Path, spec: str, **config: Any) -> Any:
    core = await core_factory(spec, model_api_key="k", **config)
    session = await core.create_session([workspace])
    session.state.started_on = "2026-01-02"
    session.state.environment = FIXED_ENVIRONMENT
    return session


async def _prompt_of(core_factory: Any, workspace: Path, spec: str, **config: Any) -> tuple[str, list[str]]:
    session = await _session_of(core_factory, workspace, spec, **config)
    tools = session.tools()
    return session.instructions.text(session.state, tools), list(tools)


async def _reworded(session: Any) -> str:
    """The tool descriptions a session's requests carry that are not the tools' own, one a line."""
    params = await session.request_parameters()
    own = {name: tool.definition()["description"] for name, tool in session.tools().items()}
    return "".join(
        f"{t.name}: {t.description}\n" for t in params.function_tools if t.description != own.get(t.name)
    )


@pytest.mark.parametrize("family", sorted(FAMILY_MODELS))
async def test_issue30_item8_item9_prompt_snapshot_per_family(
    core_factory: Any, workspace: Path, family: str
) -> None:
    """The whole system prompt and the tool names each family gets, against a snapshot
    (DEVAGENT_TEST_UPDATE_SNAPSHOTS=1 rewrites them after an intended change)."""
    config = FAMILY_CONFIG.get(family, {})
    session = await _session_of(core_factory, workspace, FAMILY_MODELS[family], **config)
    tools = session.tools()
    text = session.instructions.text(session.state, tools)
    got = f"tools: {', '.join(tools)}\n\n{text}\n"
    if reworded := await _reworded(session):
        got += f"\n# Tool descriptions in the family's words\n{reworded}"
    path = SNAPSHOTS / f"{family}.txt"
    if os.environ.get("DEVAGENT_TEST_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
    assert got == path.read_text(), f"the {family} prompt changed; see {path}"


async def test_issue30_item9_openai_edits_with_apply_patch_and_anthropic_with_edit(
    core_factory: Any, workspace: Path
) -> None:
    openai_text, openai_tools = await _prompt_of(core_factory, workspace, "openai:gpt-5")
    claude_text, claude_tools = await _prompt_of(core_factory, workspace, "anthropic:claude-opus-4-1")
    assert "edit" not in openai_tools and "`edit`" not in openai_text
    assert "apply_patch" not in claude_tools and "apply_patch" not in claude_text
    assert "edit" in claude_tools and "Change files with `edit`" in claude_text
    overridden, tools = await _prompt_of(core_factory, workspace, "openai:gpt-5", edit_tools="edit")
    assert "edit" in tools and "Change files with `edit`" in overridden


async def test_issue30_item8_nested_guides_apply_to_their_folders(core_factory: Any, workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("Root rule: use tabs.\n")
    (workspace / "web").mkdir()
    (workspace / "web" / "AGENTS.md").write_text("Web rule: use pnpm.\n")
    (workspace / "web" / "node_modules" / "x").mkdir(parents=True)
    (workspace / "web" / "node_modules" / "x" / "AGENTS.md").write_text("Vendored rule.\n")
    text, _ = await _prompt_of(core_factory, workspace, "demo")
    assert "Root rule: use tabs." in text
    assert "<guide path='web/AGENTS.md' applies_to='web/'>\nWeb rule: use pnpm.\n</guide>" in text
    assert "takes precedence over the guides above it" in text
    assert "Vendored rule." not in text  # dependency folders are not walked
    assert text.index("Root rule") < text.index("Web rule")


@pytest.mark.parametrize("tree", ["repository", "big"])
async def test_the_nested_guide_walk_runs_off_the_event_loop_once(
    core_factory: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch, tree: str
) -> None:
    """The walk for nested guides (up to 20,000 files in a big repository) runs in a worker
    thread, not on the event loop, once per loaded session: the next request's prompt is the same
    bytes without walking again. (A small tree outside a repository is read on the loop: see the
    next test.)"""
    if tree == "repository":
        (workspace / ".git").mkdir()  # its snapshot runs git, off the loop
        (workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    else:
        (workspace / "many").mkdir()
        for i in range(LOOP_WALK_MAX_FILES + 1):
            (workspace / "many" / f"f{i}.txt").write_text("")
    (workspace / "web").mkdir()
    (workspace / "web" / "AGENTS.md").write_text("Web rule: use pnpm.\n")
    core = await core_factory("demo")
    session = await core.create_session([workspace])
    walked_in: list[threading.Thread] = []
    read = session.instructions.read_nested

    def recorded() -> str:
        walked_in.append(threading.current_thread())
        return str(read())

    monkeypatch.setattr(session.instructions, "read_nested", recorded)
    first = await session.request_parameters()
    assert len(walked_in) == 1 and walked_in[0] is not threading.current_thread(), walked_in
    prompt = first.instruction_parts[0].content
    assert "Web rule: use pnpm." in prompt
    again = await session.request_parameters()
    assert again.instruction_parts[0].content == prompt
    assert len(walked_in) == 1


async def test_a_small_tree_outside_a_repository_is_walked_on_the_loop_once(
    core_factory: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39 item 7: the environment and the nested guides of a small tree that is not a git
    repository are read on the event loop's thread (cheaper than a worker thread's trip), once
    per loaded session, and give the same prompt."""
    (workspace / "web").mkdir()
    (workspace / "web" / "AGENTS.md").write_text("Web rule: use pnpm.\n")
    core = await core_factory("demo")
    session = await core.create_session([workspace])
    walks: list[threading.Thread] = []
    walk = guides.nested_guides_within

    def recorded(*args: Any, **kwargs: Any) -> Any:
        walks.append(threading.current_thread())
        return walk(*args, **kwargs)

    monkeypatch.setattr(guides, "nested_guides_within", recorded)
    monkeypatch.setattr(asyncio, "to_thread", None)  # no worker thread may be asked
    first = await session.request_parameters()
    assert walks == [threading.current_thread()]
    prompt = first.instruction_parts[0].content
    assert "Web rule: use pnpm." in prompt and "not a git repository" in prompt
    again = await session.request_parameters()
    assert again.instruction_parts[0].content == prompt and len(walks) == 1


def test_issue30_item8_git_state_is_read_from_files_and_runs_nothing(tmp_path: Path) -> None:
    """A repository's configuration names programs (fsmonitor); the prompt's git line is read
    from HEAD, so none of them runs."""
    marker = tmp_path / "ran"
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/feature/x\n")
    (repo / ".git" / "config").write_text(f"[core]\n\tfsmonitor = touch {marker}\n")
    assert "on branch feature/x" in git_state(repo)
    assert not marker.exists()
    (repo / ".git" / "HEAD").write_text("0123456789abcdef0123456789abcdef01234567\n")
    assert "detached commit 0123456789ab" in git_state(repo)
    assert git_state(tmp_path / "elsewhere") == "The workspace is not a git repository."


async def test_issue30_item8_environment_is_taken_once_and_kept_across_a_restart(
    core_factory: Any, workspace: Path, sqlite_url: str
) -> None:
    core = await core_factory("demo")
    session = await core.create_session([workspace])
    first = session.instructions.text(session.state, session.tools())
    assert "Workspace roots: " + str(workspace) in first
    assert "Commands run" in first  # sandbox and network are stated
    await session.record.save()
    (workspace / ".git").mkdir()  # the repository changes after the session began
    (workspace / ".git" / "HEAD").write_text("ref: refs/heads/later\n")
    again = await core_factory("demo", db=sqlite_url)
    reloaded = await again.get_session(session.id)
    assert reloaded is not None
    assert reloaded.instructions.text(reloaded.state, reloaded.tools()) == first


def test_issue43_item3_the_operator_names_a_models_family(tmp_path: Path) -> None:
    named = ("ollama:qwen3:4b=small", "lmstudio:*=small", "openrouter:acme/coder=anthropic")
    assert family_of("ollama:qwen3:4b", named) == "small"
    assert family_of("ollama:qwen3:32b", named) == "other"  # another model of the provider
    assert family_of("lmstudio:phi-4", named) == "small"  # every model the prefix starts
    assert family_of("openrouter:acme/coder", named) == "anthropic"
    assert family_of("openai:gpt-5", named) == "openai"  # unnamed: what its name shows
    assert family_of("anthropic:claude-opus-4-1", ("small",)) == "small"  # a bare family: every model
    assert family_of("demo", ("demo=small", "openai")) == "small"  # the first entry that matches
    for bad in (("tiny",), ("ollama:x=huge",), ("=small",)):
        with pytest.raises(ValueError, match="model_family"):
            check_model_family(bad)
    home = {"XDG_CONFIG_HOME": str(tmp_path)}  # no user settings file is read
    env = {**home, "DEVAGENT_MODEL_FAMILY": "ollama:qwen3:4b=small, lmstudio:*=small"}
    assert load_config(environ=env).model_family == ("ollama:qwen3:4b=small", "lmstudio:*=small")
    toml = tmp_path / "config.toml"
    toml.write_text('model_family = "small"\n')
    assert load_config(environ={**home, "DEVAGENT_CONFIG": str(toml)}).model_family == ("small",)
    with pytest.raises(ConfigError, match="DEVAGENT_MODEL_FAMILY"):
        load_config(environ={**home, "DEVAGENT_MODEL_FAMILY": "tiny"})


async def test_issue43_item3_a_small_model_gets_a_lighter_set_and_a_shorter_prompt(
    core_factory: Any, workspace: Path
) -> None:
    """The same model named small by the operator: fewer tools, fewer characters before the
    conversation (prompt and definitions), and `edit_tools` still picks its editing tool."""
    sizes = {}
    for named in ((), ("ollama:qwen3=small",)):
        session = await _session_of(core_factory, workspace, "ollama:qwen3", model_family=named)
        params = await session.request_parameters()
        names = {t.name for t in params.function_tools}
        system = params.instruction_parts[0].content
        definitions = sum(
            len(t.description or "") + len(str(t.parameters_json_schema)) for t in params.function_tools
        )
        sizes[bool(named)] = (names, len(system), definitions)
    (other, other_system, other_defs), (small, small_system, small_defs) = sizes[False], sizes[True]
    assert small == other - SMALL_HIDDEN and {"web_fetch", "task", "background_process"} <= other - small
    assert small_system * 2 < other_system and small_defs * 2 < other_defs
    text, tools = await _prompt_of(
        core_factory, workspace, "ollama:qwen3", model_family=("small",), edit_tools="apply_patch"
    )
    assert "apply_patch" in tools and "edit" not in tools and "`apply_patch`" in text


@pytest.mark.parametrize("family", sorted(FAMILY_MODELS))
async def test_issue43_item3_each_familys_prefix_is_byte_stable_across_requests_and_a_reload(
    core_factory: Any, workspace: Path, sqlite_url: str, family: str
) -> None:
    config = FAMILY_CONFIG.get(family, {})
    session = await _session_of(core_factory, workspace, FAMILY_MODELS[family], **config)
    first, again = await session.request_parameters(), await session.request_parameters()
    assert first.instruction_parts == again.instruction_parts and first.function_tools == again.function_tools
    await session.record.save()
    core = await core_factory(FAMILY_MODELS[family], db=sqlite_url, model_api_key="k", **config)
    reloaded = await core.get_session(session.id)
    assert reloaded is not None
    after = await reloaded.request_parameters()
    assert after.instruction_parts == first.instruction_parts and after.function_tools == first.function_tools


async def test_issue43_item3_a_small_models_command_output_is_cut_shorter_through_the_loop(
    core_factory: Any, workspace: Path, tmp_path: Path
) -> None:
    """A scripted model named small by the operator runs a command with long output: it reads a
    shorter head and tail than a model of another family running the same command."""
    spec = write_script(tmp_path / "s.json", call_then_text(shell_call("seq 1 40000", "c1"), "done"))
    seen = {}
    for named in ((), ("scripted:*=small",)):
        core = await core_factory(
            spec, approval_mode="yolo", allowed_approval_modes=("yolo",), model_family=named
        )
        session = await core.create_session([workspace], approval_mode="yolo")
        events = await collect(session.advance(UserPrompt("count")))
        end = events[-1]
        assert isinstance(end, TurnEnd) and end.reason == "finished", end
        seen[bool(named)] = result_text(calls_by_id(events)["c1"])
    small, whole = seen[True], seen[False]
    for text in (small, whole):
        assert text.startswith("1\n2\n3\n") and "40000" in text and "left out" in text
    assert len(small) < 9_000 + 500 < HEAD_CHARS + TAIL_CHARS - 500 < len(whole)


async def test_issue43_item3_the_prefix_follows_the_family_of_the_model_the_session_switches_to(
    core_factory: Any, workspace: Path
) -> None:
    session = await _session_of(
        core_factory, workspace, "ollama:qwen3", model_family=("ollama:qwen3:4b=small",)
    )
    before = await session.request_parameters()
    session.state.model = "ollama:qwen3:4b"
    small = await session.request_parameters()
    session.state.model = "anthropic:claude-sonnet-4-5"
    claude = await session.request_parameters()
    texts = [p.instruction_parts[0].content for p in (before, small, claude)]
    assert "web_fetch" in {t.name for t in before.function_tools} - {t.name for t in small.function_tools}
    assert "# Code and conventions" in texts[0] and "# Code and conventions" not in texts[1]
    assert "your Read tool" in texts[2] and "your Read tool" not in texts[0]
    todos = [
        next(t.description for t in p.function_tools if t.name == "write_todos") for p in (before, claude)
    ]
    assert "TodoWrite" in todos[1] and "TodoWrite" not in todos[0]
