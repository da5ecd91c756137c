// The dashboard: approvals waiting for a person, a page of sessions (filtered server-side: the form is a GET),
// and the batches. Built once from the page's data, then kept up to date from the daemon's updates: each
// row is changed in place, so a button stays the button it was while a person clicks it.

const approvalsBox = document.getElementById("approvals");
const approvalsCount = document.getElementById("approvals-count");
const runningCount = document.getElementById("running-count");
const sessionsBody = document.querySelector("#sessions tbody");
const batchesBody = document.querySelector("#batches tbody");
const pageInfo = document.getElementById("page-info");

// -- approvals ------------------------------------------------------------------------------------------

const approvals = new Map();

function showApprovalCount() {
  setText(approvalsCount, String(approvals.size));
  approvalsBox.closest("section").classList.toggle("empty", approvals.size === 0);
  const none = document.getElementById("no-approvals");
  none.hidden = approvals.size > 0;
}

function addApproval(a) {
  if (approvals.has(a.approval_id)) return;
  const card = approvalCard(a, {});
  approvals.set(a.approval_id, card);
  approvalsBox.append(card);
  showApprovalCount();
}

function removeApproval(decided) {
  const card = approvals.get(decided.approval_id);
  if (!card) return;
  approvals.delete(decided.approval_id);
  card.remove();
  showApprovalCount();
}

// -- sessions -------------------------------------------------------------------------------------------

const sessions = new Map();
let total = DATA.total;
let running = DATA.running;
let newestShown = Math.max(DATA.now, ...DATA.sessions.map((s) => s.created));

function showPageInfo() {
  const shown = sessions.size;
  const first = shown ? DATA.offset + 1 : 0;
  setText(pageInfo, shown ? first + "–" + (DATA.offset + shown) + " of " + fmtNumber(total) : "no sessions");
  setText(runningCount, fmtNumber(running));
}

function matches(s) {
  const f = DATA.filters;
  if (f.state && !f.state.split(",").includes(s.state)) return false;
  if (f.batch && s.batch_id !== f.batch) return false;
  if (f.provider && s.provider !== f.provider) return false;
  if (f.q) {
    const hay = [s.session_id, s.task_id, s.batch_id, s.prompt, s.cwd, s.model].filter(Boolean).join("\n");
    if (!hay.toLowerCase().includes(f.q.toLowerCase())) return false;
  }
  return true;
}

function filterHref(extra) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(Object.assign({}, DATA.filters, extra || {}))) {
    if (value) params.set(key, value);
  }
  const query = params.toString();
  return query ? "?" + query : "./";
}

function sessionRow(s) {
  const r = {};
  r.link = el("a", {class: "mono", href: sessionHref(s.session_id)}, short(s.session_id));
  r.prompt = el("div", {class: "prompt small"});
  r.task = el("span", {class: "mono"});
  r.batch = el("a", {class: "small mono"});
  r.cwd = el("span", {class: "mono small"});
  r.model = el("span", {class: "small"});
  r.scripted = el("span", {class: "badge scripted", title: "served by agent_fleet.testing: not a real model"}, "scripted");
  r.state = el("span", {class: "badge"});
  r.step = el("span", {class: "small muted"});
  r.client = el("span", {class: "badge no-client"}, "no client");
  r.started = el("td", {class: "small"});
  r.duration = el("td", {class: "num"});
  r.tokens = el("td", {class: "num"});
  r.cost = el("td", {class: "num"});
  r.stop = el("button", {type: "button", class: "danger", data: {stop: s.session_id},
    title: "Interrupt the running turn: the session stays, and can be continued"}, "Interrupt");
  r.stop.addEventListener("click", async () => {
    r.stop.disabled = true;
    setText(r.stop, "Interrupting…");
    const result = await post("v1/sessions/" + encodeURIComponent(s.session_id) + "/stop");
    if (!result.ok) { setText(r.stop, "Interrupt"); r.stop.disabled = false; r.stop.title = errorText(result); }
  });
  r.tr = el("tr", {data: {session: s.session_id}},
    el("td", {}, r.link, r.prompt),
    el("td", {}, r.task, el("br"), r.batch),
    el("td", {}, r.cwd),
    el("td", {}, r.model, " ", r.scripted),
    el("td", {class: "state"}, r.state, " ", r.step, " ", r.client),
    r.started, r.duration, r.tokens, r.cost,
    el("td", {}, r.stop));
  updateSession(r, s);
  return r;
}

function updateSession(r, s) {
  r.row = s;
  setText(r.prompt, firstLine(s.prompt, 140));
  r.prompt.title = s.prompt || "";
  setText(r.task, s.task_id || "");
  setText(r.batch, s.batch_id || "");
  if (s.batch_id) r.batch.href = filterHref({batch: s.batch_id}); else r.batch.removeAttribute("href");
  const cwd = s.cwd || "";
  setText(r.cwd, cwd.split("/").slice(-2).join("/"));
  r.cwd.title = cwd;
  setText(r.model, modelText(s));
  r.scripted.hidden = !s.scripted;
  setText(r.state, s.state);
  r.state.className = "badge state-" + s.state;
  setText(r.step, s.state === "running" ? s.step || "" : "");
  const alone = s.state === "running" && s.loaded && !s.clients;
  r.client.hidden = !alone;
  r.client.title = s.orphan_deadline
    ? "no client reads its events: its turn is interrupted at " + fmtTime(s.orphan_deadline) + " unless one returns"
    : "no client reads its events";
  setText(r.started, fmtTime(s.created));
  if (s.state === "running") r.duration.dataset.since = s.created;
  else { delete r.duration.dataset.since; setText(r.duration, fmtDuration(s.duration)); }
  setText(r.tokens, fmtNumber(s.tokens));
  setText(r.cost, fmtCost(s));
  r.stop.hidden = s.state !== "running";
  if (s.state !== "running") { r.stop.disabled = false; setText(r.stop, "Interrupt"); }
}

function onSession(s) {
  if (typeof s.fleet_running === "number") running = s.fleet_running;  // every session update says it
  const known = sessions.get(s.session_id);
  if (known) {
    updateSession(known, s);
    showPageInfo();
    return;
  }
  if (DATA.before || !matches(s) || s.created <= newestShown) {
    showPageInfo();  // only the first page takes sessions, and only those newer than it shows
    return;
  }
  newestShown = s.created;
  const r = sessionRow(s);
  sessions.set(s.session_id, r);
  sessionsBody.prepend(r.tr);
  total += 1;
  while (sessions.size > DATA.limit) {  // the page keeps its size: the oldest goes to the next page
    const last = sessionsBody.lastElementChild;
    sessions.delete(last.dataset.session);
    last.remove();
  }
  showPageInfo();
}

// -- batches --------------------------------------------------------------------------------------------

const batches = new Map();

function taskRow(t) {
  const r = {state: el("span", {class: "badge"}), session: el("a", {class: "mono small"}), prompt: el("span", {class: "small muted"})};
  r.tr = el("tr", {data: {task: t.task_id}}, el("td", {class: "mono"}, t.task_id), el("td", {}, r.state), el("td", {}, r.session), el("td", {class: "prompt"}, r.prompt));
  return r;
}

function updateTask(r, t, linked) {
  setText(r.state, t.state + (t.status ? ": " + t.status : ""));
  r.state.className = "badge state-" + (t.status || t.state);
  r.state.title = t.reason || "";
  setText(r.session, t.session_id ? short(t.session_id) : "");
  // A batch the daemon runs keeps its sessions inside it (its report shows them): no page to link to.
  if (t.session_id && linked) r.session.href = sessionHref(t.session_id); else r.session.removeAttribute("href");
  r.session.title = t.session_id || "";
  setText(r.prompt, firstLine(t.prompt, 100));
}

function batchRow(b) {
  const r = {tasks: new Map()};
  r.name = el("div", {});
  r.id = el("div", {class: "mono small muted"});
  r.kind = el("span", {class: "badge"});
  r.state = el("span", {class: "badge"});
  r.reason = el("div", {class: "small muted"});
  r.bar = el("span");
  r.counts = el("span", {class: "small"});
  r.summary = el("summary", {});
  r.taskBody = el("tbody");
  r.details = el("details", {}, r.summary, el("table", {class: "tasks"}, r.taskBody));
  r.stop = el("button", {type: "button", class: "danger", data: {stopBatch: b.batch_id},
    title: "Stop starting tasks and interrupt the running ones (it can be resumed)"}, "Stop");
  r.stop.addEventListener("click", async () => {
    r.stop.disabled = true;
    setText(r.stop, "Stopping…");
    const result = await post("v1/batches/" + encodeURIComponent(b.batch_id) + "/stop");
    if (!result.ok) { setText(r.stop, "Stop"); r.stop.disabled = false; r.stop.title = errorText(result); }
  });
  r.sessionsLink = el("a", {href: filterHref({batch: b.batch_id, state: ""}), class: "small"}, "sessions");
  r.report = el("a", {href: ROOT + "v1/batches/" + encodeURIComponent(b.batch_id) + "/report", class: "small"}, "report");
  r.tr = el("tr", {data: {batch: b.batch_id}},
    el("td", {}, r.name, r.id, r.kind),
    el("td", {class: "state"}, r.state, r.reason),
    el("td", {}, el("span", {class: "progress"}, r.bar), " ", r.counts),
    el("td", {}, r.details),
    el("td", {}, el("div", {class: "actions"}, r.stop, r.sessionsLink, r.report)));
  updateBatch(r, b);
  return r;
}

function updateBatch(r, b) {
  const client = b.kind === "client";
  setText(r.name, b.name || b.batch_id);
  setText(r.id, b.name ? b.batch_id : "");
  setText(r.kind, client ? "batch --server" : "run here");
  r.kind.title = client ? "run by a client (agent-fleet batch --server): its sessions are here" : "run by this daemon";
  setText(r.state, b.state + (b.stop_asked && b.state === "running" ? " (stop asked)" : ""));
  r.state.className = "badge state-" + b.state;
  setText(r.reason, b.reason || (client && b.state === "running" ? "last heard " + fmtTime(b.updated) : ""));
  const totalTasks = b.total || 0;
  r.bar.style.width = (totalTasks ? Math.round((100 * b.done) / totalTasks) : 0) + "%";
  const other = Object.entries(b.states || {}).filter(([k]) => !k.includes(":") && k !== "finished").map(([k, n]) => n + " " + k);
  setText(r.counts, b.done + "/" + totalTasks + " (" + b.ok + " ok)" + (other.length ? ", " + other.join(", ") : ""));
  const tasks = b.tasks || [];
  setText(r.summary, tasks.length + (tasks.length < totalTasks ? " of " + totalTasks : "") + " tasks");
  for (const t of tasks) {
    let tr = r.tasks.get(t.task_id);
    if (!tr) { tr = taskRow(t); r.tasks.set(t.task_id, tr); r.taskBody.append(tr.tr); }
    updateTask(tr, t, client);
  }
  r.stop.hidden = b.state !== "running" || Boolean(b.stop_asked);
  r.report.hidden = client;
  r.sessionsLink.hidden = !client;
}

function onBatch(b) {
  const known = batches.get(b.batch_id);
  if (known) { updateBatch(known, b); return; }
  const r = batchRow(b);
  batches.set(b.batch_id, r);
  batchesBody.prepend(r.tr);
  document.getElementById("no-batches").hidden = true;
}

// -- start --------------------------------------------------------------------------------------------

for (const a of DATA.approvals) addApproval(a);
showApprovalCount();
for (const s of DATA.sessions) {
  const r = sessionRow(s);
  sessions.set(s.session_id, r);
  sessionsBody.append(r.tr);
}
for (const b of DATA.batches) {
  const r = batchRow(b);
  batches.set(b.batch_id, r);
  batchesBody.append(r.tr);
}
document.getElementById("no-batches").hidden = DATA.batches.length > 0;
showPageInfo();

// The filter form shows what the page was asked for; the pager keeps the filters.
const form = document.getElementById("filters");
form.elements.state.value = DATA.filters.state;
form.elements.batch.value = DATA.filters.batch;
form.elements.provider.value = DATA.filters.provider;
form.elements.q.value = DATA.filters.q;
const newest = document.getElementById("newest");
const older = document.getElementById("older");
newest.href = filterHref({});
newest.hidden = !DATA.before;
older.href = DATA.next ? filterHref({before: DATA.next}) : "";
older.hidden = !DATA.next;
tick();

followUpdates("", {
  session: onSession,
  batch: onBatch,
  approval: addApproval,
  approval_decided: removeApproval,
});
