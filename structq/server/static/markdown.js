// A small Markdown renderer for answers: paragraphs, lists, headings, code, **bold**, `code`,
// tables, and citations [key] as links to their steps. Text only ever becomes text nodes
// (never HTML), so nothing an answer or a row holds can inject markup.
//
// A table whose header is a step's columns is left out (the step shows the same rows, sortable,
// below), with its caption line ("[key] purpose — 6 行") and its "… N more" line.
"use strict";

const StructqMarkdown = (() => {
  const CAPTION = /^\[[A-Za-z_]\w*\] .* — \d+ (行|rows)/;
  const MORE = /^… \d+ more$/;
  const LIST = /^\s*(?:[-*]|\d+[.)])\s+/;

  const splitRow = (line) => line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
  const isRule = (line) => /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/.test(line);

  function blocks(text) {
    const lines = String(text || "").replace(/\r\n?/g, "\n").split("\n");
    const out = [];
    for (let i = 0; i < lines.length;) {
      const line = lines[i];
      if (!line.trim()) { i += 1; continue; }
      if (line.trim().startsWith("```")) {
        const body = [];
        for (i += 1; i < lines.length && !lines[i].trim().startsWith("```"); i += 1) body.push(lines[i]);
        out.push({ type: "code", text: body.join("\n") });
        i += 1;
      } else if (line.trim().startsWith("|")) {
        const rows = [];
        for (; i < lines.length && lines[i].trim().startsWith("|"); i += 1) if (!isRule(lines[i])) rows.push(splitRow(lines[i]));
        out.push({ type: "table", rows });
      } else if (LIST.test(line)) {
        const items = [];
        const ordered = /^\s*\d/.test(line);
        for (; i < lines.length && LIST.test(lines[i]); i += 1) items.push(lines[i].replace(LIST, ""));
        out.push({ type: ordered ? "ol" : "ul", items });
      } else if (/^#{1,4}\s/.test(line)) {
        out.push({ type: "heading", text: line.replace(/^#+\s*/, "") });
        i += 1;
      } else {
        const para = [];
        for (; i < lines.length && lines[i].trim() && !lines[i].trim().startsWith("|") && !lines[i].trim().startsWith("```")
               && !(para.length && LIST.test(lines[i])); i += 1) para.push(lines[i]);
        out.push({ type: "p", lines: para });
      }
    }
    return out;
  }

  // Inline: **bold**, `code`, [key] citations (only of steps that exist); the rest is text.
  function inline(text, options) {
    const parts = [];
    const pattern = /\*\*([^*]+)\*\*|`([^`]+)`|\[([A-Za-z_]\w*)\]/g;
    let last = 0, m;
    while ((m = pattern.exec(text))) {
      if (m[3] !== undefined && !(options.keys || []).includes(m[3])) continue;
      parts.push(document.createTextNode(text.slice(last, m.index)));
      if (m[1] !== undefined) parts.push(el("strong", {}, m[1]));
      else if (m[2] !== undefined) parts.push(el("code", {}, m[2]));
      else parts.push(options.cite(m[3]));
      last = m.index + m[0].length;
    }
    parts.push(document.createTextNode(text.slice(last)));
    return parts;
  }

  function el(tag, attrs, ...children) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
    for (const c of children) n.append(c);
    return n;
  }

  const sameColumns = (a, b) => a.length === b.length && a.every((c, i) => c === b[i]);

  // render(text, {keys, cite(key) → element, shown: [[column…]…]}) → a <div class="answer-text markdown">
  function render(text, options) {
    const root = el("div", { class: "answer-text markdown" });
    const list = blocks(text);
    const shown = options.shown || [];
    const dropped = new Set();
    list.forEach((b, i) => {
      if (b.type !== "table" || !b.rows.length || !shown.some((cols) => sameColumns(cols, b.rows[0]))) return;
      dropped.add(i);
      const before = list[i - 1];
      if (before && before.type === "p" && CAPTION.test(before.lines[before.lines.length - 1])) {
        before.lines = before.lines.slice(0, -1);
        if (!before.lines.length) dropped.add(i - 1);
      }
      const after = list[i + 1];
      if (after && after.type === "p" && after.lines.length === 1 && MORE.test(after.lines[0].trim())) dropped.add(i + 1);
    });
    list.forEach((b, i) => {
      if (dropped.has(i)) return;
      if (b.type === "p") {
        const p = el("p");
        b.lines.forEach((line, j) => { if (j) p.append(el("br")); p.append(...inline(line, options)); });
        root.append(p);
      } else if (b.type === "heading") root.append(el("h4", {}, ...inline(b.text, options)));
      else if (b.type === "code") root.append(el("pre", { class: "query" }, b.text));
      else if (b.type === "ul" || b.type === "ol") root.append(el(b.type, {}, ...b.items.map((t) => el("li", {}, ...inline(t, options)))));
      else if (b.type === "table") {
        const [head, ...rows] = b.rows;
        root.append(el("div", { class: "table-scroll" }, el("table", {},
          el("thead", {}, el("tr", {}, ...head.map((c) => el("th", {}, c)))),
          el("tbody", {}, ...rows.map((r) => el("tr", {}, ...r.map((c) => el("td", {}, ...inline(c, options)))))))));
      }
    });
    return root;
  }

  return { render, blocks };
})();
