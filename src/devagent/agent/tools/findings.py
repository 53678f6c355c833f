"""What a checker found in a file (the data diagnostics.py compares before and after a write):
plain values, so the tool context, the checkers and the language-server client can name them
without importing the diagnostics machinery."""

from __future__ import annotations

from dataclasses import dataclass

_SHOWN_CHARS = 200


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding of a checker: its line (1-based), what it says, its code ("" when none) and
    whether it is an error (else a warning)."""

    line: int
    message: str
    code: str = ""
    error: bool = True

    def as_json(self) -> dict[str, str | int]:
        severity = "error" if self.error else "warning"
        return {"line": self.line, "message": self.message, "code": self.code, "severity": severity}

    def shown(self) -> str:
        kind = "error" if self.error else "warning"
        code = f" [{self.code}]" if self.code else ""
        message = " ".join(self.message.split())
        if len(message) > _SHOWN_CHARS:
            message = message[: _SHOWN_CHARS - 1] + "…"
        return f"line {self.line}: {kind}{code}: {message}"


@dataclass(frozen=True, slots=True)
class Findings:
    """What one checker (`source`: "ruff", "basedpyright", ...) said of the old text (None: a new
    file) and of the new one; `note` says why it said nothing (missing, failed, too slow)."""

    source: str
    before: tuple[Diagnostic, ...] | None = None
    after: tuple[Diagnostic, ...] = ()
    note: str = ""
