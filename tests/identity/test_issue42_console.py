"""Issue 42 item 3 (and 4 in the console): the console signs people in through the identity
provider as a relying party (authorization code + PKCE, state and nonce), against a real
`devagent serve` process and a real provider: the session cookie HttpOnly and SameSite=Lax (no
Secure over plain http), accepted only with the console's own header, a forged or replayed
callback refused, sign-out clearing it; an operator of the provider's roles sees every
identity's sessions, a member only their own. Then in headless Chromium: the button, the
provider's login page, back in the console signed in as an operator who opens another identity's
session read-only, signed out."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from tests.a2a.helpers import auth, rpc, v03_message
from tests.a2a.procs import Serve, serve_argv, serving
from tests.conftest import Script
from tests.identity.conftest import CLIENTS, ROLES
from tests.identity.idp import Idp, running_idp

CONSOLE = ("console", "console-secret", "http://127.0.0.1/ui/callback")
HEADER = {"X-Devagent-Console": "1"}


@contextmanager
def idp_and_server(
    tmp_path: Path,
    sqlite_url: str,
    model: str,
    groups: dict[str, list[str]] | None = None,
    more_env: dict[str, str] | None = None,
) -> Iterator[tuple[Idp, Serve]]:
    with running_idp(tmp_path, CLIENTS, ROLES, console=CONSOLE, groups=groups) as idp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEVAGENT_")}
        env |= {
            "DEVAGENT_OIDC_ISSUER": idp.issuer,
            "DEVAGENT_OIDC_CLIENT_ID": CONSOLE[0],
            "DEVAGENT_OIDC_CLIENT_SECRET": CONSOLE[1],
            "DEVAGENT_OIDC_ROLES_CLAIM": "roles",
            **(more_env or {}),
        }
        root = tmp_path / "root"
        root.mkdir()
        args = serve_argv(sqlite_url, root, model, "--no-sandbox", token="ci=tok")
        with serving(args, tmp_path / "serve.log", env=env) as srv:
            yield idp, srv


def sign_in(idp: Idp, srv: Serve, user: str) -> httpx.Client:
    """A browser's sign-in, step by step: the console's /ui/login, the provider's pages, the
    console's callback. The client returned holds the console's cookie."""
    ua = httpx.Client(timeout=60)
    r = ua.get(srv.url + "ui/login")
    assert r.status_code == 302, r.text
    asked = parse_qs(urlsplit(r.headers["location"]).query)
    assert asked["code_challenge_method"] == ["S256"] and asked["code_challenge"][0]
    assert asked["state"][0] and asked["nonce"][0] and asked["resource"] == [srv.url.rstrip("/")]
    login_cookie = r.headers["set-cookie"].lower()
    assert (
        "httponly" in login_cookie and "samesite=lax" in login_cookie and "path=/ui/callback" in login_cookie
    )
    back = idp.log_in(r.headers["location"], user, srv.url + "ui/callback")
    r = ua.get(srv.url + "ui/callback?" + urlencode(back))
    assert r.status_code == 302 and r.headers["location"] == "/ui/", r.text
    session = next(c for c in r.headers.get_list("set-cookie") if c.startswith("devagent_console="))
    attrs = session.lower()
    assert "httponly" in attrs and "samesite=lax" in attrs and "path=/" in attrs and "secure" not in attrs
    ua.headers["x-test-callback"] = urlencode(back)  # what a replay would send again
    return ua


def test_issue42_item3_console_signs_in_through_the_idp(
    tmp_path: Path, sqlite_url: str, script: Script
) -> None:
    with idp_and_server(tmp_path, sqlite_url, script([[{"text": "alice's answer"}]])) as (idp, srv):
        erin = sign_in(idp, srv, "erin")
        me = erin.get(srv.url + "ui/api/me", headers=HEADER).json()
        assert me["identity"] == "oidc:erin" and me["operator"] is False, me
        # the cookie alone (another site's request could carry it) is not enough: the header too
        assert erin.get(srv.url + "ui/api/me").status_code == 401
        assert erin.post(srv.url, json=rpc("tasks/get", {"id": "x"})).status_code == 401
        # ...and it acts through A2A like a token (the page's own JSON-RPC)
        got = erin.post(srv.url, json=rpc("tasks/get", {"id": "x"}), headers=HEADER).json()
        assert got["error"]["code"] == -32001, got
        # a replayed callback (its code spent) and a forged one (another sign-in's state) fail
        replay = erin.get(srv.url + "ui/callback?" + erin.headers["x-test-callback"])
        assert replay.status_code in (400, 401), replay.text
        with httpx.Client(timeout=60) as mallory:
            mallory.get(srv.url + "ui/login")  # her own sign-in's cookie
            forged = mallory.get(srv.url + "ui/callback?" + erin.headers["x-test-callback"])
            assert forged.status_code == 400 and "not started here" in forged.text
            assert "devagent_console" not in str(forged.headers.get_list("set-cookie"))
            # a sign-in cookie she made herself (state of her choosing, no MAC of the server's)
            made = base64.urlsafe_b64encode(
                json.dumps({"state": "s", "nonce": "n", "verifier": "v"}).encode()
            )
            mallory.cookies.set(
                "devagent_login", made.decode() + ".00", domain="127.0.0.1", path="/ui/callback"
            )
            tossed = mallory.get(srv.url + "ui/callback", params={"state": "s", "code": "c"})
            assert tossed.status_code == 400 and "not started here" in tossed.text
            # (the same cookie with the server's MAC passes the state check, and fails only at
            # the provider, which knows no code "c": the MAC is what refused hers)
            mac = hmac.new(CONSOLE[1].encode(), made, hashlib.sha256).hexdigest()
            mallory.cookies.set(
                "devagent_login", f"{made.decode()}.{mac}", domain="127.0.0.1", path="/ui/callback"
            )
            signed = mallory.get(srv.url + "ui/callback", params={"state": "s", "code": "c"})
            assert signed.status_code == 401 and "refused the sign-in" in signed.text, signed.text
        # roles: Alice's session (a token of the provider's, by client credentials) is seen by
        # the operator, not by Erin
        alice = idp.token("alice", srv.url.rstrip("/"))
        with httpx.Client(timeout=60) as c:
            done = c.post(
                srv.url,
                json=rpc("message/send", {"message": v03_message("hi")}),
                headers=auth(alice, ext=False),
            )
        context_id = done.json()["result"]["contextId"]
        assert erin.get(srv.url + "ui/api/sessions", headers=HEADER).json()["total"] == 0
        hidden = erin.get(
            srv.url + f"ui/api/sessions/{context_id}", params={"owner": "oidc:alice"}, headers=HEADER
        )
        assert hidden.status_code == 404
        ops = sign_in(idp, srv, "ops")
        assert ops.get(srv.url + "ui/api/me", headers=HEADER).json()["operator"] is True
        rows = ops.get(srv.url + "ui/api/sessions", headers=HEADER).json()["sessions"]
        assert [(r["owner"], r["context_id"]) for r in rows] == [("oidc:alice", context_id)], rows
        shown = ops.get(
            srv.url + f"ui/api/sessions/{context_id}", params={"owner": "oidc:alice"}, headers=HEADER
        )
        assert shown.status_code == 200 and "alice's answer" in shown.text
        # sign-out clears the cookie
        out = erin.post(srv.url + "ui/logout", headers=HEADER)
        assert out.status_code == 204 and 'devagent_console=""' in out.headers["set-cookie"]
        assert erin.get(srv.url + "ui/api/me", headers=HEADER).status_code == 401
        erin.close()
        ops.close()


def test_issue42_item3_console_sign_in_in_headless_chromium(
    tmp_path: Path, sqlite_url: str, script: Script
) -> None:
    pytest.importorskip("playwright.sync_api", reason="playwright is installed by scripts/test ([dev])")
    from playwright.sync_api import expect, sync_playwright

    from tests.console.conftest import CHROMIUM

    if CHROMIUM is None:
        pytest.skip("Debian's chromium (installed by scripts/test)")
    wait = 60_000  # ms a page may take (2 shared cores); never a pass condition
    steps = [[{"text": "alice's answer"}]]
    with idp_and_server(tmp_path, sqlite_url, script(steps)) as (idp, srv), sync_playwright() as p:
        alice = idp.token("alice", srv.url.rstrip("/"))  # a session of Alice's, by a program of hers
        with httpx.Client(timeout=60) as c:
            c.post(
                srv.url,
                json=rpc("message/send", {"message": v03_message("hi")}),
                headers=auth(alice, ext=False),
            )
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(srv.url + "ui/")
            link = page.locator("#idp-link")
            expect(link).to_be_visible(timeout=wait)
            link.click()
            page.locator("input[name=login]").fill("ops", timeout=wait)  # the provider's own page
            page.locator("input[name=password]").fill("any")
            page.locator("button[type=submit]").click()
            page.locator("button[type=submit]").click(timeout=wait)  # its consent page
            expect(page.locator("#who")).to_have_text("signed in as oidc:ops", timeout=wait)
            cookies = {c["name"]: c for c in page.context.cookies()}
            assert cookies["devagent_console"]["httpOnly"] is True
            assert cookies["devagent_console"]["sameSite"] == "Lax"
            assert "devagent_console" not in page.evaluate("document.cookie")  # no script reads it
            # an operator: Alice's session listed with its owner, opened read-only
            row = page.locator("#sessions li").filter(has_text="oidc:alice")
            expect(row).to_have_count(1, timeout=wait)
            row.locator("a").click()
            expect(page.locator("#conversation")).to_contain_text("alice's answer", timeout=wait)
            expect(page.locator("#view-meta")).to_contain_text("oidc:alice")
            expect(page.locator("#prompt-form")).to_be_hidden()
            page.locator("#signout").click()
            expect(page.locator("#signin")).to_be_visible(timeout=wait)
            page.reload()
            expect(page.locator("#signin")).to_be_visible(timeout=wait)  # the cookie is gone
            expect(page.locator("#who")).to_have_text("")
        finally:
            browser.close()


def test_issue42_item4_an_approver_allows_another_members_request_in_headless_chromium(
    tmp_path: Path, sqlite_url: str, script: Script
) -> None:
    """Bob signs in to the console through the provider's page, opens Alice's session (his group
    approves with hers), sees her pending write with "allow once" and "refuse" only, allows it;
    the turn goes on in Alice's workspace. The server is a `devagent serve` process with
    `DEVAGENT_OIDC_SHARED_GROUPS=team-a=approve`."""
    pytest.importorskip("playwright.sync_api", reason="playwright is installed by scripts/test ([dev])")
    from playwright.sync_api import expect, sync_playwright

    from tests.console.conftest import CHROMIUM
    from tests.core_helpers import call_then_text, write_call

    if CHROMIUM is None:
        pytest.skip("Debian's chromium (installed by scripts/test)")
    wait = 60_000  # ms a page may take (2 shared cores); never a pass condition
    steps = call_then_text(write_call("one.txt", "1\n", "c1"), "wrote one.txt")
    groups = {"alice": ["team-a"], "bob": ["team-a"]}
    more = {"DEVAGENT_OIDC_GROUPS_CLAIM": "groups", "DEVAGENT_OIDC_SHARED_GROUPS": "team-a=approve"}
    with (
        idp_and_server(tmp_path, sqlite_url, script(steps), groups=groups, more_env=more) as (idp, srv),
        sync_playwright() as p,
    ):
        alice = idp.token("alice", srv.url.rstrip("/"))  # her program starts the write
        with httpx.Client(timeout=60) as c:
            sent = c.post(
                srv.url, json=rpc("message/send", {"message": v03_message("write")}), headers=auth(alice)
            )
        task = sent.json()["result"]
        assert task["status"]["state"] == "input-required", task
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(srv.url + "ui/")
            page.locator("#idp-link").click(timeout=wait)
            page.locator("input[name=login]").fill("bob", timeout=wait)
            page.locator("input[name=password]").fill("any")
            page.locator("button[type=submit]").click()
            page.locator("button[type=submit]").click(timeout=wait)  # its consent page
            expect(page.locator("#who")).to_have_text("signed in as oidc:bob", timeout=wait)
            page.goto(f"{srv.url}ui/#/s/{task['contextId']}/oidc%3Aalice")
            box = page.locator("#permissions .permission")
            expect(box).to_have_count(1, timeout=wait)
            offered = box.locator("button[data-option]")
            expect(offered).to_have_count(2, timeout=wait)  # allow once, refuse: no "always"
            assert sorted(offered.evaluate_all("bs => bs.map(b => b.dataset.option)")) == [
                "cancel",
                "proceed_once",
            ]
            expect(box.locator("details.edit")).to_have_count(0)
            expect(page.locator("#prompt-form")).to_be_hidden()  # still no prompt of his
            allow = box.locator("button[data-option=proceed_once]")
            expect(allow).to_be_enabled(timeout=wait)
            allow.click()
            expect(page.locator("#conversation")).to_contain_text("wrote one.txt", timeout=wait)
        finally:
            browser.close()
        assert (tmp_path / "root" / ".oidc" / "alice" / "one.txt").read_text() == "1\n"
