// Browser tests of the dashboard: playwright-core (web/node_modules) drives Debian's Chromium,
// headless, against real daemons (`baton serve`, dry-run executor, embedded SQLite) on loopback.
// Run by ctest as: node --test tests/ui/  with BATON_BINARY, BATON_SOURCE_DIR and
// BATON_ARTIFACTS (screenshots and timings are written there) in the environment.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, mkdirSync, rmSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

const src = process.env.BATON_SOURCE_DIR;
const baton = process.env.BATON_BINARY;
const artifacts = process.env.BATON_ARTIFACTS || join(tmpdir(), "baton-ui-artifacts");
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
mkdirSync(artifacts, { recursive: true });
const require = createRequire(join(src, "web", "package.json"));
const { chromium } = require("playwright-core");

const tokens = {
  ops: "ops-" + Math.random().toString(36).slice(2) + "-token",
  alice: "alice-" + Math.random().toString(36).slice(2) + "-token",
  bob: "bob-" + Math.random().toString(36).slice(2) + "-token",
};
const timings = {};

// Starts `baton serve` on a free port with the given cluster (a file in data/clusters, or
// "preset:NAME"); resolves with its URL.
async function startDaemon(cluster) {
  const where = cluster.startsWith("preset:") ? ["--preset", cluster.slice(7)]
    : ["--topology", join(src, "data/clusters", cluster)];
  const dir = mkdtempSync(join(tmpdir(), "baton-ui-"));
  writeFileSync(join(dir, "auth.yaml"), `principals:
  - {name: ops, role: admin, token: "${tokens.ops}"}
  - {name: alice, role: tenant, tenant: team-a, token: "${tokens.alice}"}
  - {name: bob, role: tenant, tenant: team-b, token: "${tokens.bob}"}
`);
  const proc = spawn(baton, ["serve", ...where,
    "--executor", "dry-run", "--speedup", "1", "--listen", "127.0.0.1:0",
    "--db", join(dir, "baton.db"), "--auth", join(dir, "auth.yaml")], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  const url = await new Promise((resolve, reject) => {
    const onData = (d) => {
      log += d;
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(log);
      if (m) resolve(m[1]);
    };
    proc.stdout.on("data", onData);
    proc.stderr.on("data", onData);
    proc.on("exit", (code) => reject(new Error(`baton serve exited ${code}: ${log}`)));
    setTimeout(() => reject(new Error("baton serve did not start: " + log)), 60_000);
  });
  return { url, proc, dir };
}

function stopDaemon(d) {
  if (!d) return;
  d.proc.kill("SIGTERM");
  rmSync(d.dir, { recursive: true, force: true });
}

async function call(d, token, method, path, body) {
  const res = await fetch(d.url + path, {
    method,
    headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

async function signIn(page, d, token) {
  await page.goto(d.url + "/");
  await page.fill("#token", token);
  await page.click("#login-form button[type=submit]");
  await page.waitForSelector("#heatmap[data-gpus]");
}

// The job view's step-time bar shows the planner's whole step: its parts add up to it.
async function assertBreakdownAddsUp(page) {
  const parts = await page.$$eval("#job-breakdown .bar-row:first-child .bar span", (ss) => ss.map((x) => Number(x.dataset.seconds)));
  const step = Number((await page.textContent("#job-breakdown .bar-row:first-child .bar-label")).match(/([\d.]+) s/)[1]);
  assert.ok(Math.abs(parts.reduce((a, b) => a + b, 0) - step) < 0.002 * step + 0.001, `parts ${parts} vs step ${step}`);
}

let browser, small, big, superpod;
before(async () => {
  assert.ok(baton && existsSync(baton), "BATON_BINARY must name the baton binary");
  browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] });
  small = await startDaemon("fake16.yaml");
});
after(async () => {
  await browser?.close();
  stopDaemon(small);
  stopDaemon(big);
  stopDaemon(superpod);
  writeFileSync(join(artifacts, "timings.json"), JSON.stringify(timings, null, 2) + "\n");
  console.log("timings:", JSON.stringify(timings));
});

test("the page loads, asks for a token, and the heatmap shows every GPU", async () => {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.goto(small.url + "/");
  assert.equal(await page.isVisible("#login-form"), true);
  // A wrong token is refused with a message, and nothing else is shown.
  await page.fill("#token", "not-a-token-at-all");
  await page.click("#login-form button[type=submit]");
  await page.waitForFunction(() => document.querySelector("#login-error").textContent !== "");
  assert.equal(await page.isVisible("#tabs"), false);
  await signIn(page, small, tokens.ops);
  assert.equal(await page.getAttribute("#heatmap", "data-gpus"), "128");
  assert.match(await page.textContent("#cluster-summary"), /16 nodes, 128 GPUs/);
  await page.waitForFunction(() => document.body.dataset.firstPaintMs !== undefined);
  timings.first_paint_128_ms = Number(await page.evaluate(() => document.body.dataset.firstPaintMs));
  // The token never appears in a URL.
  assert.ok(!page.url().includes(tokens.ops));
  await page.screenshot({ path: join(artifacts, "cluster-128.png") });
  await page.close();
});

test("a job submitted through the API appears without a reload, and an operator cancels it", async () => {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await signIn(page, small, tokens.ops);
  await page.click("nav button[data-view=jobs]");
  const reloads = await page.evaluate(() => performance.getEntriesByType("navigation").length);
  const t0 = Date.now();
  const submitted = await call(small, tokens.alice, "POST", "/api/v1/jobs",
    { name: "ui-live", gpus: 16, gpus_per_node: 8, estimated_runtime_s: 3600 });
  assert.equal(submitted.status, 201);
  const id = submitted.body.id;
  await page.waitForSelector(`#jobs-table tr[data-job="${id}"]`, { timeout: 10_000 });
  timings.job_appears_ms = Date.now() - t0;
  assert.equal(await page.evaluate(() => performance.getEntriesByType("navigation").length), reloads);
  // The state change (queued -> running) reaches the open page: timed from the moment the API
  // says it is running (polled every 20 ms) to the moment the row says so.
  const apiRunning = (async () => {
    for (;;) {
      const r = await call(small, tokens.ops, "GET", `/api/v1/jobs/${id}`);
      if (r.body.state === "running" || Date.now() - t0 > 15_000) return Date.now();
      await new Promise((ok) => setTimeout(ok, 20));
    }
  })();
  await page.waitForFunction((jid) => {
    const row = document.querySelector(`#jobs-table tr[data-job="${jid}"]`);
    return row && row.children[3].textContent === "running";
  }, id, { timeout: 10_000, polling: 10 });
  const pageRunning = Date.now();
  timings.state_change_reaches_page_ms = Math.max(0, pageRunning - (await apiRunning));
  const heat = await page.evaluate(() => document.querySelector("#heatmap").dataset.gpus);
  assert.equal(heat, "128");
  await page.screenshot({ path: join(artifacts, "jobs.png") });
  // The page asks before it cancels; declining changes nothing (confirm blocks the click's
  // handler, so no request can be on its way once the click returns).
  let asked = "";
  page.once("dialog", (d) => { asked = d.message(); d.dismiss(); });
  await page.click(`#jobs-table tr[data-job="${id}"] button.cancel`);
  assert.match(asked, new RegExp(`^Cancel job ${id} \\(ui-live\\)\\? Its running ranks are stopped\\.$`));
  assert.equal((await call(small, tokens.ops, "GET", `/api/v1/jobs/${id}`)).body.state, "running");
  page.once("dialog", (d) => d.accept());
  const t1 = Date.now();
  await page.click(`#jobs-table tr[data-job="${id}"] button.cancel`);
  await page.waitForFunction((jid) => {
    const row = document.querySelector(`#jobs-table tr[data-job="${jid}"]`);
    return row && /cancel/.test(row.children[3].textContent);
  }, id, { timeout: 10_000 });
  timings.cancel_reaches_page_ms = Date.now() - t1;
  const after = await call(small, tokens.ops, "GET", `/api/v1/jobs/${id}`);
  assert.match(after.body.state, /cancel/);
  await page.close();
});

test("a tenant sees only its own jobs, and cannot cancel another tenant's", async () => {
  const theirs = await call(small, tokens.alice, "POST", "/api/v1/jobs",
    { name: "alice-secret-run", gpus: 8, estimated_runtime_s: 3600 });
  assert.equal(theirs.status, 201);
  const mine = await call(small, tokens.bob, "POST", "/api/v1/jobs",
    { name: "bob-run", gpus: 8, estimated_runtime_s: 3600 });
  assert.equal(mine.status, 201);
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await signIn(page, small, tokens.bob);
  await page.waitForFunction(() => document.querySelectorAll("#jobs-table tbody tr").length > 0);
  await page.click("nav button[data-view=jobs]");
  const text = await page.textContent("body");
  assert.ok(text.includes("bob-run"));
  assert.ok(!text.includes("alice-secret-run"), "another tenant's job name is on the page");
  assert.ok(!text.includes("team-a"), "another tenant's name is on the page");
  assert.equal(await page.isVisible("nav button[data-view=nodes]"), false);
  // The cluster data the page reads hides other tenants' jobs behind -1.
  const cluster = await page.evaluate(async (t) => (await fetch("/api/v1/cluster", { headers: { Authorization: "Bearer " + t } })).json(), tokens.bob);
  const ids = new Set(cluster.nodes.flatMap((n) => n.gpus));
  assert.ok(!ids.has(theirs.body.id));
  // The API refuses the cancel a crafted request would try.
  const status = await page.evaluate(async ([t, id]) => (await fetch(`/api/v1/jobs/${id}`, { method: "DELETE", headers: { Authorization: "Bearer " + t } })).status, [tokens.bob, theirs.body.id]);
  assert.equal(status, 404);
  const still = await call(small, tokens.ops, "GET", `/api/v1/jobs/${theirs.body.id}`);
  assert.doesNotMatch(still.body.state, /cancel/);
  await page.screenshot({ path: join(artifacts, "tenant-view.png") });
  await page.close();
});

test("the queue view shows each pending job's position, estimated start and reason", async () => {
  // 120 GPUs cannot start while alice's and bob's jobs hold 16 of the 128: it waits.
  const big = await call(small, tokens.alice, "POST", "/api/v1/jobs",
    { name: "waits-for-room", gpus: 120, gpus_per_node: 8, estimated_runtime_s: 600 });
  assert.equal(big.status, 201);
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await signIn(page, small, tokens.ops);
  await page.click("nav button[data-view=queue]");
  const row = `#queue-table tr[data-job="${big.body.id}"]`;
  await page.waitForSelector(row, { timeout: 10_000 });
  await page.waitForFunction((sel) => document.querySelector(sel).children[7].textContent !== "\u2014", row, { timeout: 10_000 });
  const cells = await page.$$eval(`${row} td`, (tds) => tds.map((td) => td.textContent));
  const api = (await call(small, tokens.ops, "GET", `/api/v1/jobs/${big.body.id}`)).body;
  // Each field is shown when the API gives it and is a dash when it does not.
  assert.equal(cells[0], api.queue_position !== undefined ? String(api.queue_position) : "\u2014");
  assert.equal(cells[6], api.waiting_kind ?? "\u2014");
  assert.ok(cells[7].length > 3, "the waiting reason is shown: " + cells[7]);
  if (api.estimated_start) assert.match(cells[8], /^\d{4}-\d\d-\d\d \d\d:\d\d UTC/);
  else assert.equal(cells[8], "\u2014");
  await page.screenshot({ path: join(artifacts, "queue-128.png") });
  await page.close();
  await call(small, tokens.ops, "DELETE", `/api/v1/jobs/${big.body.id}`);
});

test("the job view draws the placement, the events and the planner's breakdown", async () => {
  const planned = await call(small, tokens.alice, "POST", "/api/v1/jobs",
    { name: "llama-pretrain", gpus: 32, gpus_per_node: 8, estimated_runtime_s: 3600, plan: { model: "llama3-8b" } });
  assert.equal(planned.status, 201, JSON.stringify(planned.body));
  const id = planned.body.id;
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  await signIn(page, small, tokens.alice);
  await page.click("nav button[data-view=jobs]");
  await page.waitForSelector(`#jobs-table tr[data-job="${id}"]`);
  await page.waitForFunction((jid) => {
    const row = document.querySelector(`#jobs-table tr[data-job="${jid}"]`);
    return row && row.children[3].textContent === "running";
  }, id, { timeout: 15_000 });
  await page.click(`#jobs-table tr[data-job="${id}"]`);
  await page.waitForSelector("#job-breakdown .bar span", { timeout: 10_000 });
  // 32 GPUs highlighted on the zoomed heatmap, the slowdown against a compact placement, events.
  const highlighted = await page.evaluate(() => {
    const c = document.querySelector("#job-heatmap");
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] === 0x2b && d[i + 1] === 0x5f && d[i + 2] === 0xad) n++;
    return n;
  });
  assert.ok(highlighted > 0, "the job's GPUs are drawn in the placement colour");
  assert.match(await page.textContent("#job-placement"), /32 GPUs on 4 nodes/);
  assert.match(await page.textContent("#job-slowdown"), /\d\.\d\d\u00d7 the compact placement's step time \(llama3-8b, tp\d+ pp\d+ dp\d+/);
  assert.ok((await page.$$("#job-events li")).length >= 2, "queued and placed events");
  await assertBreakdownAddsUp(page);
  const placement = await call(small, tokens.alice, "GET", `/api/v1/jobs/${id}/placement`);
  assert.equal(placement.status, 200);
  assert.ok(placement.body.plan.slowdown >= 1 - 1e-9, JSON.stringify(placement.body.plan));
  assert.equal(placement.body.gpus, 32);
  // Another tenant gets "not found" for the job and its placement, from the API and the page.
  for (const path of [`/api/v1/jobs/${id}`, `/api/v1/jobs/${id}/placement`, `/api/v1/jobs/${id}/events`]) {
    assert.equal((await call(small, tokens.bob, "GET", path)).status, 404, path);
  }
  await page.screenshot({ path: join(artifacts, "job-128.png"), fullPage: true });
  await page.close();
  const bobPage = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await signIn(bobPage, small, tokens.bob);
  await bobPage.click("nav button[data-view=jobs]");
  await bobPage.evaluate((jid) => showJob(jid), id);
  assert.equal(await bobPage.isVisible("#job-detail"), false);
  assert.ok(!(await bobPage.textContent("body")).includes("llama-pretrain"));
  await bobPage.close();
});

test("the tenants view charts use and fair share; a tenant sees only itself", async () => {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await signIn(page, small, tokens.ops);
  await page.click("nav button[data-view=tenants]");
  await page.waitForSelector('#tenants-table tr[data-tenant="team-a"]');
  await page.waitForSelector("#tenant-chart .uplot");
  const rows = await page.$$eval("#tenants-table tbody tr", (trs) => trs.map((tr) => tr.dataset.tenant));
  assert.ok(rows.includes("team-a") && rows.includes("team-b"), rows.join(","));
  const all = await call(small, tokens.ops, "GET", "/api/v1/tenants");
  const a = all.body.tenants.find((t) => t.tenant === "team-a");
  assert.ok(a.used >= 32 && a.fair_share > 0, JSON.stringify(a));
  assert.equal(all.body.interval_s, 10);
  assert.equal(all.body.capacity, 360);
  assert.ok(all.body.history.time.length >= 2, "a recorded sample and now");
  await page.screenshot({ path: join(artifacts, "tenants-128.png") });
  await page.close();
  // bob (team-b) gets team-b only, from the API and on the page.
  const mine = await call(small, tokens.bob, "GET", "/api/v1/tenants");
  assert.equal(mine.status, 200);
  assert.deepEqual(mine.body.tenants.map((t) => t.tenant), ["team-b"]);
  assert.ok(!JSON.stringify(mine.body).includes("team-a"));
  const bobPage = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await signIn(bobPage, small, tokens.bob);
  await bobPage.click("nav button[data-view=tenants]");
  await bobPage.waitForSelector('#tenants-table tr[data-tenant="team-b"]');
  assert.ok(!(await bobPage.textContent("body")).includes("team-a"));
  await bobPage.close();
});

test("the nodes view shows the DCGM signals behind a verdict; an operator drains and resumes, a tenant cannot", async () => {
  // n05 runs hot for three samples: the gpu-hot rule makes it suspect.
  for (let i = 0; i < 3; i++) {
    const r = await call(small, tokens.ops, "POST", "/api/v1/nodes/n05/telemetry", { DCGM_FI_DEV_GPU_TEMP: 95, DCGM_FI_DEV_XID_ERRORS: 0, not_a_rule_field: 1 });
    assert.equal(r.status, 202);
  }
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await signIn(page, small, tokens.ops);
  await page.click("nav button[data-view=nodes]");
  await page.waitForSelector('#nodes-table tr[data-node="n05"]');
  await page.waitForFunction(() => /gpu_temp = 95 \(>= 90\)/.test(document.querySelector('#nodes-table tr[data-node="n05"] td.why').textContent), null, { timeout: 10_000 });
  assert.equal(await page.textContent('#nodes-table tr[data-node="n05"] td.health'), "suspect");
  assert.match(await page.textContent('#nodes-table tr[data-node="n05"] td.signals'), /gpu_temp 95/);
  // The daemon keeps only the fields its rules read (a sample may name any number of others).
  assert.doesNotMatch(await page.textContent('#nodes-table tr[data-node="n05"] td.signals'), /not_a_rule_field/);
  assert.match(await page.textContent("#nodes-table tr.group"), /leaf leaf1 · 4 nodes · 32 GPUs/);
  await page.selectOption("#nodes-group", "rack");
  await page.waitForFunction(() => /^rack rack1 /.test(document.querySelector("#nodes-table tr.group").textContent));
  await page.screenshot({ path: join(artifacts, "nodes-128.png") });
  // Drain from the page, then resume.
  page.on("dialog", (d) => d.dismiss());
  await page.click('#nodes-table tr[data-node="n07"] button.drain');
  await page.waitForFunction(() => document.querySelector('#nodes-table tr[data-node="n07"] td.admin').textContent === "draining", null, { timeout: 10_000 });
  assert.equal((await call(small, tokens.ops, "GET", "/api/v1/nodes/n07")).body.admin, "draining");
  await page.click('#nodes-table tr[data-node="n07"] button.resume');
  await page.waitForFunction(() => document.querySelector('#nodes-table tr[data-node="n07"] td.admin').textContent === "active", null, { timeout: 10_000 });
  assert.equal((await call(small, tokens.ops, "GET", "/api/v1/nodes/n07")).body.admin, "active");
  await page.close();
  // A tenant has no nodes tab, and the API refuses it the data and the actions.
  const bobPage = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await signIn(bobPage, small, tokens.bob);
  assert.equal(await bobPage.isVisible("nav button[data-view=nodes]"), false);
  const refused = await bobPage.evaluate(async (t) => {
    const h = { Authorization: "Bearer " + t, "Content-Type": "application/json" };
    return [(await fetch("/api/v1/nodes/n07:drain", { method: "POST", headers: h, body: "{}" })).status,
      (await fetch("/api/v1/health", { headers: h })).status, (await fetch("/api/v1/nodes", { headers: h })).status];
  }, tokens.bob);
  assert.deepEqual(refused, [403, 403, 403]);
  // Forcing the hidden view open shows nothing either.
  await bobPage.evaluate(() => switchView("nodes"));
  assert.equal(await bobPage.$$eval("#nodes-table tbody tr", (trs) => trs.length), 0);
  await bobPage.close();
  assert.equal((await call(small, tokens.ops, "GET", "/api/v1/nodes/n07")).body.admin, "active");
});

test("the 16,384-GPU heatmap draws every GPU", async () => {
  big = await startDaemon("fat-tree-16k.yaml");
  for (let i = 0; i < 6; i++) {
    await call(big, tokens.ops, "POST", "/api/v1/jobs", { name: `pretrain-${i}`, tenant: `team-${i % 3}`, gpus: 1024, gpus_per_node: 8, estimated_runtime_s: 7200 });
  }
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  const t0 = Date.now();
  await signIn(page, big, tokens.ops);
  timings.heatmap_16k_sign_in_to_heatmap_ms = Date.now() - t0;
  // Measured in the page: from the sign-in click to the frame after the heatmap was drawn.
  await page.waitForFunction(() => document.body.dataset.firstPaintMs !== undefined);
  timings.heatmap_16k_first_paint_ms = Number(await page.evaluate(() => document.body.dataset.firstPaintMs));
  assert.equal(await page.getAttribute("#heatmap", "data-gpus"), "16384");
  await page.waitForFunction(() => /allocated \([1-9]/.test(document.querySelector("#cluster-summary").textContent), null, { timeout: 15_000 });
  timings.heatmap_16k_render_ms = Number(await page.getAttribute("#heatmap", "data-render-ms"));
  // What the first paint waits for: the cluster document (every GPU) from the daemon.
  timings.cluster_api_16k_ms = await page.evaluate(async (t) => {
    const t0 = performance.now();
    await (await fetch("/api/v1/cluster", { headers: { Authorization: "Bearer " + t } })).json();
    return Math.round(performance.now() - t0);
  }, tokens.ops);
  await page.screenshot({ path: join(artifacts, "cluster-16384.png"), fullPage: true });
  await page.close();
});

test("a 1,024-GPU SuperPOD under load, coloured by tenant (the README's screenshot)", async () => {
  superpod = await startDaemon("preset:superpod-h100");
  // First, so that it is placed: a job with a plan, for the job view.
  const planned = await call(superpod, tokens.ops, "POST", "/api/v1/jobs",
    { name: "llama3-70b-pretrain", tenant: "team-a", gpus: 64, gpus_per_node: 8, estimated_runtime_s: 7200, plan: { model: "llama3-70b" } });
  assert.equal(planned.status, 201, JSON.stringify(planned.body));
  const sizes = [256, 128, 128, 64, 64, 32, 16, 16, 8, 8, 512];
  for (const [i, gpus] of sizes.entries()) {
    await call(superpod, tokens.ops, "POST", "/api/v1/jobs", { name: `job-${i}`, tenant: ["team-a", "team-b", "team-c"][i % 3], gpus, estimated_runtime_s: 7200 });
  }
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await signIn(page, superpod, tokens.ops);
  assert.equal(await page.getAttribute("#heatmap", "data-gpus"), "1024");
  await page.waitForFunction(() => /allocated \([1-9]/.test(document.querySelector("#cluster-summary").textContent), null, { timeout: 15_000 });
  await page.screenshot({ path: join(artifacts, "cluster-1024.png") });
  await page.click("nav button[data-view=queue]");
  await page.screenshot({ path: join(artifacts, "queue-1024.png") });
  await page.click("nav button[data-view=tenants]");
  await page.waitForSelector("#tenant-chart .uplot");
  await page.screenshot({ path: join(artifacts, "tenants-1024.png") });
  // A job with a plan, in the job view (the README's job screenshot).
  await page.click("nav button[data-view=jobs]");
  await page.waitForSelector(`#jobs-table tr[data-job="${planned.body.id}"]`);
  await page.evaluate((jid) => showJob(jid), planned.body.id);
  await page.waitForSelector("#job-breakdown .bar span", { timeout: 15_000 });
  await assertBreakdownAddsUp(page);
  const box = await page.evaluate(() => { const r = document.querySelector("#job-detail").getBoundingClientRect(); return { y: r.top + window.scrollY }; });
  await page.screenshot({ path: join(artifacts, "job-1024.png"), fullPage: true, clip: { x: 0, y: box.y, width: 1400, height: 560 } });
  await page.close();
});
