"""What a new user asked of the web console (issue 37 item 10), in Debian's Chromium (headless,
through Playwright) against a real `devagent serve`: a dark theme that follows the system and a
toggle the browser remembers; buttons that look like what they do (allow: positive, refuse:
danger, cancel: neutral, the turn's Cancel like a card's); a running command shown as the command
it runs, not as its JSON arguments; and a session's changed files, each with its diff. A command,
a file and a diff holding `<script>` and an `onerror` image stay text. Screenshots go to
$DEVAGENT_SCREENSHOTS when set (docs/console.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devagent.agent.events import FileDiff, FileDiffs, ToolCall, ToolCallStatus, ToolKind, ToolOutput
from devagent.agent.views.timeline import changed_files
from tests.a2a.procs import Serve, serve_argv, serving
from tests.console.conftest import CHROMIUM
from tests.console.test_console import (
    ALICE,
    WAIT,
    _running,
    plain_send,
    plain_send_on,
    refreshes,
    server_folders,
    shot,
    sign_in,
)
from tests.core_helpers import call, shell_call, write_call

pytest.importorskip("playwright.sync_api", reason="playwright is installed by scripts/test ([dev])")
from playwright.sync_api import Browser, Locator, Page, expect

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium (installed by scripts/test)")

LIGHT_BG, DARK_BG = "rgb(247, 247, 245)", "rgb(21, 23, 27)"  # console.css --bg of each theme
THEME_KEY = "devagent.console.theme"

# A command whose text would be markup if it were put into the page as HTML; it runs until cancelled.
COMMAND = (
    "echo '<img src=x onerror=\"window.__pwned = 5\">' && echo started\n"
    "while [ ! -e never-created-37 ]; do sleep 0.2; done  # <script>window.__pwned = 6</script>"
)
APP = '# <script>window.__pwned = 1</script>\nprint("hi")\n'
PATCH = (
    "*** Begin Patch\n*** Add File: docs/notes.md\n"
    '+<img src="x" onerror="window.__pwned = 2">\n+plain notes\n*** End Patch\n'
)
SCRIPT = {
    "steps": [{"items": [{"text": "nothing scripted for this prompt"}]}],
    "conversations": [
        {
            "first_prompt": "change files",
            "steps": [
                {"items": [write_call("app.py", APP, "c1")]},
                {"items": [call("read_file", {"path": "app.py"}, "c2")]},
                {
                    "items": [
                        call(
                            "edit",
                            {"path": "app.py", "old_string": 'print("hi")', "new_string": 'print("bye")'},
                            "c3",
                        )
                    ]
                },
                {"items": [call("apply_patch", {"input": PATCH}, "c4")]},
                {"items": [{"text": "Changed two files."}]},
            ],
        },
        {
            "first_prompt": "run the watcher",
            "steps": [{"items": [shell_call(COMMAND, "s1")]}, {"items": [{"text": "unreachable"}]}],
        },
    ],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, Path]]:
    base, root, script = server_folders(tmp_path_factory, "console37", "issue37.json", SCRIPT)
    db = f"sqlite+aiosqlite:///{base / 'db.sqlite'}"
    args = serve_argv(
        db, root, f"scripted:{script}", "--approval", "ask", "--no-sandbox", token=f"alice={ALICE}"
    )
    with serving(args, base / "serve.log") as s:
        yield s, root


def background(page: Page) -> str:
    return str(page.evaluate("getComputedStyle(document.body).backgroundColor"))


def colour(button: Locator) -> tuple[int, int, int]:
    """A button's background colour as (red, green, blue)."""
    rgb = button.evaluate("b => getComputedStyle(b).backgroundColor")
    r, g, b = (int(x) for x in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3])
    return r, g, b


def open_session(browser: Browser, url: str, context_id: str, **page_args: Any) -> Page:
    page = browser.new_page(viewport={"width": 1100, "height": 900}, **page_args)
    sign_in(page, url, ALICE)
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT)
    page.goto(url + f"ui#/s/{context_id}")
    expect(page.locator("#view-title")).not_to_be_empty(timeout=WAIT)
    return page


def approved_to_the_end(url: str, text: str) -> str:
    """A conversation a plain A2A client starts and allows every request of ("yes"), to its end."""
    task = plain_send(url, text)
    context_id = str(task["contextId"])
    for _ in range(10):
        if task["status"]["state"] != "input-required":
            break
        task = plain_send_on(url, "yes", context_id)
    assert task["status"]["state"] == "completed", task["status"]
    return context_id


def test_issue37_item10_dark_theme_follows_the_system_and_a_remembered_toggle(
    server: tuple[Serve, Path], browser: Browser
) -> None:
    s, _ = server
    # a browser whose system asks for dark colours gets them, with nothing stored
    page = browser.new_page(viewport={"width": 1100, "height": 900}, color_scheme="dark")
    sign_in(page, s.url, ALICE)
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT)
    assert background(page) == DARK_BG
    toggle = page.get_by_role("button", name="Dark theme", exact=True)
    expect(toggle).to_have_attribute("aria-pressed", "true")
    assert page.evaluate("localStorage.length") == 0
    # the system turns light: the page follows (no choice was made)
    page.emulate_media(color_scheme="light")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    assert background(page) == LIGHT_BG
    page.close()

    # a light system: the toggle chooses dark, which this browser remembers through a reload
    page = browser.new_page(viewport={"width": 1100, "height": 900}, color_scheme="light")
    sign_in(page, s.url, ALICE)
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT)
    assert background(page) == LIGHT_BG
    toggle = page.get_by_role("button", name="Dark theme", exact=True)
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    assert background(page) == DARK_BG
    assert page.evaluate(f"localStorage.getItem('{THEME_KEY}')") == "dark"
    page.reload()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT)
    assert background(page) == DARK_BG
    # toggled back to the system's theme, the choice is forgotten: the system is followed again
    page.get_by_role("button", name="Dark theme", exact=True).click()
    expect(page.locator("html")).to_have_attribute("data-theme", "light")
    assert background(page) == LIGHT_BG
    assert page.evaluate("localStorage.length") == 0
    page.emulate_media(color_scheme="dark")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert background(page) == DARK_BG
    page.close()


def test_issue37_item10_buttons_say_what_they_do_and_a_running_command_shows_as_a_command(
    server: tuple[Serve, Path], browser: Browser
) -> None:
    s, _ = server
    task = plain_send(s.url, "run the watcher")
    assert task["status"]["state"] == "input-required"
    page = open_session(browser, s.url, str(task["contextId"]))
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    card = page.locator(".permission", has_text="started")
    expect(card.locator("pre.command")).to_have_text(COMMAND, timeout=WAIT)

    # allow: positive (green); reject for good and refuse: danger (red); a plain cancel: neutral
    allow = card.get_by_role("button", name="Allow once")
    always = card.get_by_role("button", name="Allow always")
    cancel = card.get_by_role("button", name="Cancel", exact=True)
    reject = card.get_by_role("button", name="Reject always")
    expect(allow).to_have_class("allow")
    expect(always).to_have_class("allow secondary")
    expect(cancel).to_have_class("neutral")
    expect(reject).to_have_class("danger")
    card.get_by_text("Refuse with a reason").click()
    refuse = card.get_by_role("button", name="Refuse", exact=True)
    expect(refuse).to_have_class("danger")
    allowed = r, g, b = colour(allow)
    assert g > r and g > b, f"Allow once is not green: {(r, g, b)}"
    for danger in (reject, refuse):
        r, g, b = colour(danger)
        assert r > g and r > b, f"a refusal is not red: {(r, g, b)}"
    expect(card.get_by_role("heading")).to_have_text("devagent asks to run a command")
    page.emulate_media(color_scheme="dark")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    shot(page, "dark-buttons")
    page.emulate_media(color_scheme="light")

    # allowed, the command runs: shown as the command, in a monospace block, not as JSON
    allow.click()
    tool = page.locator(".tool", has_text="started")
    expect(tool.locator("pre.live")).to_contain_text("started", timeout=WAIT)
    expect(tool.locator("pre.command")).to_have_text(COMMAND)
    expect(tool.locator(".tool-desc")).to_have_text(COMMAND.split("\n")[0] + " …")
    expect(tool.locator("pre.args")).to_have_count(0)
    font = tool.locator("pre.command").evaluate("n => getComputedStyle(n).fontFamily")
    assert "monospace" in font
    shot(page, "running-command")

    # the turn's Cancel looks like a card's Cancel: neutral
    stop = page.get_by_role("button", name="Cancel turn")
    expect(stop).to_have_class("neutral")
    assert colour(stop) != allowed
    stop.click()
    expect(page.locator("#view-state")).to_have_text("cancelled", timeout=WAIT)
    assert not _running("never-created-37")
    # read again from the store, the cancelled call still shows its command as a command
    page.reload()
    tool = page.locator(".tool", has_text="started")
    expect(tool.locator(".badge")).to_have_text("cancelled", timeout=WAIT)
    tool.locator("summary").click()
    expect(tool.locator("pre.command")).to_have_text(COMMAND)
    # the command's markup stayed text
    assert page.locator("#app img, #conversation script").count() == 0
    assert page.evaluate("window.__pwned") is None and dialogs == []
    page.close()


def test_issue37_item10_a_sessions_changed_files_with_their_diffs(
    server: tuple[Serve, Path], browser: Browser
) -> None:
    s, workspace = server
    context_id = approved_to_the_end(s.url, "change files")
    # the view lists each file once, with every change's diff (the core's read model)
    auth = {"Authorization": f"Bearer {ALICE}"}
    view = httpx.get(s.url + f"ui/api/sessions/{context_id}", headers=auth, timeout=60).json()
    assert (workspace / "app.py").read_text() == APP.replace('"hi"', '"bye"')
    files = {Path(f["path"]).name: f for f in view["changed_files"]}
    assert list(files) == ["app.py", "notes.md"]
    assert files["app.py"]["changes"] == 2 and files["notes.md"]["changes"] == 1
    assert '+print("bye")' in files["app.py"]["diff"] and '-print("hi")' in files["app.py"]["diff"]

    dialogs: list[str] = []
    page = open_session(browser, s.url, context_id)
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    panel = page.locator("#changes")
    expect(panel.get_by_role("heading")).to_have_text("Changed files (2)", timeout=WAIT)
    rows = panel.locator(".changed-file")
    expect(rows.locator(".path")).to_have_text(["app.py", "docs/notes.md"])
    app = rows.filter(has_text="app.py")
    expect(app.locator("summary")).to_contain_text("+3 −1 · 2 changes")
    app.locator("summary").click()
    diff = app.locator(".diff-unified")
    expect(diff.locator(".add")).to_contain_text(
        ["+# <script>window.__pwned = 1</script>\n", '+print("hi")\n', '+print("bye")\n']
    )
    expect(diff.locator(".del")).to_have_text(['-print("hi")\n'])
    notes = rows.filter(has_text="notes.md")
    notes.locator("summary").click()
    expect(notes.locator(".diff-unified .add").first).to_have_text(
        '+<img src="x" onerror="window.__pwned = 2">\n'
    )
    shot(page, "changed-files")
    # an opened file stays open while the page reads the session again
    refreshes(page, context_id, 2)
    expect(app.locator("details")).to_have_attribute("open", "")
    # another tool's arguments read as names and values, not JSON
    read = page.locator(".tool", has_text="Read app.py")
    read.locator("summary").click()
    expect(read.locator(".params dt")).to_have_text(["path"])
    expect(read.locator(".params dd")).to_have_text(["app.py"])
    expect(read.locator("pre.args")).to_have_count(0)
    # the diffs' markup stayed text
    assert panel.locator("script, img").count() == 0
    assert page.evaluate("window.__pwned") is None and dialogs == []

    # a dark system shows the same panel in dark colours
    page.close()
    page = open_session(browser, s.url, context_id, color_scheme="dark")
    expect(page.locator("#changes .changed-file")).to_have_count(2, timeout=WAIT)
    page.locator("#changes .changed-file", has_text="app.py").locator("summary").click()
    assert background(page) == DARK_BG
    shot(page, "dark-changed-files")
    page.close()


def _edit(cid: str, status: ToolCallStatus, *diffs: FileDiff) -> ToolCall:
    diff = diffs[0] if len(diffs) == 1 else FileDiffs(list(diffs))
    return ToolCall(cid, "edit", {}, ToolKind.EDIT, status=status, output=ToolOutput("ok", diff=diff))


def test_issue37_item10_changed_files_are_per_file_in_first_change_order() -> None:
    """The read model behind the panel: a patch's files each on their own, a file changed twice
    once with both diffs, calls that did not succeed left out."""

    def diff(path: str, line: str) -> FileDiff:
        unified = f"--- a/{path}\n+++ b/{path}\n@@ -0,0 +1 @@\n+{line}\n"
        return FileDiff(Path(path).name, path, None, "", unified)

    items = [
        _edit("1", ToolCallStatus.SUCCEEDED, diff("/w/b.py", "one")),
        _edit("2", ToolCallStatus.SUCCEEDED, diff("/w/a.py", "two"), diff("/w/b.py", "three")),
        _edit("3", ToolCallStatus.CANCELLED, diff("/w/c.py", "never")),
        _edit("4", ToolCallStatus.EXECUTING, diff("/w/c.py", "not yet")),
    ]
    files = changed_files(items)
    assert [f.path for f in files] == ["/w/b.py", "/w/a.py"]
    assert [len(f.changes) for f in files] == [2, 1]
    both = files[0].formatted_diff
    assert "+one\n" in both and both.index("+one\n") < both.index("+three\n")  # oldest first
