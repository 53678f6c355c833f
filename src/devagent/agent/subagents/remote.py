"""Remote A2A agents as subagent types: the operator names them in the settings file
(`[remote_agents.NAME]`, `RemoteAgentSpec`), each becomes a subagent type named after its key and
described by its agent card, and a `task` call of that type is a conversation with the remote
agent over a2a-sdk's client, on the binding its card prefers.

- Cards are read once per process (`prefetch`, at the core's start) and kept; a card that cannot be
  read describes its type as unavailable, and the listing stays the same for the process's life.
- Every URL devagent calls for a remote agent (its card, the endpoints the card names, the OAuth
  token URL) passes the server's outbound address policy (`outbound_allow`).
- Only the configured auth leaves: a bearer token, an API-key header or an OAuth 2.0 access token
  (client credentials), each read from the server's environment; with traces on, `traceparent`.
- The remote task's status messages are read in its dialect (remote_status.py: plain A2A's
  progress lines, or Gemini CLI's coderAgent answer); its `input-required` question becomes a
  waiting question of the parent (answered through the parent's door), whose answer goes back as
  the next message on the remote task; its artifacts and final message are the call's result.
- What a remote agent says is capped like a command's output: the live output is its last
  `remote_status.LIVE_CHARS`, at most `ANSWER_MAX_CHARS` of its answer are kept (the rest counted, not held),
  and a long answer reaches the model as its head and tail, the whole of it saved where the
  session's `read_file` reads it (`tools/saved_outputs.py`).
- A remote agent that fails, hangs (`remote_agent_timeout`) or answers garbage fails the call,
  never the parent's turn; a cancel of the parent's turn cancels the remote task (one that came
  before the remote said its task's id cancels the task when the id comes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from devagent import telemetry
from devagent.agent.events import ANSWER_OPTION, QuestionDetails, ToolErrorType, ToolKind
from devagent.agent.history.serial import confirmation_to_json
from devagent.agent.state import PendingCall
from devagent.agent.subagents.remote_status import StatusReader
from devagent.agent.tools.base import ToolContext, ToolResult, ToolWaits
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.output import OUTPUT_MAX_CHARS, head_and_tail
from devagent.common.errors import DevagentError
from devagent.common.netpolicy import IPNetwork, check_outbound_url
from devagent.common.tables import named_tables

if TYPE_CHECKING:
    import httpx

    from devagent.agent.settings import CoreConfig

log = logging.getLogger(__name__)

CARD_TIMEOUT = 10.0  # seconds, for reading a card (at the core's start)
ANSWER_MAX_CHARS = 16 * 1024 * 1024  # of a remote agent's answer kept (its texts together)
CANCEL_WAIT = 60.0  # seconds a cancelled call reads the remote's stream on for its task's id
MAX_DESCRIPTION = 600
HINT = "allow its network with outbound_allow in the settings file"
QUESTION_TOOL = "ask_user"

_KEYS = {
    "card_url",
    "bearer_token_env",
    "api_key_header",
    "api_key_env",
    "oauth_token_url",
    "oauth_client_id",
    "oauth_client_secret_env",
    "oauth_scope",
}


@dataclasses.dataclass(frozen=True, slots=True)
class RemoteAgentSpec:
    """One `[remote_agents.NAME]` table: where the card is and how to authenticate."""

    name: str
    card_url: str
    bearer_token_env: str = ""
    api_key_header: str = ""
    api_key_env: str = ""
    oauth_token_url: str = ""
    oauth_client_id: str = ""
    oauth_client_secret_env: str = ""
    oauth_scope: str = ""

    @classmethod
    def parse(cls, name: str, raw: Any) -> RemoteAgentSpec:
        where = f"remote_agents.{name}"
        if not isinstance(raw, Mapping):
            raise ValueError(f"{where} must be a table")
        unknown = sorted(set(map(str, raw)) - _KEYS)
        if unknown:
            raise ValueError(
                f"{where}: unknown keys {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})"
            )
        if not all(isinstance(v, str) for v in raw.values()):
            raise ValueError(f"{where}: every value is a string")
        spec = cls(name, **{k: v.strip() for k, v in raw.items()})
        if not spec.card_url.startswith(("http://", "https://")):
            raise ValueError(f"{where}: card_url must be an http(s) URL")
        if bool(spec.api_key_header) != bool(spec.api_key_env):
            raise ValueError(f"{where}: api_key_header and api_key_env go together")
        oauth = (spec.oauth_token_url, spec.oauth_client_id, spec.oauth_client_secret_env)
        if any(oauth) and not all(oauth):
            raise ValueError(
                f"{where}: OAuth needs oauth_token_url, oauth_client_id and oauth_client_secret_env"
            )
        if sum(map(bool, (spec.bearer_token_env, spec.api_key_header, spec.oauth_token_url))) > 1:
            raise ValueError(f"{where}: choose one of bearer_token_env, api_key_header and oauth_token_url")
        return spec


def parse_remote_agents(raw: Any) -> dict[str, dict[str, str]]:
    """The `remote_agents` setting (a table of tables, or its JSON), checked, as stored in CoreConfig."""
    out = {}
    for name, value in named_tables(raw, "remote_agents", "agents").items():
        spec = RemoteAgentSpec.parse(str(name), value)
        out[spec.name] = {k: v for k, v in dataclasses.asdict(spec).items() if v and k != "name"}
    return out


def specs(config: CoreConfig) -> dict[str, RemoteAgentSpec]:
    return {name: RemoteAgentSpec(name, **raw) for name, raw in config.remote_agents.items()}


# --- cards ---------------------------------------------------------------------------------------

# The cards of this process, by card URL: the card, or why it could not be read.
_cards: dict[str, Any] = {}


class Refused(DevagentError):
    """An outbound call the address policy does not allow."""


async def prefetch(config: CoreConfig) -> None:
    """Read every remote agent's card once (those not read yet), at the same time."""
    todo = [s for s in specs(config).values() if s.card_url not in _cards]
    if todo:
        await asyncio.gather(*(_read_card(s, config) for s in todo))


async def _read_card(spec: RemoteAgentSpec, config: CoreConfig) -> Any:
    try:
        async with asyncio.timeout(CARD_TIMEOUT), _http(config) as http:
            card = await _fetch_card(spec, config, http)
    except Exception as e:  # the type says it is unavailable; the server starts all the same
        log.warning("remote agent %s: cannot read its card %s: %s", spec.name, spec.card_url, _said(e))
        _cards[spec.card_url] = _said(e)
        return None
    _cards[spec.card_url] = card
    return card


async def _fetch_card(spec: RemoteAgentSpec, config: CoreConfig, http: httpx.AsyncClient) -> Any:
    from a2a.client.card_resolver import parse_agent_card  # late: the A2A client, for remote agents only

    response = await http.get(spec.card_url, headers=await _auth_headers(spec, http))
    response.raise_for_status()
    card = parse_agent_card(response.json())
    for interface in card.supported_interfaces:
        await _check(_as_url(interface.url), config.outbound_networks(), "an endpoint its card names")
    return card


def description(spec: RemoteAgentSpec) -> str:
    """What the `task` tool's description says of the type: its card's name, description and
    skills, or that it is unavailable."""
    card = _cards.get(spec.card_url)
    if card is None:
        return "remote A2A agent (its card is read when it is first called)."
    if isinstance(card, str):
        return f"remote A2A agent, unavailable (its card could not be read: {card[:200]})."
    skills = "; ".join(
        f"{s.name}: {s.description}".strip(": ") for s in card.skills if s.name or s.description
    )
    text = f"remote A2A agent {card.name}: {card.description}"
    if skills:
        text += f" Skills: {skills}"
    text = " ".join(text.split())
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 3] + "..."


# --- outbound calls ------------------------------------------------------------------------------


async def _check(url: str, allow: tuple[IPNetwork, ...], what: str) -> None:
    reason = await check_outbound_url(url, allow_private=False, what=what, hint=HINT, allow=allow)
    if reason is not None:
        raise Refused(f"{what} {url} is not allowed: {reason}")


def _as_url(target: str) -> str:
    """A card's endpoint as a URL the policy can judge (a gRPC endpoint may be a bare host:port)."""
    return target if "://" in target else f"http://{target}"


def _http(config: CoreConfig) -> httpx.AsyncClient:
    """An HTTP client whose every request passes the outbound address policy first (redirects
    are not followed, the environment's proxies and .netrc are not used)."""
    import httpx  # late: only remote agents call out here

    allow = config.outbound_networks()

    class PolicyTransport(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            await _check(str(request.url), allow, "a remote agent's URL")
            return await super().handle_async_request(request)

    # trust_env off: no proxy variables and no .netrc credentials, only the configured auth
    return httpx.AsyncClient(
        transport=PolicyTransport(trust_env=False), timeout=httpx.Timeout(30.0, read=None), trust_env=False
    )


def _secret(var: str, what: str) -> str:
    value = os.environ.get(var, "")
    if not value:
        raise ToolFailure(
            f"the environment variable {var} ({what}) is not set", ToolErrorType.REMOTE_AGENT_CONFIG
        )
    return value


async def _auth_headers(spec: RemoteAgentSpec, http: httpx.AsyncClient) -> dict[str, str]:
    """The one header the configured auth sends (lower-case names: gRPC metadata too)."""
    if spec.bearer_token_env:
        return {"authorization": f"Bearer {_secret(spec.bearer_token_env, 'bearer_token_env')}"}
    if spec.api_key_header:
        return {spec.api_key_header.lower(): _secret(spec.api_key_env, "api_key_env")}
    if spec.oauth_token_url:
        form = {
            "grant_type": "client_credentials",
            "client_id": spec.oauth_client_id,
            "client_secret": _secret(spec.oauth_client_secret_env, "oauth_client_secret_env"),
        }
        if spec.oauth_scope:
            form["scope"] = spec.oauth_scope
        response = await http.post(spec.oauth_token_url, data=form)
        response.raise_for_status()
        token = response.json().get("access_token")
        if not isinstance(token, str) or not token:
            raise ValueError("the OAuth token endpoint's answer has no access_token")
        return {"authorization": f"Bearer {token}"}
    return {}


def _said(e: BaseException) -> str:
    text = " ".join(str(e).split())[:300]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


# --- a task call ---------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class _Exchange:
    """What one message's stream told: the remote task, its last state, its texts (together at
    most ANSWER_MAX_CHARS: `keep`)."""

    task_id: str = ""
    context_id: str = ""
    state: int = 0
    status_text: str = ""
    message: str = ""
    artifacts: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # each one's pieces
    held: int = 0  # characters of the texts above and of a coderAgent answer's pieces
    left_out: int = 0  # characters said beyond ANSWER_MAX_CHARS, not kept

    def keep(self, text: str, replacing: int = 0) -> str:
        """`text`, about to be held in place of `replacing` characters, cut to the room left."""
        room = max(ANSWER_MAX_CHARS - self.held + replacing, 0)
        if len(text) > room:
            self.left_out += len(text) - room
            text = text[:room]
        self.held += len(text) - replacing
        return text

    def set_status(self, text: str) -> None:
        self.status_text = self.keep(text, len(self.status_text))

    def set_artifact(self, artifact_id: str, text: str, append: bool) -> None:
        pieces = self.artifacts.setdefault(artifact_id, [])
        if append:
            pieces.append(self.keep(text))
        else:
            self.artifacts[artifact_id] = [self.keep(text, sum(map(len, pieces)))]

    said: StatusReader = dataclasses.field(default_factory=lambda: StatusReader(""))
    known: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)  # task_id is known

    def answer(self) -> str:
        texts = ("".join(pieces).strip() for pieces in self.artifacts.values())
        body = "\n\n".join(t for t in texts if t)
        final = (self.message or self.status_text).strip()
        if final and final not in body:
            body = f"{body}\n\n{final}".strip()
        if self.left_out:
            body += (
                f"\n[the remote agent said {self.left_out:,} characters more, not kept: an answer "
                f"keeps its first {ANSWER_MAX_CHARS:,}]"
            )
        return body


async def run(
    spec: RemoteAgentSpec,
    config: CoreConfig,
    pending: list[PendingCall],
    args: dict[str, Any],
    ctx: ToolContext,
) -> ToolResult:
    """Run (or go on with) the remote agent's task of the `task` call `ctx.call_id`."""
    from a2a.types import Message, Part, Role, TaskState  # late: the A2A client, for remote agents only

    answered = [p for p in pending if p.via == ctx.call_id and p.answer is not None]
    task_id = context_id = ""
    round_ = 0
    text = str(args["prompt"])
    if answered:
        p = answered[-1]
        answer, p.answer = p.answer or {}, None
        task_id, context_id = str(p.args.get("remote_task", "")), str(p.args.get("remote_context", ""))
        round_ = int(p.args.get("round", 0)) + 1
        if answer.get("option") != ANSWER_OPTION:
            await _cancel_quietly(spec, config, task_id)
            raise ToolFailure(
                f"the user did not answer the remote agent {spec.name!r}", ToolErrorType.NOT_ANSWERED
            )
        text = str(answer.get("new_content") or "")
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )
    got = _Exchange(task_id=task_id, context_id=context_id, said=StatusReader(spec.name))
    got.said.keep = got.keep  # a coderAgent answer's pieces count against the same cap
    # the stream is read by a task of its own, which a cancel of the call leaves reading until the
    # remote says its task's id (the task to cancel)
    reading = asyncio.ensure_future(_exchange(spec, config, message, got, ctx))
    try:
        async with asyncio.timeout(config.remote_agent_timeout):
            await asyncio.shield(reading)
        turn_end = got.said.turn_answer(got.state, got.status_text)
    except asyncio.CancelledError:
        got.said.quiet = True
        if got.task_id:
            reading.cancel()
            await asyncio.shield(_cancel_quietly(spec, config, got.task_id))
        else:
            _in_background(_cancel_when_known(spec, config, got, reading))
        raise
    except TimeoutError:
        reading.cancel()
        await _cancel_quietly(spec, config, got.task_id)
        raise ToolFailure(
            f"the remote agent {spec.name!r} did not finish within {config.remote_agent_timeout:g} s "
            "(remote_agent_timeout)",
            ToolErrorType.TIMEOUT,
        ) from None
    except Refused as e:
        raise ToolFailure(
            f"the remote agent {spec.name!r} is refused: {e}", ToolErrorType.OUTBOUND_REFUSED
        ) from None
    except ToolFailure as f:
        if f.type == ToolErrorType.REMOTE_AGENT_APPROVAL:
            await _cancel_quietly(spec, config, got.task_id)
        raise
    except Exception as e:
        raise ToolFailure(
            f"the remote agent {spec.name!r} failed: {_said(e)}", ToolErrorType.REMOTE_AGENT_ERROR
        ) from None
    if turn_end is not None:  # Gemini CLI's dialect: the turn's end is the answer's
        got.state, got.message = TaskState.TASK_STATE_COMPLETED, turn_end
    return await _outcome(spec, got, ctx, round_)


_background: set[asyncio.Task[None]] = set()


def _in_background(work: Any) -> None:
    task = asyncio.ensure_future(work)
    _background.add(task)
    task.add_done_callback(_background.discard)


async def _cancel_when_known(spec: RemoteAgentSpec, config: CoreConfig, got: _Exchange, reading: Any) -> None:
    """The call was cancelled before the remote said its task's id: read its stream on until it
    does (at most CANCEL_WAIT s, or until the stream ends), then cancel that task."""
    reading.add_done_callback(lambda t: t.cancelled() or t.exception())  # its failure is no one's
    known = asyncio.ensure_future(got.known.wait())
    try:
        async with asyncio.timeout(CANCEL_WAIT):
            await asyncio.wait([reading, known], return_when=asyncio.FIRST_COMPLETED)
    except TimeoutError:
        pass
    finally:
        known.cancel()
        reading.cancel()
    await _cancel_quietly(spec, config, got.task_id)


async def _exchange(
    spec: RemoteAgentSpec, config: CoreConfig, message: Any, got: _Exchange, ctx: ToolContext
) -> None:
    from a2a.client import ClientCallContext
    from a2a.types import SendMessageRequest

    async with _http(config) as http:
        client, headers = await _client(spec, config, http)
        try:
            call = ClientCallContext(service_parameters={**headers, **_trace_headers()})
            async for resp in client.send_message(SendMessageRequest(message=message), context=call):
                await _take(resp, got, ctx)
                if got.task_id:
                    got.known.set()
        finally:
            await client.close()


async def _client(
    spec: RemoteAgentSpec, config: CoreConfig, http: httpx.AsyncClient
) -> tuple[Any, dict[str, str]]:
    import grpc  # type: ignore[import-untyped]
    from a2a.client import ClientConfig, ClientFactory

    try:
        card = _cards.get(spec.card_url)
        if card is None or isinstance(card, str):  # read now (again, if it failed at the start)
            card = await _fetch_card(spec, config, http)
            _cards[spec.card_url] = card
    except Refused as e:
        raise ToolFailure(
            f"the remote agent {spec.name!r} is refused: {e}", ToolErrorType.OUTBOUND_REFUSED
        ) from None
    for interface in card.supported_interfaces:
        try:
            await _check(_as_url(interface.url), config.outbound_networks(), "an endpoint its card names")
        except Refused as e:
            raise ToolFailure(
                f"the remote agent {spec.name!r} is refused: {e}", ToolErrorType.OUTBOUND_REFUSED
            ) from None
    headers = await _auth_headers(spec, http)

    def channel(target: str) -> Any:
        if target.startswith("https://"):
            return grpc.aio.secure_channel(target.removeprefix("https://"), grpc.ssl_channel_credentials())
        return grpc.aio.insecure_channel(target.removeprefix("http://"))

    factory = ClientFactory(
        ClientConfig(
            streaming=True,
            httpx_client=http,
            supported_protocol_bindings=["JSONRPC", "HTTP+JSON", "GRPC"],
            grpc_channel_factory=channel,
        )
    )
    return factory.create(card), headers


def _trace_headers() -> dict[str, str]:
    if not telemetry.tracing():
        return {}
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return {k.lower(): v for k, v in carrier.items()}


async def _take(resp: Any, got: _Exchange, ctx: ToolContext) -> None:
    """One event of the remote stream into `got` (and the status text into the live output)."""
    from a2a.types import TaskState

    kind = resp.WhichOneof("payload")
    if kind == "task":
        task = resp.task
        got.task_id, got.context_id, got.state = task.id, task.context_id, task.status.state
        got.set_status(_text(task.status.message.parts))
        for a in task.artifacts:
            got.set_artifact(a.artifact_id, _text(a.parts), append=False)
    elif kind == "message":
        got.message = got.keep(_text(resp.message.parts), len(got.message))
        got.state = TaskState.TASK_STATE_COMPLETED
    elif kind == "status_update":
        su = resp.status_update
        got.task_id, got.context_id, got.state = su.task_id, su.context_id, su.status.state
        got.set_status(await got.said.take(su, _text(su.status.message.parts), ctx))
    elif kind == "artifact_update":
        au = resp.artifact_update
        got.set_artifact(au.artifact.artifact_id, _text(au.artifact.parts), au.append)
    else:
        raise ValueError(f"an event the A2A client does not know ({kind})")


def _text(parts: Any) -> str:
    return "".join(p.text for p in parts if p.HasField("text"))


async def _outcome(spec: RemoteAgentSpec, got: _Exchange, ctx: ToolContext, round_: int) -> ToolResult:
    from a2a.types import TaskState

    data = {"agent": spec.name, "remote_task": got.task_id, "state": TaskState.Name(got.state)}
    if got.state == TaskState.TASK_STATE_COMPLETED:
        return ToolResult(await _shown(got.answer(), ctx) or "(the remote agent gave no answer)", data=data)
    if got.state == TaskState.TASK_STATE_INPUT_REQUIRED:
        raise ToolWaits([_question(spec, got, ctx.call_id, round_)])
    if got.state == TaskState.TASK_STATE_UNSPECIFIED:
        raise ToolFailure(
            f"the remote agent {spec.name!r} ended its answer without a state",
            ToolErrorType.REMOTE_AGENT_ERROR,
        )
    said = await _shown(got.answer(), ctx)
    raise ToolFailure(
        f"the remote agent {spec.name!r} ended {TaskState.Name(got.state)}" + (f": {said}" if said else ""),
        ToolErrorType("remote_agent_" + TaskState.Name(got.state).removeprefix("TASK_STATE_").lower()),
    )


async def _shown(answer: str, ctx: ToolContext) -> str:
    """The answer as the model gets it: whole when short, else its head and tail, the whole saved
    for `read_file` (where the server saves long outputs)."""
    if len(answer) <= OUTPUT_MAX_CHARS:
        return answer
    saver = ctx.saved_outputs
    saving = saver.open(ctx.session_id, ctx.call_id) if saver is not None else None
    saved = None
    if saving is not None and saver is not None:
        await asyncio.to_thread(saving.write, answer.encode("utf-8", "replace"))
        saved = saving.finish(keep=True)
        await asyncio.to_thread(saver.prune)
    return head_and_tail(answer, str(saved) if saved is not None else "")


def _question(spec: RemoteAgentSpec, got: _Exchange, call_id: str, round_: int) -> PendingCall:
    """The remote agent's `input-required` question as a waiting question of the parent (a long
    one as its head and tail)."""
    from devagent.agent.events import ConfirmationRequest
    from devagent.agent.policy.approval import question_options

    asked = (
        head_and_tail(got.status_text.strip()) or "(the remote agent asks for input and says nothing more)"
    )
    details = QuestionDetails(f"{spec.name}: {asked}")
    return PendingCall(
        f"{call_id}/remote_{round_ + 1}",
        QUESTION_TOOL,
        {
            "question": details.question,
            "remote_task": got.task_id,
            "remote_context": got.context_id,
            "round": round_,
        },
        ToolKind.QUESTION.value,
        description=f"The remote agent {spec.name} asks: {asked[:200]}",
        needs="permission",
        confirmation=confirmation_to_json(ConfirmationRequest(question_options(details), details)),
        via=call_id,
        parent_call=call_id,
    )


async def _cancel_quietly(spec: RemoteAgentSpec, config: CoreConfig, task_id: str) -> None:
    """Ask the remote agent to cancel its task (best effort, briefly)."""
    if not task_id:
        return
    from a2a.types import CancelTaskRequest

    try:
        async with asyncio.timeout(10), _http(config) as http:
            from a2a.client import ClientCallContext

            client, headers = await _client(spec, config, http)
            try:
                await client.cancel_task(
                    CancelTaskRequest(id=task_id), context=ClientCallContext(service_parameters=headers)
                )
            finally:
                await client.close()
    except Exception as e:  # the call's own outcome is what matters
        log.info("remote agent %s: could not cancel task %s: %s", spec.name, task_id, _said(e))


async def abandon(
    spec: RemoteAgentSpec, config: CoreConfig, pending: list[PendingCall], call_id: str
) -> None:
    """The parent's step ends without the call's result while the remote task waits: cancel it."""
    for p in pending:
        if p.via == call_id and p.args.get("remote_task"):
            await _cancel_quietly(spec, config, str(p.args["remote_task"]))
