"""What the working tree held when a session started: `git status` (branch and changed files) and
the last few commits, for the prompt's environment section.

git runs programs its configuration names (`core.fsmonitor`, a filter's `clean` command while it
refreshes the index), and a workspace's configuration is not trusted. So git runs here with no
system or global configuration, with every key of `gitguard.NEUTRAL_KEYS` turned off, with every
diff, filter and merge driver the repository names turned off, without writing the index (no
optional locks), and with a short deadline. Names are quoted by git (`core.quotePath`) and every
character that is not printable is escaped again here, so a file's name stays on its line."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from devagent.agent.sandbox.gitguard import DRIVER_KEYS, NEUTRAL_KEYS

DEADLINE = 3.0  # seconds for the git commands together; a slower repository gets no snapshot
MAX_STATUS_LINES = 20
MAX_COMMITS = 5
MAX_LINE = 200


@dataclass(frozen=True, slots=True)
class Snapshot:
    branch: str  # git's `## ...` line without its marks: the branch and how it stands to upstream
    changes: list[str]  # `XY path` lines, capped
    more: int  # changed files left out
    commits: list[str]  # `abbreviated-hash subject`, newest first

    def describe(self) -> str:
        """Indented lines to follow the prompt's Git line."""
        lines = [f"  Branch when this session started: {self.branch}"]
        if self.changes:
            lines.append("  Uncommitted changes then (`git status --short`; the user's, not yours):")
            lines += [f"    {line}" for line in self.changes]
            if self.more:
                lines.append(f"    ... and {self.more} more")
        else:
            lines.append("  The working tree was clean then.")
        if self.commits:
            lines.append("  Recent commits:")
            lines += [f"    {line}" for line in self.commits]
        return "\n".join(lines)


def printable(text: str) -> str:
    """`text` with every character that is not printable written as an escape, cut to a line."""
    out = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return out if len(out) <= MAX_LINE else out[: MAX_LINE - 3] + "..."


def _base_env() -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ALLOW_PROTOCOL": "",
    }
    return _with_config(env, [*NEUTRAL_KEYS, ("core.quotePath", "true")])


def _with_config(env: dict[str, str], keys: list[tuple[str, str]]) -> dict[str, str]:
    env = dict(env)
    env["GIT_CONFIG_COUNT"] = str(len(keys))
    for i, (key, value) in enumerate(keys):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def _git(root: Path, env: dict[str, str], until: float, *args: str) -> str | None:
    """git's output, or None when it failed, did not end by `until` (monotonic) or is not
    installed."""
    left = until - time.monotonic()
    if left <= 0:
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=left,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", errors="replace")


def _safe_env(root: Path, until: float) -> dict[str, str]:
    """The environment git runs in for `root`: the fixed keys, then each driver key the
    repository names, turned off."""
    env = _base_env()
    listed = _git(root, env, until, "config", "--includes", "--name-only", "--get-regexp", DRIVER_KEYS)
    if listed is None:  # no driver keys (git exits 1), or git cannot read the configuration
        listed = ""
    drivers = [(key, "") for key in listed.splitlines() if key]
    keys = [*NEUTRAL_KEYS, ("core.quotePath", "true"), *drivers]
    return _with_config(env, keys)


def take_snapshot(root: Path) -> Snapshot | None:
    """The status of the repository `root` is in, or None when git cannot tell it safely and soon."""
    until = time.monotonic() + DEADLINE
    env = _safe_env(root, until)
    status = _git(root, env, until, "status", "--porcelain=v1", "--branch", "--ignore-submodules=all")
    if status is None:
        return None
    lines = status.splitlines()
    branch = lines[0][3:] if lines and lines[0].startswith("## ") else "branch unknown"
    changes = [printable(line) for line in lines[1:] if line]
    log = _git(root, env, until, "log", f"-n{MAX_COMMITS}", "--no-show-signature", "--format=%h %s")
    return Snapshot(
        branch=printable(branch),
        changes=changes[:MAX_STATUS_LINES],
        more=max(0, len(changes) - MAX_STATUS_LINES),
        commits=[printable(line) for line in (log or "").splitlines() if line],
    )
