"""What goes wrong with a model: a spec that names no usable model (`ModelConfigError`), and a
failed model request told as one line: where it went (the provider's URL) and what came back,
never the provider SDK's class names or a whole error page.

An HTTP error gives its status and the server's own message (the `message` of a JSON error body,
else its first line); an HTML body, what a wrong base URL usually meets (a web server's or a
proxy's page), is cut to its status line. A connection failure says it could not reach the URL.
"""

from __future__ import annotations

import json
import re
from http import HTTPStatus
from typing import Any

from devagent.common.errors import DevagentError

# The longest provider message shown (a line, not a page).
MAX_DETAIL = 300


class ModelConfigError(DevagentError, ValueError):
    """The model spec cannot be turned into a model: unknown provider, missing key or base URL,
    unreadable or invalid script. The message says what to set."""


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>|<h1[^>]*>(.*?)</h1>", re.IGNORECASE | re.DOTALL)


def describe(e: BaseException, url: str | None) -> str:
    """`e`, raised by a request to the model server at `url` (None: no server, e.g. a script),
    as one line starting "Model error"."""
    at = f" at {url}" if url else ""
    status = getattr(e, "status_code", None)
    if isinstance(status, int):
        answer = _status_line(status, getattr(e, "body", None))
        suggested = getattr(e, "suggested_model_id", None)
        if suggested:
            answer += f" (did you mean {suggested!r}?)"
        return f"Model error: the model server{at} answered HTTP {answer}"
    text = _one_line(str(e))
    if _is_connection_error(e):
        if url and url in text:  # the error names the URL already (devagent's own explanation)
            return f"Model error: {text}"
        return f"Model error: cannot reach the model server{at}" + (f" ({text})" if text else "")
    return f"Model error{at}: {text or type(e).__name__}"


def _status_line(status: int, body: Any) -> str:
    """`404 Not Found`, with the server's message when it sent one that is not a page."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    head = f"{status} {phrase}".strip()
    detail = _body_message(body)
    if detail is None:  # an HTML page: its title says no more than the status
        return f"{head} (an HTML page, not an API answer: is the base URL right?)"
    return f"{head}: {detail}" if detail and detail != head else head


def _body_message(body: Any) -> str | None:
    """The message in an error body; None for an HTML page."""
    if isinstance(body, bytes):
        body = body.decode(errors="replace")
    if isinstance(body, str):
        stripped = body.lstrip()
        if stripped.startswith("{"):
            try:
                body = json.loads(stripped)
            except ValueError:
                return _one_line(stripped)
        elif _is_html(stripped):
            return None
        else:
            return _one_line(stripped)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail")
            return _one_line(str(msg)) if msg else _one_line(json.dumps(body))
        return _one_line(str(err))
    return _one_line(str(body)) if body else ""


def _is_html(text: str) -> bool:
    low = text[:200].lower()
    return low.startswith("<!doctype html") or low.startswith("<html") or bool(_TITLE.search(text[:2000]))


def _is_connection_error(e: BaseException) -> bool:
    try:
        from pydantic_ai.exceptions import ModelConnectionError
    except ImportError:  # pragma: no cover - pydantic-ai is a dependency
        return False
    return isinstance(e, ModelConnectionError)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_DETAIL else line[: MAX_DETAIL - 1] + "…"
