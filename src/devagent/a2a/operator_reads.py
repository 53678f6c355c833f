"""An operator of the identity provider reads other identities' tasks over A2A: `tasks/get` of
any task by its id, `tasks/list` of one identity's tasks named in the request's `tenant` (A2A
1.0's field for whose tasks a request is about: devagent's tenants are its identities). A member
of a group the operator lets share (`oidc_shared_groups`) reads the same way the tasks of the
identities last seen in that group too.

A door-level translation of the role the verifier gave (the auth scope "operator", set by
`BearerAuth` from the IdP's roles claim): the read is made in the context of the task's owner, so
the store's owner filter and the conversation it reads from are exactly the owner's. A group is
the IdP's (its groups claim, each caller's as its token says: `IdentityGroups`), never a caller's
claim in a request. Nothing else
changes for reading: sending, cancelling and subscribing stay the owner's alone, and a member's
token never reads another identity's task (its context is never replaced).

Where the operator lets a group approve (`GROUP=approve`), its members may also answer each
other's permission requests: allow once or refuse, on the task the request waits in
(`approver_context`). The turn goes on as the owner's (its workspace, budget and model), the
answer being all the other member gives it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from a2a.server.context import ServerCallContext
from a2a.utils.errors import InvalidParamsError

from devagent.a2a.auth import APPROVE_SCOPE, GROUP_SCOPE, NamedUser
from devagent.a2a.executor import owner_of

if TYPE_CHECKING:
    from a2a.types import ListTasksRequest

    from devagent.store.identity_groups import IdentityGroups

OPERATOR_SCOPE = "operator"


@runtime_checkable
class TaskOwners(Protocol):
    """A task store that can say whose a task is (devagent.a2a.store.BufferedTaskStore)."""

    async def owner_of(self, task_id: str) -> str | None: ...


def is_operator(context: ServerCallContext) -> bool:
    """Whether the caller's token gave it the operator's role (never a static token's)."""
    return OPERATOR_SCOPE in getattr(context.state.get("auth"), "scopes", ())


def _scopes(context: ServerCallContext) -> tuple[str, ...]:
    return tuple(getattr(context.state.get("auth"), "scopes", ()))


def groups_of(context: ServerCallContext) -> frozenset[str]:
    """The shared groups the caller's token put it in."""
    return frozenset(s.removeprefix(GROUP_SCOPE) for s in _scopes(context) if s.startswith(GROUP_SCOPE))


def approving_groups_of(context: ServerCallContext) -> frozenset[str]:
    """The shared groups the caller's token put it in whose members answer each other's requests."""
    return frozenset(s.removeprefix(APPROVE_SCOPE) for s in _scopes(context) if s.startswith(APPROVE_SCOPE))


async def may_read(context: ServerCallContext, owner: str, groups: IdentityGroups | None) -> bool:
    """Whether the caller may read `owner`'s tasks: an operator, or one sharing a group with it."""
    if is_operator(context):
        return True
    mine = groups_of(context)
    return bool(mine) and groups is not None and bool(mine & await groups.groups_of(owner))


def _as_owner(context: ServerCallContext, owner: str) -> ServerCallContext:
    """The call as the owner's, to read with: the same headers and extensions, its user the owner."""
    return ServerCallContext(
        user=NamedUser(owner),
        state=dict(context.state),
        tenant=context.tenant,
        requested_extensions=set(context.requested_extensions),
    )


async def owner_context(
    store: object, task_id: str, context: ServerCallContext, groups: IdentityGroups | None = None
) -> ServerCallContext | None:
    """For an operator or a member of a group the task's owner shares, the owner's context to read
    another identity's task in; None for anyone else, a task that does not exist or is the
    caller's own, or a store that cannot say whose a task is."""
    if not (is_operator(context) or groups_of(context)) or not isinstance(store, TaskOwners):
        return None
    owner = await store.owner_of(task_id)
    if owner is None or owner == owner_of(context) or not await may_read(context, owner, groups):
        return None
    return _as_owner(context, owner)


# The key of the call state naming the identity that answers another's permission request.
APPROVER_KEY = "devagent.approver"


async def approver_context(
    store: object, task_id: str, context: ServerCallContext, groups: IdentityGroups | None
) -> ServerCallContext | None:
    """For a member of a group that approves, sharing it with the owner of task `task_id`, the
    owner's context to answer that task's permission requests in (the caller's name kept in its
    state under APPROVER_KEY); None for anyone else, the caller's own task, or no such task. An
    operator's role alone approves nothing: it reads."""
    mine = approving_groups_of(context)
    if not mine or groups is None or not task_id or not isinstance(store, TaskOwners):
        return None
    owner = await store.owner_of(task_id)
    if owner is None or owner == owner_of(context) or not mine & await groups.groups_of(owner):
        return None
    answering = _as_owner(context, owner)
    answering.state[APPROVER_KEY] = owner_of(context)
    return answering


async def list_context(
    params: ListTasksRequest, context: ServerCallContext, groups: IdentityGroups | None = None
) -> ServerCallContext:
    """The context `tasks/list` reads in: the caller's, or for an operator (or a member of a group
    it shares) naming another identity in `tenant`, that identity's. Anyone else naming another
    identity is refused (never answered with its own tasks as if they were that identity's)."""
    tenant = params.tenant or context.tenant  # (HTTP+JSON carries it in the path: the context's)
    if not tenant or tenant == owner_of(context):
        return context
    if not await may_read(context, tenant, groups):
        raise InvalidParamsError(
            message="only an operator, or a member of a group it shares, "
            "may list another identity's tasks (tenant)"
        )
    return _as_owner(context, tenant)
