"""Issue 28 item 7: error text is scrubbed of known secrets and anything shaped like a key."""

from __future__ import annotations

import json

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
    }
    for text, secrets in cases.items():
        out = scrub.scrub(text)
        assert "[redacted]" in out, out
        for secret in secrets:
            assert secret not in out, (text, out)
    plain = "maximum context length is 128000 tokens; the token limit was exceeded (abc)"
    assert scrub.scrub(plain) == plain
    assert "/home/someone" in scrub.scrub("cwd /home/someone")
