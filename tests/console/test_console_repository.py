"""The console and repository sessions, against a real `devagent serve` and a bare repository on
disk: the session view names the repository, the ref and the branch pushed, and its patch is made
on request (`/ui/api/sessions/CTX/patch`, never pushing); in a real browser (Debian's Chromium
through Playwright), the new-session form starts one from a repository and the page shows the
branch and, on request, the patch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import rpc, v03_message
from tests.a2a.procs import Serve, serve_argv, serving
from tests.console.conftest import CHROMIUM
from tests.core_helpers import shell_call, write_call
from tests.git_remotes import Remote, make_remote

ALICE = "tok"  # the token tests.a2a.procs checks readiness with
WAIT = 60_000  # ms a page may take to show what the server did; never a pass condition
EXT = "https://github.com/google-gemini/gemini-cli/blob/main/docs/a2a/developer-profile/v0/spec.md"
STEPS = [
    {"items": [write_call("console.txt", "from the console\n"), shell_call("echo made > made.txt")]},
    {"items": [{"text": "changed"}]},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, Path, Remote]]:
    base = tmp_path_factory.mktemp("console-repo")
    remote = make_remote(base / "remotes")
    root = base / "work"
    root.mkdir()
    script = base / "script.json"
    script.write_text(json.dumps({"steps": STEPS * 2}))
    env_file = base / "settings.toml"
    env_file.write_text(f'repository_remotes = ["{base / "remotes"}/"]\n')
    args = serve_argv(
        f"sqlite+aiosqlite:///{base / 'db.sqlite'}",
        root,
        f"scripted:{script}",
        "--approval",
        "yolo",
        "--no-sandbox",
        token=f"alice={ALICE}",
    )
    with serving(["--config", str(env_file), *args], base / "serve.log") as s:
        yield s, root, remote


def _api(s: Serve, path: str) -> Any:
    r = httpx.get(s.url + path.lstrip("/"), headers={"Authorization": f"Bearer {ALICE}"}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_issue40_item4_console_view_names_the_branch_and_makes_the_patch_on_request(
    server: tuple[Serve, Path, Remote],
) -> None:
    s, _root, remote = server
    settings = {"repository": {"url": str(remote.path), "ref": "main", "push": True}}
    body = rpc("message/send", {"message": v03_message("change it", settings=settings)})
    headers = {"Authorization": f"Bearer {ALICE}", "X-A2A-Extensions": EXT}
    task = httpx.post(s.url, json=body, headers=headers, timeout=120).json()["result"]
    assert task["status"]["state"] == "completed", task
    view = _api(s, f"/ui/api/sessions/{task['contextId']}")
    repo = view["repository"]
    assert repo["url"] == str(remote.path) and repo["ref"] == "main" and repo["base_commit"] == remote.second
    assert remote.branches()[repo["branch"]] == repo["commit"]
    before = remote.branches()
    got = _api(s, f"/ui/api/sessions/{task['contextId']}/patch")
    assert "+from the console\n" in got["patch"] and sorted(got["files"]) == ["console.txt", "made.txt"]
    assert remote.branches() == before  # viewing the patch pushes nothing


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium (installed by scripts/test)")
def test_issue40_item4_console_new_session_form_starts_from_a_repository(
    server: tuple[Serve, Path, Remote], browser: Any
) -> None:
    from playwright.sync_api import expect

    s, _root, remote = server
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.goto(s.url + "ui")
    page.get_by_label("Token").fill(ALICE)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT)
    page.goto(s.url + "ui#/new")
    page.get_by_label("What should devagent do?").fill("change it from the page")
    page.get_by_text("From a repository").click()
    page.get_by_label("Repository URL").fill(str(remote.path))
    page.get_by_label("Branch, tag or commit").fill("feature")
    page.get_by_label("Push the result as a new branch").check()
    page.get_by_role("button", name="Start").click()
    info = page.locator("#repository-info")
    expect(info).to_contain_text("pushed to branch devagent/", timeout=WAIT)
    expect(info).to_contain_text(f"{remote.path} at feature")
    page.get_by_role("button", name="Show the patch").click()
    expect(page.locator("#repository-patch")).to_contain_text("+from the console", timeout=WAIT)
    page.close()
