"""The web console in a real browser (issue 23): Debian's Chromium, headless, driven by Playwright,
against a real `devagent serve` process.

One conversation walks through what a person does with the console: it is started by a plain A2A
client (no extension) and appears in the list waiting for approval; the write is approved in the
browser and lands on disk; a follow-up whose write is refused with a reason hands the model that
reason; an edit-first writes the edited content; a running command is cancelled from the page.
The model's answer and the file carry `<script>`, an `onerror` image and a `javascript:` link,
which must stay text. Another test: a wrong token sees nothing, another identity sees none of
Alice's sessions. Screenshots go to $DEVAGENT_SCREENSHOTS when set (docs/console.md uses them).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.a2a.helpers import rpc, v03_message
from tests.a2a.procs import Serve, serve_argv, serving
from tests.core_helpers import shell_call, write_call

pytest.importorskip("playwright.sync_api", reason="playwright is installed by scripts/test ([dev])")
from playwright.sync_api import Browser, Locator, Page, expect

from tests.console.conftest import CHROMIUM

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium (installed by scripts/test)")

ALICE, BOB = "tok", "tok-bob"  # `tok` is the token tests.a2a.procs checks readiness with
WAIT = 60_000  # ms a page may take to show what the server did (2 shared cores); never a pass condition
HOSTILE = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">'
CODE = 'def b():\n    return "bee" + 42  # refused later\n'
BLOCKING = "echo started; while [ ! -e never-created ]; do sleep 0.2; done"


SCRIPT = {
    "steps": [
        # started by a plain client: a write, approved in the browser
        {"items": [{"thinking": "A file to write."}, write_call("a.txt", HOSTILE + "\n", "w1")]},
        {
            "items": [
                {
                    "text": "Wrote it. **Bold**, [a link](javascript:window.__pwned=3) and "
                    "<script>window.__pwned = 4</script> stay text.\n\n- one\n- two"
                }
            ]
        },
        # a follow-up from the console: a write refused with a reason
        {"items": [write_call("b.py", CODE, "w2")]},
        {"items": [{"text": "The tool said: {last_tool_results}"}]},
        # edit first
        {"items": [write_call("e.txt", "original\n", "w3")]},
        {"items": [{"text": "Edited and written."}]},
        # a command that runs until it is cancelled
        {"items": [shell_call(BLOCKING, "s1")]},
        {"items": [{"text": "unreachable"}]},
    ]
}


def server_folders(
    tmp_path_factory: pytest.TempPathFactory, name: str, script_name: str, script: Any
) -> tuple[Path, Path, Path]:
    """A folder of the server's own (`name`): the folder itself, its workspace root `work`, and
    the scripted model's file `script_name` holding `script` (the console shows its name)."""
    base = tmp_path_factory.mktemp(name)
    root = base / "work"
    root.mkdir()
    script_file = base / script_name
    script_file.write_text(json.dumps(script))
    return base, root, script_file


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, Path]]:
    base, root, script = server_folders(tmp_path_factory, "console", "script.json", SCRIPT)
    more = ["--token", f"bob={BOB}", "--approval", "ask", "--no-sandbox"]
    db = f"sqlite+aiosqlite:///{base / 'db.sqlite'}"
    args = serve_argv(db, root, f"scripted:{script}", *more, token=f"alice={ALICE}")
    with serving(args, base / "serve.log") as s:
        yield s, root / "alice"


def shot(page: Page, name: str) -> None:
    where = os.environ.get("DEVAGENT_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(where) / f"{name}.png"), full_page=True)


def sign_in(page: Page, url: str, token: str) -> None:
    page.goto(url + "ui")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()


def plain_send(url: str, text: str) -> dict[str, Any]:
    """message/send from a client without the extension (v0.3 JSON-RPC, blocking)."""
    return plain_send_on(url, text, None)


def plain_send_on(url: str, text: str, context_id: str | None) -> dict[str, Any]:
    body = rpc("message/send", {"message": v03_message(text, context_id=context_id)})
    r = httpx.post(url, json=body, headers={"Authorization": f"Bearer {ALICE}"}, timeout=120)
    result: dict[str, Any] = r.json()["result"]
    return result


def get_task(url: str, task_id: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": task_id}}
    r = httpx.post(url, json=body, headers={"Authorization": f"Bearer {ALICE}"}, timeout=60)
    result: dict[str, Any] = r.json()["result"]
    return result


def test_issue23_a_conversation_watched_approved_and_steered_from_the_browser(
    server: tuple[Serve, Path], browser: Browser
) -> None:
    s, workspace = server
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    sign_in(page, s.url, ALICE)
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT)

    # A plain A2A client starts the conversation; it waits for a permission it cannot show.
    task = plain_send(s.url, "write the greeting file")
    assert task["status"]["state"] == "input-required"
    row = page.locator(".session", has_text="write the greeting file")
    expect(row.locator(".badge")).to_have_text("waiting for approval", timeout=WAIT)
    shot(page, "sessions")

    # Opened, it shows the request with its diff; the file's markup is text.
    row.get_by_role("link").click()
    permission = page.locator(".permission")
    expect(permission).to_contain_text("devagent asks: Write a.txt", timeout=WAIT)
    expect(permission.locator(".diff-unified")).to_contain_text("<script>window.__pwned = 1</script>")
    shot(page, "permission")
    permission.get_by_role("button", name="Side by side").click()
    expect(permission.locator(".diff-split td.add")).to_contain_text('<img src="x"')
    permission.get_by_role("button", name="Allow once").click()

    answer = page.locator(".msg.agent", has_text="Wrote it.")
    expect(answer).to_be_visible(timeout=WAIT)
    assert (workspace / "a.txt").read_text() == HOSTILE + "\n"
    # The model's markup stayed text: no script ran, no javascript: link exists.
    expect(answer.locator("strong")).to_have_text("Bold")
    expect(answer).to_contain_text("<script>window.__pwned = 4</script>")
    expect(answer).to_contain_text("[a link](javascript:window.__pwned=3)")
    assert page.locator("a[href^='javascript']").count() == 0
    assert page.evaluate("window.__pwned") is None and dialogs == []
    # The plain client's own view of its task agrees: completed, with the answer.
    assert get_task(s.url, task["id"])["status"]["state"] == "completed"

    # A follow-up from the page; its write is refused with a reason, which reaches the model.
    page.get_by_label("Message, or a /command").fill("now write b.py")
    page.get_by_role("button", name="Send").click()
    permission = page.locator(".permission", has_text="Write b.py")
    expect(permission).to_be_visible(timeout=WAIT)
    # code in a diff has syntax colour (as text: spans of the file's own characters)
    code = permission.locator(".diff-unified .add")
    expect(code.locator(".tok-kw").first).to_have_text("def")
    expect(code.locator(".tok-str")).to_have_text('"bee"')
    expect(code.locator(".tok-num")).to_have_text("42")
    expect(code.locator(".tok-com")).to_have_text("# refused later")
    expect(permission.locator(".diff-unified")).to_contain_text('return "bee" + 42  # refused later')
    shot(page, "syntax")
    permission.get_by_text("Refuse with a reason").click()
    permission.get_by_label("What should devagent do instead?").fill("use notes.md instead")
    permission.get_by_role("button", name="Refuse", exact=True).click()
    expect(page.locator(".msg.agent", has_text="The tool said:")).to_contain_text(
        "use notes.md instead", timeout=WAIT
    )
    assert not (workspace / "b.py").exists()

    # Edit first: the person's content is what is written.
    page.get_by_label("Message, or a /command").fill("write e.txt")
    page.get_by_role("button", name="Send").click()
    permission = page.locator(".permission", has_text="Write e.txt")
    expect(permission).to_be_visible(timeout=WAIT)
    permission.get_by_text("Edit before allowing").click()
    editor = permission.get_by_label("New content of e.txt")
    expect(editor).to_have_value("original\n")
    editor.fill("edited by a person\n")
    shot(page, "edit-first")
    permission.get_by_role("button", name="Allow with my changes").click()
    expect(page.locator(".msg.agent", has_text="Edited and written.")).to_be_visible(timeout=WAIT)
    assert (workspace / "e.txt").read_text() == "edited by a person\n"

    # A slash command: its output is shown (not stored in the conversation).
    page.get_by_label("Message, or a /command").fill("/st")
    expect(page.locator("#command-hint")).to_contain_text("/stats")
    page.get_by_label("Message, or a /command").fill("/stats")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg.note")).to_contain_text("model requests", timeout=WAIT)

    # A command that runs until stopped: approved, its live output shown, then cancelled.
    page.get_by_label("Message, or a /command").fill("run the watcher")
    page.get_by_role("button", name="Send").click()
    permission = page.locator(".permission", has_text="echo started")
    expect(permission).to_be_visible(timeout=WAIT)
    permission.get_by_role("button", name="Allow once").click()
    expect(page.locator(".tool pre.live")).to_contain_text("started", timeout=WAIT)
    shot(page, "running")
    page.get_by_role("button", name="Cancel turn").click()
    expect(page.locator("#view-state")).to_have_text("cancelled", timeout=WAIT)
    expect(page.locator(".tool", has_text="echo started").locator(".badge")).to_have_text(
        "cancelled", timeout=WAIT
    )
    assert not _running(BLOCKING)

    # A reload shows the same conversation (the view is read from the store).
    page.reload()
    expect(page.locator(".msg.agent", has_text="Edited and written.")).to_be_visible(timeout=WAIT)
    expect(page.locator(".msg.user", has_text="write the greeting file")).to_be_visible()
    shot(page, "session")
    page.close()


def test_issue23_an_answer_to_a_request_answered_elsewhere_is_refused_clearly(
    server: tuple[Serve, Path], browser: Browser
) -> None:
    """The page shows a waiting request; the client that started the turn answers it first; the
    page's answer is then refused with the server's reason and the view shows where things stand.
    The page's clock is held (its polling never fires), so it still shows the old request."""
    s, root = server
    for written in root.rglob("a.txt"):  # an earlier test wrote it: a new session must read it first
        written.unlink()
    task = plain_send(s.url, "another greeting")
    assert task["status"]["state"] == "input-required"
    page = browser.new_page()
    page.clock.install()
    sign_in(page, s.url, ALICE)
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT)
    page.goto(s.url + f"ui#/s/{task['contextId']}")
    permission = page.locator(".permission")
    expect(permission).to_contain_text("Write a.txt", timeout=WAIT)
    # The plain client answers on the context alone (issue 21 item 1).
    reply = plain_send_on(s.url, "yes", task["contextId"])
    assert reply["status"]["state"] == "completed"
    permission.get_by_role("button", name="Allow once").click()
    expect(page.locator("#view-status")).to_contain_text(
        "Not sent: this permission request was already answered", timeout=WAIT
    )
    expect(page.locator(".msg.agent", has_text="Wrote it.")).to_be_visible(timeout=WAIT)
    expect(page.locator(".permission")).to_have_count(0)
    page.close()


def _running(command: str) -> bool:
    """Whether a process runs `command` (the cancelled shell's process group is gone)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if command.encode() in (proc / "cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def test_issue23_wrong_token_sees_nothing_and_identities_see_only_their_own(
    server: tuple[Serve, Path], browser: Browser
) -> None:
    s, _ = server
    plain_send(s.url, "alice's private work")
    page = browser.new_page()
    sign_in(page, s.url, "not-a-token")
    expect(page.locator("#signin-error")).to_have_text(
        "That token is not accepted by this server.", timeout=WAIT
    )
    expect(page.locator("#list")).to_be_hidden()
    # Bob signs in: his list has none of Alice's sessions, and her session's page is unknown to him.
    sign_in(page, s.url, BOB)
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT)
    expect(page.locator("#sessions-empty")).to_be_visible(timeout=WAIT)
    alice = httpx.get(s.url + "ui/api/sessions", headers={"Authorization": f"Bearer {ALICE}"}).json()
    theirs = alice["sessions"][0]["context_id"]
    assert alice["total"] >= 1
    r = httpx.get(s.url + f"ui/api/sessions/{theirs}", headers={"Authorization": f"Bearer {BOB}"})
    assert r.status_code == 404
    assert httpx.get(s.url + "ui/api/sessions").status_code == 401
    page.goto(s.url + f"ui#/s/{theirs}")
    expect(page.locator("#view-status")).to_have_text("no such session", timeout=WAIT)
    page.close()


def test_issue23_page_headers_and_narrow_window(server: tuple[Serve, Path], browser: Browser) -> None:
    """A Content-Security-Policy without inline scripts, the token never in a URL, and a layout
    that fits a phone-width window."""
    s, _ = server
    r = httpx.get(s.url + "ui")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert not re.search(r"<script(?![^>]*\bsrc=)", r.text), "no inline script in the page"
    page = browser.new_page(viewport={"width": 390, "height": 844})
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    sign_in(page, s.url, ALICE)
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT)
    expect(page.locator(".session").first).to_be_visible(timeout=WAIT)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width}px wide in a 390px window"
    assert not any(ALICE in u for u in requests)
    assert page.evaluate("sessionStorage.length") == 1 and page.evaluate("localStorage.length") == 0
    shot(page, "phone")
    page.close()


# --- issue 28 item 10: a view that holds still, and says what it knows ------------------------------

NOTES = "first line\nsecond line\n"
SCRIPT28 = {
    "steps": [
        {"items": [shell_call("echo hi")]},
        {"items": [{"text": "Ran it."}]},
        {"items": [write_call("notes.txt", NOTES, "n1")]},
        {"items": [{"text": "Noted: {last_tool_results}"}]},
        {"items": [{"text": "More text after the note."}]},
        {"items": [write_call("p1.txt", "one\n", "p1"), write_call("p2.txt", "two\n", "p2")]},
        {"items": [{"text": "Both answered: {last_tool_results}"}]},
    ]
}


@pytest.fixture(scope="module")
def server28(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, Path]]:
    """A server whose model comes from DEVAGENT_MODEL (as a new user sets it), not --model."""
    base, root, script = server_folders(tmp_path_factory, "console28", "issue28.json", SCRIPT28)
    args = ["--db", f"sqlite+aiosqlite:///{base / 'db.sqlite'}", "--workspace-root", str(root)]
    args += ["--token", f"alice={ALICE}", "--approval", "ask", "--no-sandbox"]
    env = {**os.environ, "DEVAGENT_MODEL": f"scripted:{script}"}
    with serving(args, base / "serve.log", env=env) as s:
        yield s, root


def _view_fetch(context_id: str) -> Any:
    return lambda req: f"/ui/api/sessions/{context_id}" in req.url


def refreshes(page: Page, context_id: str, cycles: int) -> None:
    """Wait until the open session's view has been read and drawn `cycles` more times: the page
    asks for the next read only after it drew the previous one, so `cycles` + 1 new requests
    mean `cycles` whole refreshes (a request missed between two waits only makes the wait longer)."""
    for _ in range(cycles + 1):
        page.wait_for_event("request", _view_fetch(context_id), timeout=WAIT)


def _waiting_on_notes(url: str, workspace: Path) -> str:
    """A conversation (started by a plain client) whose command ran and whose write waits. The
    files it writes are new to it (another test's session may have written them: this one would
    have to read them first)."""
    for name in ("notes.txt", "p1.txt", "p2.txt"):
        for written in workspace.rglob(name):
            written.unlink()
    task = plain_send(url, "run echo")
    assert task["status"]["state"] == "input-required"
    context_id = str(task["contextId"])
    assert plain_send_on(url, "yes", context_id)["status"]["state"] == "completed"
    assert plain_send_on(url, "write the notes", context_id)["status"]["state"] == "input-required"
    return context_id


def open_view(browser: Browser, url: str, context_id: str) -> Page:
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    sign_in(page, url, ALICE)
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT)
    page.goto(url + f"ui#/s/{context_id}")
    expect(page.locator("#view-title")).not_to_be_empty(timeout=WAIT)
    return page


def notes_permission(browser: Browser, url: str, workspace: Path) -> tuple[Page, Locator, str]:
    """A conversation waiting for its notes.txt write, in a new page: the page, the write's
    permission card, and the conversation's context id."""
    context_id = _waiting_on_notes(url, workspace)
    page = open_view(browser, url, context_id)
    return page, page.locator(".permission", has_text="Write notes.txt"), context_id


def test_issue28_item9_the_card_says_where_a_command_runs(
    server28: tuple[Serve, Path], browser: Browser
) -> None:
    """In words on the card, not only in a button's hover title (this server: --no-sandbox)."""
    s, _ = server28
    page = open_view(browser, s.url, plain_send(s.url, "run echo")["contextId"])
    permission = page.locator(".permission", has_text="echo hi")
    expect(permission.locator(".where")).to_have_text(
        "Not sandboxed: runs as the server's user, with that user's files and network.", timeout=WAIT
    )
    shot(page, "command")
    page.close()


def test_issue28_item9_G1_the_header_names_the_model_the_server_uses(
    server28: tuple[Serve, Path], browser: Browser
) -> None:
    """The model from DEVAGENT_MODEL, a script by its file's name only (its path stays private)."""
    s, _ = server28
    page = open_view(browser, s.url, plain_send(s.url, "run echo")["contextId"])
    meta = page.locator("#view-meta")
    expect(meta).to_contain_text("scripted:issue28.json", timeout=WAIT)
    expect(meta).not_to_contain_text("default model")
    expect(meta).not_to_contain_text("/issue28.json")
    page.close()


def test_issue28_item9_the_page_says_how_to_send(server28: tuple[Serve, Path], browser: Browser) -> None:
    s, _ = server28
    page = open_view(browser, s.url, plain_send(s.url, "run echo")["contextId"])
    hint = "or press Ctrl+Enter (⌘+Enter on a Mac)"
    expect(page.locator("#send-hint")).to_have_text(hint)
    expect(page.get_by_label("Message, or a /command")).to_have_attribute("aria-describedby", "send-hint")
    page.goto(s.url + "ui#/new")
    expect(page.locator("#new-send-hint")).to_have_text(hint)
    page.close()


def test_issue28_item9_a_typed_reason_and_edit_survive_refreshes(
    server28: tuple[Serve, Path], browser: Browser
) -> None:
    s, workspace = server28
    page, permission, context_id = notes_permission(browser, s.url, workspace)
    expect(permission).to_be_visible(timeout=WAIT)
    permission.get_by_text("Edit before allowing").click()
    editor = permission.get_by_label("New content of notes.txt")
    editor.fill("my own notes\n")
    permission.get_by_text("Refuse with a reason").click()
    reason = permission.get_by_label("What should devagent do instead?")
    reason.fill("keep notes in the README")
    refreshes(page, context_id, 3)
    expect(reason).to_have_value("keep notes in the README")
    expect(reason).to_be_focused()
    expect(editor).to_have_value("my own notes\n")
    expect(editor).to_be_visible()
    # and the reason typed before the refreshes is the one the model gets
    permission.get_by_role("button", name="Refuse", exact=True).click()
    noted = page.locator(".msg.agent", has_text="Noted:")
    expect(noted).to_contain_text("keep notes in the README", timeout=WAIT)
    page.close()


def test_issue28_item9_an_expanded_call_stays_open_through_refreshes_and_new_messages(
    server28: tuple[Serve, Path], browser: Browser
) -> None:
    s, _ = server28
    task = plain_send(s.url, "run echo")
    context_id = str(task["contextId"])
    assert plain_send_on(s.url, "yes", context_id)["status"]["state"] == "completed"
    page = open_view(browser, s.url, context_id)
    call = page.locator(".tool", has_text="echo hi")
    expect(call.locator(".badge")).to_have_text("done", timeout=WAIT)
    call.locator("summary").click()
    details = call.locator("details")
    expect(details).to_have_attribute("open", "")
    # nothing new: the page reads the stored view three times and leaves it as it is
    refreshes(page, context_id, 3)
    expect(details).to_have_attribute("open", "")
    # the view's `updated` is when the session was stored (as in the list), not the time of the read
    auth = {"Authorization": f"Bearer {ALICE}"}
    view = httpx.get(s.url + f"ui/api/sessions/{context_id}", headers=auth).json()["session"]
    listed = httpx.get(s.url + "ui/api/sessions", headers=auth).json()["sessions"]
    assert view["updated"] == next(r["updated"] for r in listed if r["context_id"] == context_id)
    # the conversation grows (another client's prompt): only the new part is drawn
    plain_send_on(s.url, "write the notes", context_id)
    expect(page.locator(".permission", has_text="Write notes.txt")).to_be_visible(timeout=WAIT)
    expect(details).to_have_attribute("open", "")
    expect(call.locator("pre.output")).to_contain_text("hi")
    page.close()


def test_issue28_item9_B6_a_finished_write_shows_its_diff(
    server28: tuple[Serve, Path], browser: Browser
) -> None:
    s, workspace = server28
    page, permission, _ = notes_permission(browser, s.url, workspace)
    permission.get_by_role("button", name="Allow once").click(timeout=WAIT)
    expect(page.locator(".msg.agent", has_text="Noted:")).to_be_visible(timeout=WAIT)
    assert (workspace / "notes.txt").read_text() == NOTES
    # read again from the store: the finished write shows its diff, not its JSON arguments
    page.reload()
    call = page.locator(".tool", has_text="notes.txt")
    expect(call.locator(".badge")).to_have_text("done", timeout=WAIT)
    call.locator("summary").click()
    expect(call.locator(".diff-unified .add")).to_have_text(["+first line\n", "+second line\n"])
    expect(call.locator("pre.args")).to_have_count(0)
    shot(page, "finished-write")
    page.close()


def test_issue28_item9_the_card_of_a_sandboxed_server_says_so(tmp_path: Path, browser: Browser) -> None:
    """The same card on a server whose sandbox is on (bubblewrap), without network."""
    root = tmp_path / "work"
    root.mkdir()
    args = ["--db", f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}", "--workspace-root", str(root)]
    args += ["--token", f"alice={ALICE}", "--approval", "ask", "--sandbox"]
    env = {**os.environ, "DEVAGENT_MODEL": f"scripted:{tmp_path / 'issue28.json'}"}
    env.pop("DEVAGENT_SANDBOX_NETWORK", None)
    (tmp_path / "issue28.json").write_text(json.dumps(SCRIPT28))
    with serving(args, tmp_path / "serve.log", env=env) as s:
        page = open_view(browser, s.url, plain_send(s.url, "run echo")["contextId"])
        permission = page.locator(".permission", has_text="echo hi")
        expect(permission.locator(".where")).to_have_text(
            "Runs in the sandbox: only the workspace is writable, without network.", timeout=WAIT
        )
        page.close()


def test_issue28_item9_answering_one_request_keeps_what_is_typed_in_another(
    server28: tuple[Serve, Path], browser: Browser
) -> None:
    """Two writes wait at once; a reason typed under the second stays while the first is allowed."""
    s, workspace = server28
    context_id = _waiting_on_notes(s.url, workspace)
    assert plain_send_on(s.url, "yes", context_id)["status"]["state"] == "completed"
    assert plain_send_on(s.url, "go on", context_id)["status"]["state"] == "completed"
    assert plain_send_on(s.url, "two files", context_id)["status"]["state"] == "input-required"
    page = open_view(browser, s.url, context_id)
    first = page.locator(".permission", has_text="Write p1.txt")
    second = page.locator(".permission", has_text="Write p2.txt")
    expect(second).to_be_visible(timeout=WAIT)
    second.get_by_text("Refuse with a reason").click()
    reason = second.get_by_label("What should devagent do instead?")
    reason.fill("one file is enough")
    first.get_by_role("button", name="Allow once").click()
    expect(page.locator(".tool", has_text="Write p1.txt").locator(".badge")).to_have_text(
        "done", timeout=WAIT
    )
    expect(first).to_have_count(0)
    expect(reason).to_have_value("one file is enough")
    expect(second.get_by_role("button", name="Refuse", exact=True)).to_be_enabled(timeout=WAIT)
    second.get_by_role("button", name="Refuse", exact=True).click()
    expect(page.locator(".msg.agent", has_text="Both answered:")).to_contain_text(
        "one file is enough", timeout=WAIT
    )
    assert (workspace / "p1.txt").read_text() == "one\n" and not (workspace / "p2.txt").exists()
    page.close()
