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
  loginAt: null,  // performance.now() at sign-in, for the first-paint timing
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
        ctx.fillStyle = colorOf(n, job, g);
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
      ? el("button", { class: "action cancel", onclick: (e) => { e.stopPropagation(); confirmCancel(j); } }, "Cancel")
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

const DASH = "\u2014";
function fmtDuration(s) {
  s = Math.max(0, Math.round(s));
  if (s < 60) return s + " s";
  if (s < 3600) return Math.round(s / 60) + " min";
  if (s < 86400) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}
// "2026-12-01 11:05 UTC (in 12 min)"; the dash when absent or unreadable.
function fmtStart(iso) {
  if (!iso) return DASH;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return DASH;
  const ahead = (d.getTime() - Date.now()) / 1000;
  return d.toISOString().replace("T", " ").slice(0, 16) + " UTC" + (ahead > 0 ? ` (in ${fmtDuration(ahead)})` : " (due)");
}
const fmtNum = (v, digits = 0) => (v === null || v === undefined ? DASH : Number(v).toLocaleString(undefined, { maximumFractionDigits: digits }));

function renderQueue() {
  // Queue order: by the scheduler's position where it gives one, the rest after, by id.
  const pending = state.jobs.filter((j) => j.state === "queued").sort((a, b) =>
    (a.queue_position ?? Infinity) - (b.queue_position ?? Infinity) || a.id - b.id);
  $("#queue-table tbody").replaceChildren(...pending.map((j) => el("tr", { class: "clickable", dataset: { job: j.id }, onclick: () => { switchView("jobs"); showJob(j.id); } },
    el("td", { class: "pos" }, j.queue_position ?? DASH), el("td", {}, j.id), el("td", {}, j.name), el("td", {}, j.tenant),
    el("td", {}, (j.spec || {}).gpus ?? DASH), el("td", {}, (j.spec || {}).priority ?? 0),
    el("td", { class: "kind" }, j.waiting_kind ? el("span", { class: "badge kind-" + j.waiting_kind }, j.waiting_kind) : DASH),
    el("td", { class: "wrap" }, j.waiting_reason || DASH), el("td", { class: "start" }, fmtStart(j.estimated_start)))));
}

async function renderTenants() {
  let t;
  try { t = await api("/api/v1/tenants"); } catch (e) { return; }
  for (const row of t.tenants) hue("t:" + row.tenant);
  $("#tenants-table tbody").replaceChildren(...t.tenants.map((r) => el("tr", { dataset: { tenant: r.tenant } },
    el("td", {}, el("i", { class: "swatch", style: `background:${hue("t:" + r.tenant)}` }), r.tenant),
    el("td", {}, fmtNum(r.quota_gpus)), el("td", {}, fmtNum(r.guaranteed_gpus)), el("td", {}, fmtNum(r.weight, 2)),
    el("td", { class: "used" }, fmtNum(r.used)), el("td", {}, fmtNum(r.pending)), el("td", { class: "fair" }, fmtNum(r.fair_share, 1)),
    el("td", {}, r.fair_share > 0 ? (100 * r.used / r.fair_share).toFixed(0) + " %" : DASH))));
  $("#tenants-note").textContent = `Sampled every ${t.interval_s} s, the last ${t.capacity} samples kept ` +
    `(${fmtDuration(t.interval_s * t.capacity)}) plus now. Fair share: the weighted max-min share of the cluster's ` +
    `${fmtNum(t.cluster_gpus)} GPUs given each tenant's demand (GPUs held + GPUs queued) and quota.` +
    (t.pending_truncated ? " Pending demand is undercounted (too many queued jobs to read)." : "");
  const h = t.history, names = Object.keys(h.tenants);
  const series = [{}], data = [h.time];
  for (const name of names) {
    series.push({ label: name + " in use", stroke: hue("t:" + name), width: 2 });
    data.push(h.tenants[name].used);
    series.push({ label: name + " fair share", stroke: hue("t:" + name), width: 1.5, dash: [6, 4] });
    data.push(h.tenants[name].fair_share);
  }
  const box = $("#tenant-chart");
  box.dataset.points = String(h.time.length);
  if (!window.uPlot || state.view !== "tenants") return;
  const opts = { width: Math.max(600, box.clientWidth), height: 280, series,
    scales: { x: { time: true } },
    axes: [{}, { label: "GPUs", values: (u, ticks) => ticks.map((v) => v.toLocaleString()) }] };
  box.replaceChildren();
  new uPlot(opts, data, box);
}

const shortField = (f) => f.replace(/^DCGM_FI_DEV_/, "").toLowerCase();
function verdictText(v) {
  const conds = v.conditions.map((c) => `${shortField(c.field)} = ${c.value ?? "?"} (${c.op} ${c.threshold})`);
  return `${v.rule}${v.severity ? " \u2192 " + v.severity : ""}: ${conds.join(" and ") || "restored verdict"}`;
}

async function renderNodes() {
  if (state.me.role !== "admin") return;
  let nodes, health;
  try { [{ nodes }, health] = await Promise.all([api("/api/v1/nodes"), api("/api/v1/health")]); } catch (e) { return; }
  const info = new Map(health.nodes.map((n) => [n.node, n]));
  const by = $("#nodes-group").value, onlyBad = $("#nodes-unhealthy").checked;
  const groups = new Map();
  for (const n of nodes) {
    const h = info.get(n.node) || {};
    const key = (by === "rack" ? h.rack || h.domain : h.leaf) || DASH;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push([n, h]);
  }
  const rows = [];
  let bad = 0;
  for (const [key, list] of [...groups].sort((a, b) => a[0].localeCompare(b[0], undefined, { numeric: true }))) {
    const gpus = list.reduce((s, [n]) => s + n.gpus, 0), alloc = list.reduce((s, [n]) => s + n.gpus_allocated, 0);
    const flagged = list.filter(([n]) => n.health !== "healthy" || n.admin !== "active");
    bad += flagged.length;
    const shown = onlyBad ? flagged : list;
    if (!shown.length) continue;
    rows.push(el("tr", { class: "group" }, el("td", { colspan: 9 },
      `${by} ${key} \u00b7 ${list.length} nodes \u00b7 ${gpus} GPUs: ${alloc} allocated, ${gpus - alloc} free` +
      (flagged.length ? ` \u00b7 ${flagged.length} with a verdict or admin state` : ""))));
    for (const [n, h] of shown) {
      rows.push(el("tr", { dataset: { node: n.node } },
        el("td", {}, n.node),
        el("td", { class: "health" }, el("i", { class: "swatch", style: `background:${HEALTH[n.health] || UNAVAILABLE}` }), n.health),
        el("td", { class: "wrap why" }, (h.verdicts || []).map(verdictText).join("; ") || DASH),
        el("td", { class: "wrap signals" }, Object.entries(h.signals || {}).map(([k, v]) => `${shortField(k)} ${v}`).join(" \u00b7 ") || DASH),
        el("td", { class: "admin" }, n.admin), el("td", {}, n.gpus), el("td", {}, n.gpus_allocated),
        el("td", { class: "wrap" }, n.reason || DASH),
        el("td", {}, n.admin === "active"
          ? el("button", { class: "action drain", onclick: () => nodeAction(n.node, "drain") }, "Drain")
          : el("button", { class: "action resume", onclick: () => nodeAction(n.node, "uncordon") }, "Resume"))));
    }
  }
  $("#nodes-summary").textContent = `${nodes.length} nodes in ${groups.size} ${by}s; ${bad} with a health verdict or an admin state`;
  $("#nodes-table tbody").replaceChildren(...rows);
}

// The planner's step-time parts as stacked bars: this placement and the compact one, on one scale.
// Names and colours as perf's report (perf/report.cc kParts) writes them.
const PART_COLOR = { compute: "#4e79a7", recompute: "#a0cbe8", "tp comm": "#f28e2b", "cp comm": "#ffbe7d",
  "ep comm": "#8cd17d", "pp comm": "#b6992d", "dp comm": "#e15759", bubble: "#bab0ac", optimizer: "#79706e", launch: "#d37295" };
const partsOf = (e) => [...Object.keys(PART_COLOR), ...Object.keys(e.breakdown_s).filter((k) => !(k in PART_COLOR))];
function breakdownBars(plan) {
  const rows = [["this placement", plan.estimate], ["compact placement", plan.compact_estimate]];
  const max = Math.max(...rows.map(([, e]) => e.step_s));
  const wrap = el("div", { class: "breakdown" });
  for (const [label, e] of rows) {
    const bar = el("div", { class: "bar" });
    for (const p of partsOf(e)) {
      const v = e.breakdown_s[p] || 0;
      if (v <= 0) continue;
      bar.append(el("span", { dataset: { part: p, seconds: String(v) }, style: `width:${(100 * v) / max}%;background:${PART_COLOR[p] || OTHER}`, title: `${p}: ${v.toFixed(3)} s (${((100 * v) / e.step_s).toFixed(1)} %)` }));
    }
    wrap.append(el("div", { class: "bar-row" }, el("span", { class: "bar-label" }, `${label}: ${e.step_s.toFixed(3)} s`), bar));
  }
  const legend = el("div", { class: "bar-legend" });
  for (const p of partsOf(plan.estimate)) {
    const v = Math.max(plan.estimate.breakdown_s[p] || 0, plan.compact_estimate.breakdown_s[p] || 0);
    if (v > 0) legend.append(el("span", {}, el("i", { style: `background:${PART_COLOR[p] || OTHER}` }), `${p} ${(plan.estimate.breakdown_s[p] || 0).toFixed(3)} s`));
  }
  wrap.append(legend);
  return wrap;
}

async function showJob(id) {
  state.selectedJob = id;
  let job, events, placement;
  try {
    [job, events, placement] = await Promise.all([api(`/api/v1/jobs/${id}`), api(`/api/v1/jobs/${id}/events`),
      api(`/api/v1/jobs/${id}/placement`)]);
  } catch (e) { return; }
  $("#job-detail").hidden = false;
  $("#job-detail").dataset.job = String(job.id);
  $("#job-title").textContent = `Job ${job.id}: ${job.name} (${job.tenant}, ${job.state})`;
  $("#job-spec").textContent = JSON.stringify(job.spec, null, 2);
  const t0 = events.events.length ? Date.parse(events.events[0].time) : 0;
  $("#job-events").replaceChildren(...events.events.map((e) => el("li", {},
    el("time", { title: e.time }, e.time.replace("T", " ").slice(0, 19)),
    el("span", { class: "offset" }, "+" + fmtDuration((Date.parse(e.time) - t0) / 1000)),
    el("b", {}, e.kind), " ", e.message)));
  const p = placement;
  $("#job-placement").textContent = p.placed
    ? `${p.gpus} GPUs on ${p.nodes.length} node${p.nodes.length > 1 ? "s" : ""}, within one ${p.level}` +
      (p.compact_level ? `; a compact placement of ${p.gpus} GPUs spans one ${p.compact_level}` : "") +
      (p.source === "stored" ? " (its last placement)" : "")
    : job.waiting_reason ? "waiting: " + job.waiting_reason : "not placed";
  const ck = job.checkpoint;
  $("#job-checkpoint").textContent = ck
    ? `Last checkpoint: step ${ck.step} by attempt ${ck.attempt}, ` +
      `${fmtDuration((Date.now() - Date.parse(ck.time)) / 1000)} ago (${(ck.bytes / 2 ** 20).toFixed(1)} MiB)`
    : "No checkpoint reported";
  const slow = $("#job-slowdown");
  if (p.plan && p.plan.slowdown) {
    const pl = p.plan.plan;
    slow.replaceChildren(el("span", { class: "slowdown" + (p.plan.slowdown > 1.02 ? " worse" : "") }, `${p.plan.slowdown.toFixed(2)}\u00d7`),
      ` the compact placement's step time (${p.plan.model}, tp${pl.tp} pp${pl.pp} dp${pl.dp}` +
      `${pl.cp > 1 ? " cp" + pl.cp : ""}${pl.ep > 1 ? " ep" + pl.ep : ""}: ${p.plan.estimate.step_s.toFixed(3)} s/step here, ` +
      `${p.plan.compact_estimate.step_s.toFixed(3)} s compact)`);
    $("#job-plan").hidden = false;
    $("#job-breakdown").replaceChildren(breakdownBars(p.plan));
  } else {
    slow.replaceChildren(p.placed && p.plan_note ? el("span", { class: "muted" }, "Slowdown: " + p.plan_note) : "");
    $("#job-plan").hidden = true;
  }
  if (state.cluster) {
    const nodes = p.placed ? new Set(p.nodes.map((n) => n.node)) : new Set();
    const leaves = new Set(state.cluster.nodes.filter((n) => nodes.has(n.name)).map((n) => n.path.join("/")));
    const view = { nodes: state.cluster.nodes.filter((n) => leaves.has(n.path.join("/"))) };
    const mine = new Map(p.placed ? p.nodes.map((n) => [n.node, new Set(n.gpus)]) : []);
    drawHeatmap($("#job-heatmap"), view, (n, j, g) => (mine.has(n.name) && mine.get(n.name).has(g) ? "#2b5fad" : j ? OTHER : FREE), 10);
  }
}

// A cancel cannot be undone (a running job's ranks are stopped), so the page asks first.
function confirmCancel(j) {
  const running = j.state === "running" ? " Its running ranks are stopped." : "";
  if (confirm(`Cancel job ${j.id} (${j.name})?${running}`)) cancelJob(j.id);
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
  const pages = await Promise.all([...["running", "cancelling", "queued"].map((s) => api(`/api/v1/jobs?state=${s}&limit=1000`)),
    api("/api/v1/jobs?limit=200")]);
  const out = [], seen = new Set();
  for (const page of pages) for (const j of page.jobs) if (!seen.has(j.id)) { seen.add(j.id); out.push(j); }
  state.jobs = out;
}

// The time from sign-in to the heatmap on screen, once per sign-in (the browser test prints it).
function markFirstPaint() {
  if (state.loginAt === null) return;
  requestAnimationFrame(() => {
    if (state.loginAt === null) return;
    document.body.dataset.firstPaintMs = (performance.now() - state.loginAt).toFixed(0);
    state.loginAt = null;
  });
}

// One refresh at a time; a change that arrives meanwhile triggers one more. The heatmap is drawn
// as soon as the cluster arrives, without waiting for the job lists.
async function refresh() {
  if (state.refreshing) { state.pending = true; return; }
  state.refreshing = true;
  try {
    const cluster = api("/api/v1/cluster").then((c) => {
      state.cluster = c;
      if (state.view === "cluster") { renderCluster(); markFirstPaint(); }
    });
    await Promise.all([cluster, loadJobs()]);
    renderQueue(); renderJobs();
    if (state.view === "tenants") await renderTenants();
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
  state.loginAt = performance.now();
  sessionStorage.setItem("baton-token", state.token);
  start();
});
for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => switchView(b.dataset.view));
$("#color-by").addEventListener("change", renderCluster);
$("#nodes-group").addEventListener("change", renderNodes);
$("#nodes-unhealthy").addEventListener("change", renderNodes);
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
if (state.token) { state.loginAt = 0; start(); } else logout();  // 0: from navigation start
