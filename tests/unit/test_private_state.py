"""Issue 12 item 6 (private state): the data directory is created 0700 and the SQLite database
with its -wal/-shm files is 0600, whatever the umask; an existing database is tightened, not
broken."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from devagent.agent.settings import CoreConfig
from devagent.store.db import Store


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


async def test_issue12_item6_data_dir_0700_database_0600(tmp_path: Path) -> None:
    """Issue 12 item 6: a fresh data directory is 0700, devagent.db and its -wal/-shm are 0600,
    even under a permissive umask."""
    data = tmp_path / "data"
    old = os.umask(0o022)
    try:
        url = CoreConfig(data_dir=data).resolved_db_url()
        store = await Store.open(url)
    finally:
        os.umask(old)
    try:
        assert mode(data) == 0o700
        db = data / "devagent.db"
        files = [db] + [p for p in (data / "devagent.db-wal", data / "devagent.db-shm") if p.exists()]
        assert len(files) == 3, files  # WAL mode: both exist while the database is open
        for p in files:
            assert mode(p) == 0o600, (p, oct(mode(p)))
    finally:
        await store.close()


async def test_issue12_item6_existing_database_tightened_and_still_works(tmp_path: Path) -> None:
    """Issue 12 item 6: a database created by an older version (0644) is made 0600 on open, and
    what it holds is still there."""
    db = tmp_path / "old.db"
    url = f"sqlite+aiosqlite:///{db}"
    store = await Store.open(url)
    await store.close()
    db.chmod(0o644)
    size = db.stat().st_size
    store = await Store.open(url)
    try:
        assert mode(db) == 0o600
        assert db.stat().st_size >= size > 0
    finally:
        await store.close()
