"""devagent's own exceptions share one base, and the tool error types the docs list are exactly the
enumeration's values."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

from devagent.agent.events import ToolErrorType
from devagent.common.errors import DevagentError

SRC = Path(__file__).resolve().parents[2] / "src" / "devagent"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "tools.md"
# runs as a program of its own (`python -I -S html_text.py`): nothing of devagent on its path
OUTSIDE = {("agent/tools/html_text.py", "_Full")}
_BUILTIN_ERRORS = {
    n
    for n in dir(builtins)
    if isinstance(getattr(builtins, n), type) and issubclass(getattr(builtins, n), BaseException)
}


def _exception_classes() -> dict[tuple[str, str], list[str]]:
    """Each class in src/devagent that derives from an exception (by name, through the project's
    own classes too): (module path, name) -> its bases as written."""
    classes: dict[tuple[str, str], list[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                classes[(path.relative_to(SRC).as_posix(), node.name)] = bases
    errors = set(_BUILTIN_ERRORS) | {"ToolError"}  # the MCP SDK's, which DoorError extends
    found: dict[tuple[str, str], list[str]] = {}
    grew = True
    while grew:
        grew = False
        for key, bases in classes.items():
            if key not in found and any(b in errors for b in bases):
                found[key] = bases
                errors.add(key[1])
                grew = True
    return found


def test_issue39_item5_every_exception_class_derives_from_devagent_error() -> None:
    found = _exception_classes()
    assert len(found) > 20  # the walk found the project's exceptions at all
    ours = {name for (_, name) in found} - {"DevagentError"}
    outside = []
    for (module, name), bases in found.items():
        if name == "DevagentError" or (module, name) in OUTSIDE:
            continue
        # derives from the base directly, or from one of the project's own exceptions
        if not any(b == "DevagentError" or b in ours for b in bases):
            outside.append(f"{module}: {name}({', '.join(bases)})")
    assert outside == []


def test_issue39_item5_builtin_kinds_kept_beside_the_base() -> None:
    from devagent.agent.sandbox.confine import Outside
    from devagent.config import ConfigError
    from devagent.wire.messages import ParamsError

    for kind, builtin in ((ConfigError, ValueError), (ParamsError, ValueError), (Outside, OSError)):
        assert issubclass(kind, DevagentError) and issubclass(kind, builtin)


def test_issue39_item5_tool_error_types_are_the_docs_table() -> None:
    text = DOCS.read_text()
    section = text.split("\n## Error types\n", 1)[1].split("\n## ", 1)[0]
    listed: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            listed.update(re.findall(r"`([a-z_]+)`", first))
    assert listed == {t.value for t in ToolErrorType}


def test_issue39_item5_tool_error_types_serialise_as_their_plain_values() -> None:
    import json

    from devagent.agent.state import CallResult

    result = CallResult.error("no", ToolErrorType.NOT_FOUND)
    assert type(result.error_type) is str and result.error_type == "not_found"
    assert json.dumps({"type": ToolErrorType.INVALID_ARGUMENTS}) == '{"type": "invalid_arguments"}'
