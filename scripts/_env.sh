# Shared by scripts/start and scripts/test: make .venv/ hold devagent and its pinned dependencies.
# Re-installs only when pyproject.toml changed since the last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"

ensure_venv() {
    local extras="$1"   # "" or "[dev]"
    if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
        echo "devagent needs Python 3.11 or newer ($PY is $("$PY" --version 2>&1))" >&2
        exit 2
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        echo "Creating $VENV ..." >&2
        "$PY" -m venv "$VENV"
    fi
    local stamp="$VENV/.devagent-installed$extras"
    local want
    want="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "Installing devagent$extras and its dependencies into $VENV ..." >&2
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT$extras" >&2
        echo "$want" > "$stamp"
    fi
}
