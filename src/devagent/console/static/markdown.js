// A small Markdown renderer that builds DOM nodes and never HTML: a model's answer is untrusted
// text, so every piece of it reaches the page through textContent (a `<script>` stays text) and a
// link is a link only when it is http(s) or mailto (a `javascript:` URL stays text).
//
// It covers what models write in answers: headings, paragraphs, fenced code blocks, bullet and
// numbered lists, block quotes, horizontal rules, and inline code, bold, italics and links. Anything
// else is shown as the text it is.

const SAFE_URL = /^(https?:|mailto:)/i;

function el(tag, cls) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  return node;
}

// Inline spans: `code`, **bold**, *italic* / _italic_, [text](url); everything else is text.
const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|(?<![\w])_([^_\s][^_]*)_(?![\w])|\[([^\]]+)\]\(([^)\s]+)\)/g;

export function inline(parent, text) {
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) parent.append(text.slice(last, m.index));
    if (m[1]) {
      const code = el("code");
      code.textContent = m[2];
      parent.append(code);
    } else if (m[3] !== undefined || m[4] !== undefined) {
      const b = el("strong");
      inline(b, m[3] ?? m[4]);
      parent.append(b);
    } else if (m[5] !== undefined || m[6] !== undefined) {
      const i = el("em");
      inline(i, m[5] ?? m[6]);
      parent.append(i);
    } else if (m[7] !== undefined) {
      if (SAFE_URL.test(m[8])) {
        const a = el("a");
        a.href = m[8];
        a.rel = "noopener noreferrer nofollow";
        a.target = "_blank";
        inline(a, m[7]);
        parent.append(a);
      } else {
        parent.append(m[0]);
      }
    }
    last = m.index + m[0].length;
  }
  if (last < text.length) parent.append(text.slice(last));
}

const FENCE = /^\s{0,3}(```+|~~~+)\s*([\w+#.-]*)\s*$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
const NUMBERED = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;

// The Markdown `text` as a fragment of DOM nodes.
export function render(text) {
  const out = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) body.push(lines[i++]);
      i++; // the closing fence (or the end of an answer still streaming)
      const pre = el("pre");
      const code = el("code");
      if (m[2]) code.dataset.lang = m[2];
      code.textContent = body.join("\n");
      pre.append(code);
      out.append(pre);
    } else if (!line.trim()) {
      i++;
    } else if ((m = HEADING.exec(line))) {
      const h = el("h" + Math.min(6, m[1].length + 2)); // inside a message: h3 and smaller
      inline(h, m[2]);
      out.append(h);
      i++;
    } else if (RULE.test(line)) {
      out.append(el("hr"));
      i++;
    } else if (BULLET.test(line) || NUMBERED.test(line)) {
      const ordered = !BULLET.test(line);
      const list = el(ordered ? "ol" : "ul");
      const re = ordered ? NUMBERED : BULLET;
      if (ordered) list.start = Number(NUMBERED.exec(line)[1]);
      while (i < lines.length && (m = re.exec(lines[i]))) {
        const li = el("li");
        inline(li, ordered ? m[2] : m[1]);
        list.append(li);
        i++;
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !re.test(lines[i])) {
          li.append(" ");
          inline(li, lines[i++].trim());
        }
      }
      out.append(list);
    } else if (QUOTE.test(line)) {
      const q = el("blockquote");
      const body = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) body.push(m[1]), i++;
      q.append(render(body.join("\n")));
      out.append(q);
    } else {
      const p = el("p");
      const body = [];
      while (
        i < lines.length &&
        lines[i].trim() &&
        !FENCE.test(lines[i]) &&
        !HEADING.test(lines[i]) &&
        !BULLET.test(lines[i]) &&
        !NUMBERED.test(lines[i]) &&
        !QUOTE.test(lines[i])
      ) {
        body.push(lines[i++]);
      }
      body.forEach((b, n) => {
        if (n) p.append(el("br"));
        inline(p, b);
      });
      out.append(p);
    }
  }
  return out;
}
