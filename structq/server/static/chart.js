// Charts as inline SVG, drawn from a result table; no library, no network.
//
// chartKind() decides from the result's shape alone: a label column of dates, months or
// quarters is a time axis (a line); a few distinct labels are categories (bars). The value is
// a growth or ratio column when there is one (growth_pct, 占比, rate…), else the first
// numeric column. Anything else gets no chart: a wrong chart is worse than none. Labels that
// would overlap are thinned out (every k-th is written, each one in the tooltip).
"use strict";

const StructqChart = (() => {
  const SVG = "http://www.w3.org/2000/svg";
  const DATE = /^\d{4}-\d{2}(-\d{2})?([ T].*)?$/;
  const QUARTER = /^\d{4}\s*[-\/ ]?\s*Q[1-4]$|^\d{4}年(第?[一二三四1-4]季度|\d{1,2}月)?$/i;
  const RATIO = /growth|ratio|rate|pct|percent|share|yoy|mom|增长|增速|同比|环比|占比|比例|比率|率$/i;
  const MAX_BARS = 30;

  const isNumber = (v) => typeof v === "number" && Number.isFinite(v);
  const isTime = (v) => typeof v === "string" && (DATE.test(v) || QUARTER.test(v.trim()));

  function chartKind(columns, rows) {
    if (rows.length < 2 || columns.length < 2) return null;
    const numeric = columns.map((_, i) => rows.every((r) => r[i] === null || isNumber(r[i])) && rows.some((r) => isNumber(r[i])));
    const time = columns.findIndex((_, i) => !numeric[i] && rows.every((r) => isTime(r[i])));
    const label = time >= 0 ? time : columns.findIndex((_, i) => !numeric[i]);
    if (label < 0) return null;
    const values = numeric.map((n, i) => (n && i !== label ? i : -1)).filter((i) => i >= 0);
    if (!values.length) return null;
    const ratio = values.find((i) => RATIO.test(columns[i]));
    const value = ratio !== undefined ? ratio : values[0];
    if (time >= 0) return { kind: "line", label, value };
    const labels = rows.map((r) => r[label]);
    if (rows.length <= MAX_BARS && new Set(labels).size === labels.length) return { kind: "bar", label, value };
    return null;
  }

  const fmt = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });
  const full = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });

  // Width of a label in the 11px tick font, without measuring: CJK characters are about square.
  const labelWidth = (text) => [...text].reduce((w, ch) => w + (/[\u2e80-\u9fff\uff00-\uffef]/.test(ch) ? 11.5 : 6.6), 0);

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
    const min = Math.min(...data.map((d) => d[1]), 0);
    const scale = ticks(max);
    const low = min < 0 ? -ticks(-min)[ticks(-min).length - 1] : 0;  // a negative growth goes below zero
    if (low < 0) scale.unshift(...ticks(-min).slice(1).reverse().map((t) => -t));
    const top = scale[scale.length - 1] || 1;
    const x = (i) => L + (data.length === 1 ? 0 : (i * (W - L - R)) / (spec.kind === "bar" ? data.length : data.length - 1));
    const y = (v) => T + (H - T - B) * (1 - (v - low) / (top - low || 1));
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: `chart-${spec.kind}`, role: "img",
      "aria-label": `${columns[spec.value]} by ${columns[spec.label]}` });
    svg.append(el("text", { x: L, y: 14, class: "axis-title" }, `${columns[spec.value]} — ${columns[spec.label]}`));
    for (const t of scale) {
      svg.append(el("line", { x1: L, x2: W - R, y1: y(t), y2: y(t), class: "grid" }));
      svg.append(el("text", { x: L - 6, y: y(t) + 4, class: "tick", "text-anchor": "end" }, fmt.format(t)));
    }
    const room = (W - L - R) / Math.max(1, spec.kind === "bar" ? data.length : data.length - 1);
    const widest = Math.max(...data.map(([label]) => labelWidth(label)));
    // a line's first label starts at its point (the next, centred, must clear it: 1.5 widths)
    const every = Math.max(1, Math.ceil(((spec.kind === "line" ? 1.5 : 1) * widest + 8) / room));
    if (spec.kind === "bar") {
      const slot = (W - L - R) / data.length;
      data.forEach(([label, v], i) => {
        const bar = el("rect", { x: x(i) + slot * 0.15, y: Math.min(y(v), y(0)), width: slot * 0.7, height: Math.abs(y(0) - y(v)), class: "bar" });
        bar.append(el("title", {}, `${label}: ${full.format(v)}`));
        svg.append(bar);
        if (i % every === 0) svg.append(el("text", { x: x(i) + slot / 2, y: H - B + 16, class: "tick", "text-anchor": "middle" }, label));
      });
    } else {
      const points = data.map(([, v], i) => `${x(i)},${y(v)}`).join(" ");
      svg.append(el("polyline", { points, class: "line" }));
      data.forEach(([label, v], i) => {
        const dot = el("circle", { cx: x(i), cy: y(v), r: 3.5, class: "dot" });
        dot.append(el("title", {}, `${label}: ${full.format(v)}`));
        svg.append(dot);
        const anchor = i === 0 ? "start" : i === data.length - 1 ? "end" : "middle";
        // the last label (right-aligned at the last point) too, when it clears the one before it
        const lastShown = i === data.length - 1 && ((data.length - 1) % every) * room >= 1.5 * widest + 8;
        if (i % every === 0 || lastShown) svg.append(el("text", { x: x(i), y: H - B + 16, class: "tick", "text-anchor": anchor }, label));
      });
    }
    return svg;
  }

  return { chartKind, draw };
})();
