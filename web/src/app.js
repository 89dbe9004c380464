// baton's dashboard: one page over the daemon's own API (the same endpoints the `baton` client
// uses), refreshed live from /api/v1/stream. The token is kept in sessionStorage and sent only as
// an Authorization header, never in a URL.
"use strict";

const state = {
  token: sessionStorage.getItem("baton-token") || "",
  me: null,
  view: "cluster",
  cluster: null,
  jobs: [],
  selectedJob: null,
  history: { t: [], byTenant: new Map() },
  refreshing: false,
  pending: false,
};

const $ = (sel) => document.querySelector(sel);
const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(e.dataset, v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
};

async function api(path, options = {}) {
  const headers = Object.assign({ Authorization: "Bearer " + state.token }, options.headers || {});
  const res = await fetch(path, Object.assign({}, options, { headers }));
  const text = await res.text();
  let body = null;
  try { body = text ? JSON.parse(text) : {}; } catch { body = { error: { message: text } }; }
  if (!res.ok) {
    const err = new Error((body && body.error && body.error.message) || "HTTP " + res.status);
    err.status = res.status;
    throw err;
  }
  return body;
}

// ---- colours -------------------------------------------------------------------------------
const FREE = "#e6e6e1", OTHER = "#9d9d98", UNAVAILABLE = "#3a3a3a";
const HEALTH = { healthy: "#7fb77e", suspect: "#e5c04b", draining: "#e58e3c", down: "#c8453b" };
// Categorical colours, handed out in order of first use (tenants are registered sorted before
// each draw), so two tenants never share a colour while there are fewer than the palette holds.
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
  "#ff9da7", "#9c755f", "#1f77b4", "#bcbd22", "#17becf"];
const assigned = new Map();
function hue(key) {
  if (!assigned.has(key)) {
    let h = 2166136261;
    for (const ch of String(key)) h = Math.imul(h ^ ch.charCodeAt(0), 16777619);
    assigned.set(key, assigned.size < PALETTE.length ? PALETTE[assigned.size] : `hsl(${(h >>> 0) % 360}, 58%, 52%)`);
  }
  return assigned.get(key);
}
function gpuColor(mode, node, job) {
  if (mode === "health") return HEALTH[node.health] || UNAVAILABLE;
  if (node.health === "down") return UNAVAILABLE;
  if (!job) return FREE;
  if (job < 0) return OTHER;
  const info = state.cluster.jobs[job];
  if (mode === "tenant") return info ? hue("t:" + info.tenant) : OTHER;
  return hue("j:" + job);
}

// ---- heatmap -------------------------------------------------------------------------------
// Layout: one band per top-level switch group, leaves (or NVLink domains) as boxes within it,
// nodes as small blocks of GPU cells. Returns the node rectangles for hit testing.
function drawHeatmap(canvas, cluster, colorOf, cell) {
  const t0 = performance.now();
  const gap = Math.max(1, Math.round(cell / 4));
  const pad = cell * 2;
  const width = Math.max(600, canvas.parentElement.clientWidth - 4);
  // Bands are the highest switch tier with more than one switch (a single core is no grouping).
  let depth = 0;
  const tiers = Math.max(0, ...cluster.nodes.map((n) => n.path.length));
  while (depth < tiers - 1 && new Set(cluster.nodes.map((n) => n.path[depth])).size < 2) depth++;
  const bands = new Map();
  for (const n of cluster.nodes) {
    const top = n.path.length > depth ? n.path[depth] : "cluster";
    const box = n.domain || (n.path.length ? n.path[n.path.length - 1] : "nodes");
    if (!bands.has(top)) bands.set(top, new Map());
    const boxes = bands.get(top);
    if (!boxes.has(box)) boxes.set(box, []);
    boxes.get(box).push(n);
  }
  // A node's GPUs as a block of cols x rows cells.
  const blockOf = (g) => { const cols = Math.max(1, Math.ceil(Math.sqrt(g * 2))); return [cols, Math.ceil(g / cols)]; };
  const plan = [];
  let y = 0;
  for (const [top, boxes] of bands) {
    y += 16;
    const bandLabel = { top, y };
    let x = 0, rowH = 0;
    for (const [box, nodes] of boxes) {
      const [bc, br] = blockOf(Math.max(...nodes.map((n) => n.gpus.length), 1));
      const nodeW = bc * (cell + gap) + gap, nodeH = br * (cell + gap) + gap;
      const perRow = Math.max(1, Math.min(nodes.length, Math.floor((width - pad) / (nodeW + gap))));
      const boxW = perRow * (nodeW + gap) + gap + 2;
      const boxH = Math.ceil(nodes.length / perRow) * (nodeH + gap) + gap + 14;
      if (x + boxW > width && x > 0) { x = 0; y += rowH + pad / 2; rowH = 0; }
      plan.push({ box, x, y, w: boxW, h: boxH, nodes, perRow, nodeW, nodeH, bc });
      x += boxW + pad / 2;
      rowH = Math.max(rowH, boxH);
    }
    plan.push({ label: bandLabel });
    y += rowH + pad;
  }
  const dpr = window.devicePixelRatio || 1;
  canvas.width = width * dpr; canvas.height = Math.max(40, y) * dpr;
  canvas.style.width = width + "px"; canvas.style.height = Math.max(40, y) + "px";
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, width, y);
  ctx.font = "11px system-ui, sans-serif";
  const rects = [];
  let drawn = 0;
  for (const p of plan) {
    if (p.label) { ctx.fillStyle = "#444"; ctx.fillText(p.label.top, 0, p.label.y - 4); continue; }
    ctx.strokeStyle = "#c9c9c3"; ctx.strokeRect(p.x + 0.5, p.y + 0.5, p.w - 1, p.h - 1);
    ctx.fillStyle = "#777"; ctx.fillText(p.box, p.x + 3, p.y + 11);
    p.nodes.forEach((n, i) => {
      const nx = p.x + 1 + gap + (i % p.perRow) * (p.nodeW + gap);
      const ny = p.y + 14 + Math.floor(i / p.perRow) * (p.nodeH + gap);
      ctx.fillStyle = n.admin !== "active" ? "#5a5a5a" : "#d5d5cf";
      ctx.fillRect(nx, ny, p.nodeW, p.nodeH);
      n.gpus.forEach((job, g) => {
        ctx.fillStyle = colorOf(n, job);
        ctx.fillRect(nx + gap + (g % p.bc) * (cell + gap), ny + gap + Math.floor(g / p.bc) * (cell + gap), cell, cell);
        drawn++;
      });
      rects.push({ x: nx, y: ny, w: p.nodeW, h: p.nodeH, node: n, bc: p.bc });
    });
  }
  canvas.dataset.gpus = String(drawn);
  canvas.dataset.renderMs = (performance.now() - t0).toFixed(1);
  return rects;
}

let heatRects = [];
function renderCluster() {
  const c = state.cluster;
  if (!c) return;
  const mode = $("#color-by").value;
  for (const t of [...new Set(Object.values(c.jobs).map((j) => j.tenant))].sort()) hue("t:" + t);
  const pct = c.gpus ? ((100 * c.gpus_allocated) / c.gpus).toFixed(1) : "0";
  $("#cluster-summary").textContent =
    `${c.name}: ${c.nodes.length} nodes, ${c.gpus} GPUs, ${c.gpus_allocated} allocated (${pct} %)`;
  const cell = c.gpus > 4096 ? 4 : c.gpus > 1024 ? 6 : 10;
  heatRects = drawHeatmap($("#heatmap"), c, (n, job) => gpuColor(mode, n, job), cell);
  const legend = $("#legend");
  legend.replaceChildren();
  const item = (color, text) => legend.append(el("span", {}, el("i", { style: `background:${color}` }), text));
  if (mode === "health") for (const [k, v] of Object.entries(HEALTH)) item(v, k);
  else {
    item(FREE, "free");
    if (mode === "tenant") for (const t of new Set(Object.values(c.jobs).map((j) => j.tenant))) item(hue("t:" + t), t);
    if (Object.values(c.nodes).some((n) => n.gpus.some((j) => j < 0))) item(OTHER, "other tenants");
  }
}

function nodeAt(rects, canvas, ev) {
  const r = canvas.getBoundingClientRect();
  const x = ev.clientX - r.left, y = ev.clientY - r.top;
  return rects.find((q) => x >= q.x && x < q.x + q.w && y >= q.y && y < q.y + q.h);
}

// ---- views -----------------------------------------------------------------------------------
function jobRow(j, withCancel) {
  const spec = j.spec || {};
  const nodes = j.placement ? j.placement.nodes.map((n) => n.node) : [];
  const tr = el("tr", { class: "clickable", dataset: { job: j.id } },
    el("td", {}, j.id), el("td", {}, j.name), el("td", {}, j.tenant), el("td", {}, j.state),
    el("td", {}, spec.gpus ?? "-"), el("td", {}, j.placement ? j.placement.level : "-"),
    el("td", {}, nodes.length ? nodes[0] + (nodes.length > 1 ? ` +${nodes.length - 1}` : "") : "-"),
    el("td", {}, withCancel && ["queued", "running"].includes(j.state)
      ? el("button", { class: "action cancel", onclick: (e) => { e.stopPropagation(); cancelJob(j.id); } }, "Cancel")
      : ""));
  tr.addEventListener("click", () => showJob(j.id));
  return tr;
}

function mayCancel(j) {
  return state.me.role === "admin" || j.tenant === state.me.tenant;
}

function renderJobs() {
  const body = $("#jobs-table tbody");
  body.replaceChildren(...state.jobs.map((j) => jobRow(j, mayCancel(j))));
}

function renderQueue() {
  const pending = state.jobs.filter((j) => j.state === "queued");
  $("#queue-table tbody").replaceChildren(...pending.map((j, i) => el("tr", { class: "clickable", onclick: () => { switchView("jobs"); showJob(j.id); } },
    el("td", {}, j.queue_position ?? i + 1), el("td", {}, j.id), el("td", {}, j.name), el("td", {}, j.tenant),
    el("td", {}, (j.spec || {}).gpus ?? "-"), el("td", {}, (j.spec || {}).priority ?? 0),
    el("td", { class: "wrap" }, j.waiting_reason || "-"), el("td", {}, j.estimated_start || "-"))));
}

function renderTenants() {
  const c = state.cluster;
  if (!c) return;
  const use = new Map(), running = new Map(), pending = new Map();
  for (const n of c.nodes) for (const job of n.gpus) if (job > 0 && c.jobs[job]) {
    const t = c.jobs[job].tenant; use.set(t, (use.get(t) || 0) + 1);
  }
  for (const j of state.jobs) {
    const m = j.state === "queued" ? pending : j.state === "running" ? running : null;
    if (m) m.set(j.tenant, (m.get(j.tenant) || 0) + 1);
  }
  const tenants = [...new Set([...use.keys(), ...running.keys(), ...pending.keys()])].sort();
  $("#tenants-table tbody").replaceChildren(...tenants.map((t) => el("tr", {},
    el("td", {}, t), el("td", {}, use.get(t) || 0),
    el("td", {}, c.gpus ? ((100 * (use.get(t) || 0)) / c.gpus).toFixed(1) + " %" : "-"),
    el("td", {}, running.get(t) || 0), el("td", {}, pending.get(t) || 0))));
  // History for the chart.
  const h = state.history;
  h.t.push(Date.now() / 1000);
  for (const t of tenants) if (!h.byTenant.has(t)) h.byTenant.set(t, new Array(h.t.length - 1).fill(0));
  for (const [t, arr] of h.byTenant) arr.push(use.get(t) || 0);
  if (state.view === "tenants" && window.uPlot) {
    const names = [...h.byTenant.keys()];
    const opts = { width: Math.max(600, $("#tenant-chart").clientWidth), height: 260,
      series: [{}, ...names.map((t) => ({ label: t, stroke: hue("t:" + t), width: 2 }))],
      axes: [{}, { label: "GPUs", values: (u, ticks) => ticks.map((v) => v.toLocaleString()) }] };
    $("#tenant-chart").replaceChildren();
    new uPlot(opts, [h.t, ...names.map((t) => h.byTenant.get(t))], $("#tenant-chart"));
  }
}

async function renderNodes() {
  if (state.me.role !== "admin") return;
  const { nodes } = await api("/api/v1/nodes");
  const group = new Map((state.cluster ? state.cluster.nodes : []).map((n) => [n.name, n.path[n.path.length - 1] || "-"]));
  $("#nodes-table tbody").replaceChildren(...nodes.map((n) => el("tr", { dataset: { node: n.node } },
    el("td", {}, n.node), el("td", {}, group.get(n.node) || "-"), el("td", {}, n.health),
    el("td", { class: "wrap" }, (n.active_rules || []).join(", ") || "-"), el("td", {}, n.admin),
    el("td", {}, n.gpus), el("td", {}, n.gpus_allocated), el("td", { class: "wrap" }, n.reason || "-"),
    el("td", {}, n.admin === "active"
      ? el("button", { class: "action drain", onclick: () => nodeAction(n.node, "drain") }, "Drain")
      : el("button", { class: "action resume", onclick: () => nodeAction(n.node, "uncordon") }, "Resume")))));
}

async function showJob(id) {
  state.selectedJob = id;
  let job, events;
  try {
    [job, events] = await Promise.all([api(`/api/v1/jobs/${id}`), api(`/api/v1/jobs/${id}/events`)]);
  } catch (e) { return; }
  $("#job-detail").hidden = false;
  $("#job-title").textContent = `Job ${job.id}: ${job.name} (${job.tenant}, ${job.state})`;
  $("#job-spec").textContent = JSON.stringify(job.spec, null, 2);
  $("#job-events").replaceChildren(...events.events.map((e) => el("li", {}, el("time", {}, e.time.replace("T", " ").slice(0, 19)), el("b", {}, e.kind), " ", e.message)));
  $("#job-placement").textContent = job.placement
    ? `${job.placement.gpus} GPUs on ${job.placement.nodes.length} nodes, within one ${job.placement.level}`
    : job.waiting_reason ? "waiting: " + job.waiting_reason : "not placed";
  if (state.cluster) {
    const nodes = job.placement ? new Set(job.placement.nodes.map((n) => n.node)) : new Set();
    const leaves = new Set(state.cluster.nodes.filter((n) => nodes.has(n.name)).map((n) => n.path.join("/")));
    const view = { nodes: state.cluster.nodes.filter((n) => leaves.has(n.path.join("/"))) };
    drawHeatmap($("#job-heatmap"), view, (n, j) => (j === job.id ? "#2b5fad" : j ? OTHER : FREE), 10);
  }
}

async function cancelJob(id) {
  try { await api(`/api/v1/jobs/${id}`, { method: "DELETE" }); } catch (e) { alert(`cancel ${id}: ${e.message}`); }
  refresh();
}

async function nodeAction(node, action) {
  try { await api(`/api/v1/nodes/${node}:${action}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ reason: "from the dashboard" }) }); }
  catch (e) { alert(`${action} ${node}: ${e.message}`); }
  refresh();
}

async function loadJobs() {
  const out = [];
  for (const s of ["running", "cancelling", "queued"]) {
    const page = await api(`/api/v1/jobs?state=${s}&limit=1000`);
    out.push(...page.jobs);
  }
  const done = await api(`/api/v1/jobs?limit=200`);
  for (const j of done.jobs) if (!out.some((o) => o.id === j.id)) out.push(j);
  state.jobs = out;
}

// One refresh at a time; a change that arrives meanwhile triggers one more.
async function refresh() {
  if (state.refreshing) { state.pending = true; return; }
  state.refreshing = true;
  try {
    const [cluster] = await Promise.all([api("/api/v1/cluster"), loadJobs()]);
    state.cluster = cluster;
    if (state.view === "cluster") renderCluster();
    renderQueue(); renderJobs(); renderTenants();
    if (state.view === "nodes") await renderNodes();
    if (state.selectedJob && state.view === "jobs") await showJob(state.selectedJob);
    document.body.dataset.refreshed = String(Date.now());
  } catch (e) {
    if (e.status === 401) return logout("the daemon refused the token: " + e.message);
  } finally {
    state.refreshing = false;
    if (state.pending) { state.pending = false; refresh(); }
  }
}

// Server-sent events over fetch (EventSource cannot send an Authorization header).
async function stream() {
  for (;;) {
    let ended = false;
    try {
      const res = await fetch("/api/v1/stream", { headers: { Authorization: "Bearer " + state.token } });
      if (res.status === 401) return logout("the daemon refused the token");
      if (!res.ok || !res.body) throw new Error("HTTP " + res.status);
      $("#live").classList.add("on");
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) { ended = true; break; }
        buf += decoder.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const msg = buf.slice(0, i); buf = buf.slice(i + 2);
          if (/^event: change/m.test(msg)) refresh();
        }
      }
    } catch (e) { /* reconnect below */ }
    $("#live").classList.remove("on");
    if (!state.token) return;
    // A stream that ended normally is reopened at once; after an error, wait a second.
    await new Promise((r) => setTimeout(r, ended ? 0 : 1000));
  }
}

function switchView(view) {
  state.view = view;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.view === view);
  for (const s of document.querySelectorAll(".view")) s.hidden = s.id !== "view-" + view;
  if (view === "cluster") renderCluster();
  if (view === "tenants") renderTenants();
  if (view === "nodes") renderNodes();
}

function logout(message) {
  state.token = ""; sessionStorage.removeItem("baton-token");
  $("#tabs").hidden = true; $("#who").textContent = "";
  for (const s of document.querySelectorAll(".view")) s.hidden = true;
  $("#login").hidden = false;
  $("#login-error").textContent = message || "";
}

async function start() {
  try { state.me = await api("/api/v1/whoami"); } catch (e) { return logout(e.status === 401 ? "unknown token" : e.message); }
  $("#login").hidden = true; $("#tabs").hidden = false;
  $("#who").textContent = `${state.me.name} (${state.me.role}${state.me.role === "tenant" ? ", " + state.me.tenant : ""})`;
  for (const b of document.querySelectorAll("#tabs button[data-role=admin]")) b.hidden = state.me.role !== "admin";
  switchView("cluster");
  await refresh();
  stream();
}

$("#login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  state.token = $("#token").value.trim();
  sessionStorage.setItem("baton-token", state.token);
  start();
});
for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => switchView(b.dataset.view));
$("#color-by").addEventListener("change", renderCluster);
window.addEventListener("resize", () => state.view === "cluster" && renderCluster());
const heat = $("#heatmap"), tip = $("#tooltip");
heat.addEventListener("mousemove", (ev) => {
  const hit = nodeAt(heatRects, heat, ev);
  if (!hit) { tip.hidden = true; return; }
  const n = hit.node;
  const jobs = [...new Set(n.gpus.filter((j) => j))].map((j) => j < 0 ? "another tenant" : `job ${j} (${(state.cluster.jobs[j] || {}).tenant || "?"})`);
  tip.textContent = `${n.name} · ${n.health}${n.admin !== "active" ? " · " + n.admin : ""} · ${n.gpus.filter((j) => j).length}/${n.gpus.length} GPUs${jobs.length ? " · " + jobs.join(", ") : ""}`;
  tip.style.left = ev.clientX + 12 + "px"; tip.style.top = ev.clientY + 12 + "px"; tip.hidden = false;
});
heat.addEventListener("mouseleave", () => { tip.hidden = true; });
if (state.token) start(); else logout();
