"use strict";
// Shared by the dashboard and the session page. Everything the daemon sends is shown as text (textContent),
// never parsed as HTML. URLs are relative to the page (ROOT), so a proxy may serve the daemon under a path.
const DATA = JSON.parse(document.getElementById("data").textContent);
const ROOT = document.body.dataset.root || "";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (key === "data") for (const [k, v] of Object.entries(value)) node.dataset[k] = v;
    else if (key === "on") for (const [k, v] of Object.entries(value)) node.addEventListener(k, v);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function setText(node, text) {
  text = text === null || text === undefined ? "" : String(text);
  if (node.textContent !== text) node.textContent = text;
}

function fmtTime(t) {
  if (!t) return "";
  const d = new Date(t * 1000);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

function fmtDuration(s) {
  if (s === null || s === undefined) return "";
  s = Math.max(0, Math.round(s));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
}

function fmtNumber(n) {
  return n === null || n === undefined ? "" : Number(n).toLocaleString("en-US");
}

function fmtCost(row) {
  if (row.cost === null || row.cost === undefined) return "";
  return row.cost.toFixed(row.cost < 1 ? 4 : 2) + " " + (row.currency || "USD");
}

function short(id) {
  return id && id.length > 13 ? id.slice(0, 8) + "…" + id.slice(-4) : id || "";
}

function firstLine(text, max) {
  const line = String(text || "").split("\n")[0];
  return line.length > (max || 120) ? line.slice(0, max || 120) + "…" : line;
}

function sessionHref(id) {
  return ROOT + "sessions/" + encodeURIComponent(id);
}

function modelText(row) {
  return [row.provider, row.model_label || row.model].filter(Boolean).join(" / ");
}

// A state-changing request: the cookie authenticates; X-Agent-Fleet proves it is this page, not a form.
async function post(path, body) {
  try {
    const response = await fetch(ROOT + path, {
      method: "POST",
      credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-Agent-Fleet": "1"},
      body: JSON.stringify(body || {}),
    });
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    return {ok: response.ok, status: response.status, data: data};
  } catch (e) {
    return {ok: false, status: 0, data: {error: {message: String(e)}}};
  }
}

function errorText(result) {
  const message = result.data && result.data.error && result.data.error.message;
  return message || "failed (HTTP " + result.status + ")";
}

// The daemon's updates (GET v1/updates) as server-sent events; a "reset" means updates were missed: reload.
function followUpdates(query, handlers) {
  const url = ROOT + "v1/updates?after=" + DATA.feed + (query ? "&" + query : "");
  const source = new EventSource(url, {withCredentials: true});
  source.addEventListener("reset", () => location.reload());
  for (const [kind, handle] of Object.entries(handlers)) {
    source.addEventListener(kind, (event) => handle(JSON.parse(event.data)));
  }
  return source;
}

function whatOf(a) {
  if (a.command) return Array.isArray(a.command) ? a.command.join(" ") : a.command;
  if (a.tool) return a.tool;
  if (a.kind === "network") return (a.host || "any host") + (a.port ? ":" + a.port : "");
  if (a.paths && a.paths.length) return a.paths.join(" ");
  return "";
}

const DECIDED = {allow_once: "allowed once", allow_for_session: "allowed for the session",
  decline: "declined", cancel: "cancelled"};

// A pending approval with what a person needs to decide it, and the three answers.
function approvalCard(a, opts) {
  const status = el("span", {class: "status muted small"});
  const reason = el("input", {name: "reason", type: "text", maxlength: "2000",
    placeholder: "reason for a decline (the agent is told)"});
  const buttons = [];
  const decide = async (decision) => {
    for (const b of buttons) b.disabled = true;
    setText(status, "sending…");
    const body = {decision: decision};
    if (decision === "decline" && reason.value.trim()) body.reason = reason.value.trim();
    const result = await post("v1/approvals/" + encodeURIComponent(a.approval_id), body);
    if (result.ok) {
      card.classList.add("decided");
      setText(status, DECIDED[decision] || decision);
    } else {
      setText(status, errorText(result));
      for (const b of buttons) b.disabled = false;
    }
  };
  const button = (text, decision, cls) => {
    const b = el("button", {type: "button", class: cls, data: {decide: decision}, on: {click: () => decide(decision)}}, text);
    buttons.push(b);
    return b;
  };
  const kv = el("dl", {class: "kv"});
  const add = (label, value) => { if (value) kv.append(el("dt", {}, label), el("dd", {}, value)); };
  if (!(opts && opts.inSession) && a.session_id) {
    add("session", el("a", {href: sessionHref(a.session_id), class: "mono"}, short(a.session_id)));
  }
  add("task", a.task_id && (a.task_id + (a.batch_id ? "  (batch " + a.batch_id + ")" : "")));
  if (!(opts && opts.inSession)) add("prompt", a.prompt && firstLine(a.prompt, 300));
  add("cwd", a.cwd && el("code", {}, a.cwd));
  const why = [a.rule ? "rule " + a.rule : "", a.rule_means || a.why || ""].filter(Boolean).join(": ");
  add("why asked", why);
  const until = el("span", {class: "countdown", data: {deadline: a.deadline || ""}});
  add("times out", a.deadline ? until : null);
  const card = el("div", {class: "card waiting", data: {approval: a.approval_id}},
    el("h3", {}, a.kind + " ", el("code", {}, whatOf(a))),
    kv,
    el("div", {class: "actions"},
      button("Allow once", "allow_once", "primary"),
      button("Allow for this session", "allow_for_session", ""),
      reason,
      button("Decline", "decline", "danger"),
      status));
  return card;
}

// Countdowns and running durations, once a second (text only: no element is replaced).
function tick() {
  const now = Date.now() / 1000;
  for (const node of document.querySelectorAll("[data-deadline]")) {
    const deadline = Number(node.dataset.deadline);
    if (deadline) setText(node, fmtTime(deadline) + " (in " + fmtDuration(deadline - now) + ")");
  }
  for (const node of document.querySelectorAll("[data-since]")) {
    const since = Number(node.dataset.since);
    if (since) setText(node, fmtDuration(now - since));
  }
}
setInterval(tick, 1000);
