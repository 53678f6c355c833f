"""Issue 28 item 7: error text is scrubbed of known secrets and anything shaped like a key."""

from __future__ import annotations

import json

import pytest

from devagent.common import scrub


def test_issue28_item7_scrub_removes_known_and_key_shaped_secrets() -> None:
    scrub.remember(["operator-token-77Qx", None, "abc"])  # too short to be told from a word: kept
    scrub.remember_environment({"SOME_API_KEY": "from-env-9b1d2e", "HOME": "/home/someone"})
    echoed = json.dumps({"authorization": "Bearer sk-test-1234567890", "x-api-key": "raw-value-42"})
    cases = {
        json.dumps({"error": {"message": "bad request " + echoed}}): ("1234567890", "raw-value-42"),
        "Authorization: Bearer abc.def-ghi_jkl": ("abc.def-ghi_jkl",),
        "key AIzaSyA1234567890abcdefghijklmn given": ("AIzaSyA1234567890",),
        "token=ghp_abcdefghijklmnopqrstuvwxyz0123": ("ghp_abcdef",),
        "sent operator-token-77Qx and from-env-9b1d2e": ("operator-token-77Qx", "from-env-9b1d2e"),
        "https://example.test/v1?api_key=query-secret-1&x=1": ("query-secret-1",),
        "cannot reach postgresql://app:db-pass-77@db.internal/devagent": ("db-pass-77",),
    }
    for text, secrets in cases.items():
        out = scrub.scrub(text)
        assert "[redacted]" in out, out
        for secret in secrets:
            assert secret not in out, (text, out)
    plain = "maximum context length is 128000 tokens; the token limit was exceeded (abc)"
    assert scrub.scrub(plain) == plain
    assert "/home/someone" in scrub.scrub("cwd /home/someone")


def test_issue28_item7_an_internal_errors_log_line_is_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    """A provider error that escapes a turn (e.g. from /compact's summary request) is logged with
    its traceback under a reference: scrubbed like the rest."""
    from devagent.common.rpcerrors import internal_error

    secret = "sk-test-00112233445566778899"
    try:
        raise RuntimeError(f"status_code: 401, body: {{'authorization': 'Bearer {secret}'}}")
    except RuntimeError as e:
        with caplog.at_level("ERROR", logger="devagent.errors"):
            text = internal_error(repr(e), what="the turn", exc_info=e)
    logged = caplog.text  # formatted: the message and the traceback
    assert "reference" in text and secret not in text
    assert "Traceback" in logged and "RuntimeError" in logged and "[redacted]" in logged, logged
    assert secret not in logged and "00112233" not in logged, logged
