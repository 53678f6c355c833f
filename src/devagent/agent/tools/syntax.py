"""The syntax check of a written file: the errors a write introduced, with their lines.

Python is checked with the interpreter's own compiler (`compile`: the grammar of the Python
devagent runs on); JavaScript, TypeScript, JSON, Go, Rust, Java, C, C++, Ruby, CSS, YAML and TOML
with the tree-sitter grammars the tree-sitter project publishes (one package each, compiled in,
nothing fetched at run time), loaded on the first check of such a file. Other files are not
checked.

Only errors the write introduced are reported: the errors of the new text that the old text did
not have. A tree-sitter error is known by its kind and the text of the line it starts on, so
errors that only moved (lines added above them) are not counted again. Python's compiler stops at
the first error, so a Python file that did not compile before the write is not blamed on it.
Nothing is ever run: `compile` makes a code object and throws it away.
"""

from __future__ import annotations

import functools
import importlib
import sys
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

# Past this size a file is not checked (a generated bundle, a data dump).
MAX_CHECKED_CHARS = 1_000_000
# At most this many errors are reported for one write.
MAX_REPORTED = 5
_SHOWN_CHARS = 80

MODES = ("warn", "refuse", "off")

# The name the compiler is given: warnings it would print about the checked text (an invalid
# escape sequence, `is` with a literal) are not the server's to print.
_PY_NAME = "<devagent syntax check>"
warnings.filterwarnings("ignore", module=r"<devagent syntax check>\Z")

_PYTHON = "Python"
# suffix -> (the language as the model is told, grammar module, its function giving the language)
_GRAMMARS: dict[str, tuple[str, str, str]] = {
    ".js": ("JavaScript", "tree_sitter_javascript", "language"),
    ".mjs": ("JavaScript", "tree_sitter_javascript", "language"),
    ".cjs": ("JavaScript", "tree_sitter_javascript", "language"),
    ".jsx": ("JavaScript", "tree_sitter_javascript", "language"),
    ".ts": ("TypeScript", "tree_sitter_typescript", "language_typescript"),
    ".mts": ("TypeScript", "tree_sitter_typescript", "language_typescript"),
    ".cts": ("TypeScript", "tree_sitter_typescript", "language_typescript"),
    ".tsx": ("TSX", "tree_sitter_typescript", "language_tsx"),
    ".json": ("JSON", "tree_sitter_json", "language"),
    ".go": ("Go", "tree_sitter_go", "language"),
    ".rs": ("Rust", "tree_sitter_rust", "language"),
    ".java": ("Java", "tree_sitter_java", "language"),
    ".c": ("C", "tree_sitter_c", "language"),
    ".h": ("C++", "tree_sitter_cpp", "language"),  # C++'s grammar reads C headers too
    ".cc": ("C++", "tree_sitter_cpp", "language"),
    ".cpp": ("C++", "tree_sitter_cpp", "language"),
    ".cxx": ("C++", "tree_sitter_cpp", "language"),
    ".hh": ("C++", "tree_sitter_cpp", "language"),
    ".hpp": ("C++", "tree_sitter_cpp", "language"),
    ".hxx": ("C++", "tree_sitter_cpp", "language"),
    ".rb": ("Ruby", "tree_sitter_ruby", "language"),
    ".css": ("CSS", "tree_sitter_css", "language"),
    ".yaml": ("YAML", "tree_sitter_yaml", "language"),
    ".yml": ("YAML", "tree_sitter_yaml", "language"),
    ".toml": ("TOML", "tree_sitter_toml", "language"),
}
_PYTHON_SUFFIXES = (".py", ".pyi", ".pyw")


@dataclass(frozen=True, slots=True)
class Problem:
    """One syntax error: where it starts (1-based) and what is wrong."""

    line: int
    column: int
    message: str
    text: str  # the line it starts on, stripped and cut

    def shown(self) -> str:
        return f"line {self.line}, column {self.column}: {self.message}: `{self.text}`"


@dataclass(frozen=True, slots=True)
class Report:
    """The errors a write introduced in a file of `language` (empty: none)."""

    language: str
    problems: tuple[Problem, ...]

    def shown(self) -> str:
        lines = [f"  {p.shown()}" for p in self.problems[:MAX_REPORTED]]
        if len(self.problems) > MAX_REPORTED:
            lines.append(f"  ... and {len(self.problems) - MAX_REPORTED} more")
        return "\n".join(lines)


def language_of(path: PurePath) -> str | None:
    """The language a file is checked as, or None when it is not checked."""
    suffix = path.suffix.lower()
    if suffix in _PYTHON_SUFFIXES:
        return _PYTHON
    grammar = _GRAMMARS.get(suffix)
    return grammar[0] if grammar is not None else None


def introduced(path: PurePath, old: str | None, new: str) -> Report | None:
    """The syntax errors `new` has that `old` (None: a new file) did not, for a file at `path`;
    None when the file is not checked (its language, its size, a grammar that failed to load)."""
    if len(new) > MAX_CHECKED_CHARS or "\x00" in new:
        return None
    suffix = path.suffix.lower()
    if suffix in _PYTHON_SUFFIXES:
        return _python(old, new)
    grammar = _GRAMMARS.get(suffix)
    if grammar is None:
        return None
    return _tree_sitter(grammar, old, new)


# --- Python --------------------------------------------------------------------------------------


def _python(old: str | None, new: str) -> Report | None:
    try:
        error = _python_error(new)
        if error is None:
            return Report(_PYTHON, ())
        if old is not None and len(old) <= MAX_CHECKED_CHARS and _python_error(old) is not None:
            return Report(_PYTHON, ())  # it did not compile before either: not this write's doing
    except (ValueError, RecursionError, MemoryError):  # NUL bytes, nesting too deep to check
        return None
    return Report(_PYTHON, (error,))


def _python_error(text: str) -> Problem | None:
    try:
        compile(text, _PY_NAME, "exec", dont_inherit=True)
    except SyntaxError as e:
        line = e.lineno or 1
        lines = text.splitlines()
        shown = lines[line - 1] if 0 < line <= len(lines) else (e.text or "")
        message = f"{type(e).__name__}: {e.msg}"
        version = f"Python {sys.version_info.major}.{sys.version_info.minor}"
        return Problem(line, e.offset or 1, f"{message} ({version})", _cut(shown))
    return None


# --- tree-sitter ---------------------------------------------------------------------------------


def _tree_sitter(grammar: tuple[str, str, str], old: str | None, new: str) -> Report | None:
    language, module, function = grammar
    parser = _parser(module, function)
    if parser is None:
        return None
    found = list(_errors(parser, new))
    if not found:
        return Report(language, ())
    before: Counter[tuple[str, str]] = Counter()
    if old is not None and len(old) <= MAX_CHECKED_CHARS:
        before.update((p.message, p.text) for p in _errors(parser, old))
    fresh: list[Problem] = []
    for p in found:
        if before[(p.message, p.text)] > 0:
            before[(p.message, p.text)] -= 1
        else:
            fresh.append(p)
    return Report(language, tuple(fresh))


def _parser(module: str, function: str) -> Any:
    """A new parser of the grammar (a parser is not shared between threads), or None when the
    grammar cannot be loaded."""
    language = _language(module, function)
    if language is None:
        return None
    # late: tree-sitter is loaded by the first check of a file it parses
    from tree_sitter import Parser

    return Parser(language)


@functools.cache
def _language(module: str, function: str) -> Any:
    try:
        # late: a grammar is loaded by the first check of a file in its language
        from tree_sitter import Language

        return Language(getattr(importlib.import_module(module), function)())
    except (ImportError, AttributeError, ValueError):
        return None


def _errors(parser: Any, text: str) -> Iterator[Problem]:
    """The error and missing nodes of the text's tree, outermost first (an error node's inside
    is not searched: it is one error)."""
    source = text.encode("utf-8", errors="surrogatepass")
    lines = text.splitlines()
    tree = parser.parse(source)
    stack = [tree.root_node]
    count = 0
    while stack and count < 50:
        node = stack.pop()
        if node.is_error or node.is_missing:
            row, column = node.start_point
            shown = lines[row] if row < len(lines) else ""
            message = f"missing `{node.type}`" if node.is_missing else "syntax error"
            count += 1
            yield Problem(row + 1, column + 1, message, _cut(shown))
            continue
        if node.has_error:
            stack.extend(reversed(node.children))


def _cut(line: str) -> str:
    line = line.strip()
    return line if len(line) <= _SHOWN_CHARS else line[: _SHOWN_CHARS - 1] + "…"
