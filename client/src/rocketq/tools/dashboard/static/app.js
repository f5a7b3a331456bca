// rocketq dashboard front end: renders the page named by the URL path from the JSON API (/api/...).
// No framework and no build step; DOM nodes are built with el() and text is never parsed as HTML.
"use strict";

const AUTH_KEY = "rocketq-dashboard-auth";
const COLORS = ["#2f6fdf", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#d35400"];
let CONFIG = {};
let refreshTimer = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined && v !== false) node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function status(text, isError) {
  const s = document.getElementById("status");
  s.textContent = text || "";
  s.className = text ? (isError ? "error" : "ok") : "";
}

async function api(method, path, body) {
  const headers = { "X-Requested-With": "rocketq-dashboard" };
  const auth = sessionStorage.getItem(AUTH_KEY);
  if (auth) headers["Authorization"] = "Basic " + auth;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let doc = null;
  try { doc = await resp.json(); } catch (e) { doc = { error: resp.statusText }; }
  if (!resp.ok) {
    const err = new Error(`${resp.status}: ${(doc && doc.error) || resp.statusText}`);
    err.status = resp.status;
    throw err;
  }
  return doc;
}

async function guarded(what, fn) {
  try {
    status("");
    return await fn();
  } catch (e) {
    status(`${what} failed: ${e.message}`, true);
    return null;
  }
}

function table(id, columns, rows, onClick) {
  const head = el("tr", {}, columns.map(c => el("th", { class: c.num ? "num" : "" }, c.title)));
  const body = rows.map((r, i) => {
    const tr = el("tr", { class: onClick ? "clickable" : "", "data-key": r.__key || "" },
      columns.map(c => { const v = c.get(r); return el("td", { class: c.num ? "num" : "" }, v instanceof Node ? v : fmt(v)); }));
    if (onClick) tr.addEventListener("click", () => {
      tr.parentNode.querySelectorAll("tr.selected").forEach(x => x.classList.remove("selected"));
      tr.classList.add("selected");
      onClick(r, i);
    });
    return tr;
  });
  if (!rows.length) body.push(el("tr", {}, el("td", { colspan: columns.length, class: "muted" }, "(none)")));
  return el("table", { id }, el("thead", {}, head), el("tbody", {}, body));
}

function fmt(v) {
  if (v === null || v === undefined || v === "") return "–";
  if (typeof v === "number" && !Number.isInteger(v)) return v.toFixed(2);
  return String(v);
}

function time(ms) { return ms ? new Date(ms).toLocaleString() : "–"; }

// ---------------------------------------------------------------- charts (canvas)

function drawChart(canvas, series, unit) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 600, h = canvas.clientHeight || 220;
  canvas.width = w * dpr; canvas.height = h * dpr;
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  g.font = "11px system-ui, sans-serif";
  const pad = { l: 54, r: 12, t: 24, b: 38 };
  const pts = series.flatMap(s => s.points);
  if (!pts.length) {
    g.fillStyle = "#667"; g.fillText("no samples yet (the dashboard samples every few seconds)", pad.l, h / 2);
    return;
  }
  const t0 = Math.min(...pts.map(p => p[0])), t1 = Math.max(...pts.map(p => p[0]), t0 + 1);
  const vmax = Math.max(1, ...pts.map(p => p[1])) * 1.1;
  const x = t => pad.l + (t - t0) / (t1 - t0) * (w - pad.l - pad.r);
  const y = v => h - pad.b - v / vmax * (h - pad.t - pad.b);
  g.strokeStyle = "#d8dde6"; g.fillStyle = "#667"; g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const v = vmax * i / 4, yy = y(v);
    g.beginPath(); g.moveTo(pad.l, yy); g.lineTo(w - pad.r, yy); g.stroke();
    g.fillText(v >= 100 ? v.toFixed(0) : v.toFixed(1), 4, yy + 4);
  }
  g.fillText(new Date(t0).toLocaleTimeString(), pad.l, h - pad.b + 14);
  const right = new Date(t1).toLocaleTimeString();
  g.fillText(right, w - pad.r - g.measureText(right).width, h - pad.b + 14);
  g.fillText(unit, 4, 12);
  let lx = pad.l;
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    g.strokeStyle = color; g.lineWidth = 2; g.beginPath();
    s.points.forEach((p, j) => (j ? g.lineTo(x(p[0]), y(p[1])) : g.moveTo(x(p[0]), y(p[1]))));
    g.stroke();
    g.fillStyle = color; g.fillRect(lx, h - 14, 10, 10);
    g.fillStyle = "#1d2633"; g.fillText(s.name, lx + 14, h - 5);
    lx += 24 + g.measureText(s.name).width;
  });
}

function seriesFrom(samples, pick) {
  const byName = new Map();
  for (const s of samples) for (const [name, v] of pick(s)) {
    if (!byName.has(name)) byName.set(name, []);
    byName.get(name).push([s.t, v]);
  }
  return [...byName.entries()].map(([name, points]) => ({ name, points }));
}

// ---------------------------------------------------------------- pages

async function clusterPage(main) {
  const doc = await guarded("loading the cluster", () => api("GET", "/api/cluster"));
  if (!doc) return;
  main.replaceChildren(
    el("h2", {}, "Cluster"),
    el("p", { class: "muted" }, `NameServer ${doc.namesrv}`),
    table("broker-table", [
      { title: "Cluster", get: r => r.cluster },
      { title: "Broker", get: r => r.broker_name },
      { title: "Id", get: r => r.broker_id, num: true },
      { title: "Role", get: r => el("span", { class: "pill " + r.role.toLowerCase() }, r.role) },
      { title: "brokerRole", get: r => r.broker_role },
      { title: "Address", get: r => r.addr },
      { title: "Version", get: r => r.version },
      { title: "Disk used", get: r => r.disk_ratio === null ? null : (r.disk_ratio * 100).toFixed(1) + " %", num: true },
      { title: "Put TPS", get: r => r.put_tps, num: true },
      { title: "Get TPS", get: r => r.get_tps, num: true },
      { title: "Replication lag", get: r => r.lag_bytes === null ? null : `${r.lag_bytes} B / ${r.lag_ms} ms`, num: true },
      { title: "Error", get: r => r.error ? el("span", { class: "bad" }, r.error) : null },
    ], doc.brokers),
    el("h3", {}, "Put and get TPS (last minutes)"),
    el("canvas", { id: "tps-chart", class: "chart" }),
  );
  await refreshTpsChart();
  refreshTimer = setInterval(refreshTpsChart, 5000);
}

async function refreshTpsChart() {
  const canvas = document.getElementById("tps-chart");
  if (!canvas) return;
  const h = await guarded("loading the history", () => api("GET", "/api/history"));
  if (!h) return;
  const series = [
    ...seriesFrom(h.samples, s => Object.entries(s.tps).map(([a, v]) => [`put ${a}`, v.put])),
    ...seriesFrom(h.samples, s => Object.entries(s.tps).map(([a, v]) => [`get ${a}`, v.get])),
  ];
  drawChart(canvas, series, "msg/s");
}

async function topicsPage(main) {
  const doc = await guarded("loading the topics", () => api("GET", "/api/topics"));
  if (!doc) return;
  const showSystem = el("input", { type: "checkbox", id: "show-system" });
  const detail = el("div", { id: "topic-detail" });
  const name = el("input", { id: "new-topic-name", placeholder: "topic name", required: true });
  const queues = el("input", { id: "new-topic-queues", type: "number", min: 1, max: 1024, value: 4 });
  const form = el("form", { class: "inline", id: "create-topic-form" }, "Create topic", name, "queues", queues,
    el("button", { id: "create-topic-btn", type: "submit" }, "Create"));
  form.addEventListener("submit", async ev => {
    ev.preventDefault();
    const n = Number(queues.value);
    const res = await guarded("creating the topic", () =>
      api("POST", "/api/topics", { topic: name.value.trim(), read_queue_nums: n, write_queue_nums: n }));
    if (res) { await render(); status(`created topic ${res.topic} on ${res.created_on.join(", ")}`); }
  });
  const listBox = el("div", {});
  const drawList = () => {
    const rows = doc.topics.filter(t => showSystem.checked || t.kind === "normal").map(t => ({ ...t, __key: t.topic }));
    listBox.replaceChildren(table("topic-table", [
      { title: "Topic", get: r => r.topic },
      { title: "Kind", get: r => r.kind },
    ], rows, r => showTopic(r.topic, detail)));
  };
  showSystem.addEventListener("change", drawList);
  drawList();
  main.replaceChildren(el("h2", {}, "Topics"), el("section", { class: "card" }, form),
    el("label", {}, showSystem, " show system, retry and DLQ topics"), listBox, detail);
}

async function showTopic(topic, box) {
  const doc = await guarded(`loading topic ${topic}`, () => api("GET", `/api/topics/${encodeURIComponent(topic)}`));
  if (!doc) return;
  const body = el("input", { id: "msg-body", placeholder: "body", value: "hello from the dashboard" });
  const tags = el("input", { id: "msg-tags", placeholder: "tags" });
  const keys = el("input", { id: "msg-keys", placeholder: "keys" });
  const form = el("form", { class: "inline", id: "send-msg-form" }, "Send a test message", body, tags, keys,
    el("button", { id: "send-msg-btn", type: "submit" }, "Send"));
  form.addEventListener("submit", async ev => {
    ev.preventDefault();
    const res = await guarded("sending", () => api("POST", `/api/topics/${encodeURIComponent(topic)}/messages`,
      { body: body.value, tags: tags.value, keys: keys.value }));
    if (res) { await showTopic(topic, box); status(`sent ${res.msg_id}: ${res.send_status} (queue ${res.queue_id}, offset ${res.queue_offset})`); }
  });
  box.replaceChildren(el("section", { class: "card", id: "topic-card" },
    el("h3", {}, `Topic ${topic}: route`),
    table("route-table", [
      { title: "Broker", get: r => r.broker_name },
      { title: "Read queues", get: r => r.read_queue_nums, num: true },
      { title: "Write queues", get: r => r.write_queue_nums, num: true },
      { title: "Perm", get: r => r.perm },
      { title: "Addresses", get: r => Object.entries((doc.brokers.find(b => b.broker_name === r.broker_name) || { addrs: {} }).addrs).map(([id, a]) => `${id}: ${a}`).join(", ") },
    ], doc.queue_datas),
    el("h3", {}, "Queue offsets"),
    table("queue-table", [
      { title: "Broker", get: r => r.broker_name },
      { title: "Queue", get: r => r.queue_id, num: true },
      { title: "Min offset", get: r => r.min_offset, num: true },
      { title: "Max offset", get: r => r.max_offset, num: true },
    ], doc.queues),
    form));
}

async function groupsPage(main) {
  const doc = await guarded("loading the consumer groups", () => api("GET", "/api/groups"));
  if (!doc) return;
  const detail = el("div", { id: "group-detail" });
  main.replaceChildren(el("h2", {}, "Consumer groups"),
    table("group-table", [
      { title: "Group", get: r => r.group },
      { title: "Online", get: r => r.online ? "yes" : "no" },
      { title: "Members", get: r => r.members, num: true },
      { title: "5.x SDKs", get: r => r.grpc_members, num: true },
      { title: "Type", get: r => r.consume_type },
      { title: "Model", get: r => r.message_model },
      { title: "Topics", get: r => r.topics.join(", ") },
      { title: "Lag", get: r => r.lag, num: true },
    ], doc.groups.map(g => ({ ...g, __key: g.group })), r => showGroup(r.group, detail)),
    detail,
    el("h3", {}, "Lag per group (last minutes)"),
    el("canvas", { id: "lag-chart", class: "chart" }));
  await refreshLagChart();
  refreshTimer = setInterval(refreshLagChart, 5000);
}

async function refreshLagChart() {
  const canvas = document.getElementById("lag-chart");
  if (!canvas) return;
  const h = await guarded("loading the history", () => api("GET", "/api/history"));
  if (h) drawChart(canvas, seriesFrom(h.samples, s => Object.entries(s.lag)), "messages behind");
}

async function showGroup(group, box) {
  const doc = await guarded(`loading group ${group}`, () => api("GET", `/api/groups/${encodeURIComponent(group)}`));
  if (!doc) return;
  const topics = [...new Set(doc.queues.map(q => q.topic).concat(doc.subscriptions.map(s => s.topic)))]
    .sort((a, b) => (a.startsWith("%") - b.startsWith("%")) || a.localeCompare(b));  // %RETRY% / %DLQ% last
  const topicSel = el("select", { id: "reset-topic" }, topics.map(t => el("option", { value: t }, t)));
  const when = el("input", { id: "reset-time", type: "datetime-local", step: 1 });
  const form = el("form", { class: "inline", id: "reset-form" }, "Reset offsets of", topicSel, "to the first message stored at/after", when,
    el("button", { id: "reset-btn", type: "submit" }, "Reset"));
  form.addEventListener("submit", async ev => {
    ev.preventDefault();
    const ts = when.value ? new Date(when.value).getTime() : Date.now();
    const res = await guarded("resetting offsets", () => api("POST", `/api/groups/${encodeURIComponent(group)}/reset-offset`,
      { topic: topicSel.value, timestamp_ms: ts }));
    if (res) { await showGroup(group, box); status(`reset ${group} on ${res.topic}: ` + res.offsets.map(o => `${o.broker_name}/${o.queue_id}→${o.offset}`).join(", ")); }
  });
  box.replaceChildren(el("section", { class: "card", id: "group-card" },
    el("h3", {}, `Group ${group}: ${doc.online ? "online" : "offline"}, total lag `, el("span", { id: "group-lag" }, String(doc.lag))),
    doc.online ? el("p", { class: "muted" }, `${doc.consume_type} · ${doc.message_model} · ${doc.consume_from_where}`) : null,
    el("h3", {}, "Members"),
    table("connection-table", [
      { title: "Client id", get: r => r.client_id },
      { title: "Address", get: r => r.client_addr },
      { title: "Language", get: r => r.language },
      { title: "Version", get: r => r.version_name },
      { title: "Protocol", get: r => r.protocol },
    ], doc.connections),
    el("h3", {}, "Subscriptions"),
    table("subscription-table", [{ title: "Topic", get: r => r.topic }, { title: "Expression", get: r => r.expression }], doc.subscriptions),
    el("h3", {}, "Lag per queue"),
    table("group-queues", [
      { title: "Topic", get: r => r.topic },
      { title: "Broker", get: r => r.broker_name },
      { title: "Queue", get: r => r.queue_id, num: true },
      { title: "Broker offset", get: r => r.broker_offset, num: true },
      { title: "Consumer offset", get: r => r.consumer_offset, num: true },
      { title: "Lag", get: r => r.lag, num: true },
      { title: "Last consumed", get: r => time(r.last_timestamp) },
    ], doc.queues),
    doc.pop.length ? el("h3", {}, "POP in flight") : null,
    doc.pop.length ? table("group-pop", [
      { title: "Topic", get: r => r.topic },
      { title: "Broker", get: r => r.broker_name },
      { title: "In flight", get: r => r.in_flight, num: true },
      { title: "Retry backlog", get: r => r.retry_backlog, num: true },
      { title: "Retry in flight", get: r => r.retry_in_flight, num: true },
    ], doc.pop) : null,
    form));
}

function messagesPage(main) {
  const results = el("div", { id: "message-results" });
  const search = (what, path) => async ev => {
    ev.preventDefault();
    const doc = await guarded(what, () => api("GET", path()));
    if (doc) showMessages(doc.messages, results);
  };
  const kTopic = el("input", { id: "key-topic", placeholder: "topic" });
  const kKey = el("input", { id: "key-key", placeholder: "key" });
  const iId = el("input", { id: "id-msgid", placeholder: "message id", size: 34 });
  const iTopic = el("input", { id: "id-topic", placeholder: "topic (for a client msgId)" });
  const tTopic = el("input", { id: "time-topic", placeholder: "topic" });
  const now = new Date(Date.now() - new Date().getTimezoneOffset() * 60000);
  const tBegin = el("input", { id: "time-begin", type: "datetime-local", step: 1, value: new Date(now - 3600000).toISOString().slice(0, 19) });
  const tEnd = el("input", { id: "time-end", type: "datetime-local", step: 1, value: new Date(now.getTime() + 60000).toISOString().slice(0, 19) });
  const q = encodeURIComponent;
  const byKey = el("form", { class: "inline", id: "key-form" }, "By key", kTopic, kKey, el("button", { id: "key-search-btn", type: "submit" }, "Search"));
  byKey.addEventListener("submit", search("searching by key", () => `/api/messages?topic=${q(kTopic.value.trim())}&key=${q(kKey.value.trim())}`));
  const byId = el("form", { class: "inline", id: "id-form" }, "By message id", iId, iTopic, el("button", { id: "id-search-btn", type: "submit" }, "Search"));
  byId.addEventListener("submit", search("searching by id", () => `/api/messages?msg_id=${q(iId.value.trim())}&topic=${q(iTopic.value.trim())}`));
  const byTime = el("form", { class: "inline", id: "time-form" }, "By topic and time", tTopic, tBegin, "to", tEnd, el("button", { id: "time-search-btn", type: "submit" }, "Search"));
  byTime.addEventListener("submit", search("searching by time", () =>
    `/api/messages?topic=${q(tTopic.value.trim())}&begin_ms=${new Date(tBegin.value).getTime()}&end_ms=${new Date(tEnd.value).getTime()}`));
  main.replaceChildren(el("h2", {}, "Messages"), el("section", { class: "card" }, byKey, byId, byTime), results);
}

function showMessages(msgs, box) {
  status(`${msgs.length} message(s) found`);
  box.replaceChildren(...msgs.map((m, i) => {
    const traceBox = el("div", { class: "trace", id: `trace-${i}` }, el("span", { class: "muted" }, "loading the trace…"));
    loadTrace(m.msg_id, traceBox);
    return el("section", { class: "card message", "data-msg-id": m.msg_id },
      table(`message-${i}`, [
        { title: "Message id", get: r => r.msg_id },
        { title: "Topic", get: r => r.topic },
        { title: "Tags", get: r => r.tags },
        { title: "Keys", get: r => r.keys.join(" ") },
        { title: "Queue", get: r => `${r.queue_id} @ ${r.queue_offset}` },
        { title: "Stored", get: r => time(r.store_timestamp) },
        { title: "Store host", get: r => r.store_host },
        { title: "Body", get: r => el("pre", { class: "body" }, r.body === null ? `(${r.body_length} bytes, binary)` : r.body) },
      ], [m]),
      el("h3", {}, "Trace"), traceBox);
  }));
}

async function loadTrace(msgId, box) {
  let doc;
  try { doc = await api("GET", `/api/trace/${encodeURIComponent(msgId)}`); }
  catch (e) { box.replaceChildren(el("span", { class: "bad" }, `trace lookup failed: ${e.message}`)); return; }
  if (!doc.available) { box.replaceChildren(el("span", { class: "muted trace-unavailable" }, doc.reason)); return; }
  box.replaceChildren(table(`trace-table-${msgId}`, [
    { title: "Type", get: r => r.trace_type },
    { title: "Time", get: r => time(r.timestamp_ms) },
    { title: "Group", get: r => r.group_name },
    { title: "Client", get: r => r.client_host },
    { title: "Store host", get: r => r.store_host },
    { title: "Cost ms", get: r => r.cost_time_ms, num: true },
    { title: "Success", get: r => r.success === undefined ? null : (r.success ? "yes" : "no") },
  ], doc.events));
  box.querySelector("table").classList.add("trace-table");
}

// ---------------------------------------------------------------- login and start

function showLogin() {
  const auth = sessionStorage.getItem(AUTH_KEY);
  const user = auth ? atob(auth).split(":")[0] : null;
  document.getElementById("login-state").textContent = user ? `logged in as ${user}` : "not logged in";
  for (const id of ["login-user", "login-pass", "login-btn"]) document.getElementById(id).hidden = !!user;
  document.getElementById("logout-btn").hidden = !user;
  if (CONFIG.read_only) document.getElementById("login-box").hidden = true;
}

async function login() {
  const user = document.getElementById("login-user").value, pass = document.getElementById("login-pass").value;
  const token = btoa(unescape(encodeURIComponent(`${user}:${pass}`)));
  const resp = await fetch("/api/whoami", { headers: { Authorization: "Basic " + token, "X-Requested-With": "rocketq-dashboard" } });
  if (!resp.ok) { status("login failed: wrong user name or password", true); return; }
  sessionStorage.setItem(AUTH_KEY, token);
  document.getElementById("login-pass").value = "";
  status(`logged in as ${user}`);
  showLogin();
}

const PAGES = { "/": clusterPage, "/topics": topicsPage, "/groups": groupsPage, "/messages": messagesPage };

async function render() {
  if (refreshTimer) { clearInterval(refreshTimer); refreshTimer = null; }
  const path = location.pathname.replace(/\/+$/, "") || "/";
  document.querySelectorAll("nav a").forEach(a => a.classList.toggle("active", a.dataset.page === path));
  await (PAGES[path] || clusterPage)(document.getElementById("main"));
}

async function start() {
  CONFIG = await guarded("loading the settings", () => api("GET", "/api/config")) || {};
  const banner = document.getElementById("banner");
  const notes = [];
  if (CONFIG.read_only) notes.push("Read-only mode: every state change is refused.");
  else if (!CONFIG.users_configured) notes.push("No users are configured (--users): state changes are refused.");
  if (notes.length) { banner.textContent = notes.join(" "); banner.hidden = false; }
  document.getElementById("footer").textContent = `NameServer ${CONFIG.namesrv || "?"} · traces ${CONFIG.traces ? "available" : "unavailable"}`;
  document.getElementById("login-btn").addEventListener("click", login);
  document.getElementById("login-pass").addEventListener("keydown", e => { if (e.key === "Enter") login(); });
  document.getElementById("logout-btn").addEventListener("click", () => { sessionStorage.removeItem(AUTH_KEY); showLogin(); status("logged out"); });
  showLogin();
  await render();
  document.body.dataset.ready = "1";
}

start();
