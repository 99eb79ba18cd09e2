// Charts as inline SVG, drawn from a result table; no library, no network.
//
// chartKind() decides from the data alone: a label column of dates or months with a numeric
// column is a time series (a line); a few labels with a numeric column are totals per
// category (bars). Anything else gets no chart: a wrong chart is worse than none.
"use strict";

const StructqChart = (() => {
  const SVG = "http://www.w3.org/2000/svg";
  const DATE = /^\d{4}-\d{2}(-\d{2})?([ T].*)?$/;
  const MAX_BARS = 30;

  const isNumber = (v) => typeof v === "number" && Number.isFinite(v);

  function chartKind(columns, rows) {
    if (rows.length < 2 || columns.length < 2) return null;
    const numeric = columns.map((_, i) => rows.every((r) => r[i] === null || isNumber(r[i])) && rows.some((r) => isNumber(r[i])));
    const label = columns.findIndex((_, i) => !numeric[i]);
    const value = numeric.findIndex((n, i) => n && i !== label);
    if (label < 0 || value < 0) return null;
    const labels = rows.map((r) => r[label]);
    if (labels.every((v) => typeof v === "string" && DATE.test(v))) return { kind: "line", label, value };
    if (rows.length <= MAX_BARS && new Set(labels).size === labels.length) return { kind: "bar", label, value };
    return null;
  }

  const fmt = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });

  function el(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function ticks(max) {
    if (max <= 0) return [0];
    const step = Math.pow(10, Math.floor(Math.log10(max)));
    const unit = [1, 2, 5, 10].map((m) => m * step).find((u) => max / u <= 5);
    const out = [0];
    while (out[out.length - 1] < max) out.push(out.length * unit);  // the top tick is at or above max
    return out;
  }

  function draw(columns, rows) {
    const spec = chartKind(columns, rows);
    if (!spec) return null;
    let data = rows.map((r) => [String(r[spec.label]), isNumber(r[spec.value]) ? r[spec.value] : 0]);
    if (spec.kind === "line") data.sort((a, b) => (a[0] < b[0] ? -1 : 1));
    const W = 720, H = 280, L = 64, R = 48, T = 30, B = 48;
    const max = Math.max(...data.map((d) => d[1]), 0);
    const scale = ticks(max);
    const top = scale[scale.length - 1] || 1;
    const x = (i) => L + (data.length === 1 ? 0 : (i * (W - L - R)) / (spec.kind === "bar" ? data.length : data.length - 1));
    const y = (v) => T + (H - T - B) * (1 - v / top);
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: `chart-${spec.kind}`, role: "img",
      "aria-label": `${columns[spec.value]} by ${columns[spec.label]}` });
    svg.append(el("text", { x: L, y: 14, class: "axis-title" }, `${columns[spec.value]} — ${columns[spec.label]}`));
    for (const t of scale) {
      svg.append(el("line", { x1: L, x2: W - R, y1: y(t), y2: y(t), class: "grid" }));
      svg.append(el("text", { x: L - 6, y: y(t) + 4, class: "tick", "text-anchor": "end" }, fmt.format(t)));
    }
    const every = Math.ceil(data.length / 12);
    if (spec.kind === "bar") {
      const slot = (W - L - R) / data.length;
      data.forEach(([label, v], i) => {
        const bar = el("rect", { x: x(i) + slot * 0.15, y: y(v), width: slot * 0.7, height: Math.max(0, y(0) - y(v)), class: "bar" });
        bar.append(el("title", {}, `${label}: ${v}`));
        svg.append(bar);
        if (i % every === 0) svg.append(el("text", { x: x(i) + slot / 2, y: H - B + 16, class: "tick", "text-anchor": "middle" }, label));
      });
    } else {
      const points = data.map(([, v], i) => `${x(i)},${y(v)}`).join(" ");
      svg.append(el("polyline", { points, class: "line" }));
      data.forEach(([label, v], i) => {
        const dot = el("circle", { cx: x(i), cy: y(v), r: 3.5, class: "dot" });
        dot.append(el("title", {}, `${label}: ${v}`));
        svg.append(dot);
        const anchor = i === 0 ? "start" : i === data.length - 1 ? "end" : "middle";
        if (i % every === 0 || i === data.length - 1) svg.append(el("text", { x: x(i), y: H - B + 16, class: "tick", "text-anchor": anchor }, label));
      });
    }
    return svg;
  }

  return { chartKind, draw };
})();
