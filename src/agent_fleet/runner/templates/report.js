// The batch report's script: draws the overview's visible rows, filters and searches, and opens a
// task's detail from its compressed block. Every value from a task is set as text, never as HTML.
(function () {
  "use strict";
  // JSON, deflated, base64 (as the page's builder packs it) -> the value.
  function unpack(text) {
    if (typeof DecompressionStream === "undefined") {
      return Promise.reject(new Error("this browser cannot inflate the page's data (no DecompressionStream); read summary.json"));
    }
    var binary = atob(text.trim()), bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) { bytes[i] = binary.charCodeAt(i); }
    return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"))).text().then(JSON.parse);
  }
  var loaded = new Promise(function (resolve) {
    if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", resolve); } else { resolve(); }
  });
  unpack(document.getElementById("overview-data").textContent).then(start, function (error) {
    document.getElementById("shown").textContent = "cannot show the tasks: " + error.message;
  });

  function start(data) {
  var rows = data.rows, statuses = data.statuses;
  var ROW = 26, CHUNK = data.chunk, BUFFER = 12;
  var KINDS = ["turn", "tool", "approval", "gate", "review"];
  var overview = document.getElementById("overview");
  var list = document.getElementById("rows");
  var spacer = document.getElementById("spacer");
  var statusFilter = document.getElementById("status-filter");
  var search = document.getElementById("search");
  var shownCount = document.getElementById("shown");
  var detailBox = document.getElementById("detail");
  var byId = new Map();
  rows.forEach(function (r, i) { byId.set(r[0], i); });
  var visible = [];      // the positions the filter lets through, in order
  var drawn = new Map(); // position -> its row element, for the rows on screen
  var selected = -1;
  var blocks = new Map(); // chunk -> Promise of its details
  overview.style.setProperty("--tick", data.tick + "%");
  if (data.cost) { overview.classList.add("with-cost"); }

  // -- formatting --------------------------------------------------------------------------------------
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) { if (arguments[i]) { parent.appendChild(arguments[i]); } }
    return parent;
  }
  function num(v) { return v === null || v === undefined ? "\u2013" : Number(v).toLocaleString("en-US"); }
  function duration(s) {
    if (s === null || s === undefined) { return "\u2013"; }
    if (s < 60) { return s.toFixed(1) + "s"; }
    var m = Math.floor(s / 60), r = Math.floor(s % 60);
    return m < 60 ? m + "m" + String(r).padStart(2, "0") + "s" : Math.floor(m / 60) + "h" + String(m % 60).padStart(2, "0") + "m";
  }
  function cost(v) { return v === null || v === undefined ? "\u2013" : v.toFixed(4) + (data.currency ? " " + data.currency : ""); }
  function statusBadge(status) { return el("span", "status status-" + status, status); }

  // -- the overview: only the rows on screen are in the page ---------------------------------------------
  function rowElement(pos) {
    var r = rows[pos];
    var row = el("div", "row task-row");
    row.dataset.task = r[0];
    row.dataset.status = statuses[r[1]];
    row.setAttribute("role", "row");
    var id = el("span", "c-task");
    var link = el("a", null, r[0]);
    link.href = "#task-" + encodeURIComponent(r[0]);
    add(id, link);
    if (r[14] && !data.all_scripted) { add(id, el("span", "badge-scripted", "scripted")); }
    add(row, id, add(el("span", "c-status"), statusBadge(statuses[r[1]])), el("span", "c-num", duration(r[2])),
      el("span", "c-num", num(r[3])), el("span", "c-num", num(r[4])), el("span", "c-num", num(r[5])));
    if (data.cost) { add(row, el("span", "c-num", cost(r[6]))); }
    add(row, el("span", "c-num", r[7]), el("span", "c-gate", r[8] === null ? "\u2013" : r[8] ? "passed" : "failed"),
      el("span", "c-num", r[9]), el("span", "c-num", r[10]));
    var diff = el("span", "c-diff");
    if (r[11] || r[12]) { add(diff, el("span", "add", "+" + r[11]), document.createTextNode(" "), el("span", "del", "\u2212" + r[12])); }
    var time = el("span", "c-time"), line = el("div", "timeline");
    for (var b = 0; b < r[13].length; b += 3) {
      var bar = el("div", "bar bar-" + KINDS[r[13][b]]);
      bar.style.left = r[13][b + 1] + "%";
      bar.style.width = r[13][b + 2] + "%";
      line.appendChild(bar);
    }
    add(row, diff, add(time, line));
    if (pos === selected) { row.classList.add("selected"); }
    return row;
  }
  function draw() {
    var top = list.scrollTop, height = list.clientHeight || 600;
    var first = Math.max(0, Math.floor(top / ROW) - BUFFER);
    var last = Math.min(visible.length, Math.ceil((top + height) / ROW) + BUFFER);
    var keep = new Set();
    for (var k = first; k < last; k++) { keep.add(visible[k]); }
    drawn.forEach(function (node, pos) { if (!keep.has(pos)) { node.remove(); drawn.delete(pos); } });
    for (var n = first; n < last; n++) {
      var pos = visible[n], node = drawn.get(pos);
      if (!node) { node = rowElement(pos); drawn.set(pos, node); list.appendChild(node); }
      node.style.top = (n * ROW) + "px";
    }
  }
  var prompts = null;  // the prompts' starts, read at the first search (they come after the script)
  function applyFilter() {
    var want = statusFilter.value, text = search.value.trim().toLowerCase();
    if (text && prompts === null) {
      loaded.then(function () { return unpack(document.getElementById("search-data").textContent); }).then(function (p) { prompts = p; applyFilter(); });
      return;
    }
    var wanted = want === "" ? -1 : statuses.indexOf(want);
    visible = [];
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      if ((wanted < 0 || r[1] === wanted) && (!text || prompts[i].indexOf(text) !== -1 || r[0].toLowerCase().indexOf(text) !== -1)) { visible.push(i); }
    }
    spacer.style.height = (visible.length * ROW) + "px";
    list.style.height = Math.min(visible.length * ROW, Math.max(260, window.innerHeight * 0.7)) + "px";
    drawn.forEach(function (node) { node.remove(); });
    drawn.clear();
    list.scrollTop = 0;
    draw();
    shownCount.textContent = visible.length.toLocaleString("en-US") + " shown";
  }
  var pendingDraw = false;
  list.addEventListener("scroll", function () {
    if (!pendingDraw) { pendingDraw = true; requestAnimationFrame(function () { pendingDraw = false; draw(); }); }
  });
  var typing = null;
  search.addEventListener("input", function () { clearTimeout(typing); typing = setTimeout(applyFilter, rows.length > 5000 ? 120 : 0); });
  statusFilter.addEventListener("change", applyFilter);
  list.addEventListener("click", function (event) {
    var row = event.target.closest(".task-row");
    if (row && !event.target.closest("a")) { location.hash = "task-" + encodeURIComponent(row.dataset.task); }
  });

  // -- a task's detail, from its compressed block -------------------------------------------------------
  function block(chunk) {  // the details come after the script: read once the page is
    if (!blocks.has(chunk)) {
      blocks.set(chunk, loaded.then(function () { return unpack(document.getElementById("details-" + chunk).textContent); }));
    }
    return blocks.get(chunk);
  }
  function section(parent, title) { add(parent, el("h3", null, title)); }
  function pre(text, cls) { return el("pre", cls || null, text); }
  function none(text) { return el("p", "none", text); }
  function dl(pairs) {
    var list = el("dl");
    pairs.forEach(function (p) { add(list, el("dt", null, p[0]), typeof p[1] === "object" && p[1] ? add(el("dd"), p[1]) : el("dd", null, p[1] === null || p[1] === undefined || p[1] === "" ? "\u2013" : p[1])); });
    return list;
  }
  function collapsed(label, body, open) {
    var box = el("details");
    if (open) { box.open = true; }
    return add(box, el("summary", null, label), body);
  }
  function base() { return data.base; }
  function offset(iso) { return iso ? (Date.parse(iso) / 1000 - base()) : null; }
  function conversation(t) {
    var entries = [];
    var start = offset(t.started_at);
    if (t.prompt) { entries.push({ at: start === null ? -1 : start, order: 0, kind: "user", who: "task", text: t.prompt }); }
    (t.messages || []).forEach(function (m, i) {
      entries.push({ at: offset(m.at), order: 1 + i, kind: m.kind, who: (m.agent ? "sub-agent " + m.agent.slice(-8) + " " : "") + (m.kind === "message" ? "agent" : "thinking"), text: m.text });
    });
    (t.commands || []).forEach(function (c) {
      entries.push({ at: offset(c.started_at), order: 2, kind: "command", who: "$", text: c.command, exit: c.exit_code, status: c.status, output: c.output_tail });
    });
    (t.declines || []).forEach(function (d) {
      entries.push({ at: offset(d.at), order: 3, kind: "decline", who: "declined", text: (d.command || "") + " (" + (d.rule || "policy") + ": " + (d.reason || "") + ")" });
    });
    (t.followup_prompts || []).forEach(function (f) {
      entries.push({ at: offset(f.at), order: 4, kind: "user", who: "follow-up " + f.number, text: f.prompt || "" });
    });
    (t.timeline || []).forEach(function (s) {
      if (s.kind === "gate") { entries.push({ at: s.start, order: 5, kind: s.status === "failed" ? "gate-failed" : "gate", who: "gate", text: s.name + ": " + (s.status || "running") }); }
    });
    entries.sort(function (a, b) { return ((a.at === null ? Infinity : a.at) - (b.at === null ? Infinity : b.at)) || (a.order - b.order); });
    var list = el("ol");
    entries.forEach(function (e) {
      var item = el("li", "c-" + e.kind);
      add(item, el("span", "who", e.who), document.createTextNode(e.text));
      if (e.kind === "command") {
        add(item, el("span", e.exit === 0 ? "exit-ok" : "exit-bad", "  exit " + (e.exit === null || e.exit === undefined ? (e.status || "\u2013") : e.exit)));
        if (e.output) { add(item, collapsed("output", pre(e.output))); }
      }
      list.appendChild(item);
    });
    return add(el("details", "conversation"), el("summary", null, "Conversation (" + entries.length + " entries)"), list);
  }
  function diffText(text) {
    var box = el("pre", "diff");
    text.split("\n").forEach(function (line) {
      var cls = line.indexOf("@@") === 0 ? "hunk" : /^(diff --git|index |--- |\+\+\+ |new file|deleted file|similarity|rename )/.test(line) ? "dmeta" : line[0] === "+" ? "add" : line[0] === "-" ? "del" : "";
      box.appendChild(el("span", cls || null, line || " "));
    });
    return box;
  }
  function render(t) {
    var box = detailBox;
    box.textContent = "";
    box.dataset.task = t.task_id;
    box.dataset.status = t.status;
    var head = add(el("header"), el("h2", null, t.task_id), statusBadge(t.status));
    if (t.scripted) { add(head, el("span", "badge-scripted", "scripted model")); }
    add(box, head, el("p", null, t.reason || ""));
    var model = el("span", null, (t.provider || "\u2013") + " / " + (t.model_label || t.model || "\u2013"));
    var transcript = t.transcript ? el("a", null, t.transcript) : null;
    if (transcript) { transcript.href = "file://" + encodeURI(t.transcript); }
    var pairs = [["provider / model", model], ["started / finished", (t.started_at || "\u2013") + " / " + (t.finished_at || "\u2013") + " (" + duration(t.duration) + ")"]];
    if (t.error_code) { pairs.push(["error", t.error_code]); }
    pairs.push(["session", t.session_id], ["branch", t.branch]);
    if (t.worktree) { pairs.push(["worktree", t.worktree.path + " (" + (t.worktree.kept ? "kept: uncommitted changes" : "removed") + ")"]); }
    pairs.push(["transcript", transcript], ["retries", (t.retries === undefined || t.retries === null ? "\u2013" : t.retries) + (t.resumed_from ? "; resumed from " + t.resumed_from : "")]);
    if (t.cost !== undefined && t.cost !== null) { pairs.push(["cost", cost(t.cost)]); }
    add(box, dl(pairs));
    section(box, "Prompt"); add(box, pre(t.prompt || "", "prompt"));
    add(box, conversation(t));
    section(box, "Final message"); add(box, t.final_message ? pre(t.final_message, "final") : none("none"));
    var commands = t.commands || [];
    section(box, "Commands (" + commands.length + ")");
    if (commands.length) {
      var table = el("table", "commands");
      add(table, add(el("thead"), add(el("tr"), el("th", null, "command"), el("th", "num", "exit code"), el("th", "num", "duration"), el("th", null, "output"))));
      var body = el("tbody");
      commands.forEach(function (c) {
        var out = c.output_tail ? collapsed("output", pre(c.output_tail)) : el("span", "none", "no output");
        add(body, add(el("tr", "command"), add(el("td"), el("code", null, c.command)),
          el("td", "num exit-code " + (c.exit_code === 0 ? "exit-ok" : "exit-bad"), c.exit_code === null || c.exit_code === undefined ? (c.status || "\u2013") : c.exit_code),
          el("td", "num", duration(c.duration)), add(el("td"), out)));
      });
      add(box, add(table, body));
    } else { add(box, none("no commands")); }
    var declines = t.declines || [];
    section(box, "Declined approvals (" + declines.length + ")");
    if (declines.length) {
      var ul = el("ul", "declines");
      declines.forEach(function (d) {
        var li = add(el("li", "decline"), document.createTextNode("rule "), el("code", "rule", d.rule || "\u2013"));
        if (d.command) { add(li, document.createTextNode(": "), el("code", null, d.command)); }
        if (d.reason) { add(li, document.createTextNode(" \u2014 " + d.reason)); }
        ul.appendChild(li);
      });
      add(box, ul);
    } else { add(box, none("none")); }
    section(box, "Gate");
    if (t.gate) {
      add(box, el("p", "gate", (t.gate.passed ? "passed" : "failed") + ": " + t.gate.summary + " (" + t.gate.runs + " run(s))"));
      if (t.gate.output_tail) { add(box, collapsed("gate output", pre(t.gate.output_tail, "gate-output"), true)); }
    } else { add(box, none("no gate ran")); }
    var followups = t.followup_prompts || [];
    section(box, "Follow-ups (" + (t.followups || 0) + ")");
    if (followups.length) {
      var ol = el("ol");
      followups.forEach(function (f) { add(ol, add(el("li"), collapsed("follow-up " + f.number, pre(f.prompt || "")))); });
      add(box, ol);
    } else { add(box, none("none")); }
    if (t.errors && t.errors.length) {
      section(box, "Errors");
      var errors = el("ul");
      t.errors.forEach(function (e) { add(errors, add(el("li"), el("code", null, e.code), document.createTextNode(" " + e.message))); });
      add(box, errors);
    }
    if (t.review) {
      section(box, "Review (" + (t.reviews || 0) + ")");
      add(box, el("p", null, t.review.explanation || ""));
      var findings = el("ul");
      (t.review.findings || []).forEach(function (f) { add(findings, add(el("li", null, "P" + f.priority + " " + f.title + " "), el("span", "meta", f.location || ""))); });
      add(box, findings);
    }
    var files = t.diff_files || [];
    var stats = new Map(files.map(function (f) { return [f.path, f]; }));
    var names = (t.files_changed || []).slice();
    files.forEach(function (f) { if (f.path && names.indexOf(f.path) < 0) { names.push(f.path); } });
    section(box, "Files changed (" + names.length + ")");
    if (t.shared_tree) { add(box, el("p", "shared-tree", "This task shared its working tree with other tasks (no worktrees): these are the files its own session reported changing; what its shell commands wrote is not attributed.")); }
    if (names.length) {
      var fl = el("ul", "files");
      names.forEach(function (name) {
        var f = stats.get(name), li = add(el("li"), el("code", null, name));
        if (f) { add(li, add(el("span", "stat"), el("span", "add", "+" + f.added), document.createTextNode(" "), el("span", "del", "\u2212" + f.removed))); }
        fl.appendChild(li);
      });
      add(box, fl);
    } else { add(box, none("none recorded")); }
    section(box, "Final diff");
    if (files.length) {
      files.forEach(function (f, i) {
        var label = add(el("summary"), document.createTextNode((f.path || "diff") + " "), el("span", "add", "+" + f.added), document.createTextNode(" "), el("span", "del", "\u2212" + f.removed));
        var file = add(el("details", "file"), label, diffText(f.text));
        if (i < 5) { file.open = true; }
        box.appendChild(file);
      });
    } else { add(box, none("no diff recorded")); }
    box.hidden = false;
  }
  function open(pos) {
    if (selected >= 0 && drawn.has(selected)) { drawn.get(selected).classList.remove("selected"); }
    selected = pos;
    if (drawn.has(pos)) { drawn.get(pos).classList.add("selected"); }
    detailBox.hidden = false;
    detailBox.dataset.task = rows[pos][0];
    detailBox.textContent = "opening " + rows[pos][0] + "\u2026";
    block(Math.floor(pos / CHUNK)).then(function (details) {
      if (selected === pos) { render(details[pos % CHUNK]); detailBox.scrollIntoView({ block: "start" }); }
    }, function (error) { detailBox.textContent = "cannot open this task: " + error.message; });
  }
  function fromHash() {
    var id = location.hash.indexOf("#task-") === 0 ? decodeURIComponent(location.hash.slice(6)) : null;
    if (id === null || !byId.has(id)) { return; }
    var pos = byId.get(id), at = visible.indexOf(pos);
    if (at >= 0 && (at * ROW < list.scrollTop || at * ROW > list.scrollTop + list.clientHeight - ROW)) {
      list.scrollTop = Math.max(0, at * ROW - ROW * 2);
      draw();
    }
    open(pos);
  }
  window.addEventListener("hashchange", fromHash);
  applyFilter();
  fromHash();
  document.documentElement.dataset.ready = String(Math.round(performance.now()));
  }
})();
