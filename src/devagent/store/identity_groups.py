"""The groups each identity of the operator's identity provider was last seen in, among the
groups the operator lets share (`oidc_shared_groups`): a member of such a group may read the
tasks of the group's other members. Stored, not kept in memory: any replica answers a read,
and the owner of a task is often not the one calling when another member reads it.

An identity's row is written when a token shows it in other groups than the row says (a
membership the IdP gave or took away), so sharing follows the IdP without a write per request
(nor a read: what this process last wrote or read is trusted for RECHECK_SECONDS)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import sqlalchemy as sa

from devagent.common.lru import LRU

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

metadata = sa.MetaData()

groups_table = sa.Table(
    "identity_groups",
    metadata,
    sa.Column("identity", sa.String(300), primary_key=True),
    sa.Column("groups", sa.Text, nullable=False),  # JSON list of group names, sorted
    sa.Column("updated_at", sa.Float, nullable=False),
)

# identities whose stored groups this process remembers (a miss costs one read)
REMEMBERED = 4096
# Seconds this process trusts its memory of a row before reading it again: another replica may
# have written the row since (the identity's token there showed other groups). A membership the
# IdP takes away lasts anyway as long as the tokens it issued before; this adds at most this much.
RECHECK_SECONDS = 30.0


class IdentityGroups:
    def __init__(self, engine: AsyncEngine, recheck: float = RECHECK_SECONDS) -> None:
        self.engine = engine
        self._recheck = recheck
        self._known: LRU[str, tuple[frozenset[str], float]] = LRU(REMEMBERED)

    async def initialize(self) -> None:
        try:
            async with self.engine.begin() as conn:
                await conn.run_sync(metadata.create_all)
        except sa.exc.DBAPIError:
            # Two replicas starting together both saw the table missing; the other one made it.
            async with self.engine.begin() as conn:
                await conn.run_sync(metadata.create_all)

    async def record(self, identity: str, groups: frozenset[str]) -> None:
        """`identity` is now in `groups` (the shared ones its token names)."""
        known = self._known.get(identity)
        if known is not None and known[0] == groups and time.monotonic() - known[1] < self._recheck:
            return
        if await self._stored(identity) != groups:
            try:
                await self._write(identity, groups)
            except sa.exc.IntegrityError:  # another replica inserted the row meanwhile
                await self._write(identity, groups)
        self._known[identity] = (groups, time.monotonic())

    async def _write(self, identity: str, groups: frozenset[str]) -> None:
        t = groups_table
        values = {"groups": json.dumps(sorted(groups)), "updated_at": time.time()}
        async with self.engine.begin() as conn:
            done = await conn.execute(t.update().where(t.c.identity == identity).values(**values))
            if done.rowcount == 0:
                await conn.execute(t.insert().values(identity=identity, **values))

    async def groups_of(self, identity: str) -> frozenset[str]:
        """The shared groups `identity` was last seen in (read from the store: another replica may
        have seen it since)."""
        return await self._stored(identity)

    async def _stored(self, identity: str) -> frozenset[str]:
        t = groups_table
        async with self.engine.connect() as conn:
            row = (await conn.execute(sa.select(t.c.groups).where(t.c.identity == identity))).first()
        if row is None:
            return frozenset()
        names = json.loads(row[0])
        return frozenset(n for n in names if isinstance(n, str))
