// Shared by the page tests: a browser context that records every console error or warning,
// page error, failed request and HTTP error, and helpers to drive the page.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { before, after, beforeEach, afterEach } from "node:test";
import { REPO, startServer, launchChromium } from "../node/helpers.mjs";

export const ARTIFACTS = path.join(process.env.CARGO_TARGET_DIR || path.join(REPO, "target"), "test-artifacts");

/** A new context and page; `problems` collects what must not happen (checked by `done`). */
export async function openContext(browser, { viewport = { width: 1440, height: 1000 } } = {}) {
  const context = await browser.newContext({ viewport, acceptDownloads: true });
  const page = await context.newPage();
  const problems = [];
  const watch = (where) => (msg) => {
    if (msg.type() === "error" || msg.type() === "warning") problems.push(`${where} console.${msg.type()}: ${msg.text()}`);
  };
  page.on("console", watch("page"));
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  page.on("worker", (worker) => worker.on("console", watch("worker")));
  page.on("requestfailed", (req) => problems.push(`request failed: ${req.url()} ${req.failure()?.errorText}`));
  page.on("response", (res) => {
    if (res.status() >= 400) problems.push(`HTTP ${res.status()} for ${res.url()}`);
  });
  return { context, page, problems };
}

/**
 * The lifecycle of a suite of page tests, registered in the calling `describe`: the page's
 * server and Chromium for the whole suite (after checking that each of `requires`, a list
 * of `[file, how to make it]`, exists), and a fresh context per test whose problems fail
 * the test unless a regexp the test pushed to `allowed` matches. Returns the live handles
 * (`server`, `browser`, `context`, `page`, `problems`, `allowed`), set before each test.
 */
export function pageSuite(requires = []) {
  const s = { server: null, browser: null, context: null, page: null, problems: [], allowed: [] };
  before(async () => {
    for (const [file, how] of requires) assert.ok(fs.existsSync(file), `${file} is missing: ${how}`);
    s.server = await startServer({ args: ["--quiet"] });
    s.browser = await launchChromium();
  });
  after(async () => {
    await s.browser?.close();
    await s.server?.stop();
  });
  beforeEach(async () => {
    ({ context: s.context, page: s.page, problems: s.problems } = await openContext(s.browser));
    s.allowed = [];
  });
  afterEach(async () => {
    await s.context?.close();
    assertClean(s.problems, s.allowed);
  });
  return s;
}

/** Waits until the analysis after `afterSeq` has finished (ok, warn or error). */
export async function waitAnalysis(page, afterSeq = null, timeout = 30000) {
  await page.waitForFunction(
    (s) => ["ok", "warn", "error"].includes(document.body.dataset.analysis) && document.body.dataset.seq !== undefined && document.body.dataset.seq !== s,
    afterSeq,
    { timeout },
  );
  return page.evaluate(() => document.body.dataset.analysis);
}

export const seqOf = (page) => page.evaluate(() => document.body.dataset.seq ?? null);

/** Opens the page and waits for the first analysis. */
export async function openReady(page, url) {
  await page.goto(url);
  await waitAnalysis(page);
}

/** Chooses a preset and waits for its analysis. */
export async function selectPreset(page, id) {
  const seq = await seqOf(page);
  await page.getByLabel("Preset").selectOption(id);
  return waitAnalysis(page, seq);
}

/** Replaces the editor's text as a user would (select all, type) and waits for the analysis. */
export async function setCode(page, text, { wait = true } = {}) {
  const seq = await seqOf(page);
  await page.locator(".cm-content").click();
  await page.keyboard.press("Control+A");
  await page.keyboard.insertText(text);
  if (wait) return waitAnalysis(page, seq);
  return null;
}

/**
 * The editor's whole text. CodeMirror draws only the lines near what the window shows, so
 * the window and the editor are made tall enough for all of them while they are read.
 */
export const editorText = (page) => withAllLines(page, () => [...document.querySelectorAll(".cm-content .cm-line")].map((l) => l.textContent).join("\n"));

/** Runs `fn` in the page with every line of the editor drawn. */
async function withAllLines(page, fn) {
  const viewport = page.viewportSize();
  await page.setViewportSize({ width: viewport.width, height: 16000 });
  await page.evaluate(async () => {
    const box = document.getElementById("editor");
    box.dataset.height = box.style.height;
    box.style.height = "15000px";
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  });
  try {
    return await page.evaluate(fn);
  } finally {
    await page.evaluate(() => {
      const box = document.getElementById("editor");
      box.style.height = box.dataset.height ?? "";
      delete box.dataset.height;
    });
    await page.setViewportSize(viewport);
  }
}

/** The 1-based editor lines carrying an error diagnostic. */
export function errorLines(page) {
  return withAllLines(page, () => {
    const lines = [...document.querySelectorAll(".cm-content .cm-line")];
    const marked = new Set();
    for (const r of document.querySelectorAll(".cm-lintRange-error")) {
      const line = r.closest(".cm-line");
      if (line) marked.add(lines.indexOf(line) + 1);
    }
    return [...marked].sort((a, b) => a - b);
  });
}

/** The IPUs the assignment view shows (its rows), after opening it. */
export async function assignmentIpus(page) {
  await page.getByRole("tab", { name: "Assignment" }).click();
  return page.evaluate(() => [...document.querySelectorAll("#stages-chart .ipu-row")].map((r) => Number(r.dataset.ipu)));
}

export async function screenshot(page, name, locator = null) {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, `${name}.png`);
  await (locator ?? page).screenshot({ path: file, fullPage: !locator });
  return file;
}

/** Asserts nothing went wrong, except problems matching `allowed` (regexps). */
export function assertClean(problems, allowed = []) {
  const left = problems.filter((p) => !allowed.some((re) => re.test(p)));
  assert.deepEqual(left, []);
}

/**
 * The memory view of `ipu`, after opening it: the share of the chart's pixels painted, the
 * legend and the stats' text.
 */
export async function memoryChart(page, ipu) {
  await page.getByRole("tab", { name: "Memory" }).click();
  await page.locator("#memory-ipu").selectOption(String(ipu));
  return page.evaluate(() => {
    // Read through a copy made for reading (reading the page's canvas itself again and again
    // makes Chromium warn, as it would for any page doing so).
    const src = document.getElementById("memory-chart");
    const c = Object.assign(document.createElement("canvas"), { width: src.width, height: src.height });
    const ctx = c.getContext("2d", { willReadFrequently: true });
    ctx.drawImage(src, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
    return {
      painted: n / (d.length / 4),
      legend: [...document.querySelectorAll("#memory-legend .key")].map((k) => k.textContent),
      stats: document.getElementById("memory-stats").textContent,
    };
  });
}

/** The execution view's rectangles per IPU lane and kind, after opening it: { ipu: { kind: count } }. */
export async function ganttRects(page) {
  await page.getByRole("tab", { name: "Execution" }).click();
  return page.evaluate(() => {
    const out = {};
    for (const lane of document.querySelectorAll("#gantt-chart .lane")) {
      const kinds = {};
      for (const r of lane.querySelectorAll("rect.iv")) kinds[r.classList[1]] = (kinds[r.classList[1]] ?? 0) + 1;
      out[lane.dataset.ipu] = kinds;
    }
    return out;
  });
}
