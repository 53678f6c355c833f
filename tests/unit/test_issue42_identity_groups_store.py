"""Issue 42 item 4: each identity's shared groups kept in the database, as two replicas on one
database see them: what one writes the other reads, and a membership taken away on one replica
is written even where the other last wrote it."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import create_async_engine

from devagent.store.identity_groups import IdentityGroups


async def test_issue42_item4_two_replicas_share_each_identitys_groups(sqlite_url: str) -> None:
    engine = create_async_engine(sqlite_url)
    try:
        a, b = IdentityGroups(engine, recheck=0), IdentityGroups(engine, recheck=0)
        await a.initialize()
        await b.initialize()
        assert await a.groups_of("oidc:alice") == frozenset()
        await a.record("oidc:alice", frozenset())  # first seen in no shared group
        await b.record("oidc:alice", frozenset({"team-a"}))  # then in team-a, on the other replica
        assert await a.groups_of("oidc:alice") == {"team-a"}
        await a.record("oidc:alice", frozenset())  # taken away, seen where the old row was not written
        assert await b.groups_of("oidc:alice") == frozenset()
        await b.record("oidc:bob", frozenset({"team-a", "team-b"}))
        assert await a.groups_of("oidc:bob") == {"team-a", "team-b"}
        assert await a.groups_of("oidc:alice") == frozenset()
    finally:
        await engine.dispose()
