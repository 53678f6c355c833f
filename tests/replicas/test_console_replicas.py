"""The web console on several replicas (issue 23 item 4): two `devagent serve` processes on one
PostgreSQL database behind the round-robin balancer. A plain client's session started through one
replica is approved in a page served by the other; a command that page lets run is followed live
in a second page on the other replica (A2A's SubscribeToTask, through the replicas' event fan-out)
and cancelled from there."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from tests.a2a.helpers import TOKEN, rpc, v03_message
from tests.replicas.conftest import StartCluster

pytest.importorskip("playwright.async_api", reason="playwright is installed by scripts/test ([dev])")
from playwright.async_api import Page, async_playwright, expect

from tests.conftest import Script
from tests.core_helpers import shell_call, write_call

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium (installed by scripts/test)"),
]
# Prints a line every 0.2 s for two minutes (output a page that subscribes later still sees come in).
TICKS = "echo started; for i in $(seq 600); do echo tick $i; sleep 0.2; done"
WAIT = 60_000  # ms: how long a page may take to show what the servers did; never a pass condition

STEPS = [
    {"items": [write_call("hello.txt", "hi\n", "w1")]},
    {"items": [{"text": "I wrote hello.txt."}]},
    {"items": [shell_call(TICKS, "s1")]},
    {"items": [{"text": "unreachable"}]},
]


async def sign_in(page: Page, url: str) -> None:
    await page.goto(url + "ui")
    await page.get_by_label("Token").fill(TOKEN)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT)


async def test_issue23_console_on_two_replicas(
    script: Script, start_cluster: StartCluster, workspace: Path
) -> None:
    cl = await start_cluster(script(STEPS), n=2)
    one, two = (r.url for r in cl.replicas)
    body = rpc("message/send", {"message": v03_message("write hello")})
    async with httpx.AsyncClient(timeout=120) as c:
        r = await c.post(two, json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    task = r.json()["result"]
    assert task["status"]["state"] == "input-required"

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            # Through the balancer: every request of the page to the next replica.
            page = await browser.new_page()
            await sign_in(page, cl.url)
            row = page.locator(".session", has_text="write hello")
            await expect(row.locator(".badge")).to_have_text("waiting for approval", timeout=WAIT)
            await page.close()

            # Replica one approves what replica two's client started.
            first = await browser.new_page()
            await sign_in(first, one)
            await first.goto(one + f"ui#/s/{task['contextId']}")
            permission = first.locator(".permission")
            await expect(permission).to_contain_text("Write hello.txt", timeout=WAIT)
            await permission.get_by_role("button", name="Allow once").click()
            await expect(first.locator(".msg.agent", has_text="I wrote hello.txt.")).to_be_visible(
                timeout=WAIT
            )
            assert (workspace.parent / "hello.txt").read_text() == "hi\n"

            # A command started from replica one's page, followed live from replica two's.
            await first.get_by_label("Message, or a /command").fill("run it")
            await first.get_by_role("button", name="Send").click()
            permission = first.locator(".permission", has_text="echo started")
            await expect(permission).to_be_visible(timeout=WAIT)
            await permission.get_by_role("button", name="Allow once").click()
            await expect(first.locator(".tool pre.live")).to_contain_text("started", timeout=WAIT)

            second = await browser.new_page()
            await sign_in(second, two)
            await second.goto(two + f"ui#/s/{task['contextId']}")
            await expect(second.locator("#view-state")).to_have_text("running", timeout=WAIT)
            await expect(second.locator(".tool pre.live")).to_contain_text("tick", timeout=WAIT)
            await second.get_by_role("button", name="Cancel turn").click()
            for page in (first, second):
                await expect(page.locator("#view-state")).to_have_text("cancelled", timeout=WAIT)
        finally:
            await browser.close()
