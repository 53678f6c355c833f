"""`ask_user` in the web console (Debian's Chromium, headless, through Playwright, against a real
`devagent serve`): a conversation a plain A2A client started waits on the model's question; the
page shows it with a button per choice, a box for one's own words and Dismiss, and each answer
reaches the model. Screenshots go to $DEVAGENT_SCREENSHOTS when set (docs/console.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.a2a.procs import Serve, serve_argv, serving
from tests.console.conftest import CHROMIUM
from tests.console.test_console import ALICE, WAIT, plain_send, server_folders, shot, sign_in
from tests.core_helpers import ask_then_echo

pytest.importorskip("playwright.sync_api", reason="playwright is installed by scripts/test ([dev])")
from playwright.sync_api import Browser, expect

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium (installed by scripts/test)")

QUESTION = "Which colour should the button be?"
SCRIPT = {"steps": [step for n in (1, 2, 3) for step in ask_then_echo(QUESTION, ["Red", "Green"], f"q{n}")]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    base, root, script = server_folders(tmp_path_factory, "console-ask", "ask.json", SCRIPT)
    db = f"sqlite+aiosqlite:///{base / 'db.sqlite'}"
    args = serve_argv(
        db, root, f"scripted:{script}", "--approval", "yolo", "--no-sandbox", token=f"alice={ALICE}"
    )
    with serving(args, base / "serve.log") as s:
        yield s


def test_issue30_item6_a_question_answered_in_the_browser(server: Serve, browser: Browser) -> None:
    task = plain_send(server.url, "style the button")
    assert task["status"]["state"] == "input-required"
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    sign_in(page, server.url, ALICE)
    row = page.locator(".session", has_text="style the button")
    expect(row.locator(".badge")).to_have_text("waiting for an answer", timeout=WAIT)
    row.get_by_role("link").click()

    # a choice's button
    question = page.locator(".permission", has_text=QUESTION)
    expect(question).to_be_visible(timeout=WAIT)
    expect(question.get_by_role("heading")).to_have_text("devagent asks")
    shot(page, "question")
    question.get_by_role("button", name="Green", exact=True).click()
    expect(page.locator(".msg.agent", has_text="Got: The user answered: Green")).to_be_visible(timeout=WAIT)

    # one's own words
    page.get_by_label("Message, or a /command").fill("and the border?")
    page.get_by_role("button", name="Send").click()
    question = page.locator(".permission", has_text=QUESTION)
    expect(question).to_be_visible(timeout=WAIT)
    question.get_by_label("Or answer in your own words").fill("a dark teal")
    question.get_by_role("button", name="Send answer").click()
    expect(page.locator(".msg.agent", has_text="Got: The user answered: a dark teal")).to_be_visible(
        timeout=WAIT
    )

    # dismissed: the turn goes on and the model reads that it was not answered
    page.get_by_label("Message, or a /command").fill("and the text?")
    page.get_by_role("button", name="Send").click()
    question = page.locator(".permission", has_text=QUESTION)
    expect(question).to_be_visible(timeout=WAIT)
    question.get_by_role("button", name="Dismiss").click()
    expect(page.locator(".msg.agent", has_text="dismissed the question without answering")).to_be_visible(
        timeout=WAIT
    )
    expect(page.locator("#view-state")).to_have_text("idle", timeout=WAIT)
