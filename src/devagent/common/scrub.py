"""Secrets out of error text: what a provider (or anything devagent did not write) says in an
error may quote the request it got, `Authorization` header and API key included. `scrub` replaces
the secrets the process knows (the model's API key, bearer tokens, provider keys in the
environment: `remember`) and anything shaped like a credential with `[redacted]`, before such text
reaches a span, a log line or a caller."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

REDACTED = "[redacted]"
_MIN_SECRET = 6  # shorter values would redact ordinary words

# A credential after the word that introduces it: the word stays, the value goes.
_NAMED = re.compile(
    r"(?i)(\bbearer\s+|"
    r"\b(?:authorization|proxy-authorization|x-api-key|x-goog-api-key|api[-_]?key|access[-_]?token|"
    r"refresh[-_]?token|token|client[-_]?secret|secret|password|passwd)[\\\"'\s]*[:=][\\\"'\s]*"
    r"(?:(?:bearer|basic|token)\s+)?)"
    r"([^\s\\\"',;&}\]]{6,})"
)
# Values shaped like a key, wherever they stand.
_SHAPED = re.compile(
    r"\bsk-[A-Za-z0-9_-]{8,}"  # OpenAI, Anthropic (sk-ant-...), DeepSeek, OpenRouter (sk-or-...)
    r"|\bAIza[0-9A-Za-z_-]{20,}"  # Google
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWTs
    r"|\bhf_[A-Za-z0-9]{20,}"  # Hugging Face
)
# The password in a URL's user info (`scheme://user:password@host`).
_URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)[^/\s@]+(?=@)")
# Environment variables whose values are secrets, by name.
_SECRET_NAME = re.compile(r"(?i)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$")

_known: set[str] = set()


def remember(values: Iterable[str | None]) -> None:
    """Secrets this process holds (a model API key, bearer tokens): never shown in error text."""
    for v in values:
        if v and len(v.strip()) >= _MIN_SECRET:
            _known.add(v.strip())


def remember_environment(environ: Mapping[str, str] | None = None) -> None:
    """The values of variables named like secrets (`OPENAI_API_KEY`, `DEVAGENT_TOKEN`, ...)."""
    env = os.environ if environ is None else environ
    remember(v for k, v in env.items() if _SECRET_NAME.search(k))


def scrub(text: str) -> str:
    """The text with every known secret and credential-shaped value replaced by `[redacted]`."""
    for secret in sorted(_known, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = _NAMED.sub(lambda m: m.group(1) + REDACTED if m.group(2) != REDACTED else m.group(0), text)
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED, text)
    return _SHAPED.sub(REDACTED, text)
