"""The core's one front door: every name a door (a2a/, wire/, acp/, mcp/, terminal/, console/,
cli.py and the process set-up beside it) takes from `devagent.agent`, and nothing else.

    from devagent.agent.api import AgentCore, CoreConfig, TurnDriver, Door, UserPrompt

A door imports from this module only (tests/unit/test_core_boundary.py holds every door to it);
docs/core-api.md documents each group. The names load lazily: importing this module loads no core
module, and a name loads its own module when a door first takes it, so a door keeps exactly the
start-up cost it had (`serve` answers before pydantic-ai and the providers load; `load_core` loads
them on purpose, in a thread). A name is looked up in its module on every access, never kept here.

The names marked "debt" reach into the core's internals; a narrower call on the session should
replace each (listed in docs/core-api.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from devagent.common.late_import import late_import

if TYPE_CHECKING:  # the type checker's view of the names `_WHERE` loads at run time
    from devagent.agent.commands import CommandInfo as CommandInfo
    from devagent.agent.commands import Registry as Registry
    from devagent.agent.commands import registry as registry
    from devagent.agent.commands import with_custom as with_custom
    from devagent.agent.core import AgentCore as AgentCore
    from devagent.agent.events import ANSWER_OPTION as ANSWER_OPTION
    from devagent.agent.events import ClientResult as ClientResult
    from devagent.agent.events import ConfirmationRequest as ConfirmationRequest
    from devagent.agent.events import Decision as Decision
    from devagent.agent.events import Event as Event
    from devagent.agent.events import ExecuteDetails as ExecuteDetails
    from devagent.agent.events import FileDiff as FileDiff
    from devagent.agent.events import FileDiffs as FileDiffs
    from devagent.agent.events import GenericDetails as GenericDetails
    from devagent.agent.events import Input as Input
    from devagent.agent.events import InputError as InputError
    from devagent.agent.events import McpDetails as McpDetails
    from devagent.agent.events import NeedsInput as NeedsInput
    from devagent.agent.events import Notice as Notice
    from devagent.agent.events import PermissionOption as PermissionOption
    from devagent.agent.events import QuestionDetails as QuestionDetails
    from devagent.agent.events import Resume as Resume
    from devagent.agent.events import RunCommand as RunCommand
    from devagent.agent.events import StatusUpdate as StatusUpdate
    from devagent.agent.events import StepBegin as StepBegin
    from devagent.agent.events import TextDelta as TextDelta
    from devagent.agent.events import ThoughtDelta as ThoughtDelta
    from devagent.agent.events import ToolCall as ToolCall
    from devagent.agent.events import ToolCallStatus as ToolCallStatus
    from devagent.agent.events import ToolCallUpdate as ToolCallUpdate
    from devagent.agent.events import ToolError as ToolError
    from devagent.agent.events import ToolErrorType as ToolErrorType
    from devagent.agent.events import ToolKind as ToolKind
    from devagent.agent.events import ToolOutput as ToolOutput
    from devagent.agent.events import TurnEnd as TurnEnd
    from devagent.agent.events import Usage as Usage
    from devagent.agent.events import UserPrompt as UserPrompt
    from devagent.agent.events import file_diffs as file_diffs
    from devagent.agent.hooks.config import HooksFileError as HooksFileError
    from devagent.agent.hooks.config import load_hooks as load_hooks
    from devagent.agent.loop.driver import Door as Door
    from devagent.agent.loop.driver import Outcome as Outcome
    from devagent.agent.loop.driver import Paused as Paused
    from devagent.agent.loop.driver import TurnDriver as TurnDriver
    from devagent.agent.mcp.manager import parse_servers as parse_servers
    from devagent.agent.models import errors as _model_errors
    from devagent.agent.models.aliases import parse_aliases as parse_aliases
    from devagent.agent.models.errors import ModelConfigError as ModelConfigError
    from devagent.agent.models.prices import NANO as NANO
    from devagent.agent.models.prices import parse_prices as parse_prices
    from devagent.agent.models.prices import usage_dollars as usage_dollars
    from devagent.agent.models.providers import PROVIDERS as PROVIDERS
    from devagent.agent.models.providers import check_model_spec as check_model_spec
    from devagent.agent.models.providers import create_model as create_model
    from devagent.agent.models.providers import default_model_spec as default_model_spec
    from devagent.agent.models.providers import shown_name as shown_name
    from devagent.agent.prompt.family import check_edit_tools as check_edit_tools
    from devagent.agent.prompt.family import check_model_family as check_model_family
    from devagent.agent.repository import remotes as _remotes
    from devagent.agent.repository.remotes import RepositoryRequest as RepositoryRequest
    from devagent.agent.repository.remotes import check_repository_settings as check_repository_settings
    from devagent.agent.repository.results import RepositoryResult as RepositoryResult
    from devagent.agent.repository.results import repository_result as repository_result
    from devagent.agent.sandbox.base import SandboxError as SandboxError
    from devagent.agent.sandbox.base import SandboxProvider as SandboxProvider
    from devagent.agent.sandbox.base import runs_sandboxed as runs_sandboxed
    from devagent.agent.sandbox.childenv import check_env_pass as check_env_pass
    from devagent.agent.sandbox.choose import choose_sandbox as choose_sandbox
    from devagent.agent.sandbox.choose import sandbox_backend_setting as sandbox_backend_setting
    from devagent.agent.sandbox.choose import sandbox_setting as sandbox_setting
    from devagent.agent.sandbox.choose import sandbox_workspace_setting as sandbox_workspace_setting
    from devagent.agent.sandbox.choose import setup_sandbox as setup_sandbox
    from devagent.agent.sandbox.hosted import Hosted as Hosted
    from devagent.agent.sandbox.hosted import hosted_provider as hosted_provider
    from devagent.agent.sandbox.snapshot import LARGEST_SNAPSHOT as LARGEST_SNAPSHOT
    from devagent.agent.session import Session as Session
    from devagent.agent.settings import SANDBOX_ENGINES as SANDBOX_ENGINES
    from devagent.agent.settings import CoreConfig as CoreConfig
    from devagent.agent.settings import parse_sandbox_templates as parse_sandbox_templates
    from devagent.agent.settings import requested_cap as requested_cap
    from devagent.agent.settings import user_config_dir as user_config_dir
    from devagent.agent.settings import utc_day as utc_day
    from devagent.agent.state import APPROVAL_MODES as APPROVAL_MODES
    from devagent.agent.state import ClientTool as ClientTool
    from devagent.agent.state import SessionState as SessionState
    from devagent.agent.subagents.remote import parse_remote_agents as parse_remote_agents
    from devagent.agent.tools import builtin_tools as builtin_tools
    from devagent.agent.tools import diagnostics as _diagnostics
    from devagent.agent.tools import syntax as _syntax
    from devagent.agent.tools.backends import CallContext as CallContext
    from devagent.agent.tools.backends import CommandResult as CommandResult
    from devagent.agent.tools.backends import ToolBackends as ToolBackends
    from devagent.agent.tools.client import validate_client_tools as validate_client_tools
    from devagent.agent.tools.failure import ToolFailure as ToolFailure
    from devagent.agent.tools.web import web_search_setting as web_search_setting
    from devagent.agent.tools.workspace import Workspace as Workspace
    from devagent.agent.turn_view import ModelAnswer as ModelAnswer
    from devagent.agent.turn_view import TurnInput as TurnInput
    from devagent.agent.turn_view import TurnView as TurnView
    from devagent.agent.turn_view import read_turn as read_turn
    from devagent.agent.views.timeline import call_results as call_results
    from devagent.agent.views.timeline import changed_files as changed_files
    from devagent.agent.views.timeline import replayed_call as replayed_call
    from devagent.agent.wording import diff_summary as diff_summary
    from devagent.agent.wording import how_to_answer as how_to_answer
    from devagent.agent.wording import question_words as question_words
    from devagent.agent.wording import request_text as request_text
    from devagent.agent.wording import subagent_name as subagent_name

    # names a door knows by a clearer name than the one in their module
    describe_model_error = _model_errors.describe
    DIAGNOSTICS_MODES = _diagnostics.MODES
    parse_repository = _remotes.parse_request
    check_repository = _remotes.check_request
    parse_git_credentials = _remotes.parse_credentials
    SYNTAX_CHECK_MODES = _syntax.MODES


def _names(module: str, *names: str) -> dict[str, tuple[str, str]]:
    return {name: (module, name) for name in names}


_EVENTS = (
    "ANSWER_OPTION ClientResult ConfirmationRequest Decision Event ExecuteDetails FileDiff "
    "FileDiffs GenericDetails Input InputError McpDetails NeedsInput Notice PermissionOption "
    "QuestionDetails Resume RunCommand StatusUpdate StepBegin TextDelta ThoughtDelta ToolCall "
    "ToolCallStatus ToolCallUpdate ToolError ToolErrorType ToolKind ToolOutput TurnEnd Usage UserPrompt "
    "file_diffs"
).split()

# Each name: the module it lives in and its name there.
_WHERE: dict[str, tuple[str, str]] = {
    # The core and a session: AgentCore opens, creates and finds sessions; `Session` is the handle
    # a door holds; its state, the client's tools, the approval modes
    **_names("devagent.agent.core", "AgentCore"),
    **_names("devagent.agent.session", "Session"),
    **_names("devagent.agent.state", "APPROVAL_MODES", "ClientTool", "SessionState"),
    # Settings: the core's configuration and the checks a door applies to a client's values
    **_names("devagent.agent.settings", "CoreConfig", "requested_cap", "user_config_dir", "utc_day"),
    # The turn driver and the door it drives
    **_names("devagent.agent.loop.driver", "Door", "Outcome", "Paused", "TurnDriver"),
    # Events and inputs: the vocabulary between the core and a door
    **_names("devagent.agent.events", *_EVENTS),
    # Slash commands: the registry, the user's and the workspace's own commands
    **_names("devagent.agent.commands", "CommandInfo", "Registry", "registry", "with_custom"),
    # Wording: how a door words a request, a question, a diff, a subagent
    **_names("devagent.agent.wording", "diff_summary", "how_to_answer", "question_words"),
    **_names("devagent.agent.wording", "request_text", "subagent_name"),
    # Models: checking a model spec (info, preflight, `/model`), the name a client is shown
    **_names("devagent.agent.models.providers", "PROVIDERS", "check_model_spec", "create_model"),
    **_names("devagent.agent.models.providers", "default_model_spec", "shown_name"),
    **_names("devagent.agent.models.errors", "ModelConfigError"),
    "describe_model_error": ("devagent.agent.models.errors", "describe"),
    # Money: nano-dollars, a usage's dollars
    **_names("devagent.agent.models.prices", "NANO", "usage_dollars"),
    # Tools a door lists, validates or backs (an editor's files and terminal)
    **_names("devagent.agent.tools", "builtin_tools"),
    **_names("devagent.agent.tools.backends", "CallContext", "CommandResult", "ToolBackends"),
    **_names("devagent.agent.tools.failure", "ToolFailure"),
    **_names("devagent.agent.tools.workspace", "Workspace"),
    **_names("devagent.agent.tools.client", "validate_client_tools"),
    # The sandbox: its set-up for the core a door opens (from the settings and the door's flags),
    # the line `info` prints, the settings' checks, and whether a session's commands run in it
    **_names("devagent.agent.sandbox.base", "SandboxError", "SandboxProvider", "runs_sandboxed"),
    **_names("devagent.agent.sandbox.choose", "choose_sandbox", "sandbox_backend_setting"),
    **_names("devagent.agent.sandbox.choose", "sandbox_setting", "setup_sandbox"),
    **_names("devagent.agent.sandbox.choose", "sandbox_workspace_setting"),
    # A worker's end of the worker backend (`devagent worker`): its sessions and its own backend
    **_names("devagent.agent.sandbox.hosted", "Hosted", "hosted_provider"),
    **_names("devagent.agent.sandbox.snapshot", "LARGEST_SNAPSHOT"),
    # Sessions from a repository: what a caller asks for (parsed from a door's value), and the
    # session's result (its patch, its pushed branch)
    **_names("devagent.agent.repository.remotes", "RepositoryRequest"),
    "parse_repository": ("devagent.agent.repository.remotes", "parse_request"),
    "check_repository": ("devagent.agent.repository.remotes", "check_request"),
    **_names("devagent.agent.repository.results", "RepositoryResult", "repository_result"),
    # Reading the operator's settings file (config.py): each part's parser or check
    **_names("devagent.agent.sandbox.childenv", "check_env_pass"),
    **_names("devagent.agent.hooks.config", "HooksFileError", "load_hooks"),
    **_names("devagent.agent.mcp.manager", "parse_servers"),
    **_names("devagent.agent.models.aliases", "parse_aliases"),
    **_names("devagent.agent.prompt.family", "check_edit_tools", "check_model_family"),
    **_names("devagent.agent.models.prices", "parse_prices"),
    **_names("devagent.agent.subagents.remote", "parse_remote_agents"),
    **_names("devagent.agent.repository.remotes", "check_repository_settings"),
    "parse_git_credentials": ("devagent.agent.repository.remotes", "parse_credentials"),
    **_names("devagent.agent.settings", "SANDBOX_ENGINES", "parse_sandbox_templates"),
    "DIAGNOSTICS_MODES": ("devagent.agent.tools.diagnostics", "MODES"),
    "SYNTAX_CHECK_MODES": ("devagent.agent.tools.syntax", "MODES"),
    **_names("devagent.agent.tools.web", "web_search_setting"),
    # The session's read model: how its current turn stands, the answers since an input, what
    # became of calls (`read_turn`: what an A2A task is derived from)
    **_names("devagent.agent.turn_view", "ModelAnswer", "TurnInput", "TurnView", "read_turn"),
    # (debt: internals a door rebuilds a client's view from; the session should offer these views)
    **_names("devagent.agent.views.timeline", "call_results", "changed_files", "replayed_call"),
}


def load_core() -> None:
    """Load the core's heavy modules now (pydantic-ai, the model layer, the session): a door that
    answers its first message before the core is ready calls this in a thread. The core's own late
    import of the session waits for this one rather than racing it (common/late_import.py)."""
    late_import("devagent.agent.core")
    late_import("devagent.agent.session")


if not TYPE_CHECKING:  # hidden from the type checker, which so still refuses an unknown name

    def __getattr__(name: str) -> Any:
        where = _WHERE.get(name)
        if where is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        module, attr = where
        return getattr(late_import(module), attr)


def __dir__() -> list[str]:
    return sorted([*_WHERE, "load_core"])
