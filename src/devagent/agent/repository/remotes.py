"""Which remotes a caller may name, which refs, and the operator's credentials for each remote.

A caller chooses a repository and a ref only among what the operator allows: the URL must fall
under one of `repository_remotes` (a prefix, or a pattern where `*` stands for one path segment),
and nothing in it may make git do more than fetch (`ext::`/`fd::` transports, options, userinfo).
The operator's credentials (`git_credentials`) are matched by the same prefixes and never leave
the server process: `git_auth` gives one git command the config and environment that carry them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from devagent.agent.events import InputError
from devagent.agent.settings import CoreConfig

# The transports a clone or push may use (GIT_ALLOW_PROTOCOL): never `ext` (a command) or `fd`.
ALLOWED_PROTOCOLS = "file:git:http:https:ssh"
_SCHEMES = ("https://", "http://", "ssh://", "git://", "file://")
_SCP_LIKE = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^:]")  # git@host:owner/repo
_HEX = re.compile(r"[0-9a-fA-F]{7,40}")
_CREDENTIAL_KEYS = ("token_env", "token_file", "username", "helper")


@dataclass(frozen=True, slots=True)
class RepositoryRequest:
    """What a caller asks a new session to start from: a remote, a ref there (branch, tag or
    commit), the name of a setup the operator allows ("" for its `default`, if any), and whether
    the result is pushed as a branch at the session's end (else a patch only)."""

    url: str
    ref: str
    setup: str = ""
    push: bool = False


def refused(message: str) -> InputError:
    """The error every door turns into its own protocol's refusal."""
    return InputError(message, "repository_refused")


def parse_request(value: Any, *, push: bool | None = None) -> RepositoryRequest | None:
    """A door's `repository` value: {"url", "ref", "setup"?, "push"?} (or None: not asked for).
    ValueError says what is wrong with it in words a caller understands."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError('repository must be an object: {"url": URL, "ref": REF}')
    unknown = sorted(set(value) - {"url", "ref", "setup", "push"})
    if unknown:
        raise ValueError(f"repository: unknown field(s) {', '.join(unknown)} (url, ref, setup, push)")
    url, ref, setup = value.get("url"), value.get("ref"), value.get("setup", "")
    if not isinstance(url, str) or not url.strip():
        raise ValueError("repository.url must be a non-empty string")
    if not isinstance(ref, str) or not ref.strip():
        raise ValueError("repository.ref must be a branch, tag or commit (a non-empty string)")
    if not isinstance(setup, str):
        raise ValueError("repository.setup must be the name of a setup the server allows")
    wants = value.get("push", False) if push is None else push
    if not isinstance(wants, bool):
        raise ValueError("repository.push must be true or false")
    return RepositoryRequest(url.strip(), ref.strip(), setup.strip(), wants)


def _unsafe(text: str) -> bool:
    return any(ord(c) < 0x21 or c in "\\\x7f" for c in text)


def check_url(url: str, allowed: tuple[str, ...]) -> str:
    """The URL if the operator allows it; else the refusal, saying why."""
    if not allowed:
        raise refused("this server starts no session from a repository (its repository_remotes is empty)")
    if url.startswith("-") or _unsafe(url):
        raise refused(f"repository URL {url!r}: spaces, control characters and a leading '-' are refused")
    if "::" in url.split("/", 1)[0] or url.lower().startswith(("ext::", "fd::", "file::")):
        raise refused(f"repository URL {url!r}: git's `transport::address` form is refused")
    if not (url.startswith(_SCHEMES) or _SCP_LIKE.match(url) or url.startswith("/")):
        raise refused(f"repository URL {url!r}: give https://, ssh://, git://, file:// or an absolute path")
    if url.startswith(("http://", "https://")) and urlsplit(url).password is not None:
        raise refused("repository URL: credentials in the URL are refused (the server holds its own)")
    if any(part == ".." for part in re.split(r"[/:]", url)):
        raise refused(f"repository URL {url!r}: '..' is refused")
    if not any(_matches(url, entry) for entry in allowed):
        raise refused(f"repository {url} is not among the remotes this server allows")
    return url


def _matches(url: str, entry: str) -> bool:
    """Whether `url` falls under an allow-list entry: a pattern (`*` one path segment, matching
    the whole URL) or a prefix ending at a boundary (so `https://h/team` never allows
    `https://h/team-evil`)."""
    if "*" in entry:
        pattern = "".join("[^/]*" if c == "*" else re.escape(c) for c in entry)
        return re.fullmatch(pattern + r"(\.git)?/?", url) is not None
    if not url.startswith(entry):
        return False
    return entry.endswith(("/", ":")) or len(url) == len(entry) or url[len(entry)] == "/"


def check_ref(ref: str) -> str:
    """A branch, tag or commit a caller may name: a full or abbreviated commit id, or a name git
    accepts as a ref (`git check-ref-format` rules, checked here without running git)."""
    if _HEX.fullmatch(ref):
        return ref
    bad = (
        not ref
        or ref.startswith(("-", "/", "."))
        or ref.endswith(("/", ".", ".lock"))
        or _unsafe(ref)
        or any(s in ref for s in ("..", "@{", "//", "/.", "~", "^", ":", "?", "*", "["))
        or ref == "@"
        or len(ref) > 255
    )
    if bad:
        raise refused(f"ref {ref!r} is not a branch, tag or commit name git accepts")
    return ref


def result_branch(pattern: str, session_id: str, identity: str, ref: str) -> str:
    """The branch a session's result is pushed to: the operator's pattern with `{session}` and
    `{identity}` filled in (folded to what a ref name may hold); never the ref it started from."""
    safe_id = re.sub(r"[^A-Za-z0-9._-]", "-", session_id)[:64] or "session"
    who = re.sub(r"[^A-Za-z0-9._-]", "-", identity)[:64] or "local"
    branch = pattern.replace("{session}", safe_id).replace("{identity}", who)
    check_ref(branch)
    if branch in (ref, f"refs/heads/{ref}") or branch.removeprefix("refs/heads/") == ref:
        raise refused(f"the result branch {branch} would be the ref the session started from")
    return branch.removeprefix("refs/heads/")


def check_branch_pattern(pattern: str) -> str:
    """ValueError when the operator's pattern cannot make a branch name or names no session."""
    if "{session}" not in pattern:
        raise ValueError(
            "result_branch_pattern must hold {session}, so that every session has its own branch"
        )
    try:
        result_branch(pattern, "s", "i", "")
    except InputError as e:
        raise ValueError(str(e)) from None
    return pattern


# --- setups -------------------------------------------------------------------------------------


def parse_setups(entries: tuple[str, ...]) -> dict[str, str]:
    """`repository_setup` entries, NAME=SCRIPT: SCRIPT is an absolute path to the operator's own
    script, or `repo:PATH`, a file of the repository the operator allows to run. ValueError."""
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, script = entry.partition("=")
        name, script = name.strip(), script.strip()
        if not sep or not name or not script:
            raise ValueError(f"repository_setup {entry!r}: give NAME=/path/to/script or NAME=repo:PATH")
        if script.startswith("repo:"):
            rel = script.removeprefix("repo:")
            if not rel or rel.startswith("/") or ".." in Path(rel).parts:
                raise ValueError(f"repository_setup {entry!r}: repo:PATH is a path inside the repository")
        elif not os.path.isabs(script) or not os.path.isfile(script):
            raise ValueError(f"repository_setup {entry!r}: {script} is not an absolute path to a file")
        out[name] = script
    return out


def chosen_setup(entries: tuple[str, ...], name: str) -> str:
    """The script of the setup a caller named ("" : the operator's `default`, or none)."""
    setups = parse_setups(entries)
    if not name:
        return setups.get("default", "")
    if name not in setups:
        offered = ", ".join(sorted(setups)) or "none"
        raise refused(f"setup {name!r} is not one this server allows (it offers: {offered})")
    return setups[name]


# --- credentials --------------------------------------------------------------------------------


def parse_credentials(value: Any) -> dict[str, dict[str, str]]:
    """`[git_credentials."PREFIX"]` tables: `token_env` (a variable of the server's environment
    holding a token) or `token_file`, with `username` (default `x-access-token`), or `helper` (a
    git credential helper, as git's `credential.helper` takes it). ValueError names a bad one."""
    if not isinstance(value, Mapping):
        raise ValueError('expected tables such as {"https://git.example.com/": {"token_env": "GIT_TOKEN"}}')
    out: dict[str, dict[str, str]] = {}
    for prefix, spec in value.items():
        if not isinstance(spec, Mapping) or not spec:
            raise ValueError(f"git_credentials {prefix!r}: expected a table (token_env, token_file, helper)")
        unknown = sorted(set(spec) - set(_CREDENTIAL_KEYS))
        if unknown:
            raise ValueError(f"git_credentials {prefix!r}: unknown key(s) {', '.join(unknown)}")
        if not all(isinstance(v, str) and v for v in spec.values()):
            raise ValueError(f"git_credentials {prefix!r}: every value is a non-empty string")
        ways = [k for k in ("token_env", "token_file", "helper") if k in spec]
        if len(ways) != 1:
            raise ValueError(f"git_credentials {prefix!r}: give one of token_env, token_file or helper")
        out[str(prefix)] = {str(k): str(v) for k, v in spec.items()}
    return out


@dataclass(frozen=True, slots=True)
class GitAuth:
    """What one git command gets to authenticate: `-c` options and environment variables. The
    token travels in the environment of that command alone, read by an inline credential helper
    (never on a command line, never written to the clone's config)."""

    config: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    secret: str = ""


# git asks it with `get` and the request on standard input: it answers only for the remote's own
# host, so a redirect to another host never gets the token.
_INLINE_HELPER = (
    '!f() { test "$1" = get || return 0; h=; while IFS= read -r l; do case "$l" in host=*) h="${l#host=}";; '
    'esac; done; test "$h" = "$DEVAGENT_GIT_HOST" || return 0; '
    'printf "username=%s\\npassword=%s\\n" "$DEVAGENT_GIT_USERNAME" "$DEVAGENT_GIT_TOKEN"; }; f'
)


def git_auth(url: str, credentials: Mapping[str, Mapping[str, str]], environ: Mapping[str, str]) -> GitAuth:
    """The operator's credentials for `url` (the longest matching prefix), or none. Every
    command's helpers are reset first (`credential.helper=`), so a helper from anywhere else never
    sees the remote."""
    best = max((p for p in credentials if _matches(url, p)), key=len, default=None)
    if best is None:
        return GitAuth(config=("credential.helper=",))
    spec = credentials[best]
    if "helper" in spec:
        return GitAuth(config=("credential.helper=", f"credential.helper={spec['helper']}"))
    if "token_env" in spec:
        token = environ.get(spec["token_env"], "")
        if not token:
            raise InputError(
                f"the operator's credentials for {best} name ${spec['token_env']}, which is not set",
                "repository_failed",
            )
    else:
        try:
            token = Path(spec["token_file"]).expanduser().read_text().strip()
        except OSError as e:
            raise InputError(
                f"the operator's token file for {best} cannot be read ({e.strerror})", "repository_failed"
            ) from None
    user = spec.get("username", "x-access-token")
    host = urlsplit(url).netloc.rpartition("@")[2]
    env = (("DEVAGENT_GIT_USERNAME", user), ("DEVAGENT_GIT_TOKEN", token), ("DEVAGENT_GIT_HOST", host))
    return GitAuth(
        config=("credential.helper=", f"credential.helper={_INLINE_HELPER}"), env=env, secret=token
    )


def check_repository_settings(config: CoreConfig) -> None:
    """ValueError, naming the setting, for an operator's repository setting devagent cannot use."""
    try:
        check_branch_pattern(config.result_branch_pattern)
    except ValueError as e:
        raise ValueError(f"result_branch_pattern (DEVAGENT_RESULT_BRANCH_PATTERN): {e}") from None
    try:
        parse_setups(config.repository_setup)
    except ValueError as e:
        raise ValueError(f"{e} (DEVAGENT_REPOSITORY_SETUP)") from None
    for entry in config.repository_remotes:
        if (
            not (entry.startswith(_SCHEMES) or _SCP_LIKE.match(entry) or entry.startswith("/"))
            or "::" in entry
        ):
            raise ValueError(
                f"repository_remotes (DEVAGENT_REPOSITORY_REMOTES): {entry!r} is not a URL prefix "
                "(https://, ssh://, git://, file://, user@host: or an absolute path)"
            )


def check_request(config: CoreConfig, request: RepositoryRequest) -> None:
    """Refuse, before anything is cloned, a repository, ref or setup the operator does not allow
    (a door calls this to answer with its own protocol's error at once)."""
    check_url(request.url, config.repository_remotes)
    check_ref(request.ref)
    chosen_setup(config.repository_setup, request.setup)
