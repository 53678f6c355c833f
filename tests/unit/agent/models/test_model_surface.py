"""How a user meets the model's configuration and its failures (issue 28 item 15, "What to build"
item 12), from a real `python -m devagent` process against fake provider servers: a model error is
one line with the URL (an HTML page cut to its status line); `devagent info` prints the resolved
configuration without the key; `devagent info --check` tries the model once."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.html_page import HtmlNotFound
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.unit.devagent_process import devagent as run_devagent

SECRET = "sk-test-DO-NOT-SHOW-4242"


async def devagent(args: list[str], tmp_path: Path, **env: str) -> tuple[int, str, str]:
    """`devagent ARGS` in a clean environment (no keys, no DEVAGENT_* but `env`) with `tmp_path`
    as its home; exit code, stdout, stderr."""
    return await run_devagent(args, tmp_path, **{"HOME": str(tmp_path), **env})


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


async def test_issue28_item15_a_wrong_base_url_is_one_line(tmp_path: Path) -> None:
    """A base URL that reaches a web server's HTML 404 page: one line naming the URL and the
    status, no class name, no page; said once (not by a log line too)."""
    (tmp_path / "ws").mkdir()
    async with HtmlNotFound() as url:
        code, out, err = await devagent(
            ["run", "hi", "-w", "ws", "-m", "openai-compatible:m", "--base-url", url, "--api-key", SECRET],
            tmp_path,
            COLUMNS="60",  # a narrow terminal does not break the line either
        )
    # (not any "404": a random session id shown on another line may hold those digits)
    said = [
        ln
        for ln in _lines(out + err)
        if "Model error" in ln or "Not Found" in ln or "<html" in ln.lower() or "doctype" in ln.lower()
    ]
    assert code == 1, (out, err)
    assert len(said) == 1, out + err
    assert url in said[0] and "404 Not Found" in said[0], said
    assert "<" not in said[0] and "ModelNotFoundError" not in out + err and "Error (" not in out + err


async def test_issue28_item15_info_prints_the_resolved_configuration_without_the_key(tmp_path: Path) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text(f'[devagent]\nmodel = "openai:gpt-4.1"\napi_key = "{SECRET}"\nsandbox = "off"\n')
    db = f"sqlite+aiosqlite:///{tmp_path / 'info.db'}"
    roots = tmp_path / "repos"
    roots.mkdir()
    env = {"DEVAGENT_BASE_URL": "http://models.internal:8000/v1", "DEVAGENT_DB": db}
    env["CODER_AGENT_WORKSPACE_PATH"] = str(roots)
    code, out, err = await devagent(["--config", str(settings), "info"], tmp_path, **env)
    assert code == 0, err
    for shown in ("openai:gpt-4.1", "http://models.internal:8000/v1", str(settings), db, str(roots)):
        assert shown in out, (shown, out)
    assert "Shell sandbox: off" in out and "api_key: set" in out
    assert SECRET not in out + err
    code, out, err = await devagent(["--config", str(settings), "info", "--json"], tmp_path, **env)
    data = json.loads(out)
    assert data["model"]["spec"] == "openai:gpt-4.1" and data["database"] == db
    assert data["settings_file"] == str(settings) and data["workspace_roots"] == [str(roots)]
    assert data["wire_protocol_version"] and SECRET not in out


async def test_issue28_item15_info_check_tries_the_model_once(tmp_path: Path) -> None:
    ok = FakeOpenAI(lambda body: Reply(text=["ok"]))
    async with ok as url:
        env = {"DEVAGENT_MODEL": "openai-compatible:m", "DEVAGENT_BASE_URL": url, "DEVAGENT_API_KEY": SECRET}
        code, out, err = await devagent(["info", "--check"], tmp_path, **env)
    assert code == 0, (out, err)
    assert len(ok.requests) == 1 and "answered in" in out and url in out
    refused = FakeOpenAI(lambda body: Reply(status=401, error_message="invalid api key"))
    async with refused as url:
        env["DEVAGENT_BASE_URL"] = url
        code, out, err = await devagent(["info", "--check"], tmp_path, **env)
    assert code == 1 and len(refused.requests) == 1
    assert len(_lines(err)) == 1, err
    assert "401 Unauthorized: invalid api key" in err and url in err
    async with HtmlNotFound() as url:
        env["DEVAGENT_BASE_URL"] = url
        code, out, err = await devagent(["info", "--check"], tmp_path, **env)
    assert code == 1 and len(_lines(err)) == 1 and "404 Not Found" in err and "<" not in err, err
    assert SECRET not in out + err


async def test_issue37_item10_info_takes_model_flags_and_says_no_hooks_plainly(tmp_path: Path) -> None:
    """`devagent info --model M` (with `--base-url`, `--api-key`, as run and chat take them)
    resolves and checks that model; with no hooks file it says "hooks: none", never "None"."""
    ok = FakeOpenAI(lambda body: Reply(text=["ok"]))
    async with ok as url:
        args = ["info", "--model", "openai-compatible:picked", "--base-url", url, "--api-key", SECRET]
        code, out, err = await devagent([*args, "--check"], tmp_path, DEVAGENT_MODEL="openai:other")
    assert code == 0, (out, err)
    assert "spec: openai-compatible:picked" in out and "chosen_by: --model" in out and url in out
    assert [r["model"] for r in ok.requests] == ["picked"], ok.requests
    assert "hooks: none\n" in out and "None" not in out and SECRET not in out + err
    code, out, err = await devagent(["info", "--json", "--model", "openai:gpt-4.1"], tmp_path)
    data = json.loads(out)
    assert code == 0 and data["model"]["spec"] == "openai:gpt-4.1" and data["hooks"] == {"file": None}
