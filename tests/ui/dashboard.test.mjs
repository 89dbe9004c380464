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
  // The state change (queued -> running) reaches the open page.
  await page.waitForFunction((jid) => {
    const row = document.querySelector(`#jobs-table tr[data-job="${jid}"]`);
    return row && row.children[3].textContent === "running";
  }, id, { timeout: 10_000 });
  const heat = await page.evaluate(() => document.querySelector("#heatmap").dataset.gpus);
  assert.equal(heat, "128");
  await page.screenshot({ path: join(artifacts, "jobs.png") });
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

test("the 16,384-GPU heatmap draws every GPU", async () => {
  big = await startDaemon("fat-tree-16k.yaml");
  for (let i = 0; i < 6; i++) {
    await call(big, tokens.ops, "POST", "/api/v1/jobs", { name: `pretrain-${i}`, tenant: `team-${i % 3}`, gpus: 1024, gpus_per_node: 8, estimated_runtime_s: 7200 });
  }
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  const t0 = Date.now();
  await signIn(page, big, tokens.ops);
  timings.heatmap_16k_first_paint_ms = Date.now() - t0;
  assert.equal(await page.getAttribute("#heatmap", "data-gpus"), "16384");
  await page.waitForFunction(() => /allocated \([1-9]/.test(document.querySelector("#cluster-summary").textContent), null, { timeout: 15_000 });
  timings.heatmap_16k_render_ms = Number(await page.getAttribute("#heatmap", "data-render-ms"));
  await page.screenshot({ path: join(artifacts, "cluster-16384.png"), fullPage: true });
  await page.close();
});

test("a 1,024-GPU SuperPOD under load, coloured by tenant (the README's screenshot)", async () => {
  superpod = await startDaemon("preset:superpod-h100");
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
  await page.close();
});
