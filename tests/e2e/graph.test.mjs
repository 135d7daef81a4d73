// The Graph view in the page: a dataflow graph laid out by dagre, module scopes collapsed to
// the top-level modules on open, expand and collapse, aggregated edges, search, the details
// of a click, colour by IPU / stage / phase, pan and zoom; the BERT-Large and ResNet-50
// presets open, expand and pan with no console error (screenshots in
// target/test-artifacts/graph-*.png).
import { test, describe, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { pageSuite, openReady, selectPreset, setCode, screenshot } from "./helpers.mjs";

const T = { timeout: 120000 };

// A small model of known structure: embed (one Linear), three residual blocks of
// fc1 → relu → fc2 → + x, head (one Linear), the loss at the top level. Blocks 0 and 1 are
// on IPU 0, block 2 and the head on IPU 1.
const SMALL = `import { nn, poptorch, beginBlock } from "ipu-playground";

class Block extends nn.Module {
  constructor(d) {
    super();
    this.fc1 = new nn.Linear(d, d);
    this.fc2 = new nn.Linear(d, d);
  }
  forward(x) {
    const h = this.fc1.forward(x).relu();
    return this.fc2.forward(h).add(x);
  }
}

class Net extends nn.Module {
  constructor() {
    super();
    this.embed = new nn.Linear(16, 32);
    this.blocks = new nn.ModuleList([new Block(32), new Block(32), new Block(32)]);
    this.head = new nn.Linear(32, 4);
  }
  forward(x, labels) {
    beginBlock("first", 0);
    let h = this.embed.forward(x);
    for (let i = 0; i < 3; i++) {
      if (i === 2) beginBlock("second", 1);
      h = this.blocks.get(i).forward(h);
    }
    const logits = this.head.forward(h);
    return [logits, logits.crossEntropy(labels)];
  }
}

export default ({ options }) => ({
  model: poptorch.trainingModel(new Net(), options),
  inputs: [{ name: "x", shape: [8, 16] }, { name: "labels", shape: [8], dtype: "int32" }],
});
`;

const lineOf = (code, text) => code.split("\n").findIndex((l) => l.includes(text)) + 1;

/** What the chart draws: nodes (ops by `op scope`, scopes by id), frames and edges. */
function drawn(page) {
  return page.evaluate(() => {
    const chart = document.getElementById("graph-chart");
    // Ops by `op scope`, collapsed scopes [id], expanded ones {id}, their ports `in id`, `out id`.
    const name = (id) => {
      const port = /^g:(.*)>(in|out)$/.exec(id);
      if (port) return `${port[2]} ${port[1]}`;
      const e = chart.querySelector(`[data-id="${CSS.escape(id)}"]`);
      if (!e) return `{${id.slice(2)}}`;
      return e.classList.contains("group") ? `[${e.dataset.group}]` : `${e.querySelector(".op-name").textContent} ${e.dataset.scope}`.trim();
    };
    return {
      groups: [...chart.querySelectorAll(".node.group")].map((g) => g.dataset.group),
      ops: [...chart.querySelectorAll(".node.op")].map((g) => `${g.querySelector(".op-name").textContent} ${g.dataset.scope}`.trim()),
      clusters: [...chart.querySelectorAll(".cluster")].map((g) => g.dataset.group),
      edges: [...chart.querySelectorAll(".edge")].map((e) => `${name(e.dataset.from)} -> ${name(e.dataset.to)}${e.dataset.count > 1 ? ` x${e.dataset.count}` : ""}`).sort(),
      paths: chart.querySelectorAll(".edge path.edge-line").length,
    };
  });
}

/**
 * Edges in and out of each expanded scope balance: what its frame takes in at the level
 * around it leaves its entry port inside, and so on for its exit. Returns the unbalanced.
 */
function unbalanced(edges, clusters) {
  const sum = (re) => edges.filter((e) => re.test(e)).reduce((a, e) => a + Number(/ x(\d+)$/.exec(e)?.[1] ?? 1), 0);
  const esc = (id) => id.replace(/[.[\]{}]/g, "\\$&");
  const wrong = [];
  for (const c of clusters) {
    const into = sum(new RegExp(`-> \\{${esc(c)}\\}( x\\d+)?$`));
    const fromIn = sum(new RegExp(`^in ${esc(c)} ->`));
    const outOf = sum(new RegExp(`^\\{${esc(c)}\\} ->`));
    const toOut = sum(new RegExp(`-> out ${esc(c)}( x\\d+)?$`));
    if (into !== fromIn || outOf !== toOut) wrong.push(`${c}: in ${into}/${fromIn}, out ${outOf}/${toOut}`);
  }
  return wrong;
}

/** Whether the drawing lies inside the chart's box (fit to view). */
function fitsInChart(page) {
  return page.evaluate(() => {
    const chart = document.getElementById("graph-chart").getBoundingClientRect();
    const g = document.querySelector("#graph-chart .viewport").getBoundingClientRect();
    return g.width > 0 && g.left >= chart.left - 1 && g.right <= chart.right + 1 && g.top >= chart.top - 1 && g.bottom <= chart.bottom + 1;
  });
}

const toggle = (page, id) => page.locator(`#graph-chart [data-toggle="${id}"]`).click();

/** Finds scope `id` with the search box (which opens the scopes around it and centres it), then clears the search. */
async function find(page, id) {
  await page.getByLabel("Find").fill(id);
  await page.getByLabel("Find").press("Enter");
  await page.waitForFunction((id) => document.querySelector(`#graph-chart .selected[data-group="${id}"]`), id);
  await page.getByLabel("Find").fill("");
}

describe("the Graph view", () => {
  let server, page;
  const suite = pageSuite();
  beforeEach(() => ({ server, page } = suite));

  test("opens collapsed to the top-level modules, expands and collapses a scope, aggregates its edges", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined"); // four IPUs in the system
    assert.equal(await setCode(page, SMALL), "ok", await page.locator("#error").textContent());
    assert.match(await page.locator("#graph-stats").textContent(), /^17 ops in 12 module scopes · 2 IPUs/);
    // Top level: the inputs, embed and head (one op each: drawn as the op, under their
    // scope's name), the blocks as one node, the loss.
    let d = await drawn(page);
    assert.deepEqual(d.groups, ["blocks"]);
    assert.deepEqual(d.clusters, []);
    assert.deepEqual(d.ops.sort(), ["cross_entropy", "input labels", "input x", "linear embed", "linear head"]);
    // One edge per pair of drawn nodes: embed's output is read twice in blocks.0 (fc1, + x).
    assert.deepEqual(d.edges, ["[blocks] -> linear head", "input labels -> cross_entropy", "input x -> linear embed", "linear embed -> [blocks] x2", "linear head -> cross_entropy"]);
    assert.equal(d.paths, 5);
    assert.equal(await page.locator("#graph-chart .edge-count").allTextContents().then((t) => t.join()), "×2");
    assert.ok(await fitsInChart(page), "the graph is fitted to the view on open");
    await screenshot(page, "graph-small-collapsed", page.locator(".right"));

    await toggle(page, "blocks");
    d = await drawn(page);
    assert.deepEqual(d.clusters, ["blocks"]);
    assert.deepEqual(d.groups, ["blocks.0", "blocks.1", "blocks.2"]);
    // An edge into or out of an expanded scope goes through its frame's port.
    assert.deepEqual(d.edges, [
      "[blocks.0] -> [blocks.1] x2",
      "[blocks.1] -> [blocks.2] x2",
      "[blocks.2] -> out blocks",
      "in blocks -> [blocks.0] x2",
      "input labels -> cross_entropy",
      "input x -> linear embed",
      "linear embed -> {blocks} x2",
      "linear head -> cross_entropy",
      "{blocks} -> linear head",
    ]);
    assert.deepEqual(unbalanced(d.edges, d.clusters), []);
    await toggle(page, "blocks.1");
    d = await drawn(page);
    assert.deepEqual(d.clusters, ["blocks", "blocks.1"]);
    assert.deepEqual(d.groups, ["blocks.0", "blocks.2"]);
    // Inside blocks.1: fc1 and fc2 (one op each), relu and the residual add (the block's own).
    assert.deepEqual(d.ops.filter((o) => o.includes("blocks.1")).sort(), ["add blocks.1", "linear blocks.1.fc1", "linear blocks.1.fc2", "relu blocks.1"]);
    assert.deepEqual(d.edges.filter((e) => e.includes("blocks.1")), [
      "[blocks.0] -> {blocks.1} x2",
      "add blocks.1 -> out blocks.1 x2",
      "in blocks.1 -> add blocks.1",
      "in blocks.1 -> linear blocks.1.fc1",
      "linear blocks.1.fc1 -> relu blocks.1",
      "linear blocks.1.fc2 -> add blocks.1",
      "relu blocks.1 -> linear blocks.1.fc2",
      "{blocks.1} -> [blocks.2] x2",
    ]);
    assert.deepEqual(unbalanced(d.edges, d.clusters), []);
    assert.equal(d.paths, d.edges.length);
    await screenshot(page, "graph-small-expanded", page.locator(".right"));
    // Collapsing blocks.1 (its frame's −) and then blocks gives the top level back.
    await toggle(page, "blocks.1");
    assert.deepEqual((await drawn(page)).groups, ["blocks.0", "blocks.1", "blocks.2"]);
    await toggle(page, "blocks");
    assert.deepEqual((await drawn(page)).groups, ["blocks"]);
    // Expand all draws every op; collapse all goes back.
    await page.getByRole("button", { name: "Expand every scope" }).click();
    d = await drawn(page);
    assert.equal(d.ops.length, 17);
    assert.deepEqual(d.groups, []);
    await page.getByRole("button", { name: "Collapse to the top-level modules" }).click();
    assert.deepEqual((await drawn(page)).groups, ["blocks"]);
  });

  test("search finds an op inside a collapsed scope; a click shows its shape, line and placement; colour by IPU, stage, phase", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    assert.equal(await setCode(page, SMALL), "ok");
    // Typing marks the matches (blocks, collapsed, holds them) and counts them.
    await page.getByLabel("Find").fill("fc2");
    await page.waitForFunction(() => /^3 ops · Enter to go to the first$/.test(document.getElementById("graph-found").textContent));
    assert.deepEqual(await page.locator("#graph-chart .node.match").evaluateAll((l) => l.map((e) => e.dataset.group)), ["blocks"]);
    assert.equal(await page.locator("#graph-details").isHidden(), true);
    await page.getByLabel("Find").press("Enter");
    await page.waitForFunction(() => /^1 of 3: 3 ops/.test(document.getElementById("graph-found").textContent));
    // The first match is opened up to, selected and described.
    assert.deepEqual((await drawn(page)).clusters, ["blocks", "blocks.0"]);
    const details = page.locator("#graph-details");
    assert.match(await details.locator("h4").textContent(), /^%\d+ linear$/);
    assert.equal(await page.locator("#graph-chart .node.selected").getAttribute("data-scope"), "blocks.0.fc2");
    // The other two are inside blocks.1 and blocks.2, collapsed: marked as holding a match.
    const marked = await page.locator("#graph-chart .node.match").evaluateAll((l) => l.map((e) => e.dataset.group ?? e.dataset.scope));
    assert.deepEqual(marked.sort(), ["blocks.0.fc2", "blocks.1", "blocks.2"]);
    const dd = async (label) => details.locator(".kv", { has: page.locator(`dt:text-is("${label}")`) }).locator("dd").textContent();
    assert.equal(await dd("Shape"), "f32[8,32]"); // one micro-batch of 8 rows
    assert.equal(await dd("Scope"), "blocks.0.fc2");
    assert.equal(await dd("IPU"), "0");
    assert.equal(await dd("Stage"), "0");
    assert.equal(await dd("Phase"), "–");
    assert.equal(await dd("Source"), `line ${lineOf(SMALL, "this.fc2.forward(h)")}`);
    // Enter goes to the next match: blocks.1 opens.
    await page.getByLabel("Find").press("Enter");
    await page.waitForFunction(() => /^2 of 3/.test(document.getElementById("graph-found").textContent));
    assert.deepEqual((await drawn(page)).clusters, ["blocks", "blocks.0", "blocks.1"]);
    await page.getByLabel("Find").fill("");

    // A click on the head (after Fit: it was below the view): IPU 1, the pipeline's second
    // stage; its line opens in the editor.
    await page.getByRole("button", { name: "Fit the graph to the view" }).click();
    await page.locator('#graph-chart .node.op[data-scope="head"]').click();
    assert.equal(await dd("Scope"), "head");
    assert.equal(await dd("IPU"), "1");
    assert.equal(await dd("Stage"), "1");
    assert.match(await dd("Reads"), /%\d+ add/);
    assert.match(await dd("Read by"), /%\d+ cross_entropy/);
    await page.locator("#graph-detail-line").click();
    assert.match(await page.locator(".cm-activeLine").textContent(), /this\.head\.forward\(h\)/);
    // A click on a scope: its ops and placement span; its button opens it.
    await page.locator('#graph-chart .node.group[data-group="blocks.2"]').click();
    assert.equal(await dd("Ops"), "4");
    assert.equal(await dd("IPU"), "IPU 1");
    await page.locator("#graph-detail-toggle").click();
    assert.ok((await drawn(page)).clusters.includes("blocks.2"));
    await screenshot(page, "graph-small-details", page.locator(".right"));

    // Colour by: IPU (two), stage (two forward stages), phase (none: pipelined). The blocks,
    // collapsed, span both IPUs: their foot shows each one's share.
    await page.getByRole("button", { name: "Collapse to the top-level modules" }).click();
    const info = () => page.locator('#graph-chart .node.group[data-group="blocks"] .group-info').textContent();
    const shares = () => page.locator('#graph-chart .node.group[data-group="blocks"] rect.share').evaluateAll((l) => l.map((r) => `${r.getAttribute("fill")}:${Math.round(Number(r.getAttribute("width")))}`));
    assert.equal(await info(), "12 ops · IPUs 0–1");
    assert.deepEqual(await shares(), ["#4c78a8:120", "#f58518:60"]); // 8 ops on IPU 0, 4 on IPU 1
    const fill = () => page.locator('#graph-chart .node.op[data-scope="head"] .node-box').getAttribute("fill");
    const legend = () => page.locator("#graph-legend .key").allTextContents();
    assert.deepEqual(await legend(), ["IPU 0", "IPU 1"]);
    assert.equal(await fill(), "#f58518");
    await page.getByLabel("Colour by").selectOption("stage");
    assert.deepEqual(await legend(), ["Stage 0", "Stage 1"]);
    assert.equal(await fill(), "#f58518");
    await page.getByLabel("Colour by").selectOption("phase");
    assert.deepEqual(await legend(), ["unplaced"]);
    assert.equal(await fill(), "#9aa3b5");
    assert.equal(await info(), "12 ops · no phase");
    assert.deepEqual(await shares(), ["#9aa3b5:180"]);
    await page.getByLabel("Colour by").selectOption("ipu");
    assert.equal(await fill(), "#f58518");
  });

  test("pans with a drag and zooms with the wheel; Fit shows it whole again", T, async () => {
    await openReady(page, server.url + "/");
    const chart = page.locator("#graph-chart");
    const transform = () => page.locator("#graph-chart .viewport").getAttribute("transform");
    const before = await transform();
    const box = await chart.boundingBox();
    await page.mouse.move(box.x + 40, box.y + 40);
    await page.mouse.down();
    await page.mouse.move(box.x + 140, box.y + 90, { steps: 5 });
    await page.mouse.up();
    const moved = await transform();
    assert.notEqual(moved, before);
    const [x0, y0] = before.match(/-?[\d.]+/g).map(Number);
    const [x1, y1] = moved.match(/-?[\d.]+/g).map(Number);
    assert.ok(Math.abs(x1 - x0 - 100) < 1 && Math.abs(y1 - y0 - 50) < 1, `${before} → ${moved}`);
    assert.equal(await page.locator("#graph-details").isHidden(), true, "a drag is not a click");
    const zoom = Number(await chart.getAttribute("data-zoom"));
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.wheel(0, -300);
    await page.waitForFunction((z) => Number(document.getElementById("graph-chart").dataset.zoom) > z * 1.2, zoom);
    assert.equal(await fitsInChart(page), false, "zoomed in past the chart");
    await page.getByRole("button", { name: "Fit the graph to the view" }).click();
    assert.ok(await fitsInChart(page));
  });

  test("a model of 30,000 ops at its top level opens in runs of 500, one of which opens", T, async () => {
    const flat = `import { nn, poptorch } from "ipu-playground";

class Deep extends nn.Module {
  constructor() {
    super();
    this.fc = new nn.Linear(64, 64);
  }
  forward(x) {
    let h = this.fc.forward(x);
    // 20,000 steps at the top level: scale (a constant and a mul) or relu.
    for (let i = 0; i < 20000; i++) h = i % 2 ? h.relu() : h.scale(0.5);
    return h;
  }
}

export default ({ options }) => ({
  model: poptorch.inferenceModel(new Deep(), options),
  inputs: [{ name: "x", shape: [8, 64] }],
});
`;
    await openReady(page, server.url + "/");
    const t0 = Date.now();
    assert.equal(await setCode(page, flat), "ok", await page.locator("#error").textContent());
    const openMs = Date.now() - t0;
    assert.match(await page.locator("#graph-stats").textContent(), /^30002 ops in 1 module scope ·/);
    // x, fc's linear and 30,000 ops: 30,002 parts, in 61 runs.
    const d = await drawn(page);
    assert.equal(d.groups.length, 61);
    assert.deepEqual(d.ops, []);
    assert.match(await page.locator('#graph-chart .node.group[data-group="#3"] .group-name').textContent(), /^top level \[1501–2000\]$/);
    await page.locator('#graph-chart .node.group[data-group="#3"]').click();
    await page.locator("#graph-detail-toggle").click();
    const e = await drawn(page);
    assert.deepEqual(e.clusters, ["#3"]);
    assert.equal(await page.locator('#graph-chart .node.op').count(), 500);
    assert.deepEqual(unbalanced(e.edges, e.clusters), []);
    const layoutMs = await page.locator("#graph-chart").getAttribute("data-layout-ms");
    console.log(`30,002 ops at the top level: analysed and drawn in ${openMs} ms; a run of 500 opened in a ${layoutMs} ms layout`);
    await screenshot(page, "graph-flat-30000", page.locator(".right"));
  });

  for (const [name, preset, groups, expand, ipus] of [
    ["BERT-Large", "bert-large", ["decoder", "embeddings", "layer"], ["layer", "layer.12"], 4],
    ["ResNet-50", "resnet50", ["bn1", "layer1", "layer2", "layer3", "layer4"], ["layer3", "layer3.0"], 1],
  ]) {
    test(`the ${name} preset opens at its top-level modules, expands, and pans`, T, async () => {
      await openReady(page, server.url + "/");
      const t0 = Date.now();
      await selectPreset(page, preset);
      assert.equal(await page.evaluate(() => document.body.dataset.analysis), "ok", await page.locator("#error").textContent());
      const openMs = Date.now() - t0;
      const stats = await page.locator("#graph-stats").textContent();
      assert.match(stats, new RegExp(`· ${ipus} IPUs? ·`));
      const d = await drawn(page);
      assert.deepEqual([...d.groups].sort(), groups);
      assert.ok(d.paths > 0);
      assert.ok(await fitsInChart(page));
      await screenshot(page, `graph-${name}`, page.locator(".right"));
      const timings = [];
      for (const id of expand) {
        await find(page, id);
        await toggle(page, id);
        timings.push(Number(await page.locator("#graph-chart").getAttribute("data-layout-ms")));
        assert.ok((await drawn(page)).clusters.includes(id), id);
      }
      const e = await drawn(page);
      assert.deepEqual(unbalanced(e.edges, e.clusters), []);
      if (name === "BERT-Large") {
        // 24 layers, one open: its attention, attention output and output as scopes.
        assert.equal(e.groups.filter((g) => /^layer\.\d+$/.test(g)).length, 23);
        assert.deepEqual(e.groups.filter((g) => g.startsWith("layer.12.")).sort(), ["layer.12.attention", "layer.12.attentionOutput", "layer.12.output"]);
        assert.deepEqual(await page.locator("#graph-legend .key").allTextContents(), ["IPU 0", "IPU 1", "IPU 2", "IPU 3"]);
      } else {
        // layer3.0: a Bottleneck with a downsample (its 1×1 conv and batch norm).
        assert.ok(e.groups.includes("layer3.0.downsample"), e.groups.join());
        assert.ok(e.ops.includes("conv2d layer3.0.conv1"), e.ops.join());
      }
      await screenshot(page, `graph-${name}-expanded`, page.locator(".right"));
      // Everything at once: every op is drawn (under the drawing's limit).
      await page.getByRole("button", { name: "Expand every scope" }).click();
      const all = await drawn(page);
      assert.deepEqual(unbalanced(all.edges, all.clusters), []);
      const allMs = Number(await page.locator("#graph-chart").getAttribute("data-layout-ms"));
      const ops = Number(await page.locator("#graph-chart").getAttribute("data-ops"));
      assert.equal(all.ops.length, ops);
      // Pan over the drawing: the longest main-thread task while dragging.
      await page.evaluate(() => {
        window.__longest = 0;
        new PerformanceObserver((l) => l.getEntries().forEach((e) => (window.__longest = Math.max(window.__longest, e.duration)))).observe({ type: "longtask" });
      });
      const box = await page.locator("#graph-chart").boundingBox();
      await page.mouse.move(box.x + 30, box.y + 30);
      await page.mouse.down();
      for (let i = 1; i <= 30; i++) await page.mouse.move(box.x + 30 + i * 8, box.y + 30 + i * 12);
      await page.mouse.up();
      const longest = await page.evaluate(() => window.__longest);
      console.log(`${name}: analysed and drawn in ${openMs} ms; ${ops} ops; layouts ${timings.join(", ")} ms; expand all ${all.ops.length + all.groups.length} nodes in ${allMs} ms; longest task while panning ${Math.round(longest)} ms`);
      assert.ok(longest < 500, `a ${Math.round(longest)} ms task while panning`);
    });
  }
});
