// The structq page: a conversation over /v1/ask?stream=1, each answer with its citations,
// plan, result tables (sortable, CSV download) and a chart. Plain JavaScript, no build step.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const state = { conversation: null, turns: 0, token: localStorage.getItem("structq-token") || "" };
const TABLE_ROWS = 200;

function headers() {
  const h = { "Content-Type": "application/json", "X-Structq-Client": "page" };
  if (state.token) h.Authorization = `Bearer ${state.token}`;
  return h;
}

function node(tag, attrs = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") n.className = v;
    else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) n.append(c);
  return n;
}

const cellText = (v) => (v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));

// --- start: sources, examples, token ----------------------------------------------------

async function getJSON(path) {
  const response = await fetch(path, { headers: headers() });
  if (response.status === 401) {
    $("#token-box").hidden = false;
    throw new Error("unauthorized");
  }
  return response.json();
}

async function start() {
  try {
    const [sources, examples] = await Promise.all([getJSON("/v1/sources"), getJSON("/v1/examples")]);
    $("#token-box").hidden = true;
    $("#sources").replaceChildren(...sources.sources.map((s) => node("span", { class: "chip", title: s.description }, s.source)));
    const list = $("#example-list");
    list.replaceChildren(...examples.examples.map((e) =>
      node("li", {}, node("button", { type: "button", class: "example", onclick: () => ask(e.question) }, e.question))));
    $("#examples").hidden = examples.examples.length === 0 || state.turns > 0;
  } catch (err) {
    if (err.message !== "unauthorized") console.error(err);
  }
}

$("#token-save").addEventListener("click", () => {
  state.token = $("#token").value.trim();
  localStorage.setItem("structq-token", state.token);
  start();
});

$("#reset").addEventListener("click", () => {
  state.conversation = null;
  state.turns = 0;
  $("#thread").replaceChildren();
  $("#examples").hidden = false;
  $("#question").focus();
});

$("#ask").addEventListener("submit", (event) => {
  event.preventDefault();
  const question = $("#question").value.trim();
  if (question) ask(question);
});

$("#question").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("#ask").requestSubmit();
  }
});

// --- asking: the event stream -----------------------------------------------------------

async function* sse(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const fields = {};
      for (const line of block.split("\n")) {
        const i = line.indexOf(": ");
        if (i > 0) fields[line.slice(0, i)] = line.slice(i + 2);
      }
      yield { event: fields.event || "message", data: JSON.parse(fields.data || "null") };
    }
  }
}

async function ask(question) {
  $("#examples").hidden = true;
  $("#question").value = "";
  const turn = newTurn(question);
  const send = $("#send");
  send.disabled = true;
  try {
    const response = await fetch("/v1/ask?stream=1", {
      method: "POST", headers: headers(),
      body: JSON.stringify(state.conversation ? { question, conversation: state.conversation }
                                            : { question, start_conversation: true }),
    });
    if (!response.ok) {
      showError(turn, await response.json());
      return;
    }
    for await (const { event, data } of sse(response)) {
      if (event === "plan") showPlan(turn, data.plan, true);
      else if (event === "step") showProgress(turn, data);
      else if (event === "answer" && data.delta !== undefined) showDelta(turn, data.delta);
      else if (event === "done") {
        state.conversation = data.conversation;
        showAnswer(turn, data);
      } else if (event === "error") showError(turn, data);
    }
  } catch (err) {
    showError(turn, { error: { code: "network", message: String(err), hint: "is the server still running?" } });
  } finally {
    send.disabled = false;
    $("#question").focus();
  }
}

// --- rendering ----------------------------------------------------------------------------

function newTurn(question) {
  state.turns += 1;
  const turn = $("#turn-template").content.firstElementChild.cloneNode(true);
  turn.id = `turn-${state.turns}`;
  turn.dataset.n = state.turns;
  $(".question", turn).textContent = question;
  $(".status", turn).textContent = "Planning…";
  $(".plan", turn).hidden = true;
  $("#thread").append(turn);
  turn.scrollIntoView({ behavior: "smooth", block: "start" });
  return turn;
}

const stepId = (turn, key) => `${turn.id}-step-${key}`;

function showPlan(turn, plan, running) {
  $(".plan", turn).hidden = false;
  $(".reasoning", turn).textContent = plan.reasoning || "";
  $(".steps", turn).replaceChildren(...plan.steps.map((s) => node("li", { id: stepId(turn, s.output_key), class: "step" },
    stepHeader(s), node("pre", { class: "query" }, typeof s.query === "string" ? s.query : JSON.stringify(s.query, null, 2)),
    node("p", { class: "meta" }, running ? "waiting…" : ""))));
  if (running) $(".status", turn).textContent = `Running ${plan.steps.length} step(s)…`;
}

function stepHeader(s) {
  const where = s.index ? `${s.source}/${s.index}` : s.source;
  return node("div", { class: "step-head" }, node("code", { class: "key" }, s.output_key),
    node("span", { class: "where" }, where), node("span", { class: "purpose" }, s.purpose || ""));
}

function showProgress(turn, step) {
  const li = document.getElementById(stepId(turn, step.output_key));
  if (!li) return;
  const meta = $(".meta", li);
  meta.classList.toggle("failed", step.status === "failed");
  if (step.status === "skipped") meta.textContent = `skipped: ${step.skipped}`;
  else if (step.status === "failed") meta.textContent = `failed: ${step.error.message}${step.error.hint ? ` (${step.error.hint})` : ""}`;
  else meta.textContent = `${step.row_count} rows · ${Math.round(step.elapsed_ms)} ms`;
}

// The answer as the model writes it: provisional text, replaced by the checked answer on "done".
function showDelta(turn, delta) {
  const answer = $(".answer", turn);
  let writing = $(".answer-writing", answer);
  if (!writing) {
    writing = node("div", { class: "answer-text answer-writing" });
    answer.replaceChildren(writing);
    $(".status", turn).textContent = "Writing the answer…";
  }
  writing.textContent += delta;
}

function showAnswer(turn, doc) {
  $(".status", turn).textContent = `plan: ${doc.plan_source}`;
  $(".answer", turn).replaceChildren(...citedText(turn, doc.answer, doc.steps.map((s) => s.output_key)));
  $(".notes", turn).replaceChildren(...doc.notes.map((n) => node("p", { class: "note" }, n)));
  $(".reasoning", turn).textContent = doc.plan.reasoning || "";
  $(".steps", turn).replaceChildren(...doc.steps.map((s) => stepItem(turn, s)));
  $(".plan", turn).hidden = false;
  const final = [...doc.steps].reverse().find((s) => !s.skipped && s.row_count > 0);
  const chart = final ? StructqChart.draw(final.columns, final.rows) : null;
  $(".chart", turn).replaceChildren(...(chart ? [chart] : []));
}

function citedText(turn, text, keys) {
  // "[key]" becomes a link to that step; everything else stays text.
  const parts = [];
  const pattern = /\[([A-Za-z_]\w*)\]/g;
  let last = 0, m;
  while ((m = pattern.exec(text))) {
    if (!keys.includes(m[1])) continue;
    parts.push(text.slice(last, m.index));
    const key = m[1];
    parts.push(node("a", { href: `#${stepId(turn, key)}`, class: "cite", onclick: () => flash(stepId(turn, key)) }, `[${key}]`));
    last = m.index + m[0].length;
  }
  parts.push(text.slice(last));
  return [node("div", { class: "answer-text" }, ...parts)];
}

function flash(id) {
  const target = document.getElementById(id);
  if (!target) return;
  target.classList.remove("flash");
  void target.offsetWidth;
  target.classList.add("flash");
}

function stepItem(turn, s) {
  const meta = s.skipped ? s.skipped
    : `${s.row_count} rows · ${Math.round(s.elapsed_ms)} ms${s.truncated ? " · truncated: more rows exist" : ""}`;
  const li = node("li", { id: stepId(turn, s.output_key), class: "step" + (s.skipped ? " skipped" : "") },
    stepHeader(s), node("pre", { class: "query", title: "the query as it ran (after the sandbox)" },
      typeof s.query === "string" ? s.query : JSON.stringify(s.query, null, 2)),
    boundParams(s.params), node("p", { class: "meta" }, meta));
  if (!s.skipped && s.columns.length) li.append(resultTable(s));
  return li;
}

function boundParams(params) {
  // The values bound to the query's placeholders: row-filter variables and earlier steps' results.
  const names = Object.keys(params || {});
  if (!names.length) return null;
  const shown = names.map((k) => {
    const v = JSON.stringify(params[k]);
    return `${k} = ${v.length > 120 ? v.slice(0, 117) + "…" : v}`;
  });
  return node("p", { class: "params" }, "bound: ", shown.join("; "));
}

// --- tables: sortable, CSV of the full result -----------------------------------------------

function resultTable(step) {
  const wrap = node("div", { class: "result" });
  let rows = step.rows.slice();
  let sortBy = -1, descending = false;
  const table = node("table");
  const head = node("tr", {}, ...step.columns.map((c, i) => node("th", { scope: "col", onclick: () => sort(i) }, c)));
  table.append(node("thead", {}, head));
  const body = node("tbody");
  table.append(body);

  function fill() {
    body.replaceChildren(...rows.slice(0, TABLE_ROWS).map((r) =>
      node("tr", {}, ...r.map((v) => node("td", { class: typeof v === "number" ? "num" : "" }, cellText(v))))));
    [...head.children].forEach((th, i) => th.setAttribute("aria-sort", i === sortBy ? (descending ? "descending" : "ascending") : "none"));
  }
  function sort(i) {
    descending = sortBy === i ? !descending : false;
    sortBy = i;
    const sign = descending ? -1 : 1;
    rows.sort((a, b) => {
      const x = a[i], y = b[i];
      if (typeof x === "number" && typeof y === "number") return sign * (x - y);
      return sign * cellText(x).localeCompare(cellText(y), undefined, { numeric: true });
    });
    fill();
  }
  fill();
  const more = step.rows.length > TABLE_ROWS ? node("span", { class: "hint" }, `first ${TABLE_ROWS} of ${step.rows.length} rows shown; the CSV has all`) : null;
  const download = node("button", { type: "button", class: "secondary csv", onclick: () => downloadCsv(step) }, "Download CSV");
  wrap.append(node("div", { class: "table-scroll" }, table), node("div", { class: "table-actions" }, download, more));
  return wrap;
}

function csvField(v) {
  const t = cellText(v);
  return /[",\n\r]/.test(t) ? `"${t.replace(/"/g, '""')}"` : t;
}

function downloadCsv(step) {
  const lines = [step.columns, ...step.rows].map((r) => r.map(csvField).join(","));
  const blob = new Blob(["\ufeff" + lines.join("\r\n") + "\r\n"], { type: "text/csv;charset=utf-8" });
  const link = node("a", { href: URL.createObjectURL(blob), download: `${step.output_key}.csv` });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
}

// --- errors in place ------------------------------------------------------------------------

function showError(turn, body) {
  const e = (body && body.error) || { code: "error", message: "unknown error" };
  $(".status", turn).textContent = "";
  turn.querySelectorAll(".step .meta").forEach((m) => { if (m.textContent === "waiting…") m.textContent = "not run"; });
  const [first, ...rest] = String(e.message).split("\n");
  $(".answer", turn).replaceChildren(node("div", { class: "error", role: "alert" },
    node("p", { class: "error-message" }, node("code", {}, e.code), " ", first),
    e.hint ? node("p", { class: "error-hint" }, "Hint: ", e.hint) : null,
    rest.length ? node("details", {}, node("summary", {}, "details"), node("pre", { class: "query" }, rest.join("\n"))) : null));
}

start();
