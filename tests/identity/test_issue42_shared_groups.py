"""Issue 42 item 4: groups sharing sessions where the operator allows it, with tokens of a real
OpenID Connect provider on loopback carrying a `groups` claim: members of a group the operator
lets share (`oidc_shared_groups`) read each other's A2A tasks over JSON-RPC (`GetTask`,
`ListTasks` naming the identity in `tenant`) and open each other's sessions in the console's
API; a group the operator did not name shares nothing, a caller of another group or none reads
nothing, and reading is all (no cancel)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devagent.common.identity import OidcSettings
from devagent.common.identity.settings import oidc_settings
from tests.a2a.helpers import TOKEN, auth, call, rpc, running_server, v03_message
from tests.conftest import Script
from tests.identity.idp import Idp, running_idp

CLIENTS = {"alice": "a", "bob": "b", "carol": "c", "eve": "e"}
GROUPS = {"alice": ["team-a", "staff"], "bob": ["team-a"], "carol": ["team-b"], "eve": ["staff"]}


@pytest.fixture
def group_idp(tmp_path: Path) -> Iterator[Idp]:
    with running_idp(tmp_path, CLIENTS, {}, groups=GROUPS) as provider:
        yield provider


def v1(token: str) -> dict[str, str]:
    return auth(token, ext=False, v1=True)


def test_issue42_item4_shared_groups_setting() -> None:
    env = {"DEVAGENT_OIDC_ISSUER": "https://kc", "DEVAGENT_OIDC_GROUPS_CLAIM": "groups"}
    s = oidc_settings({**env, "DEVAGENT_OIDC_SHARED_GROUPS": "team-a, team-b=read"})
    assert s is not None and s.groups_claim == "groups" and s.shared_groups == {"team-a", "team-b"}
    s = oidc_settings(env, {"oidc_shared_groups": ["team-a"]})
    assert s is not None and s.shared_groups == {"team-a"}
    s = oidc_settings({**env, "DEVAGENT_OIDC_SHARED_GROUPS": "team-a"}, {}, {"shared_groups": "team-c"})
    assert s is not None and s.shared_groups == {"team-c"}  # the flag over the variable
    s = oidc_settings(env)
    assert s is not None and s.shared_groups == frozenset()  # none shares unless the operator says
    assert s.approving_groups == frozenset()  # reading only, unless the operator says approve
    with pytest.raises(ValueError, match="not GROUP, GROUP=read or GROUP=approve"):
        oidc_settings({**env, "DEVAGENT_OIDC_SHARED_GROUPS": "team-a=admin"})


async def test_issue42_item4_a_shared_groups_members_read_each_others_tasks(
    group_idp: Idp, script: Script, shared_db: str, workspace: Path
) -> None:
    idp = group_idp
    settings = OidcSettings(issuer=idp.issuer, groups_claim="groups", shared_groups=frozenset({"team-a"}))
    steps = [[{"text": "alice's answer"}], [{"text": "ci's answer"}]]
    kw = {"tokens": {TOKEN: "ci"}, "a2a_kw": {"oidc": settings}}
    async with running_server(script(steps), shared_db, workspace, **kw) as srv:
        base = srv.url.rstrip("/")
        alice, bob, carol, eve = (idp.token(c, base) for c in ("alice", "bob", "carol", "eve"))
        url = srv.url
        async with httpx.AsyncClient(timeout=60) as c:
            sent = await call(
                c, url, rpc("message/send", {"message": v03_message("hi")}), auth(alice, ext=False)
            )
            assert sent["result"]["status"]["state"] == "completed", sent
            task_id = sent["result"]["id"]
            by_ci = await call(
                c, url, rpc("message/send", {"message": v03_message("hi")}), auth(TOKEN, ext=False)
            )
            ci_task = by_ci["result"]["id"]

            # Bob shares team-a with Alice: he reads her task and lists her tasks
            got = await call(c, url, rpc("GetTask", {"id": task_id}), v1(bob))
            assert got["result"]["id"] == task_id and "alice's answer" in str(got["result"]), got
            listed = await call(c, url, rpc("ListTasks", {"tenant": "oidc:alice"}), v1(bob))
            assert [t["id"] for t in listed["result"]["tasks"]] == [task_id], listed
            # reading is all
            cancel = await call(c, url, rpc("CancelTask", {"id": task_id}), v1(bob))
            assert cancel["error"]["code"] == -32001, cancel
            # the console's API: Bob opens Alice's session read-only, naming its owner
            context_id = sent["result"]["contextId"]
            page = f"{url}ui/api/sessions/{context_id}?owner=oidc:alice"
            opened = await c.get(page, headers=auth(bob, ext=False))
            assert opened.status_code == 200 and "alice's answer" in opened.text, opened.text
            for token in (eve, carol, TOKEN):
                assert (await c.get(page, headers=auth(token, ext=False))).status_code == 404
            # the static token's task is in no group
            ci = await call(c, url, rpc("GetTask", {"id": ci_task}), v1(bob))
            assert ci["error"]["code"] == -32001, ci

            # Eve shares only "staff" with Alice, a group the operator did not name; Carol is in
            # another group; the static token in none: none of them reads or lists her tasks
            for token in (eve, carol, TOKEN):
                refused = await call(c, url, rpc("GetTask", {"id": task_id}), v1(token))
                assert refused["error"]["code"] == -32001, refused
                refused = await call(c, url, rpc("ListTasks", {"tenant": "oidc:alice"}), v1(token))
                assert refused["error"]["code"] == -32602, refused


async def test_issue42_item4_a_membership_the_idp_takes_away_ends_the_sharing(
    group_idp: Idp, script: Script, sqlite_url: str, workspace: Path
) -> None:
    """Alice's next token (signed by the provider's key, as it would issue once her membership is
    gone) no longer lists team-a: from her next call on, Bob no longer reads her task."""
    idp = group_idp
    settings = OidcSettings(issuer=idp.issuer, groups_claim="groups", shared_groups=frozenset({"team-a"}))
    kw = {"tokens": {TOKEN: "ci"}, "a2a_kw": {"oidc": settings}}
    async with running_server(script([[{"text": "done"}]]), sqlite_url, workspace, **kw) as srv:
        base = srv.url.rstrip("/")
        alice, bob = idp.token("alice", base), idp.token("bob", base)
        async with httpx.AsyncClient(timeout=60) as c:
            sent = await call(
                c, srv.url, rpc("message/send", {"message": v03_message("hi")}), auth(alice, ext=False)
            )
            task_id = sent["result"]["id"]
            assert (await call(c, srv.url, rpc("GetTask", {"id": task_id}), v1(bob)))["result"][
                "id"
            ] == task_id
            claims = {"iss": idp.issuer, "aud": base, "sub": "alice", "exp": 2**31, "groups": ["staff"]}
            later = idp.sign(claims)
            own = await call(c, srv.url, rpc("GetTask", {"id": task_id}), v1(later))
            assert own["result"]["id"] == task_id, own  # still Alice, now outside team-a
            refused = await call(c, srv.url, rpc("GetTask", {"id": task_id}), v1(bob))
            assert refused["error"]["code"] == -32001, refused
