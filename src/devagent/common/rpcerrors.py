"""Error hygiene for every JSON-RPC door: what an error tells a client, and
what only the server log may hold.

A client gets a JSON-RPC error object with a short message in the protocol's terms. Python's
own text (exception class names, tracebacks, file paths), pydantic's validation reports (model
names, the rejected input, links to its docs) and database errors never reach it: an internal
failure answers "Internal error (reference R)", and the log line with the detail carries the
same reference, so an operator finds it from what the user quotes. Validation reports become a
list of `{field, message}` without the input echoed back.

The A2A server passes every JSON-RPC answer (plain or a stream's events) through `clean_error`
(`devagent.a2a.hygiene`); the wire server builds its internal errors with `internal_error`.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from devagent.common.scrub import scrub

log = logging.getLogger("devagent.errors")

INTERNAL_ERROR = -32603
PARSE_ERROR = -32700
VERSION_NOT_SUPPORTED = -32009

# What must never reach a client: a traceback, a path into the code, the libraries' own words,
# an exception class name used as a label ("ValueError: ..."), the json module's positions.
_LEAK = re.compile(
    r"Traceback|File \"|site-packages|/src/|\.py\b|pydantic|sqlalchemy|sqlite|asyncpg|psycopg"
    r"|validation errors? for|\bNoneType\b|object has no attribute|line \d+ column \d+"
    r"|(?-i:\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning|Exit|Interrupt)\b)",
    re.IGNORECASE,
)
# ...but these class-like words are the protocol's own: A2A errors are named so in its spec, and
# "Internal error", "Parse error" are JSON-RPC's names.
_ALLOWED_NAMES = re.compile(
    r"\b(?:TaskNotFound|TaskNotCancelable|PushNotificationNotSupported|UnsupportedOperation"
    r"|ContentTypeNotSupported|InvalidAgentResponse|VersionNotSupported|ExtensionSupportRequired"
    r"|AuthenticatedExtendedCardNotConfigured)(?:Error|Exception)\b"
)
_GENERIC = {
    PARSE_ERROR: "Parse error",
    -32600: "Invalid request",
    -32601: "Method not found",
    -32602: "Invalid params",
    INTERNAL_ERROR: "Internal error",
}
_PYDANTIC_HEAD = re.compile(r"^\d+ validation errors? for \w+")


def rpc_error(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response (with `data` when it is given)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def leaks(text: str) -> bool:
    """Whether `text` holds something only the server log may hold."""
    return bool(_LEAK.search(_ALLOWED_NAMES.sub("", text)))


def new_reference() -> str:
    return uuid.uuid4().hex[:12]


def internal_error(detail: str, *, what: str = "request", exc_info: Any = None) -> str:
    """Logs `detail` (and the exception, if given) under a new reference, scrubbed of secrets (an
    exception may quote a provider's error, which may quote its key); the message for the client,
    which names only the reference."""
    ref = new_reference()
    log.error("reference %s: %s failed: %s", ref, what, scrub(detail), exc_info=exc_info)
    return f"Internal error (reference {ref}); the server log has the details"


class _ScrubbedTraceback(logging.Filter):
    """The traceback of a record of this logger, formatted once and scrubbed, as the record's
    `exc_text` (which formatters print instead of formatting the exception again)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        return True


log.addFilter(_ScrubbedTraceback())


def client_message(exc: BaseException, *, what: str = "request") -> str:
    """The exception's own message when it is fit for a client (a ValueError such as the core's
    InputError: a refusal worded for users), else an internal error's reference (the exception
    goes to the log)."""
    text = str(exc).strip()
    if isinstance(exc, ValueError) and text and not leaks(text):
        return text
    return internal_error(repr(exc), what=what, exc_info=exc)


def pydantic_fields(report: str) -> list[dict[str, str]] | None:
    """pydantic's text report as `[{field, message}]` (no input values, no links), or None when
    `report` is not one."""
    lines = report.splitlines()
    if not lines or not _PYDANTIC_HEAD.match(lines[0]):
        return None
    out: list[dict[str, str]] = []
    loc = ""
    for line in lines[1:]:
        if not line.startswith(" "):
            loc = line.strip()
        elif line.startswith("  ") and not line.startswith("    ") and loc:
            message = line.strip().split(" [type=", 1)[0]
            out.append({"field": loc, "message": message})
            loc = ""
    return out


def data_leaks(data: Any) -> bool:
    if isinstance(data, str):
        return leaks(data)
    if isinstance(data, dict):
        return any(data_leaks(k) or data_leaks(v) for k, v in data.items())
    if isinstance(data, list):
        return any(data_leaks(v) for v in data)
    return False


def clean_error(error: Any, *, what: str = "request") -> dict[str, Any]:
    """A JSON-RPC error object fit for a client, made from whatever error object a library built:
    an integer code and a string message always; no internals (see the module's docstring)."""
    if not isinstance(error, dict):
        return {
            "code": INTERNAL_ERROR,
            "message": internal_error(f"not an error object: {error!r}", what=what),
        }
    code = error.get("code")
    if not isinstance(code, int) or isinstance(code, bool):
        code = INTERNAL_ERROR
    message = error.get("message")
    message = message if isinstance(message, str) else ""
    data = error.get("data")
    if code == PARSE_ERROR:
        # the json module's words and positions: what was wrong is plain enough without them
        log.info("unparsable JSON-RPC body: %s", message)
        return {"code": code, "message": "Parse error: the body is not valid JSON"}
    if isinstance(data, str):
        fields = pydantic_fields(data)
        if fields is not None:
            data = {"errors": fields}
            message = _GENERIC.get(code, message)
    if code == INTERNAL_ERROR and message.startswith("A2A version "):
        # the SDK's v0.3 adapter reports a version it does not serve as an internal error; its
        # 1.0 dispatcher, as A2A says, with VersionNotSupportedError
        code = VERSION_NOT_SUPPORTED
    internal = code == INTERNAL_ERROR
    if internal or leaks(message) or data_leaks(data):
        ref = new_reference()
        log.error("reference %s: %s answered with error %s: %s (data: %r)", ref, what, code, message, data)
        head = _GENERIC.get(code, "Error")
        return {
            "code": code,
            "message": f"{head} (reference {ref}); the server log has the details",
            "data": {"reference": ref},
        }
    out: dict[str, Any] = {"code": code, "message": message or _GENERIC.get(code, "Error")}
    if data is not None:
        out["data"] = data
    return out
