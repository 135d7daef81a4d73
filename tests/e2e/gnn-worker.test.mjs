// The GNN stack of the web build in headless Chromium, inside a dedicated worker: a tiny
// test page (fixtures/gnn-worker/) whose worker fetches Cora from the served /data/ with
// datasets.Planetoid and trains the JS RevGNN (nn modules, GroupAddRev, RandomNodeLoader,
// poptorch.trainingModel) for two epochs. The loss must fall.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { startServer, launchChromium, REPO } from "../node/helpers.mjs";
import { openContext, assertClean } from "./helpers.mjs";

const FIXTURE = path.join(REPO, "tests", "e2e", "fixtures", "gnn-worker");
let server;
let browser;
let base;

before(async () => {
  if (!fs.existsSync(path.join(REPO, "data", "ind.cora.x"))) throw new Error("Cora is not staged: run scripts/stage-data.sh");
  server = await startServer({ args: ["--mount", `/data/=${path.join(REPO, "data")}`, "--mount", `/gnn-worker/=${FIXTURE}`] });
  base = server.url;
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

test("RevGNN of nn modules trains on Cora in a worker: two epochs, falling loss", { timeout: 180000 }, async () => {
  const { context, page, problems } = await openContext(browser);
  try {
    await page.goto(new URL("/gnn-worker/index.html", base).href);
    await page.waitForFunction(() => document.body.dataset.done === "1", null, { timeout: 170000 });
    const result = JSON.parse(await page.locator("#result").textContent());
    assert.equal(result.error, undefined, result.error);
    console.log(`worker: losses ${result.epochs.map((e) => e.loss.toFixed(4)).join(" -> ")}, test ${result.test.toFixed(4)}`);
    assert.equal(result.nodes, 2708);
    const [a, b] = result.epochs.map((e) => e.loss);
    assert.ok(Number.isFinite(a) && Number.isFinite(b), JSON.stringify(result.epochs));
    assert.ok(b < a, `the loss falls: ${a} -> ${b}`);
    assert.ok(result.test > 1 / 7, `test accuracy ${result.test} above chance after two epochs`);
    assertClean(problems);
  } finally {
    await context.close();
  }
});
