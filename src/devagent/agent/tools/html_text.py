"""A web page's HTML as readable text for a model: headings, paragraphs, lists, links, code and
tables in Markdown's notation; scripts, styles, navigation and everything else that is not the
page's text left out. The standard library's `html.parser` reads the page: nothing in it is
run, loaded or followed.

Everything here is linear in the page's size and bounded: the text kept (`TEXT_MAX_CHARS`, the
rest cut), the indentation of nested lists (`LIST_MAX_DEPTH` levels), the lists and skipped
elements remembered, the title. The parser itself is not ours and is quadratic on some broken
markup, so the server never runs this in its own process: `html_process.py` runs this file as a
program (`python -I -S html_text.py MEMORY_BYTES`, the URL and the page on its standard input),
under a deadline and a memory cap. Standard library only, and nothing of devagent."""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

TEXT_MAX_CHARS = 2_000_000  # of a page's text; the rest is left out
RAW_MAX_CHARS = 2 * TEXT_MAX_CHARS  # of text before the white space is tidied
LIST_MAX_DEPTH = 10  # nested lists deeper than this are indented as this deep
TITLE_MAX_CHARS = 1000
EXIT_MEMORY = 3  # the program's exit status when the page needs more memory than it may have

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
# Stand-ins the whitespace clean-up leaves alone, put back at the end (taken out of the page's
# own text first, so that only ours are there).
_INDENT = "\x01"  # an indentation space of a nested list item
_PRE = "\x02"  # marks a preformatted block's number: \x02N\x02
_STAND_INS = re.compile("[\x01\x02]")


class _Full(Exception):  # not a DevagentError: this file runs as a program, devagent not on its path
    """The text reached RAW_MAX_CHARS: the rest of the page is not read."""


class _Converter(HTMLParser):
    def __init__(self, url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base = url
        self.out: list[str] = []
        self.size = 0  # characters in `out` and the preformatted blocks
        self.title = ""
        self._in_title = False
        # The open skipped elements, and how many of each (what an end tag asks, in constant time).
        self._skip: list[str] = []
        self._skipping: dict[str, int] = {}
        # Each open list: [next number], or [] when unordered; lists below LIST_MAX_DEPTH only
        # counted (their items numbered by the deepest one kept).
        self._lists: list[list[int]] = []
        self._deeper = 0
        # The open link: where its text starts in `out`, its target. Links do not nest: a new
        # one closes the open one, as browsers do.
        self._link: tuple[int, str] | None = None
        self._pre: list[str] | None = None  # the text of the open <pre>
        self.blocks: list[str] = []  # the preformatted blocks

    def _add(self, text: str) -> None:
        self.size += len(text)
        if self.size > RAW_MAX_CHARS:
            raise _Full
        self.out.append(text)

    # --- the parser's callbacks ------------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip:
            if tag not in _VOID:
                self._push_skipped(tag)
            return
        a = {k: v or "" for k, v in attrs}
        if tag in _SKIPPED or a.get("hidden") is not None or a.get("aria-hidden") == "true":
            if tag not in _VOID:
                self._push_skipped(tag)
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

    def _push_skipped(self, tag: str) -> None:
        self._skip.append(tag)
        self._skipping[tag] = self._skipping.get(tag, 0) + 1

    def _pop_skipped(self) -> str:
        tag = self._skip.pop()
        self._skipping[tag] -= 1
        return tag

    def _open(self, tag: str, a: dict[str, str]) -> None:
        if tag in _HEADINGS:
            self._add("\n\n" + "#" * _HEADINGS[tag] + " ")
        elif tag in ("ul", "ol"):
            self._open_list(tag, a.get("start", "1"))
        elif tag == "li":
            depth = max(len(self._lists) - 1, 0)
            numbering = self._lists[-1] if self._lists else []
            mark = f"{numbering[0]}." if numbering else "-"
            if numbering:
                numbering[0] += 1
            self._add("\n" + _INDENT * 2 * depth + mark + " ")
        elif tag in _BLOCKS:
            self._add("\n\n")
        elif tag in ("br", "tr"):
            self._add("\n" + ("| " if tag == "tr" else ""))
        elif tag == "hr":
            self._add("\n\n---\n\n")
        elif tag == "a":
            if self._link is not None:
                self._close_link()
            self._link = (len(self.out), a.get("href", ""))
        elif tag == "img" and a.get("alt", "").strip():
            self._add(f" [image: {_STAND_INS.sub('', a['alt'].strip())}] ")
        elif tag == "code":
            self._add("`")

    def _open_list(self, tag: str, start: str) -> None:
        if len(self._lists) >= LIST_MAX_DEPTH:
            self._deeper += 1
            return
        if not self._lists:
            self._add("\n\n")
        self._lists.append([int(start) if start.isdigit() and len(start) < 10 else 1] if tag == "ol" else [])

    def handle_endtag(self, tag: str) -> None:
        if self._skip:
            if self._skipping.get(tag):  # elements left open inside close with it
                while self._pop_skipped() != tag:
                    pass
            return
        if tag == "title":
            self._in_title = False
        elif tag == "pre" and self._pre is not None:
            self.blocks.append("".join(self._pre).strip("\n"))
            self._pre = None
            self._add(f"\n\n{_PRE}{len(self.blocks) - 1}{_PRE}\n\n")
        elif self._pre is not None:
            return
        elif tag in ("ul", "ol") and self._deeper:
            self._deeper -= 1
        elif tag in ("ul", "ol") and self._lists:
            self._lists.pop()
            if not self._lists:
                self._add("\n\n")
        elif tag in _HEADINGS or tag in _BLOCKS:
            self._add("\n\n")
        elif tag in ("td", "th"):
            self._add(" | ")
        elif tag == "a" and self._link is not None:
            self._close_link()
        elif tag == "code":
            self._add("`")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        data = _STAND_INS.sub("", data)
        if self._in_title:
            if len(self.title) < TITLE_MAX_CHARS:
                self.title += data[:TITLE_MAX_CHARS]
        elif self._pre is not None:
            self.size += len(data)
            if self.size > RAW_MAX_CHARS:
                raise _Full
            self._pre.append(data)
        elif data:
            # One space for any run of white space, also across the parser's pieces: a page of
            # nothing but spaces between tags adds one.
            text = re.sub(r"\s+", " ", data)
            if text == " " and self.out and self.out[-1].endswith(" "):
                return
            self._add(text)

    def _close_link(self) -> None:
        assert self._link is not None
        (start, href), self._link = self._link, None
        text = " ".join("".join(self.out[start:]).split())
        target = urljoin(self.base, href.strip()) if href.strip() else ""
        if text and urlsplit(target).scheme in ("http", "https") and not target.startswith(self.base + "#"):
            self.out[start:] = [f"[{text}]({target})"]
            self.size += len(target) + 4


def html_to_text(html: str, url: str = "") -> tuple[str, str, bool]:
    """(the page's title, its text, whether its text was cut at TEXT_MAX_CHARS): Markdown-like,
    with blank lines between blocks and links made absolute against `url` (or the page's
    `<base>`). Runs in time linear in the page's size, apart from the standard library's parser
    on some broken markup (see the module's note)."""
    conv = _Converter(url)
    cut = False
    try:
        conv.feed(html)
        conv.close()
    except _Full:
        cut = True
    text = _tidy("".join(conv.out), conv.blocks)
    if len(text) > TEXT_MAX_CHARS:
        text, cut = text[:TEXT_MAX_CHARS], True
    return " ".join(conv.title.split()), text, cut


def _tidy(text: str, blocks: list[str]) -> str:
    """The converter's text with its white space tidied: no spaces around line breaks, one space
    for many, at most one blank line, no empty inline code; then the stand-ins put back. Each
    step is linear (a regex such as `[ \\t]*\\n` is not, on a long run of spaces)."""
    text = "\n".join(line.strip(" \t") for line in text.split("\n"))
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    text = re.sub(r"`\s*`", "", text)  # empty inline code (white space here is a space or two newlines)
    text = text.replace(_INDENT, " ")
    return re.sub(f"{_PRE}(\\d+){_PRE}", lambda m: "```\n" + blocks[int(m.group(1))] + "\n```", text)


def main() -> None:
    """The program `html_process.py` runs: `html_text.py MEMORY_BYTES`, the page's URL as a JSON
    string and a newline, then the page, on standard input (UTF-8); its title, text and `cut` as
    JSON on standard output. It may use MEMORY_BYTES of address space at most; a page that needs
    more ends it with EXIT_MEMORY."""
    import resource

    limit = int(sys.argv[1])
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        url, _, html = sys.stdin.buffer.read().decode("utf-8", "surrogatepass").partition("\n")
        title, text, cut = html_to_text(html, json.loads(url))
        answer = json.dumps({"title": title, "text": text, "cut": cut}, ensure_ascii=False)
        sys.stdout.buffer.write(answer.encode("utf-8", "surrogatepass"))
    except MemoryError:
        sys.exit(EXIT_MEMORY)


if __name__ == "__main__":
    main()
