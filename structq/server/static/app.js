// The structq page: a conversation over /v1/ask?stream=1, each answer with its citations,
// plan, result tables (sortable, CSV download) and a chart. Plain JavaScript, no build step.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const state = { conversation: null, turns: 0, token: localStorage.getItem("structq-token") || "" };
const TABLE_ROWS = 200;

// --- the interface's language: the browser's (Chinese or English) -------------------------

const LANG = (navigator.languages && navigator.languages[0]) || navigator.language || "en";
const ZH = /^zh/i.test(LANG);
const TEXT = {
  en: {
    tagline: "Questions about your data, answered by checked, read-only query plans",
    reset: "New conversation", tokenLabel: "This server needs an API token", tokenSave: "Use token",
    tokenHint: "Ask the administrator for one. It stays in this browser only.",
    examplesTitle: "Start from a verified question",
    examplesHint: "These are answered by plans checked in the manifests, without a model.",
    fromFeedback: "from feedback", placeholder: "Ask a question, or a follow-up (那他上个月的项目呢？)", send: "Ask",
    plan: "Plan", planning: "Planning…", running: (n) => `Running ${n} step(s)…`, writing: "Writing the answer…",
    waiting: "waiting…", notRun: "not run", skipped: (why) => `skipped: ${why}`, failed: "failed",
    rows: (n) => `${n} rows`, truncated: "truncated: more rows exist", planSource: (s) => `plan: ${s}`,
    bound: "bound: ", hint: "Hint: ", details: "details", note: "note: ", csv: "Download CSV",
    firstRows: (n, all) => `first ${n} of ${all} rows shown; the CSV has all`,
    hidden: (cols) => `show ${cols}`, asRan: "the query as it ran (after the sandbox)",
    good: "Good answer", bad: "Wrong answer", commentPlaceholder: "What was wrong? (optional)", sendFeedback: "Send",
    thanks: "Thank you: a reviewer will see it.", network: "is the server still running?",
  },
  zh: {
    tagline: "关于数据的问题，由经过检查的只读查询计划回答",
    reset: "新对话", tokenLabel: "此服务需要 API 令牌", tokenSave: "使用令牌",
    tokenHint: "请向管理员索取；令牌只保存在本浏览器中。",
    examplesTitle: "从经过验证的问题开始", examplesHint: "这些问题由清单中检查过的计划回答，无需模型。",
    fromFeedback: "来自反馈", placeholder: "输入问题或追问（那他上个月的项目呢？）", send: "提问",
    plan: "查询计划", planning: "正在制定计划…", running: (n) => `正在执行 ${n} 个步骤…`, writing: "正在撰写回答…",
    waiting: "等待中…", notRun: "未执行", skipped: (why) => `跳过：${why}`, failed: "失败",
    rows: (n) => `${n} 行`, truncated: "已截断：还有更多行", planSource: (s) => `计划来源：${s}`,
    bound: "绑定：", hint: "提示：", details: "详情", note: "注意：", csv: "下载 CSV",
    firstRows: (n, all) => `显示前 ${n} 行，共 ${all} 行；CSV 包含全部`,
    hidden: (cols) => `显示 ${cols}`, asRan: "实际执行的查询（经沙箱处理后）",
    good: "回答正确", bad: "回答有误", commentPlaceholder: "哪里不对？（可选）", sendFeedback: "提交",
    thanks: "谢谢，审核人员会看到。", network: "服务是否仍在运行？",
  },
}[ZH ? "zh" : "en"];

function translatePage() {
  document.documentElement.lang = ZH ? "zh-CN" : "en";
  document.querySelectorAll("[data-i18n]").forEach((n) => { n.textContent = TEXT[n.dataset.i18n]; });
  $("#question").placeholder = TEXT.placeholder;
}

// --- numbers: separators, sensible decimals; identifiers and years as written ---------------

const NUMBER = new Intl.NumberFormat(ZH ? "zh-CN" : LANG, { maximumFractionDigits: 2 });
const AS_WRITTEN = /(^|_)(id|code|no|year|zip)$|编号|代码|年份|号$/i;

function shownValue(v, column) {
  if (typeof v === "number" && Number.isFinite(v) && !AS_WRITTEN.test(column)) return NUMBER.format(v);
  return cellText(v);
}

//: Columns a search result carries for its own sake, hidden until asked for.
const isInternal = (column) => column === "_id" || column === "_score";

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
      node("li", {}, node("button", { type: "button", class: "example" + (e.from_feedback ? " from-feedback" : ""),
                                      onclick: () => ask(e.question) }, e.question,
        e.from_feedback ? node("span", { class: "badge", title: e.draft ? "draft" : "" }, TEXT.fromFeedback) : null))));
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
    showError(turn, { error: { code: "network", message: String(err), hint: TEXT.network } });
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
  $(".status", turn).textContent = TEXT.planning;
  $(".plan summary", turn).textContent = TEXT.plan;
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
    node("p", { class: "meta" }, running ? TEXT.waiting : ""))));
  if (running) $(".status", turn).textContent = TEXT.running(plan.steps.length);
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
  if (step.status === "skipped") meta.textContent = TEXT.skipped(step.skipped);
  else if (step.status === "failed") meta.textContent = `${TEXT.failed}: ${step.error.message}${step.error.hint ? ` (${step.error.hint})` : ""}`;
  else meta.textContent = `${TEXT.rows(step.row_count)} · ${Math.round(step.elapsed_ms)} ms`;
}

// The answer as the model writes it: provisional text, replaced by the checked answer on "done".
function showDelta(turn, delta) {
  const answer = $(".answer", turn);
  let writing = $(".answer-writing", answer);
  if (!writing) {
    writing = node("div", { class: "answer-text answer-writing" });
    answer.replaceChildren(writing);
    $(".status", turn).textContent = TEXT.writing;
  }
  writing.textContent += delta;
}

function showAnswer(turn, doc) {
  $(".status", turn).textContent = TEXT.planSource(doc.plan_source);
  const shown = doc.steps.filter((s) => !s.skipped && s.columns.length).map((s) => s.columns);
  $(".answer", turn).replaceChildren(StructqMarkdown.render(doc.answer, {
    keys: doc.steps.map((s) => s.output_key), shown,
    cite: (key) => node("a", { href: `#${stepId(turn, key)}`, class: "cite", onclick: () => flash(stepId(turn, key)) }, `[${key}]`),
  }));
  $(".notes", turn).replaceChildren(...doc.notes.map((n) => node("p", { class: "note", "data-label": TEXT.note }, n)));
  $(".reasoning", turn).textContent = doc.plan.reasoning || "";
  $(".steps", turn).replaceChildren(...doc.steps.map((s) => stepItem(turn, s)));
  $(".plan", turn).hidden = false;
  const final = [...doc.steps].reverse().find((s) => !s.skipped && s.row_count > 0);
  const chart = final ? StructqChart.draw(final.columns, final.rows) : null;
  $(".chart", turn).replaceChildren(...(chart ? [chart] : []));
  if (doc.answer_id) $(".feedback", turn).replaceChildren(feedbackBox(doc.answer_id));
}

// --- feedback: 👍 / 👎 with an optional comment ------------------------------------------------

// A tick or a cross drawn as SVG: an emoji would need a font the machine may not have.
function mark(rating) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("class", "mark");
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
  path.setAttribute("d", rating === "up" ? "M3 8.5l3.2 3.2L13 4.8" : "M4 4l8 8M12 4l-8 8");
  svg.append(path);
  return svg;
}

function feedbackBox(answerId) {
  const box = node("div", { class: "feedback-box" });
  const comment = node("input", { type: "text", class: "comment", placeholder: TEXT.commentPlaceholder, maxlength: "2000", hidden: "" });
  const sendButton = node("button", { type: "button", class: "secondary send-feedback", hidden: "" }, TEXT.sendFeedback);
  let rating = null;
  async function send() {
    const body = { answer_id: answerId, rating };
    if (comment.value.trim()) body.comment = comment.value.trim();
    const response = await fetch("/v1/feedback", { method: "POST", headers: headers(), body: JSON.stringify(body) });
    if (response.ok) box.replaceChildren(node("span", { class: "thanks" }, TEXT.thanks));
    else box.append(node("span", { class: "hint" }, (await response.json()).error.message));
  }
  const choose = (value) => () => {
    rating = value;
    box.querySelectorAll("button.rate").forEach((b) => b.classList.toggle("chosen", b.dataset.rating === value));
    comment.hidden = false;
    sendButton.hidden = false;
    if (value === "down") comment.focus();
  };
  box.append(
    node("button", { type: "button", class: "secondary rate", "data-rating": "up", title: TEXT.good, onclick: choose("up") }, mark("up"), TEXT.good),
    node("button", { type: "button", class: "secondary rate", "data-rating": "down", title: TEXT.bad, onclick: choose("down") }, mark("down"), TEXT.bad),
    comment, sendButton);
  sendButton.addEventListener("click", send);
  comment.addEventListener("keydown", (event) => { if (event.key === "Enter" && !event.isComposing) send(); });
  return box;
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
    : `${TEXT.rows(s.row_count)} · ${Math.round(s.elapsed_ms)} ms${s.truncated ? ` · ${TEXT.truncated}` : ""}`;
  const li = node("li", { id: stepId(turn, s.output_key), class: "step" + (s.skipped ? " skipped" : "") },
    stepHeader(s), node("pre", { class: "query", title: TEXT.asRan },
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
  return node("p", { class: "params" }, TEXT.bound, shown.join("; "));
}

// --- tables: sortable, CSV of the full result -----------------------------------------------

function resultTable(step) {
  const wrap = node("div", { class: "result" });
  let rows = step.rows.slice();
  let sortBy = -1, descending = false;
  const internal = step.columns.filter(isInternal);
  let showInternal = false;
  const table = node("table");
  const head = node("tr");
  table.append(node("thead", {}, head));
  const body = node("tbody");
  table.append(body);
  const visible = () => step.columns.map((c, i) => i).filter((i) => showInternal || !isInternal(step.columns[i]));

  function fill() {
    const shown = visible();
    head.replaceChildren(...shown.map((i) => node("th", { scope: "col", "data-column": i, onclick: () => sort(i) }, step.columns[i])));
    body.replaceChildren(...rows.slice(0, TABLE_ROWS).map((r) =>
      node("tr", {}, ...shown.map((i) => node("td", { class: typeof r[i] === "number" ? "num" : "", title: cellText(r[i]) },
                                                  shownValue(r[i], step.columns[i]))))));
    [...head.children].forEach((th) => th.setAttribute("aria-sort", Number(th.dataset.column) === sortBy ? (descending ? "descending" : "ascending") : "none"));
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
  const more = step.rows.length > TABLE_ROWS ? node("span", { class: "hint" }, TEXT.firstRows(TABLE_ROWS, step.rows.length)) : null;
  const download = node("button", { type: "button", class: "secondary csv", onclick: () => downloadCsv(step) }, TEXT.csv);
  const reveal = internal.length ? node("button", { type: "button", class: "secondary reveal", onclick: (event) => {
    showInternal = true;
    event.target.remove();
    fill();
  } }, TEXT.hidden(internal.join(", "))) : null;
  wrap.append(node("div", { class: "table-scroll" }, table), node("div", { class: "table-actions" }, download, reveal, more));
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
  turn.querySelectorAll(".step .meta").forEach((m) => { if (m.textContent === TEXT.waiting) m.textContent = TEXT.notRun; });
  const [first, ...rest] = String(e.message).split("\n");
  $(".answer", turn).replaceChildren(node("div", { class: "error", role: "alert" },
    node("p", { class: "error-message" }, node("code", {}, e.code), " ", first),
    e.hint ? node("p", { class: "error-hint" }, TEXT.hint, e.hint) : null,
    rest.length ? node("details", {}, node("summary", {}, TEXT.details), node("pre", { class: "query" }, rest.join("\n"))) : null));
}

translatePage();
start();
