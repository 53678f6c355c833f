"""The HTML-to-text converter as it was before issue 37 (main 74bd079): quadratic on some pages.
With the one fix noted below (lists closed), it is kept only as the reference the linear one
(`devagent.agent.tools.html_text`) must agree with on ordinary pages (test_html_text.py)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

# Elements whose content is not the page's text.
_SKIPPED = frozenset(
    "script style noscript template svg math iframe object embed canvas nav footer select "
    "button dialog".split()
)
# Elements that never have content (no end tag to wait for).
_VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
_BLOCKS = frozenset(
    "p div section article main header aside figure figcaption blockquote address details summary "
    "dl dt dd table form fieldset ul ol center".split()
)
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
# Stand-ins the whitespace clean-up leaves alone, put back at the end.
_INDENT = "\x01"  # an indentation space of a nested list item
_PRE = "\x02"  # marks a preformatted block's number: \x02N\x02


class _Converter(HTMLParser):
    def __init__(self, url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base = url
        self.out: list[str] = []
        self.title = ""
        self._in_title = False
        self._skip: list[str] = []  # the open skipped elements
        self._lists: list[list[int]] = []  # each open list: [next number], or [] when unordered
        self._links: list[tuple[int, str]] = []  # each open link: where its text starts, its target
        self._pre: list[str] | None = None  # the text of the open <pre>
        self.blocks: list[str] = []  # the preformatted blocks

    # --- the parser's callbacks ------------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip:
            if tag not in _VOID:
                self._skip.append(tag)
            return
        a = {k: v or "" for k, v in attrs}
        if tag in _SKIPPED or a.get("hidden") is not None or a.get("aria-hidden") == "true":
            if tag not in _VOID:
                self._skip.append(tag)
            return
        if tag == "title":
            self._in_title = True
        elif tag == "base" and a.get("href"):
            self.base = urljoin(self.base, a["href"])
        elif self._pre is not None:
            return
        elif tag == "pre":
            self._pre = []
        else:
            self._open(tag, a)

    def _open(self, tag: str, a: dict[str, str]) -> None:
        if tag in _HEADINGS:
            self.out.append("\n\n" + "#" * _HEADINGS[tag] + " ")
        elif tag in ("ul", "ol"):
            start = a.get("start", "1")
            if not self._lists:
                self.out.append("\n\n")
            self._lists.append([int(start) if start.isdigit() else 1] if tag == "ol" else [])
        elif tag == "li":
            depth = max(len(self._lists) - 1, 0)
            numbering = self._lists[-1] if self._lists else []
            mark = f"{numbering[0]}." if numbering else "-"
            if numbering:
                numbering[0] += 1
            self.out.append("\n" + _INDENT * 2 * depth + mark + " ")
        elif tag in _BLOCKS:
            self.out.append("\n\n")
        elif tag in ("br", "tr"):
            self.out.append("\n" + ("| " if tag == "tr" else ""))
        elif tag == "hr":
            self.out.append("\n\n---\n\n")
        elif tag == "a":
            self._links.append((len(self.out), a.get("href", "")))
        elif tag == "img" and a.get("alt", "").strip():
            self.out.append(f" [image: {a['alt'].strip()}] ")
        elif tag == "code":
            self.out.append("`")

    def handle_endtag(self, tag: str) -> None:
        if self._skip:
            if tag in self._skip:  # elements left open inside close with it
                while self._skip and self._skip.pop() != tag:
                    pass
            return
        if tag == "title":
            self._in_title = False
        elif tag == "pre" and self._pre is not None:
            self.blocks.append("".join(self._pre).strip("\n"))
            self.out.append(f"\n\n{_PRE}{len(self.blocks) - 1}{_PRE}\n\n")
            self._pre = None
        elif self._pre is not None:
            return
        # (One change from 74bd079: a list's end tag is seen before the blocks', which held `ul`
        # and `ol` and so never closed a list: every list after the first was nested deeper.)
        elif tag in ("ul", "ol") and self._lists:
            self._lists.pop()
            if not self._lists:
                self.out.append("\n\n")
        elif tag in _HEADINGS or tag in _BLOCKS:
            self.out.append("\n\n")
        elif tag in ("td", "th"):
            self.out.append(" | ")
        elif tag == "a" and self._links:
            self._close_link()
        elif tag == "code":
            self.out.append("`")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in_title:
            self.title += data
        elif self._pre is not None:
            self._pre.append(data)
        else:
            self.out.append(re.sub(r"\s+", " ", data))

    def _close_link(self) -> None:
        start, href = self._links.pop()
        text = " ".join("".join(self.out[start:]).split())
        target = urljoin(self.base, href.strip()) if href.strip() else ""
        if text and urlsplit(target).scheme in ("http", "https") and not target.startswith(self.base + "#"):
            self.out[start:] = [f"[{text}]({target})"]


def html_to_text(html: str, url: str = "") -> tuple[str, str]:
    """(the page's title, its text): Markdown-like, with blank lines between blocks and links
    made absolute against `url` (or the page's `<base>`)."""
    conv = _Converter(url)
    conv.feed(html)
    conv.close()
    text = "".join(conv.out)
    text = re.sub(r"[ \t]*\n[ \t]*", "\n", text)  # no spaces around line breaks
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    text = re.sub(r"`\s*`", "", text)  # empty inline code
    text = text.replace(_INDENT, " ")
    text = re.sub(f"{_PRE}(\\d+){_PRE}", lambda m: "```\n" + conv.blocks[int(m.group(1))] + "\n```", text)
    return " ".join(conv.title.split()), text
