"""The nesting depth of raw JSON, read before parsing (issue 12 item 2)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devagent.common.jsonlimits import nesting_depth, positive_int_from_env, too_deep


@pytest.mark.parametrize(
    ("doc", "depth"),
    [
        (1, 0),
        ("[{", 0),
        ([], 1),
        ({"a": [1, {"b": []}]}, 4),
        ([["[[[[", '\\"[[[', {"k]]": "{{"}]], 3),
        ([[[]], [[[[]]]]], 5),
    ],
)
def test_depth_matches_the_structure(doc: Any, depth: int) -> None:
    """issue 12 item 2: brackets in strings (escaped quotes included) do not count."""
    raw = json.dumps(doc).encode()
    assert nesting_depth(raw) == depth
    assert nesting_depth(json.dumps(doc, indent=2).encode()) == depth
    assert nesting_depth(json.dumps(doc).encode("utf-16")) == depth  # json.loads reads UTF-16 too
    if depth:
        assert too_deep(raw, depth - 1)
    assert not too_deep(raw, depth)


def test_deep_and_broken_input() -> None:
    """issue 12 item 2: 100,000 levels are measured without recursion; an unterminated string
    runs to the end (json.loads then reports it)."""
    deep = b"[" * 100_000 + b"]" * 100_000
    assert nesting_depth(deep) == 100_000 and too_deep(deep, 64)
    assert nesting_depth(b'[["abc') == 2
    assert nesting_depth(b'["a\\"[[[[') == 1
    assert nesting_depth(b"]]][[") == 0  # json.loads stops at the first stray bracket


def test_positive_int_from_env() -> None:
    """issue 12 item 2: a limit from the environment is a positive whole number."""
    assert positive_int_from_env("X", {}) is None
    assert positive_int_from_env("X", {"X": " 16_777_216 "}) == 16_777_216
    with pytest.raises(ValueError, match="X must be a whole number"):
        positive_int_from_env("X", {"X": "1e6"})
    with pytest.raises(ValueError, match="X must be positive"):
        positive_int_from_env("X", {"X": "-1"})
