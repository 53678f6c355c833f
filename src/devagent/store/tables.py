"""The tables of devagent's own database and the notification channels replicas share: a leaf of
the store, so every module of it (and a door that names a channel) reads them from here."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, Index, Integer, LargeBinary, MetaData, String, Table, Text

metadata = MetaData()

sessions_table = Table(
    "devagent_sessions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("revision", Integer, nullable=False, default=0),
    Column("state", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("lease_owner", String(200), nullable=True),
    Column("lease_until", Float, nullable=True),
    Column("cancel_requested", Integer, nullable=False, default=0, server_default="0"),
    # Who its turns are counted against (SessionState.identity): concurrent turns per caller.
    Column("identity", String(200), nullable=True),
)

# Tokens and requests per caller and UTC day: added to in the transaction that
# stores the step that spent them, read for budgets and `devagent sessions`.
usage_table = Table(
    "devagent_usage",
    metadata,
    Column("identity", String(200), primary_key=True),
    Column("day", String(10), primary_key=True),
    Column("input_tokens", BigInteger, nullable=False, default=0),
    Column("cached_tokens", BigInteger, nullable=False, default=0),  # read from the prompt cache
    Column("output_tokens", BigInteger, nullable=False, default=0),
    Column("requests", BigInteger, nullable=False, default=0),
    # written to the prompt cache (Anthropic bills them above the input price)
    Column("cache_write_tokens", BigInteger, nullable=False, default=0, server_default="0"),
    # what the priced requests cost, in billionths of a dollar (whole numbers add up exactly),
    # and the requests of models with no known price (devagent/agent/models/prices.py)
    Column("cost_nanousd", BigInteger, nullable=False, default=0, server_default="0"),
    Column("unpriced_requests", BigInteger, nullable=False, default=0, server_default="0"),
)
USAGE_KINDS = (
    "input_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "output_tokens",
    "requests",
    "cost_nanousd",
    "unpriced_requests",
)

# Turns running at once per caller (budgets): a row is a slot a session's turn holds, on any
# replica, until the turn ends or pauses; `until` is renewed with the session's lease, so a dead
# process's slots expire like its leases (devagent/store/slots.py).
turn_slots_table = Table(
    "devagent_turn_slots",
    metadata,
    Column("identity", String(200), primary_key=True),
    Column("slot", Integer, primary_key=True),
    Column("session_id", String(64), nullable=False),
    Column("owner", String(200), nullable=False),
    Column("until", Float, nullable=False),
    Index("devagent_turn_slots_session", "session_id"),
)

messages_table = Table(
    "devagent_messages",
    metadata,
    Column("session_id", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("data", Text, nullable=False),
)

# The live events of running A2A tasks, for the replicas that did not run them (fan-out): a task's
# rows start with a snapshot of the task (kind 1) when an execution begins, then its events (kind 0),
# each the protocol's own serialized form. Only the latest execution of a task is kept.
task_events_table = Table(
    "devagent_task_events",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("task_id", String(64), nullable=False),
    Column("kind", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("devagent_task_events_task", "task_id", "id"),
)

EVENTS_CHANNEL = "devagent_events"  # NOTIFY payload: a task id with new rows
CANCEL_CHANNEL = "devagent_cancel"  # NOTIFY payload: a session id whose turn is to stop
WORKERS_CHANNEL = "devagent_workers"  # NOTIFY payload: the workers' bells rung, one a line

# Columns added after the first release: added to an existing table when the store opens.
ADDED_COLUMNS = {
    "devagent_sessions": (
        ("lease_owner", "VARCHAR(200)"),
        ("lease_until", "FLOAT"),
        ("cancel_requested", "INTEGER NOT NULL DEFAULT 0"),
        ("identity", "VARCHAR(200)"),
    ),
    "devagent_usage": (
        ("cache_write_tokens", "BIGINT NOT NULL DEFAULT 0"),
        ("cost_nanousd", "BIGINT NOT NULL DEFAULT 0"),
        ("unpriced_requests", "BIGINT NOT NULL DEFAULT 0"),
    ),
    "devagent_workers": (("session_id", "VARCHAR(64) NOT NULL DEFAULT ''"),),
    "devagent_worker_tokens": (
        ("role", "VARCHAR(16) NOT NULL DEFAULT 'worker'"),
        ("session_id", "VARCHAR(64) NOT NULL DEFAULT ''"),
    ),
}

# Workers (`devagent worker`): processes on other machines that run sessions' tool calls. A worker
# row is one connected process (its id is random per process, its token's name beside it); a lease
# gives one session's sandbox to one worker until `until` (the database's clock), its `epoch`
# counting the grants, so a result of an earlier grant is refused (fencing); a call is one exec or
# file operation queued for the lease holder, its output rows beside it; a snapshot is the session's
# workspace as of its last finished call that changed it (a tar.gz), for the next worker.
workers_table = Table(
    "devagent_workers",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("token_name", String(200), nullable=False),
    Column("pool", String(100), nullable=False),
    Column("templates", Text, nullable=False),  # JSON list of names
    Column("capacity", Integer, nullable=False),
    Column("backend", String(20), nullable=False),
    Column("started_at", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
    Column("gone", Integer, nullable=False, default=0),
    # A one-session worker (its token a session's, minted for a dispatcher): it is granted that
    # session and no other; "" for a worker of the whole pool.
    Column("session_id", String(64), nullable=False, default="", server_default=""),
)

worker_tokens_table = Table(
    "devagent_worker_tokens",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("digest", String(64), nullable=False),  # sha256 of the token, hex; never the token
    Column("pool", String(100), nullable=False, default=""),  # "": any pool
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float, nullable=True),
    # worker | dispatcher (asks which sessions wait for a sandbox, mints session tokens) | session
    # (a one-session worker's, valid while its session waits for or holds a sandbox)
    Column("role", String(16), nullable=False, default="worker", server_default="worker"),
    Column("session_id", String(64), nullable=False, default="", server_default=""),
)

# Sessions whose replica waits for a worker to grant their sandbox to (renewed while it waits):
# what a dispatcher reads to start a one-session worker for each.
worker_wants_table = Table(
    "devagent_worker_wants",
    metadata,
    Column("session_id", String(64), primary_key=True),
    Column("pool", String(100), nullable=False),
    Column("template", String(100), nullable=False),
    Column("until", Float, nullable=False),
    Index("devagent_worker_wants_pool", "pool"),
)

worker_leases_table = Table(
    "devagent_worker_leases",
    metadata,
    Column("session_id", String(64), primary_key=True),
    Column("worker", String(64), nullable=False),
    Column("pool", String(100), nullable=False),
    Column("template", String(100), nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("until", Float, nullable=False),
    Index("devagent_worker_leases_worker", "worker"),
)

worker_calls_table = Table(
    "devagent_worker_calls",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("session_id", String(64), nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("worker", String(64), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("spec", Text, nullable=False),
    Column("data", LargeBinary, nullable=True),
    Column("state", String(16), nullable=False),  # queued | taken | done | interrupted | cancelled
    Column("code", Integer, nullable=True),
    Column("result", LargeBinary, nullable=True),
    Column("error", Text, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # Until when a replica follows the command (its relay renews this while it runs): a command
    # nobody follows any more (its replica died) is killed by its worker.
    Column("watched_until", Float, nullable=True),
    Index("devagent_worker_calls_worker", "worker", "state"),
)

worker_output_table = Table(
    "devagent_worker_output",
    metadata,
    Column("call_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("data", LargeBinary, nullable=False),
)

worker_snapshots_table = Table(
    "devagent_worker_snapshots",
    metadata,
    Column("session_id", String(64), primary_key=True),
    Column("call_id", BigInteger, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("updated_at", Float, nullable=False),
)
