"""Running one `"type": "http"` hook: the event's JSON POSTed to its URL, through the server's
outbound address policy (`common/netpolicy.py`: public addresses only, unless the operator's
`outbound_allow` lists the network; the request goes to the address that was checked). A 2xx
answer's body is read as a command hook's standard output (exit 0); anything else (an address the
policy refuses, no connection, another status, a redirect, no answer within the hook's timeout, a
body past the output cap) is an answer the hook did not give, so a guard fails closed.

Header values may name environment variables (`$NAME`, `${NAME}`) listed in the hook's
`allowedEnvVars`, taken from the server's environment; any other name becomes empty."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Mapping
from typing import Any

from devagent.agent.hooks.config import HookCommand
from devagent.agent.hooks.run import OUTPUT_LIMIT, HookRun
from devagent.common.errors import DevagentError
from devagent.common.netpolicy import IPNetwork, pinned_request, resolve_outbound_url

_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_HINT = "an http hook reaches public addresses only, unless the operator lists the network in outbound_allow"


def headers_of(hook: HookCommand) -> dict[str, str]:
    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return os.environ.get(name, "") if name in hook.env_vars else ""

    return {name: _VARIABLE.sub(value, text) for name, text in hook.headers}


async def run_http_hook(hook: HookCommand, event: Mapping[str, Any], allow: tuple[IPNetwork, ...]) -> HookRun:
    """POST `event` to the hook's URL; its answer as a HookRun (exit 0 with the body, or a problem)."""
    try:
        body = await asyncio.wait_for(_post(hook, event, allow), hook.timeout)
    except TimeoutError:
        return _problem(hook, f"it did not answer within {hook.timeout:g} s")
    except _NoAnswer as e:
        return _problem(hook, str(e))
    return HookRun(hook.command, 0, body.decode("utf-8", errors="replace"), advisory=hook.advisory)


class _NoAnswer(DevagentError):
    pass


def _problem(hook: HookCommand, text: str) -> HookRun:
    return HookRun(hook.command, None, problem=text, advisory=hook.advisory)


async def _post(hook: HookCommand, event: Mapping[str, Any], allow: tuple[IPNetwork, ...]) -> bytes:
    import httpx  # late: the HTTP client only when an http hook runs

    reason, ip = await resolve_outbound_url(
        hook.command, allow_private=False, what="the hook's URL", hint=_HINT, allow=allow
    )
    if reason or ip is None:
        raise _NoAnswer(f"its URL may not be called: {reason}")
    target, host, extensions = pinned_request(hook.command, ip)
    headers = {"Content-Type": "application/json", **headers_of(hook), **host}
    data = json.dumps(dict(event), ensure_ascii=False).encode("utf-8")
    client = httpx.AsyncClient(trust_env=False, follow_redirects=False, timeout=hook.timeout)
    try:
        async with (
            client,
            client.stream("POST", target, content=data, headers=headers, extensions=extensions) as resp,
        ):
            if not 200 <= resp.status_code < 300:
                raise _NoAnswer(f"it answered HTTP {resp.status_code}")
            kept = bytearray()
            async for chunk in resp.aiter_bytes():
                kept += chunk
                if len(kept) > OUTPUT_LIMIT:
                    raise _NoAnswer(f"it answered more than {OUTPUT_LIMIT // 1024} KiB and was cut off")
            return bytes(kept)
    except httpx.HTTPError as e:
        raise _NoAnswer(f"it could not be reached: {e or type(e).__name__}") from None
