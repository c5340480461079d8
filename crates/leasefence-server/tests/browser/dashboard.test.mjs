// The dashboard in a real browser: headless Chromium driven by Playwright, against a server
// that tests/http/browser.rs started over a known history. Every step asserts what a user
// sees; the Rust side then reads each action's effect back from the store.
//
// Environment: LF_URL, LF_ADMIN, LF_WORKER (tokens), LF_XSS_ID, LF_CHROMIUM (the browser),
// LF_SHOTS (a folder for screenshots), LF_READY (how many ready jobs the fixture has).
// Exit 0 when every check passed; otherwise the first failure, and exit 1.

import { chromium } from "playwright-core";
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const URL_ = env("LF_URL");
const ADMIN = env("LF_ADMIN");
const WORKER = env("LF_WORKER");
const XSS_ID = env("LF_XSS_ID");
const SHOTS = env("LF_SHOTS");
const READY = Number(env("LF_READY"));

let checks = 0;
let at = "start";
/** Names the part of the run under way, for the report of a failure. */
function step(name) {
  at = name;
  console.log(`browser: ${name}`);
}
function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  checks += 1;
}

// A run that hangs fails instead (the whole run takes well under a minute).
setTimeout(() => {
  console.error(`browser: timed out during "${at}" after ${checks} checks`);
  process.exit(2);
}, 300_000).unref();

const browser = await chromium.launch({
  executablePath: env("LF_CHROMIUM"),
  headless: true,
  args: [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});

/** A signed-in page, through the login form. */
async function signIn(token, user, options = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, ...options });
  context.setDefaultTimeout(20000);
  const page = await context.newPage();
  page.on("dialog", (d) => { throw new Error(`a dialog opened: ${d.message()}`); });
  page.on("pageerror", (e) => { throw new Error(`a script error on the page: ${e.message}`); });
  await page.goto(`${URL_}/dashboard/jobs?status=dead`);
  check(page.url().startsWith(`${URL_}/dashboard/login`), `signed out, ${page.url()} is the login form`);
  await page.fill("#user", user);
  await page.fill("#token", token);
  await page.click("button[type=submit]");
  await page.waitForURL(`${URL_}/dashboard/jobs?status=dead`);
  return { context, page };
}

/** axe-core on the page (in a context that lets the test inject it): no serious violation. */
async function accessible(page, name) {
  await page.addScriptTag({ content: AXE });
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help }));
  });
  const bad = result.filter((v) => v.impact === "serious" || v.impact === "critical");
  check(bad.length === 0, `${name}: no serious accessibility violation, got ${JSON.stringify(bad)}`);
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

async function text(page, selector) {
  return (await page.locator(selector).first().textContent()).trim();
}

/** An action through its button and the confirmation page; returns the notice shown. */
async function act(page, button) {
  await page.locator(button).first().click();
  await page.waitForSelector("text=Confirm");
  check((await page.locator("h1").textContent()).endsWith("?"), "the confirmation asks");
  await page.click("button:has-text('Confirm')");
  await page.waitForLoadState("load");
  return (await page.locator(".notice").textContent()).trim();
}

try {
  // ── The admin, signed in through the form; accessibility checked with CSP bypassed ──
  step("accessibility");
  const { page: a11y } = await signIn(ADMIN, "ann", { bypassCSP: true });
  for (const [name, href] of [
    ["overview", "/dashboard"], ["jobs", "/dashboard/jobs"], ["job", "/dashboard/jobs/report-1"],
    ["queues", "/dashboard/queues"], ["schedules", "/dashboard/schedules"],
    ["fences", "/dashboard/fences"], ["audit", "/dashboard/audit"],
  ]) {
    await a11y.goto(`${URL_}${href}`);
    await accessible(a11y, name);
  }

  const { page } = await signIn(ADMIN, "ann");
  check((await text(page, ".who")).includes("ann from 127.0.0.1"), "the header names the visitor");
  check(await page.locator("tbody tr").count() === 2, "two dead jobs listed");

  // ── Overview: the known history's figures ──
  step("overview");
  await page.goto(`${URL_}/dashboard`);
  const card = async (label) => Number(
    (await page.locator(`.card:has(.label:text-is("${label}")) .value`).textContent()).replace(/,/g, ""));
  check(await card("Dead") === 2, "two dead jobs");
  check(await card("Expired, unclaimed") === 1, "one expired lease");
  check(await card("Stale writes refused, last hour") === 1, "one stale write refused");
  check(await card("Leased") === 1, "one live lease");
  check(await card("Expiring within a minute") === 0, "no lease ends within the minute");
  check(await card("Ready") === READY + 1, `ready: ${READY + 1}`);
  check(await page.locator("tr:has(th a:text-is('mail')) .badge.paused").count() === 1, "mail is paused");
  check(await page.locator("figure.chart svg rect.seg-completed").count() >= 1, "throughput drawn");
  await shot(page, "overview");

  // ── Live: a job enqueued through the API shows up without a reload ──
  step("live update");
  const before = await card("Ready");
  const r = await fetch(`${URL_}/v1/jobs`, {
    method: "POST",
    headers: { Authorization: `Bearer ${WORKER}`, "Content-Type": "application/json" },
    body: JSON.stringify({ id: "arrived-live" }),
  });
  check(r.status === 201, "enqueued through the API");
  await page.waitForFunction(
    (n) => Number(document.querySelector('[data-live="totals.ready"]').textContent.replace(/,/g, "")) === n,
    before + 1, { timeout: 15000 },
  );
  check(true, "the Ready count updated without a reload");

  // ── Jobs: a filter, then every page of a thousand ready jobs ──
  step("jobs and paging");
  await page.goto(`${URL_}/dashboard/jobs`);
  await page.selectOption("#f-status", "ready");
  await page.selectOption("#f-order", "oldest");
  await page.click("button:has-text('Filter')");
  await page.waitForURL(/status=ready/);
  check(new URL(page.url()).searchParams.get("order") === "oldest", "the order is in the URL");
  const seen = new Set();
  for (let pages = 0; ; pages += 1) {
    const statuses = await page.locator("tbody .badge").allTextContents();
    check(statuses.every((s) => s === "ready"), "only ready jobs");
    for (const id of await page.locator("tbody a.id").allTextContents()) {
      check(!seen.has(id), `${id} shown once`);
      seen.add(id);
    }
    if (pages === 0) await shot(page, "jobs");
    const next = page.locator("a[rel=next]");
    if (await next.count() === 0) break;
    await next.click();
    await page.waitForLoadState("load");
    check(pages < 100, "paging ends");
  }
  check(seen.size === READY + 2, `every ready job once: ${seen.size} of ${READY + 2}`);

  // ── A job whose takeover refused a stale write: the timeline ──
  step("timeline");
  await page.goto(`${URL_}/dashboard/jobs/report-1`);
  const steps = page.locator("ol.timeline li");
  check(await steps.count() === 2, "two fences on the timeline");
  check((await steps.nth(0).textContent()).includes("fence 1"), "fence 1 first");
  check((await steps.nth(0).locator(".badge").textContent()) === "lost", "fence 1 lost its lease");
  check((await steps.nth(0).locator(".refused").textContent()).includes("complete × 1"), "its stale complete refused");
  check((await steps.nth(1).textContent()).includes("worker-b"), "fence 2 is worker-b's");
  check((await steps.nth(1).locator(".badge").textContent()) === "completed", "fence 2 completed");
  check((await page.locator("pre.data").last().textContent()) === "report by b", "the result shown");
  await shot(page, "job");

  // ── XSS: ids, payloads, kinds and errors render as inert text ──
  step("xss");
  await page.goto(`${URL_}/dashboard/jobs/${encodeURIComponent(XSS_ID)}`);
  check((await page.locator("h1 .id").textContent()) === XSS_ID, "the id is shown as text");
  check(await page.locator("main img").count() === 0, "no image from the payload");
  check(await page.locator("main script, main b").count() === 0, "no element from the id or the kind");
  check(await page.evaluate(() => document.scripts.length) === 1, "only the dashboard's own script");
  check(await page.locator("a[href^='javascript:']").count() === 0, "no javascript: link");
  check((await page.locator("pre.error-text").first().textContent()).startsWith("javascript:"), "the error as text");
  await page.goto(`${URL_}/dashboard/jobs?status=dead`);
  check((await page.locator("a.id").allTextContents()).includes(XSS_ID), "the id listed as text");

  // ── Actions, each confirmed; their effects are read back by the Rust side ──
  step("actions");
  await page.goto(`${URL_}/dashboard/jobs/stuck`);
  check((await act(page, "button:has-text('Release the expired lease')")).startsWith("Released"), "release");
  await page.goto(`${URL_}/dashboard/jobs/live`);
  check((await act(page, "button:has-text('Cancel')")).startsWith("Cancelled"), "cancel");
  check((await act(page, "button:has-text('Retry')")).startsWith("Retried"), "retry");
  await page.goto(`${URL_}/dashboard/jobs/binary`);
  check((await act(page, "button:has-text('Delete')")).startsWith("Deleted"), "delete");
  await page.goto(`${URL_}/dashboard/queues`);
  check((await act(page, "tr:has(th a:text-is('mail')) button:has-text('Resume')")).startsWith("Resumed"), "resume");
  check((await act(page, "tr:has(th a:text-is('mail')) button:has-text('Retry 1 dead')")).startsWith("Retried 1 dead job"), "retry dead");
  check((await act(page, "tr:has(th a:text-is('default')) button:has-text('Pause')")).startsWith("Paused"), "pause");
  await shot(page, "queues");
  await page.goto(`${URL_}/dashboard/audit`);
  const actions = await page.locator("tbody tr td:nth-child(3)").allTextContents();
  check(JSON.stringify(actions) === JSON.stringify(["pause", "retry_dead", "resume", "delete", "retry", "cancel", "release"]),
    `the audit log, newest first: ${actions}`);
  check((await page.locator("tbody tr td:nth-child(2)").first().textContent()) === "ann from 127.0.0.1", "who");
  await shot(page, "audit");
  await page.goto(`${URL_}/dashboard/schedules`);
  check((await page.locator("tbody tr").count()) === 1, "one schedule");
  check((await page.locator("tbody tr li").count()) === 3, "its next three slots");
  await shot(page, "schedules");
  await page.goto(`${URL_}/dashboard/fences`);
  check((await text(page, "tbody tr")).includes("s3://bucket/report"), "the fence gate's resource");
  await shot(page, "fences");

  // ── The worker token: read-only, and a forged action is refused ──
  step("read-only");
  const { page: ro } = await signIn(WORKER, "viewer");
  await ro.goto(`${URL_}/dashboard/jobs/live`);
  check((await text(ro, ".who")).includes("read-only"), "read-only");
  check(await ro.locator("section.actions button").count() === 0, "no action button");
  const forged = await ro.evaluate(async () => {
    const csrf = document.querySelector('meta[name="csrf-token"]').content;
    const body = new URLSearchParams({ csrf, confirmed: "yes" });
    const r = await fetch("/dashboard/jobs/live/cancel", { method: "POST", body });
    return r.status;
  });
  check(forged === 403, `a worker's cancel is refused: ${forged}`);

  // ── Without a token: the login form, and a POST without a session is refused ──
  step("anonymous");
  const anonContext = await browser.newContext();
  anonContext.setDefaultTimeout(20000);
  const anon = await anonContext.newPage();
  await anon.goto(`${URL_}/dashboard/queues`);
  check(anon.url().startsWith(`${URL_}/dashboard/login`), "signed out: the login form");
  const status = await anon.evaluate(async () => (await fetch("/dashboard/queues/default/resume", { method: "POST", body: new URLSearchParams({ confirmed: "yes" }) })).status);
  check(status === 401, `an anonymous POST is refused: ${status}`);

  // ── Without JavaScript, a page still shows and a filter still works ──
  step("no javascript");
  const nojsContext = await browser.newContext({ javaScriptEnabled: false });
  nojsContext.setDefaultTimeout(20000);
  const nojs = await nojsContext.newPage();
  await nojs.goto(`${URL_}/dashboard/login?next=%2Fdashboard%2Fjobs`);
  await nojs.fill("#token", WORKER);
  await nojs.click("button[type=submit]");
  await nojs.waitForURL(`${URL_}/dashboard/jobs`);
  await nojs.selectOption("#f-status", "dead");
  await nojs.click("button:has-text('Filter')");
  await nojs.waitForURL(/status=dead/);
  check(await nojs.locator("tbody tr").count() === 1, "without JavaScript: the filter works (one dead job left)");

  console.log(`browser: ${checks} checks passed`);
  await browser.close();
} catch (e) {
  console.error(`browser: failed during "${at}" after ${checks} checks`);
  console.error(e.stack || String(e));
  await browser.close();
  process.exit(1);
}
