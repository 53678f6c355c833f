"""What every model request of a session carries besides the messages: the system prompt and the
tool definitions, byte-identical for the whole session so that the provider's prompt cache keeps
them (that cache is most of what a long session costs)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_ai import messages as pm

from devagent.agent.prompt import environment, guides
from devagent.agent.prompt.system import PromptInputs, build_system_prompt
from devagent.agent.prompt.tool_wording import described
from devagent.agent.tools.memory import read_memory, read_memory_in
from devagent.common.lru import LRU

if TYPE_CHECKING:
    from devagent.agent.sandbox.base import Sandbox
    from devagent.agent.state import ClientTool, SessionState
    from devagent.agent.tools.base import Tool
    from devagent.agent.tools.workspace import Workspace


def _parameters(instructions: str, tool_defs: Sequence[Any], native: Sequence[Any]) -> Any:
    from pydantic_ai.models import ModelRequestParameters

    return ModelRequestParameters(
        function_tools=list(tool_defs),
        native_tools=list(native),
        allow_text_output=True,
        instruction_parts=[pm.InstructionPart(content=instructions)],
    )


def tool_definitions(
    tools: Mapping[str, Tool], builtin: Iterable[str], client_tools: list[ClientTool], family: str = "other"
) -> list[Any]:
    """The tool definitions of a request, the same in the same order on every request of the
    session: the built-ins in their fixed order, then the MCP servers' tools and the client's tools
    each by name (whichever server became ready first, whatever order a server or client listed
    them in); the descriptions are worded for the model's `family`."""
    from pydantic_ai.tools import ToolDefinition

    builtin = set(builtin)
    ordered = [t for name, t in tools.items() if name in builtin]
    ordered += [tools[name] for name in sorted(tools) if name not in builtin]
    # A tool's definition, not its class description: the shell tool's says how this process
    # runs commands (in the sandbox, with or without network; or that it cannot run them).
    return [
        _definition(
            t.name, described(family, t.name, t.description, t.definition()["description"]), t.parameters
        )
        for t in ordered
    ] + [  # a client's tools come with each request: not kept
        ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.parameters)
        for t in sorted(client_tools, key=lambda t: t.name)
    ]


# Each definition of the core's tools (built-in, MCP servers') by its name, description and schema
# object (kept with it, so that its id is not reused meanwhile): one object for every session that
# offers the same tool, so a new conversation builds none again (a definition is never changed in
# place: pydantic-ai copies one to transform it).
_DEFINITIONS: LRU[tuple[str, str, int], tuple[Any, Any]] = LRU(512)


def _definition(name: str, description: str, parameters: dict[str, Any]) -> Any:
    from pydantic_ai.tools import ToolDefinition

    key = (name, description, id(parameters))
    hit = _DEFINITIONS.get(key)
    if hit is not None and hit[0] is parameters:
        return hit[1]
    made = ToolDefinition(name=name, description=description, parameters_json_schema=parameters)
    _DEFINITIONS[key] = (parameters, made)
    return made


def _definitions_key(
    tools: Mapping[str, Tool], builtin: Iterable[str], client_tools: list[ClientTool], family: str
) -> tuple[Any, ...]:
    """What `tool_definitions` is made of: the family, each tool object with its name, its
    description now and its schema object (an object's id stands for it while the memo holds the
    object)."""
    return (
        family,
        tuple(builtin),
        tuple((name, id(t), t.definition()["description"], id(t.parameters)) for name, t in tools.items()),
        tuple((t.name, t.description, id(t.parameters)) for t in client_tools),
    )


# The characters of each tool's JSON schema, by the schema object (held with its size, so its id
# is not reused meanwhile): every request of every session hands a tool's one schema dict.
_SCHEMA_CHARS: LRU[int, tuple[Any, int]] = LRU(4096)


def prefix_chars(params: Any) -> int:
    """The characters a request carries before its messages: its instructions and its tool
    definitions (names, descriptions, JSON schemas)."""
    total = sum(len(p.content) for p in params.instruction_parts)
    for t in params.function_tools:
        # By the schema dict, not the definition: a tool's schema is one object that every
        # session's definitions share, so a new conversation does not encode them all again.
        schema = t.parameters_json_schema
        hit = _SCHEMA_CHARS.get(id(schema))
        if hit is None or hit[0] is not schema:
            hit = (schema, len(json.dumps(schema)))
            _SCHEMA_CHARS[id(schema)] = hit
        total += len(t.name) + len(t.description or "") + hit[1]
    return total


# The files a walk for the nested guides reads on the event loop's thread before it leaves the
# rest to a worker thread: a small tree takes less than the thread's trip (see
# `tools._util.LOOP_READ_MAX`), a large one is walked off the loop.
LOOP_WALK_MAX_FILES = 1000


class Instructions:
    """A session's instructions and tool definitions. The memory file and the nested guides are
    read once per loaded session: what the save_memory tool adds reaches the prompt after
    `/memory refresh` or when the session is next loaded, so the prefix stays the same meanwhile.
    So are the skills (`skills`: their list, as the prompt shows it), listed while the `skill`
    tool is offered. The environment is taken at the session's first request and stored with it.
    `family` tells the family of the model the session's requests go to now, which words the
    prompt and the tool descriptions."""

    def __init__(
        self,
        workspace: Workspace,
        memory_file: str,
        sandbox_network: bool = False,
        skills: str = "",
        family: Callable[[], str] = lambda: "other",
        sandbox: Sandbox | None = None,
    ) -> None:
        self.workspace = workspace
        self.sandbox = sandbox  # where the session's commands run (None: directly)
        self.family = family
        self.memory_file = memory_file
        self.sandbox_network = sandbox_network
        self.skills = skills
        self._memory: str | None = None
        self._nested: str | None = None
        # The last prompt built and its inputs; the last tool definitions, their inputs and the
        # objects those name (kept so that their ids stand for them).
        self._text: tuple[PromptInputs, str] | None = None
        self._defs: tuple[tuple[Any, ...], list[Any], tuple[Any, ...]] | None = None

    @property
    def files_here(self) -> bool:
        """Whether the workspace is a folder of this host (else only its sandbox reads it)."""
        return self.sandbox is None or self.sandbox.files_here

    def read_memory(self) -> str:
        if self.sandbox is not None and not self.sandbox.files_here:
            return read_memory_in(self.sandbox, self.workspace, self.memory_file)  # blocking: a thread's
        return read_memory(self.workspace, self.memory_file)

    def refresh_memory(self) -> str:
        self._memory = self.read_memory()
        self._nested = None
        return self._memory

    def describe_environment(self, state: SessionState) -> str:
        """The environment section, taken once per session (it runs git in a repository)."""
        if not state.started_on:  # a session stored before the day was kept
            state.started_on = time.strftime("%Y-%m-%d")
        execution = environment.execution_of(self.sandbox, self.sandbox_network)
        return environment.describe_environment(
            state.workspace_roots, state.started_on, execution, here=self.files_here
        )

    def read_nested(self) -> str:
        """The nested guides' prompt section: a walk of up to `guides.WALK_MAX_FILES` files (here
        only: a workspace in the sandbox has its root's guide, not yet the nested ones)."""
        if not self.files_here:
            return ""
        return guides.render_nested(guides.nested_guides(self.workspace, self.memory_file))

    async def take_environment(self, state: SessionState) -> None:
        """Takes the environment section and the nested guides off the event loop, in one worker
        thread: the git snapshot may take seconds in a large or slow repository, the guide walk
        tens of milliseconds in a big tree, and other callers' turns must not wait for either.
        Each is taken once (the guides again after `refresh_memory`), so the prompt stays the
        same."""
        nested = self._nested is None
        if not nested and state.environment:
            return
        read = self._read_on_loop(state, nested)
        if read is None:
            read = await asyncio.to_thread(self._read_off_loop, state, nested)
        walked, described = read
        if walked is not None and self._nested is None:
            self._nested = walked
        if described is not None:
            state.environment = state.environment or described

    def _read_on_loop(self, state: SessionState, nested: bool) -> tuple[str | None, str | None] | None:
        """What `_read_off_loop` reads, read on the event loop's thread when that is quick (a
        worker thread's trip costs more): a workspace of this host outside any git repository
        (the snapshot runs git) whose tree holds at most `LOOP_WALK_MAX_FILES` files. None: it
        is not, and a worker thread reads it all."""
        roots = state.workspace_roots
        if not self.files_here or (roots and environment.in_repository(Path(roots[0]))):
            return None
        walked = None
        if nested:
            found = guides.nested_guides_within(self.workspace, self.memory_file, LOOP_WALK_MAX_FILES)
            if found is None:
                return None
            walked = guides.render_nested(found)
        described = None if state.environment else self.describe_environment(state)
        return walked, described

    def _read_off_loop(self, state: SessionState, nested: bool) -> tuple[str | None, str | None]:
        """What `take_environment` reads in its worker thread: the nested guides (if `nested`)
        and the environment (if not taken yet); None for what it did not read."""
        walked = self.read_nested() if nested else None
        if not self.files_here and self._memory is None:  # the sandbox's file read, off the loop
            self._memory = self.read_memory()
        described = None if state.environment else self.describe_environment(state)
        return walked, described

    def text(self, state: SessionState, offered: Iterable[str]) -> str:
        """The system prompt for a model offered the tools named `offered` (the nested guides
        and the environment as `take_environment` took them; read here if it did not)."""
        if self._memory is None:
            self._memory = self.read_memory()
        if self._nested is None:
            self._nested = self.read_nested()
        if not state.environment:
            state.environment = self.describe_environment(state)
        inputs = PromptInputs(
            tools=frozenset(offered),
            environment=state.environment,
            approval_mode=state.approval_mode,
            memory=self._memory,
            memory_file=self.memory_file,
            nested_guides=self._nested,
            role=state.subagent_of.prompt if state.subagent_of is not None else "",
            skills=self.skills,
            family=self.family(),
        )
        if self._text is None or self._text[0] != inputs:
            self._text = (inputs, build_system_prompt(inputs))
        return self._text[1]

    def parameters(
        self,
        state: SessionState,
        tools: Mapping[str, Tool],
        builtin: Iterable[str],
        native: Sequence[Any] = (),
    ) -> Any:
        clients = state.turn_client_tools()
        offered = [*tools, *(t.name for t in clients)]
        builtin = tuple(builtin)
        family = self.family()
        key = _definitions_key(tools, builtin, clients, family)
        if self._defs is None or self._defs[0] != key:
            self._defs = (key, tool_definitions(tools, builtin, clients, family), (*tools.values(), *clients))
        return _parameters(self.text(state, offered), self._defs[1], native)
