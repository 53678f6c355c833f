"""The core's front door: every door takes what it needs from `devagent.agent.api` and from no other
module of `devagent.agent`, and that module gives each name it promises, lazily."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import devagent.agent.api as api

SRC = Path(__file__).resolve().parents[2] / "src" / "devagent"
API = "devagent.agent.api"
# What lies below the doors: the core, the store, the leaf helpers, the library patches, and the
# tracing set-up the core itself imports. Every other module of the package is door-side.
BELOW = {"agent", "store", "common", "patches", "telemetry.py"}


def door_modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] not in BELOW)


def core_imports_besides_the_api(source: str) -> list[tuple[int, str]]:
    """Each import of a `devagent.agent` module other than the API, anywhere in `source` (at the
    top, inside a function, under TYPE_CHECKING): (line, what it imports)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "devagent":
                modules = [f"devagent.{alias.name}" for alias in node.names]
            else:
                modules = [node.module]
        else:
            continue
        for module in modules:
            if (module == "devagent.agent" or module.startswith("devagent.agent.")) and module != API:
                found.append((node.lineno, module))
    return found


def test_issue39_item1_doors_import_only_the_core_api() -> None:
    doors = door_modules()
    named = {str(p.relative_to(SRC)) for p in doors}
    # the doors are really found (a wrong root would make the check pass on nothing)
    assert {"cli.py", "config.py", "a2a/executor.py", "wire/server.py", "acp/agent.py"} <= named
    assert {"mcp/server.py", "terminal/repl.py", "console/routes.py", "info.py"} <= named
    offences = [
        f"{path.relative_to(SRC)}:{line}: imports {module}"
        for path in doors
        for line, module in core_imports_besides_the_api(path.read_text())
    ]
    assert not offences, "doors import the core only through devagent.agent.api:\n" + "\n".join(offences)


def test_issue39_item1_the_check_sees_late_and_type_only_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from devagent.agent.api import AgentCore\n"
        "from devagent.common import lru\n"
        "if TYPE_CHECKING:\n"
        "    from devagent.agent.session import Session\n"
        "def f():\n"
        "    import devagent.agent.core\n"
        "    from devagent.agent import events\n"
        "    from devagent import agent\n"
    )
    assert core_imports_besides_the_api(source) == [
        (5, "devagent.agent.session"),
        (7, "devagent.agent.core"),
        (8, "devagent.agent"),
        (9, "devagent.agent"),
    ]


def _typed_names() -> dict[str, tuple[str, str]]:
    """The names api.py declares for the type checker: name -> (module, name there), from its
    `from M import A as A` lines and its `B = _m.A` lines (`_m` a module imported privately)."""
    tree = ast.parse(Path(api.__file__).read_text())
    guard = next(n for n in tree.body if isinstance(n, ast.If))
    names: dict[str, tuple[str, str]] = {}
    private: dict[str, str] = {}
    for node in guard.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.asname and alias.asname.startswith("_"):
                    private[alias.asname] = f"{node.module}.{alias.name}"
                else:
                    names[alias.asname or alias.name] = (node.module or "", alias.name)
        elif isinstance(node, ast.Assign):
            target, value = node.targets[0], node.value
            assert isinstance(target, ast.Name) and isinstance(value, ast.Attribute)
            assert isinstance(value.value, ast.Name)
            names[target.id] = (private[value.value.id], value.attr)
    return names


def test_issue39_item1_every_api_name_is_the_core_object_it_names() -> None:
    import importlib

    typed = _typed_names()
    assert typed == api._WHERE  # what the type checker sees is what a door gets
    assert "load_core" in dir(api) and set(dir(api)) == {*typed, "load_core"}
    for name, (module, attr) in typed.items():
        assert getattr(api, name) is getattr(importlib.import_module(module), attr), name
    try:
        api.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as e:
        assert "NoSuchName" in str(e)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


def test_issue39_item1_the_api_loads_no_core_module_until_a_name_is_taken() -> None:
    code = (
        "import sys, devagent.agent.api as api; "
        "core = [m for m in sys.modules if m.startswith('devagent.agent.') and m != api.__name__]; "
        "assert not core, core; "
        "from devagent.agent.api import TurnDriver, ToolCall; "
        "assert 'devagent.agent.loop.driver' in sys.modules; "
        "assert 'pydantic_ai' not in sys.modules and 'devagent.agent.session' not in sys.modules; "
        "api.load_core(); "
        "assert 'devagent.agent.session' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_issue39_item1_core_api_doc_names_every_api_name() -> None:
    doc = (SRC.parents[1] / "docs" / "core-api.md").read_text()
    missing = [name for name in dir(api) if f"`{name}`" not in doc]
    assert not missing, f"docs/core-api.md does not name {missing}"
