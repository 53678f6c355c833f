"""The SQL of the A2A task rows (the a2a-sdk's `tasks` table), for `devagent.a2a.store`.

A task save is one statement: `INSERT ... ON CONFLICT (id) DO UPDATE SET <every column> ...
RETURNING <signature>` (SQLite 3.35+ and PostgreSQL both have it). The SDK's `DatabaseTaskStore`
saves through the ORM's `merge`: a SELECT of the row, then an INSERT or an UPDATE, through an ORM
session, and the write-behind store then read the row's signature in a third statement. The
upsert writes the same columns (`owner` included, as `merge` does) and returns the signature
from the row it wrote.

A row's *signature* is its `last_updated` and the text length of each JSON column, as the
database reports them: any save of the row changes it (the status timestamp, or the length of
what it changed), so a reader that finds the signature it cached knows the row unchanged.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, Text, and_, bindparam, cast, func, inspect, select

from devagent.store.direct import WriteConnection

Signature = tuple[Any, ...]


class TaskRows:
    """The statements on one task model's table, built once (building costs SQLAlchemy more CPU
    than running them)."""

    def __init__(self, model: Any, dialect: str) -> None:
        self.model = model
        table = model.__table__
        # ORM attribute name -> the column's key (the metadata column is `task_metadata` on the
        # model, `metadata` in the table).
        self._keys = [(a.key, a.columns[0].key) for a in inspect(model).column_attrs]
        self._signature = (
            model.last_updated,
            func.length(cast(model.status, Text)),
            func.length(cast(model.artifacts, Text)),
            func.length(cast(model.history, Text)),
            func.length(cast(model.task_metadata, Text)),
        )
        ins: Any
        if dialect == "postgresql":  # each dialect's module imported only when used (start-up)
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            ins = pg_insert(table)
        elif dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            ins = sqlite_insert(table)
        else:
            raise ValueError(f"no upsert for the {dialect} dialect")
        pk = [c for c in table.primary_key.columns]
        self._upsert = ins.on_conflict_do_update(
            index_elements=pk,
            set_={c.key: ins.excluded[c.key] for c in table.columns if not c.primary_key},
        ).returning(*self._signature)

        mine = and_(model.id == bindparam("b_id"), model.owner == bindparam("b_owner"))
        # a task's signature; and its signature with the whole row (the model)
        self.signature: Select[Any] = select(*self._signature).where(mine)
        self.row: Select[Any] = select(*self._signature, model).where(mine)
        # whose a task is, whoever asks (an operator's read of another identity's task)
        self.owner: Select[Any] = select(model.owner).where(model.id == bindparam("b_id"))

    @staticmethod
    def params(task_id: str, owner: str) -> dict[str, Any]:
        """The parameters of `signature` and `row`."""
        return {"b_id": task_id, "b_owner": owner}

    async def upsert(self, conn: WriteConnection, row: Any) -> Signature | None:
        """Write the task row (an instance of the model, not attached to any session) in one
        statement; the signature of the row written."""
        params = {key: getattr(row, attr) for attr, key in self._keys}
        found = (await conn.execute(self._upsert, params)).first()
        return None if found is None else tuple(found)
