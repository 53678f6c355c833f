"""HTML-to-text for `web_fetch` (issue 37 item 2): on ordinary pages the same text as the converter
it replaced (`html_text_before.py`); on hostile shapes linear and bounded (its caps on list depth
and text); and run as a process of its own, killed at its deadline and held to its memory cap."""

from __future__ import annotations

import random
import time

import pytest

from devagent.agent.tools import html_process, html_text
from devagent.agent.tools.failure import ToolFailure
from devagent.agent.tools.html_text import LIST_MAX_DEPTH, TEXT_MAX_CHARS, html_to_text
from tests.process_scan import running
from tests.unit.agent.tools import html_text_before

BASE = "https://docs.example.org/guide/install.html"
WORDS = "the install runs a step when its file is read by every user who asks for more time é ü 中 ✓".split()


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _inline(rng: random.Random) -> str:
    """A paragraph's content: words, inline markup, links, images, entities, source line breaks."""
    pieces = []
    for _ in range(rng.randint(3, 12)):
        kind = rng.randrange(10)
        text = _words(rng, rng.randint(1, 6))
        if kind == 0:
            pieces.append(f"<b>{text}</b>")
        elif kind == 1:
            pieces.append(f"<em>{text}</em>\n   ")
        elif kind == 2:
            pieces.append(f"<code>{text} &lt;T&gt;</code>")
        elif kind == 3:
            href = rng.choice(["/docs/next.html", "other.html#part", "#top", "https://x.test/?b&amp;c", ""])
            pieces.append(f'<a href="{href}">{text}</a>')
        elif kind == 4:
            pieces.append(f'<img src="i.png" alt="{text}">')
        elif kind == 5:
            pieces.append("&amp; &nbsp; &copy;<br>")
        elif kind == 6:
            pieces.append(f"<span class=x>  {text}  </span>\t")
        else:
            pieces.append(text)
    return " ".join(pieces)


def _list(rng: random.Random, depth: int) -> str:
    tag = rng.choice(["ul", "ol"])
    start = f' start="{rng.randint(1, 40)}"' if tag == "ol" and rng.random() < 0.3 else ""
    items = []
    for _ in range(rng.randint(1, 4)):
        inner = _list(rng, depth + 1) if depth < 4 and rng.random() < 0.3 else ""
        items.append(f"<li>{_inline(rng)}{inner}</li>\n")
    return f"<{tag}{start}>\n{''.join(items)}</{tag}>"


def _block(rng: random.Random) -> str:
    kind = rng.randrange(9)
    if kind == 0:
        return f"<h{rng.randint(1, 6)}>{_words(rng, 4)}</h{rng.randint(1, 6)}>"
    if kind == 1:
        return _list(rng, 0)
    if kind == 2:
        rows = "".join(
            "<tr>" + "".join(f"<td>{_words(rng, 2)}</td>" for _ in range(3)) + "</tr>\n" for _ in range(3)
        )
        return f"<table><tr><th>a</th><th>b</th><th>c</th></tr>\n{rows}</table>"
    if kind == 3:
        return f"<pre><code>def f(x):\n    return x &lt; 2  # {_words(rng, 3)}\n\n</code></pre>"
    if kind == 4:
        return f"<blockquote><p>{_inline(rng)}</p></blockquote><hr>"
    if kind == 5:
        return f'<div hidden><p>{_words(rng, 5)}</p></div><script>var s = "<p>no</p>";</script>'
    if kind == 6:
        return f"<div><div><section><p>{_inline(rng)}</p></section></div></div>"
    return f"<p>{_inline(rng)}</p>"


def ordinary_page(seed: int) -> str:
    rng = random.Random(seed)
    blocks = "\n".join(_block(rng) for _ in range(rng.randint(5, 40)))
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=utf-8><title>  Guide &mdash; "
        f"{_words(rng, 3)}</title><style>p {{ margin: 0 }}</style></head>\n<body>"
        '<nav><a href="/">Home</a></nav>\n<main>\n'
        f"{blocks}\n</main><footer>(c) {_words(rng, 2)}</footer></body></html>\n"
    )


def test_issue37_item2_same_text_as_before_on_ordinary_pages() -> None:
    from tests.unit.agent.tools.test_web import PAGE

    pages = [PAGE, *(ordinary_page(seed) for seed in range(300))]
    for page in pages:
        title, text, cut = html_to_text(page, BASE)
        assert (title, text) == html_text_before.html_to_text(page, BASE)
        assert not cut
    assert "# " in text and "- " in text and "```" in text and "](https://" in text  # the shapes were there


def hostile(size: int) -> dict[str, str]:
    """Pages shaped to make a converter quadratic or huge, `size` characters each."""
    return {
        "spaces": "<html><body>x" + "<b> </b>" * (size // 8) + "y",
        "lists": "<html><body>" + "<ul><li>x" * (size // 9),
        "ordered": "<html><body>" + "<ol start=7><li>x" * (size // 17),
        "unclosed": "<html><body><div hidden>" + "<span>" * (size // 12) + "</i>" * (size // 8),
        "links": "<html><body>" + "<a href=/x>y" * (size // 12) + "</a>" * (size // 8),
        "blocks": "<html><body>" + "<div><p>z" * (size // 9),
    }


def test_issue37_item2_hostile_shapes_convert_in_linear_time_within_the_caps() -> None:
    took = {}
    for name, page in hostile(1024 * 1024).items():
        t0 = time.monotonic()
        _title, text, cut = html_to_text(page, BASE)
        took[name] = time.monotonic() - t0
        assert len(text) <= TEXT_MAX_CHARS
        if name == "spaces":
            assert text == "x y" and not cut
        if name in ("lists", "ordered"):
            indents = {len(line) - len(line.lstrip(" ")) for line in text.splitlines()}
            assert max(indents) == 2 * (LIST_MAX_DEPTH - 1), sorted(indents)[-3:]
        if name == "unclosed":
            assert text == ""
        if name == "links":  # a link closes the one before it: no link holds another
            assert text.startswith("[y](https://docs.example.org/x)[y](")
            assert "[[" not in text
    print("1 MiB hostile pages converted in", {k: round(v, 2) for k, v in took.items()})
    assert max(took.values()) < 120  # the old converter needed hours for some of these


def test_issue37_item2_text_and_title_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(html_text, "TEXT_MAX_CHARS", 1000)
    monkeypatch.setattr(html_text, "RAW_MAX_CHARS", 2000)
    title, text, cut = html_to_text("<title>" + "t" * 5000 + "</title>" + "<p>word word</p>" * 1000)
    assert cut and 900 < len(text) <= 1000 and text.startswith("word word\n\nword word")
    assert len(title) <= 2 * html_text.TITLE_MAX_CHARS
    title, text, cut = html_to_text("<pre>" + "line\n" * 1000 + "</pre>")  # preformatted text counts
    assert cut and len(text) <= 1000
    title, text, cut = html_to_text("<p>" + "word " * 150 + "</p>")
    assert not cut and text == ("word " * 150).strip()


def test_issue37_item2_page_text_cannot_pose_as_the_converters_stand_ins() -> None:
    page = '<p>a\x029\x02b \x01\x01c</p><ol start="99999999999999999999999"><li>d</li></ol><pre>x</pre>'
    assert html_to_text(page) == ("", "a9b c\n\n1. d\n\n```\nx\n```", False)


async def test_issue37_item2_converted_in_a_process_of_its_own() -> None:
    page = ordinary_page(7)
    assert await html_process.convert_html(page, BASE) == html_to_text(page, BASE)
    # Text that is not valid Unicode on its way (a lone surrogate) goes there and back.
    assert await html_process.convert_html("<p>a\ud800b</p>", BASE + "?\ud801") == ("", "a\ud800b", False)


async def test_issue37_item2_conversion_killed_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard library's parser is quadratic on unclosed tag openings: such a page runs into
    the deadline, its process is killed, and the call fails with a clear error."""
    monkeypatch.setattr(html_process, "CONVERT_SECONDS", 1.0)
    with pytest.raises(ToolFailure) as info:
        await html_process.convert_html("<html><body>" + "<a " * 300_000, BASE)
    assert info.value.type == "conversion_timeout"
    assert "could not be read as text within 1 s" in str(info.value)
    assert running(html_process.CONVERTER) == []


async def test_issue37_item2_conversion_held_to_its_memory_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(html_process, "CONVERT_MEMORY", 24 * 1024 * 1024)
    with pytest.raises(ToolFailure) as info:
        await html_process.convert_html("<p>" + "中" * 5_000_000, BASE)
    assert info.value.type == "conversion_too_large"
    assert "needs more than 24 MiB" in str(info.value)


def test_issue37_item2_a_list_ends_at_its_end_tag() -> None:
    """(The old converter never closed a list: each list after the first was nested deeper.)"""
    page = "<ul><li>a<ol><li>b</li></ol></li></ul><p>p</p><ul><li>c</li></ul>"
    assert html_to_text(page)[1] == "- a\n  1. b\n\np\n\n- c"
