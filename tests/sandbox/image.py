"""The small image the container-backend tests and bench run their sessions in.

No registry is reachable from the test machines, so the image is built here from Debian's own
packages: `debootstrap --variant=minbase` into a temporary root, a non-root user `agent` (uid
1000) and an empty /workspace owned by it added, then `tar | podman import`. The tag carries a hash
of the recipe, so the image is built once per machine and reused from the engine's image store
(which persists) until the recipe changes. Run it alone to build it ahead of the tests:

    .venv/bin/python tests/sandbox/image.py
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NAME = "devagent-test-sandbox"
SUITE = "bookworm"
PACKAGES = ("python3", "git", "bash", "coreutils", "procps")
USER, UID = "agent", 1000
FALLBACK_MIRROR = "http://deb.debian.org/debian"
# Bumped whenever what the build does to the root changes, so the tag changes with it.
RECIPE_VERSION = "1"


def tag() -> str:
    """The image's name with a tag that changes whenever its recipe does."""
    recipe = "|".join((RECIPE_VERSION, SUITE, ",".join(PACKAGES), USER, str(UID)))
    return f"{NAME}:{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def debian_mirror() -> str:
    """The Debian mirror this machine's apt uses (deb822 sources first, then sources.list)."""
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        found = re.search(r"^URIs:\s*(\S+/debian)\s*$", _text(path), re.MULTILINE)
        if found:
            return found.group(1)
    found = re.search(
        r"^deb\s+(?:\[[^]]*\]\s+)?(\S+/debian)\s", _text(Path("/etc/apt/sources.list")), re.MULTILINE
    )
    return found.group(1) if found else FALLBACK_MIRROR


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def exists(engine: str = "podman") -> bool:
    return subprocess.run([engine, "image", "inspect", tag()], capture_output=True).returncode == 0


def changes() -> list[str]:
    """The image's settings as `import --change` takes them, in the Dockerfile form both engines
    accept (Docker refuses Podman's USER=agent)."""
    return ["--change", f"USER {USER}", "--change", "WORKDIR /workspace"]


def ensure(engine: str = "podman") -> str:
    """The image's tag, building it first when the engine does not have it. A lock in /tmp keeps
    two test processes from building it at once."""
    if exists(engine):
        return tag()
    with open(Path(tempfile.gettempdir()) / f"{NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not exists(engine):
            build(engine)
    return tag()


def build(engine: str | list[str] = "podman", env: dict[str, str] | None = None) -> float:
    """Builds the image (`engine`: its program, or its command line); returns how long it took,
    in seconds. `env`: the engine client's environment (Docker's DOCKER_HOST)."""
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is not installed (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise RuntimeError(f"debootstrap needs root: build {tag()} once as root (tests/sandbox/image.py)")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="devagent-image-") as temp:
        root = Path(temp) / "root"
        include = ",".join(PACKAGES)
        subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={include}", SUITE, str(root), debian_mirror()],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        _add_user(root)
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (root / cache).glob("*.deb"):
                item.unlink()
        tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        client = [engine] if isinstance(engine, str) else engine
        subprocess.run(
            [*client, "import", *changes(), "-", tag()],
            stdin=tar.stdout,
            check=True,
            stdout=subprocess.DEVNULL,
            env=env,
        )
        if tar.stdout is not None:
            tar.stdout.close()
        if tar.wait() != 0:
            raise RuntimeError("tar of the image root failed")
    return time.monotonic() - started


def _add_user(root: Path) -> None:
    """The image's own unprivileged user, and /workspace owned by it (a new named volume mounted
    there takes the folder's owner)."""
    with open(root / "etc/passwd", "a") as passwd:
        passwd.write(f"{USER}:x:{UID}:{UID}:devagent sandbox:/workspace:/bin/bash\n")
    with open(root / "etc/group", "a") as group:
        group.write(f"{USER}:x:{UID}:\n")
    with open(root / "etc/shadow", "a") as shadow:
        shadow.write(f"{USER}:!:19000:0:99999:7:::\n")
    workspace = root / "workspace"
    workspace.mkdir(exist_ok=True)
    os.chown(workspace, UID, UID)


if __name__ == "__main__":
    engine = sys.argv[1] if len(sys.argv) > 1 else "podman"
    if exists(engine):
        print(f"{tag()} already built")
    else:
        seconds = build(engine)
        print(f"built {tag()} in {seconds:.1f} s")
