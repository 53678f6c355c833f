"""Whether bubblewrap works on this machine: it needs namespaces, which containers may refuse.
Found out once per process and user, by running `true` in it."""

from __future__ import annotations

import functools
import shutil
import subprocess

from devagent.agent.sandbox.local import Bubblewrap

INSTALL_HINT = "apt-get install bubblewrap"
USERNS_HINT = (
    "allow user namespaces (sysctl kernel.unprivileged_userns_clone=1; in Docker "
    "--security-opt seccomp=unconfined --security-opt apparmor=unconfined) or start with --no-sandbox"
)
PROBE_TIMEOUT = 30.0


@functools.cache
def probe_bwrap(user: tuple[int, int, str] | None = None) -> Bubblewrap | str:
    """Whether bubblewrap works on this machine (it needs namespaces, which containers may
    refuse): a Bubblewrap, or why not with the fix. Runs `true` in it, once per process and user:
    as this process's user, or for a root server as `user` (bwrap run by root, else, where root
    cannot make namespaces, by `user` itself)."""
    path = shutil.which("bwrap")
    if path is None:
        return f"bwrap not installed: {INSTALL_HINT}"
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"bwrap does not run here ({e}): {USERNS_HINT}"
    failed: list[str] = []
    for as_user in (False, True) if user is not None else (False,):
        sandbox = Bubblewrap(path, out.stdout.strip(), user=user, as_user=as_user)
        why = _try(sandbox)
        if why is None:
            return sandbox
        failed.append(f"as {user[2]}: {why}" if as_user and user is not None else why)
    return f"bwrap cannot create its sandbox here ({'; '.join(failed)}): {USERNS_HINT}"


def _try(sandbox: Bubblewrap) -> str | None:
    """Why `sandbox` cannot run `true`, or None when it can."""
    try:
        run = subprocess.run(
            sandbox.argv([], "/", ["true"]),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=False,
            cwd="/",
            **sandbox.run_as(),
        )
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    if run.returncode == 0:
        return None
    lines = run.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit code {run.returncode}"
