// A session's page: the conversation as it happens, read from the session's event stream (as a watcher: the
// page is not the session's client), with the notes a batch runner left (gates, follow-ups), its turns'
// prompts, the approvals it waits on, and the buttons to interrupt, steer or continue it.

const SESSION = DATA.session;
const SID = SESSION.session_id;
const conversation = document.getElementById("conversation");
const waiting = document.getElementById("waiting");
const meta = {};
for (const node of document.querySelectorAll("[data-meta]")) meta[node.dataset.meta] = node;
let row = SESSION;
let lastSeq = 0;
let events = null;

// -- placing entries in order (by event id; a note after the event it followed) --------------------------

function place(node, seq) {
  node.dataset.seq = seq;
  let before = null;
  for (let child = conversation.lastElementChild; child; child = child.previousElementSibling) {
    if (Number(child.dataset.seq) <= seq) break;
    before = child;
  }
  conversation.insertBefore(node, before);
  return node;
}

const keyed = new Map();  // an entry made by one event and completed by later ones (deltas, results)

function entry(kind, seq, record, label) {
  const agent = record && record.agent;
  const node = el("div", {class: "entry " + kind + (agent ? " sub" : "")});
  if (agent) node.append(el("div", {class: "agent"}, "sub-agent " + short(agent)));
  if (label) node.append(el("div", {class: "label"}, label));
  return place(node, seq);
}

function diffLines(text, addAll) {
  const pre = el("pre", {class: "diff"});
  for (const line of String(text || "").replace(/\n$/, "").split("\n")) {
    let cls = "ctx";
    if (addAll === "+") cls = "add";
    else if (addAll === "-") cls = "del";
    else if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff --git") || line.startsWith("index ")
      || line.startsWith("new file") || line.startsWith("deleted file")) cls = "meta";
    else if (line.startsWith("@@")) cls = "hunk";
    else if (line.startsWith("+")) cls = "add";
    else if (line.startsWith("-")) cls = "del";
    pre.append(el("span", {class: cls}, (addAll ? addAll : "") + line));
  }
  return pre;
}

function stats(text, kind) {
  let add = 0, del = 0;
  for (const line of String(text || "").split("\n")) {
    if (kind === "add" && line) add++;
    else if (kind === "delete" && line) del++;
    else if (line.startsWith("+") && !line.startsWith("+++")) add++;
    else if (line.startsWith("-") && !line.startsWith("---")) del++;
  }
  return el("span", {class: "small"}, el("span", {class: "stat-add"}, "+" + add), " ", el("span", {class: "stat-del"}, "−" + del));
}

// A diff of several files (a turn's Diff event): one collapsible block per file, coloured.
function splitDiff(text) {
  const files = [];
  let current = null;
  for (const line of String(text || "").split("\n")) {
    if (line.startsWith("diff --git")) {
      current = {name: line.replace(/^diff --git a\/(.*) b\/.*$/, "$1"), lines: []};
      files.push(current);
    }
    if (!current) { current = {name: "", lines: []}; files.push(current); }
    current.lines.push(line);
  }
  return files;
}

function relative(path) {
  const cwd = (row.cwd || "").replace(/\/$/, "");
  return cwd && String(path).startsWith(cwd + "/") ? String(path).slice(cwd.length + 1) : path;
}

function fileBlock(name, kind, diff, addAll) {
  return el("details", {open: true, class: "file"},
    el("summary", {}, el("code", {}, name), " ", kind ? el("span", {class: "badge"}, kind) : null, " ", stats(diff, kind)),
    diffLines(diff, addAll));
}

// -- events -------------------------------------------------------------------------------------------

function onRecord(seq, r) {
  lastSeq = Math.max(lastSeq, seq);
  switch (r.type) {
    case "TextDelta":
    case "AssistantMessage": {
      const key = "msg:" + (r.item_id || seq);
      let item = keyed.get(key);
      if (!item) {
        const node = entry("message", seq, r, "agent");
        const text = el("div", {class: "text"});
        node.append(text);
        item = {node, text, final: false};
        keyed.set(key, item);
      }
      if (r.type === "AssistantMessage") { setText(item.text, r.text); item.final = true; }
      else if (!item.final) item.text.textContent += r.text;
      return;
    }
    case "ReasoningDelta":
    case "Reasoning": {
      const key = "rs:" + (r.item_id || seq);
      let item = keyed.get(key);
      if (!item) {
        const node = entry("reasoning", seq, r, "reasoning");
        const text = el("div", {});
        node.append(text);
        item = {node, text, final: false};
        keyed.set(key, item);
      }
      if (r.type === "Reasoning") { setText(item.text, r.text); item.final = true; }
      else if (!item.final) item.text.textContent += r.text;
      return;
    }
    case "ToolUse": return onToolUse(seq, r);
    case "ToolResult": return onToolResult(seq, r);
    case "ToolProgress": {
      const item = keyed.get("tool:" + r.id);
      if (item && item.progress) setText(item.progress, r.message);
      return;
    }
    case "Diff": {
      const key = "diff:" + (r.turn_id || "");
      let item = keyed.get(key);
      if (!item) {
        const node = entry("command", seq, r, "changes so far in this turn");
        const box = el("div", {});
        node.append(el("details", {}, el("summary", {}, "the turn's diff"), box));
        item = {node, box};
        keyed.set(key, item);
      }
      item.box.replaceChildren(...splitDiff(r.diff).map((f) => fileBlock(f.name, "", f.lines.join("\n"))));
      return;
    }
    case "Plan": {
      const node = entry("system", seq, r, "plan" + (r.explanation ? ": " + r.explanation : ""));
      node.append(el("ol", {}, ...(r.steps || []).map((s) => el("li", {}, s.step + " ", el("span", {class: "muted"}, "(" + s.status + ")")))));
      return;
    }
    case "SubAgent": {
      const key = "sub:" + r.item_id;
      let item = keyed.get(key);
      if (!item) {
        const node = entry("note", seq, r, "sub-agent " + r.tool);
        const body = el("div", {class: "small"});
        node.append(body);
        item = {node, body};
        keyed.set(key, item);
      }
      const agents = Object.keys(r.agents || {}).map(short).join(", ");
      setText(item.body, [r.status, r.model, r.prompt && firstLine(r.prompt, 300), agents && "agents: " + agents].filter(Boolean).join(" · "));
      return;
    }
    case "WebSearch": {
      entry("command", seq, r, "web search").append(el("code", {}, r.query));
      return;
    }
    case "System": return onSystem(seq, r);
    case "Result": {
      const node = entry("system", seq, r);
      node.append("turn completed" + (r.usage && r.usage.total_tokens ? " · " + fmtNumber(r.usage.total_tokens) + " tokens" : "")
        + (r.cost_usd ? " · " + r.cost_usd.toFixed(4) + " USD" : ""));
      return;
    }
    case "Error": {
      const node = entry("error", seq, r, "the turn ended: " + r.code);
      node.append(el("div", {}, r.message));
      return;
    }
    case "TokenUsage":
    case "RateLimits":
    case "McpServerStatus":
      return;  // the header shows usage
    default: {
      const node = entry("system", seq, r);
      node.append(r.type);
    }
  }
}

function onToolUse(seq, r) {
  const input = r.input || {};
  if (r.name === "approval") {
    // The decision on a command or a file change goes with it (its id is "approval:<the item's id>").
    const about = keyed.get("tool:" + String(r.id).replace(/^approval:/, ""));
    const verdict = el("span", {class: "badge"}, "asked");
    const why = el("span", {class: "small muted"});
    let node;
    if (about && !about.approval) {
      node = about.node;
      node.append(el("div", {class: "approval-line"}, el("span", {class: "small"}, "approval "), verdict, " ", why));
    } else {
      node = entry("approval", seq, r, "approval");
      node.append(el("div", {}, input.kind + " ", el("code", {}, whatOf(input)), " ", verdict), el("br"), why);
    }
    keyed.set("tool:" + r.id, {node, verdict, why, approval: true});
    return;
  }
  if (r.name === "apply_patch" || Array.isArray(input.changes)) {
    const node = entry("command", seq, r, "file changes");
    for (const change of input.changes || []) {
      const mark = change.kind === "add" ? "+" : change.kind === "delete" ? "-" : "";
      node.append(fileBlock(relative(change.path), change.kind, change.diff, mark));
    }
    const status = el("span", {class: "small muted"});
    node.append(status);
    keyed.set("tool:" + r.id, {node, status});
    return;
  }
  const command = input.command || input.cmd;
  const node = entry("command", seq, r, command ? "command" : r.name);
  const status = el("span", {class: "badge"}, "running");
  const progress = el("div", {class: "small muted"});
  const head = command
    ? el("div", {}, el("code", {}, "$ " + (Array.isArray(command) ? command.join(" ") : command)), " ", status)
    : el("div", {}, el("code", {}, r.name), " ", status);
  node.append(head);
  if (!command && Object.keys(input).length) node.append(el("details", {}, el("summary", {class: "small"}, "input"), el("pre", {}, JSON.stringify(input, null, 2))));
  if (input.cwd) node.append(el("div", {class: "small muted"}, "in " + input.cwd));
  node.append(progress);
  keyed.set("tool:" + r.id, {node, status, progress});
}

function onToolResult(seq, r) {
  const item = keyed.get("tool:" + r.id);
  if (!item) { entry("system", seq, r).append("result of " + r.id + ": " + (r.status || "")); return; }
  if (item.approval) {
    const label = DECIDED[r.status] || r.status || "";
    setText(item.verdict, label);
    item.verdict.className = "badge " + (r.is_error ? "bad" : "ok");
    setText(item.why, r.output || "");
    return;
  }
  if (item.status && item.status.classList.contains("badge")) {
    const code = r.exit_code;
    setText(item.status, code === null || code === undefined ? (r.status || "done") : "exit " + code);
    item.status.className = "badge " + ((code === 0 || (code == null && !r.is_error)) ? "ok" : "bad");
  } else if (item.status) {
    setText(item.status, r.status || "");
  }
  const output = r.output || "";
  if (output) {
    const lines = output.replace(/\n$/, "").split("\n").length;
    item.node.append(el("details", {class: "output"}, el("summary", {class: "small"}, "output (" + lines + " line" + (lines === 1 ? "" : "s") + ")"), el("pre", {}, output)));
  }
}

function onSystem(seq, r) {
  const data = r.data || {};
  switch (r.subtype) {
    case "approval_denied": {
      // The rule that declined goes with the approval it belongs to (the latest one shown).
      const approvals = conversation.querySelectorAll(".approval-line, .entry.approval");
      const last = approvals[approvals.length - 1];
      const line = "rule " + (data.rule || "?") + (data.reason ? ": " + data.reason : "");
      if (last) last.append(el("div", {class: "small bad"}, line));
      else entry("approval", seq, r, "declined").append(line);
      return;
    }
    case "approval_pending": {
      const node = entry("approval", seq, r, "waiting for a person: approval " + data.approval_id);
      const status = el("span", {class: "badge warn"}, "waiting");
      node.append(el("div", {}, data.kind + " ", el("code", {}, whatOf(data)), " ", status));
      keyed.set("pending:" + data.approval_id, {node, status});
      return;
    }
    case "approval_decided": {
      const item = keyed.get("pending:" + data.approval_id);
      const text = (DECIDED[data.decision] || data.decision) + (data.rule ? " (rule " + data.rule + ")" : "");
      if (item) { setText(item.status, text); item.status.className = "badge " + (String(data.decision).startsWith("allow") ? "ok" : "bad"); }
      else entry("approval", seq, r, "approval " + data.approval_id).append(text);
      return;
    }
    case "session": {
      const node = entry("system", seq, r);
      node.append("model " + (data.model || "?") + (data.model_provider ? " from " + data.model_provider : "")
        + (data.model_provider === "scripted" ? " (scripted: not a real model)" : "")
        + (data.codex_version ? " · codex " + data.codex_version : ""));
      return;
    }
    default: {
      const node = entry("system", seq, r);
      const text = data.message || data.reason || "";
      node.append(r.subtype + (text ? ": " + firstLine(text, 200) : ""));
    }
  }
}

// -- notes (a batch runner's: gates, follow-ups) and turns' prompts --------------------------------------

function onNote(note) {
  const data = note.data || {};
  const seq = note.after + 0.5;
  const subtype = String(note.subtype || "").replace(/^runner\./, "");
  switch (subtype) {
    case "gate_started": {
      entry("note", seq, null, "gate").append(el("code", {}, data.command || "(checks)"), " ", el("span", {class: "muted small"}, "running"));
      return;
    }
    case "gate": {
      const node = entry("note", seq, null, "gate " + (data.passed ? "passed" : "failed"));
      node.classList.add(data.passed ? "ok" : "bad");
      node.append(el("div", {}, data.summary || ""));
      for (const check of data.checks || []) {
        const detail = check.detail || "";
        node.append(el("details", {}, el("summary", {class: "small"}, (check.passed ? "✓ " : "✗ ") + check.name
          + (check.exit_code !== null && check.exit_code !== undefined ? " (exit " + check.exit_code + ")" : "")), detail ? el("pre", {}, detail) : null));
      }
      return;
    }
    case "followup": {
      const node = entry("note", seq, null, "follow-up " + (data.number || "") + (data.limit ? " of " + data.limit : ""));
      if (data.prompt) node.append(el("details", {}, el("summary", {class: "small"}, firstLine(data.prompt, 120)), el("pre", {}, data.prompt)));
      return;
    }
    default: {
      const text = data.reason || data.message || data.summary || "";
      entry("note", seq, null, subtype).append(el("div", {class: "small"}, text));
    }
  }
}

const turnsShown = new Set();

function showTurns(history) {
  for (const turn of history || []) {
    if (turnsShown.has(turn.turn)) continue;
    turnsShown.add(turn.turn);
    const node = entry("prompt", turn.first_event_id - 0.5, null, (turn.turn === 1 ? "prompt" : "turn " + turn.turn) + " · " + fmtTime(turn.started));
    node.append(el("div", {class: "text"}, turn.prompt));
  }
}

async function refreshTurns() {
  try {
    const response = await fetch(ROOT + "v1/sessions/" + encodeURIComponent(SID), {credentials: "same-origin"});
    if (response.ok) showTurns((await response.json()).history);
  } catch (e) { /* the next update tries again */ }
}

// -- the header -----------------------------------------------------------------------------------------

function showRow(s) {
  const turnsBefore = row.turns;
  row = Object.assign({}, row, s);
  setText(meta.state, row.state);
  meta.state.className = "badge state-" + row.state;
  setText(meta.step, row.state === "running" ? row.step || "" : "");
  const alone = row.state === "running" && row.loaded && !row.clients;
  meta.client.hidden = !alone;
  if (row.orphan_deadline) meta.client.title = "its turn is interrupted at " + fmtTime(row.orphan_deadline) + " unless a client returns";
  setText(meta.clients, row.loaded ? String(row.clients || 0) : "none (not loaded)");
  setText(meta.task, row.task_id || "");
  setText(meta.batch, row.batch_id || "");
  if (row.batch_id) meta.batch.href = ROOT + "?batch=" + encodeURIComponent(row.batch_id);
  setText(meta.cwd, row.cwd || "");
  setText(meta.model, modelText(row));
  meta.scripted.hidden = !row.scripted;
  setText(meta.started, fmtTime(row.created));
  if (row.state === "running") meta.duration.dataset.since = row.created;
  else { delete meta.duration.dataset.since; setText(meta.duration, fmtDuration(row.duration)); }
  setText(meta.tokens, fmtNumber(row.tokens));
  setText(meta.cost, fmtCost(row));
  setText(meta.turns, String(row.turns || 1));
  interrupt.hidden = row.state !== "running";
  if (row.state !== "running") { interrupt.disabled = false; setText(interrupt, "Interrupt"); }
  setText(sendButton, row.state === "running" ? "Steer the turn" : "Send a follow-up turn");
  if (s.turns && s.turns !== turnsBefore) refreshTurns();
  if (row.state === "running") openEvents();
}

// -- buttons --------------------------------------------------------------------------------------------

const interrupt = document.getElementById("interrupt");
const sendButton = document.getElementById("send");
const sendText = document.getElementById("send-text");
const flash = document.getElementById("flash");

interrupt.addEventListener("click", async () => {
  interrupt.disabled = true;
  setText(interrupt, "Interrupting…");
  const result = await post("v1/sessions/" + encodeURIComponent(SID) + "/stop");
  setText(flash, result.ok ? "" : errorText(result));
  if (!result.ok) { interrupt.disabled = false; setText(interrupt, "Interrupt"); }
});

sendButton.addEventListener("click", async () => {
  const text = sendText.value.trim();
  if (!text) return;
  sendButton.disabled = true;
  const steering = row.state === "running";
  const result = steering
    ? await post("v1/sessions/" + encodeURIComponent(SID) + "/inject", {text: text})
    : await post("v1/sessions/" + encodeURIComponent(SID) + "/turns", {prompt: text});
  sendButton.disabled = false;
  setText(flash, result.ok ? "" : errorText(result));
  if (result.ok) {
    sendText.value = "";
    if (steering) entry("prompt", lastSeq + 0.25, null, "steered · " + fmtTime(Date.now() / 1000)).append(el("div", {class: "text"}, text));
    else { row.state = "running"; openEvents(); }
  }
});

// -- approvals this session waits on ---------------------------------------------------------------------

const pending = new Map();

function addPending(a) {
  if (pending.has(a.approval_id)) return;
  const card = approvalCard(a, {inSession: true});
  pending.set(a.approval_id, card);
  waiting.append(card);
  waiting.closest("section").hidden = false;
}

function removePending(d) {
  const card = pending.get(d.approval_id);
  if (!card) return;
  pending.delete(d.approval_id);
  card.remove();
  waiting.closest("section").hidden = pending.size === 0;
}

// -- streams --------------------------------------------------------------------------------------------

function openEvents() {
  if (events) return;
  const url = ROOT + "v1/sessions/" + encodeURIComponent(SID) + "/events?follow=1&watch=1&after=" + lastSeq;
  events = new EventSource(url, {withCredentials: true});
  events.addEventListener("event", (event) => onRecord(Number(event.lastEventId), JSON.parse(event.data)));
  events.addEventListener("error", () => {
    // The stream of a session that is not loaded ends after its stored events: stop asking until an
    // update says a turn runs again (a running one's stream reconnects by itself, from the last id).
    if (row.state !== "running" && events) { events.close(); events = null; }
  });
}

showTurns(SESSION.history);
for (const note of SESSION.notes || []) onNote(note);
for (const a of DATA.approvals) addPending(a);
waiting.closest("section").hidden = pending.size === 0;
showRow(SESSION);
openEvents();
tick();
followUpdates("session=" + encodeURIComponent(SID), {
  session: showRow,
  note: onNote,
  approval: addPending,
  approval_decided: removePending,
});
