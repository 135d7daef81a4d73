// The chart modules (pure drawing functions), the Plan adapter and the options' mapping to
// the planner, run in Chromium on a hand-written Plan (fixtures/plan.mjs, the planner's JSON
// layout with known figures) and on real plans from the package: each module is imported by
// its served URL, as the page's worker or bundle would load it.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, launchChromium } from "../node/helpers.mjs";
import { openContext, screenshot, assertClean } from "./helpers.mjs";
import { fixturePlan, fixtureGraph } from "./fixtures/plan.mjs";

const T = { timeout: 60000 };

describe("charts, the plan adapter and the options", () => {
  let server, browser, ctx;

  before(async () => {
    server = await startServer({ args: ["--quiet"] });
    browser = await launchChromium();
    ctx = await openContext(browser, { viewport: { width: 1000, height: 900 } });
    // A same-origin document with nothing running: modules are imported into it. (Chromium
    // asks for /favicon.ico for a non-HTML document; the site has none.)
    await ctx.page.route("**/favicon.ico", (route) => route.fulfill({ status: 204, body: "" }));
    await ctx.page.goto(server.url + "/engine/protocol.js");
  });

  after(async () => {
    await ctx?.context.close();
    await browser?.close();
    await server?.stop();
    assertClean(ctx?.problems ?? []);
  });

  const run = (fn, arg) => ctx.page.evaluate(fn, arg);

  test("plan adapter: stages, pipeline, memory, live tensors, tiles, gantt, fit items, sources", T, async () => {
    const r = await run(
      async ({ plan, graph }) => {
        const a = await import("/plan/adapter.js");
        const mem = a.memoryData(plan, 0);
        const live = (node) => a.liveTensors(plan, 0, node);
        // A pipeline of 3 stages over 64 micro-batches: its steady state is drawn shortened.
        const long = structuredClone(plan);
        const M = 64;
        long.pipeline = { stages: 3, microBatches: M, rampUp: 2, steady: M - 2, rampDown: 2, truncated: false, schedule: [] };
        for (let m = 0; m < M; m++) for (const s of plan.stages) long.pipeline.schedule.push({ step: m + s.id, stage: s.id, ipu: s.ipu, microBatch: m, pass: s.pass });
        const lp = a.pipelineData(long);
        return {
          ipus: a.planIpus(plan),
          summary: a.summary(plan),
          stages: a.stagesData(plan),
          pipe: a.pipelineData(plan),
          long: { columns: lp.columns, gaps: lp.gaps, cells: lp.cells.length },
          mem: { x: mem.x, weights: mem.series.weights, activations: mem.series.activations, gradients: mem.series.gradients, peakIndex: mem.peakIndex, peakBytes: mem.peakBytes, always: mem.alwaysLiveBytes, streaming: mem.streamingMax, capacity: mem.capacity },
          live4: live(4).tensors.map((v) => `${v.name}:${v.bytes}`),
          live8: live(8),
          labels: [0, 2, 7, 9].map((n) => a.nodeLabel(plan, n)),
          step: a.stepLabel(plan, mem, 8),
          tiles: a.tilesData(plan, 1).tiles.length,
          gantt: a.ganttData(plan),
          fit: a.fitItems(plan, [{ level: "error", code: "not_enough_ipus", message: "m", fix: "f", node: null }]).map((i) => `${i.level}:${i.code}`),
          sources: [6, 8, 9, 4, null].map((n) => a.sourceOf(plan, graph, n)),
          lines: ["model.js:12", "engine.js:3", "model.js:x", null].map((s) => a.editorLine(s)),
          graph: a.graphNodes(graph, plan),
        };
      },
      { plan: fixturePlan(), graph: fixtureGraph() },
    );
    assert.deepEqual(r.ipus, [0, 1]);
    assert.equal(r.summary.strategy, "Pipelined");
    assert.equal(r.summary.copyBytes, 6000);
    assert.equal(r.summary.peakBytes, 1_909_100);
    assert.equal(r.stages.kind, "stage");
    assert.deepEqual(r.stages.columns.map((c) => `${c.label}/${c.sub}`), ["Stage 0/forward", "Stage 1/fwd + bwd", "Stage 2/backward"]);
    assert.deepEqual(r.stages.cells.map((c) => `${c.ipu}:${c.column}:${c.blocks}`), ["0:0:b0", "1:1:b1", "0:2:b0"]);
    // 3 stages × 4 micro-batches: 6 steps, 2 up, 2 steady, 2 down, drawn in full.
    assert.equal(r.pipe.steps, 6);
    assert.deepEqual([r.pipe.rampUp, r.pipe.steady, r.pipe.rampDown], [2, 2, 2]);
    assert.deepEqual(r.pipe.columns, [0, 1, 2, 3, 4, 5]);
    assert.deepEqual(r.pipe.gaps, []);
    // 66 steps: ramp-up 0, 1; two steady steps at each end (2, 3 and 62, 63); ramp-down 64, 65.
    assert.deepEqual(r.long.columns, [0, 1, 2, 3, 62, 63, 64, 65]);
    assert.deepEqual(r.long.gaps, [{ after: 3, steps: 58 }]);
    assert.equal(r.long.cells, 3 * 8 - 6, "the cells of the drawn steps (the ramps are not full)");
    // Memory of IPU 0: always-live classes constant, the step classes as listed.
    assert.deepEqual(r.mem.x, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.deepEqual(r.mem.weights, new Array(10).fill(400_000));
    assert.deepEqual(r.mem.activations, [1000, 1000, 5000, 8000, 8000, 8000, 4000, 4000, 4000, 0]);
    assert.deepEqual(r.mem.gradients, [0, 0, 0, 0, 0, 0, 0, 2000, 5000, 3000]);
    assert.equal(r.mem.peakIndex, 8);
    assert.equal(r.mem.peakBytes, 1_909_100);
    assert.equal(r.mem.always, 1_900_000);
    assert.equal(r.mem.streaming, 7000);
    assert.equal(r.mem.capacity, 1472 * 638976);
    // Live at step 4 on IPU 0: %2 (2 .. 8) and %3 (3 .. 5); %0 died at 2; the copy of %3 is on IPU 1.
    assert.deepEqual(r.live4, ["%2 = linear fc0:4000", "%3 = relu fc0:4000"]);
    // Step 8: the backward's gradients are named through the program table.
    assert.deepEqual(r.live8.tensors.map((v) => v.name), ["%2 = linear fc0", "%8 = matmul_tn fc0 (backward)", "%7 = matmul fc1 (backward)"]);
    assert.deepEqual(r.live8.step, { activations: 4000, stash: 0, gradients: 5000, temporaries: 100, loaded: 0, streaming: 7000 });
    assert.deepEqual(r.live8.always.map((c) => `${c.class}:${c.bytes}`), ["code:200000", "exchange:100000", "weights:400000", "optimizer:800000", "accumulators:400000"]);
    assert.deepEqual(r.labels, ["input x", "linear fc0", "matmul fc1 (backward)", "optimizer_update fc0 (optimizer)"]);
    assert.equal(r.step, "step 8 of 10: matmul_tn fc0 (backward)");
    assert.equal(r.tiles, 1472);
    assert.deepEqual(r.gantt.rows.map((x) => x.ipu), [0, 1]);
    assert.equal(r.gantt.end, 0.004, "one iteration is drawn");
    assert.equal(r.gantt.stepTimeS, 0.008);
    assert.equal(r.gantt.throughput, 32000);
    assert.deepEqual(r.fit, ["error:out_of_memory", "error:not_enough_ipus", "warning:w"]);
    // A forward node's own line; a backward or optimizer node's via its scope's first forward node.
    // (A parameter without a source of its own is its module's first op's.)
    assert.deepEqual(r.sources, ["model.js:12", "model.js:10", "model.js:10", "model.js:11", null]);
    assert.deepEqual(r.lines, [12, null, null, null]);
    // The Graph view's ops: parameters left out, with the edges from them; each op's inputs
    // (producing ops), scope, shape, line and placement.
    assert.deepEqual(
      r.graph.nodes.map((n) => `%${n.index} ${n.op} ${n.scope} ${n.shape} L${n.line} <${n.inputs}> ${n.place.ipu}/${n.place.stage}/${n.place.phase}`),
      ["%0 input x  f32[32,16] Lnull <> 0/0/null", "%2 linear fc0 f32[32,16] L10 <0> 0/0/null", "%3 relu fc0 f32[32,16] L10 <2> 0/0/null", "%5 linear fc1 f32[32,8] L11 <3> 1/1/null", "%6 cross_entropy fc1 f32[] L12 <5> 1/1/null"],
    );
    assert.equal(r.graph.ipus, 2);
  });

  test("the Graph view's model: scopes as a tree, the drawn graph for the open ones, search", T, async () => {
    const r = await run(
      async ({ plan, graph }) => {
        const a = await import("/plan/adapter.js");
        const m = await import("/views/graph/model.js");
        const tree = m.buildTree(a.graphNodes(graph, plan).nodes);
        const show = (vis) => ({
          items: vis.items.map((it) => `${it.id}${it.parent ? ` in ${it.parent}` : ""}`),
          clusters: vis.clusters.map((c) => c.id),
          edges: vis.edges.map((e) => `${e.from}>${e.to}:${e.count}:${e.sources}`),
        });
        const closed = m.visibleGraph(tree, new Set());
        return {
          counts: [...tree.groups.values()].map((g) => `${g.id}:${g.count}:${g.ops}`),
          users: [...tree.users.entries()].map(([i, u]) => `${i}>${u}`),
          closed: show(closed),
          open: show(m.visibleGraph(tree, new Set(["fc0"]))),
          around: m.groupsAround(tree, 6),
          search: ["relu", "%5", "fc", "F32[32,8]", " ", "nothing"].map((q) => m.search(tree, q)),
          shares: m.keyShares(tree, closed.items[2], "stage"),
          under: m.opsUnder(tree.groups.get("")),
        };
      },
      { plan: fixturePlan(), graph: fixtureGraph() },
    );
    assert.deepEqual(r.counts, [":5:0", "fc0:2:2,3", "fc1:2:5,6"]);
    assert.deepEqual(r.users, ["0>2", "2>3", "3>5", "5>6"]);
    // Opened at the top level: each scope one node; one edge per pair of nodes.
    assert.deepEqual(r.closed, { items: ["n0", "g:fc0", "g:fc1"], clusters: [], edges: ["n0>g:fc0:1:0", "g:fc0>g:fc1:1:3"] });
    assert.deepEqual(r.open, { items: ["n0", "n2 in g:fc0", "n3 in g:fc0", "g:fc1"], clusters: ["g:fc0"], edges: ["n0>n2:1:0", "n2>n3:1:2", "n3>g:fc1:1:3"] });
    assert.deepEqual(r.around, ["fc1"]);
    assert.deepEqual(r.search, [
      { ops: [3], groups: [] },
      { ops: [5], groups: [] },
      { ops: [2, 3, 5, 6], groups: ["fc0", "fc1"] },
      { ops: [5], groups: [] },
      { ops: [], groups: [] },
      { ops: [], groups: [] },
    ]);
    assert.deepEqual(r.shares, [{ value: 1, count: 2 }]);
    assert.deepEqual(r.under, [0, 2, 3, 5, 6]);
  });

  test("the Graph view's model: a scope of more parts than MAX_PARTS holds them in runs", T, async () => {
    const r = await run(async () => {
      const m = await import("/views/graph/model.js");
      // 2,500 ops in a chain at the top level, then one module of two.
      const nodes = Array.from({ length: 2500 }, (_, i) => ({ index: i, op: "relu", scope: "", shape: "", inputs: i ? [i - 1] : [], place: {} }));
      nodes.push({ index: 2500, op: "linear", scope: "fc", shape: "", inputs: [2499], place: {} }, { index: 2501, op: "relu", scope: "fc", shape: "", inputs: [2500], place: {} });
      const tree = m.buildTree(nodes);
      const closed = m.visibleGraph(tree, new Set());
      const open = m.visibleGraph(tree, new Set(["#2"]));
      return {
        limits: [m.MAX_PARTS, m.CHUNK],
        chunks: tree.root.children.map((c) => `${c.id}:${c.label}:${c.count}`),
        closed: [closed.items.map((it) => it.id), closed.edges.map((e) => `${e.from}>${e.to}:${e.count}`)],
        open: [open.clusters.map((c) => c.id), open.items.length, open.items.filter((it) => it.parent === "g:#2").length],
        around: m.groupsAround(tree, 1234),
        search: m.search(tree, "top").groups,
      };
    });
    assert.deepEqual(r.limits, [1000, 500]);
    assert.deepEqual(r.chunks, ["#0:top level [1–500]:500", "#1:top level [501–1000]:500", "#2:top level [1001–1500]:500", "#3:top level [1501–2000]:500", "#4:top level [2001–2500]:500", "#5:top level [2501–2501]:2"]);
    assert.deepEqual(r.closed, [["g:#0", "g:#1", "g:#2", "g:#3", "g:#4", "g:#5"], ["g:#0>g:#1:1", "g:#1>g:#2:1", "g:#2>g:#3:1", "g:#3>g:#4:1", "g:#4>g:#5:1"]]);
    assert.deepEqual(r.open, [["g:#2"], 505, 500]);
    assert.deepEqual(r.around, ["#2"]);
    assert.deepEqual(r.search, [], "runs are not scopes to find");
  });

  test("charts draw the fixture: stages, pipeline, memory, tiles, gantt", T, async () => {
    const r = await run(async (plan) => {
      const a = await import("/plan/adapter.js");
      const { drawStages } = await import("/charts/stages.js");
      const { drawPipeline } = await import("/charts/pipeline.js");
      const { drawMemory } = await import("/charts/memory.js");
      const { drawTiles } = await import("/charts/tiles.js");
      const { drawGantt } = await import("/charts/gantt.js");
      const NS = "http://www.w3.org/2000/svg";
      document.body.replaceChildren();
      document.body.style.background = "#fff";
      const el = (tag) => document.body.appendChild(tag === "canvas" ? document.createElement("canvas") : document.createElementNS(NS, "svg"));
      const s = el("svg");
      drawStages(s, { ...a.stagesData(plan), width: 900 });
      const p = el("svg");
      drawPipeline(p, a.pipelineData(plan));
      const m = el("canvas");
      const mem = drawMemory(m, { ...a.memoryData(plan, 0), width: 600, height: 220, selected: 4 });
      const painted = (c) => {
        const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
        return n / (d.length / 4);
      };
      const t = el("canvas");
      const tiles = drawTiles(t, { ...a.tilesData(plan, 0), width: 600 });
      const g = el("svg");
      const gantt = drawGantt(g, { ...a.ganttData(plan), width: 900 });
      return {
        rows: [...s.querySelectorAll(".ipu-row")].map((e) => e.dataset.ipu),
        cells: [...s.querySelectorAll(".cell")].map((e) => `${e.dataset.ipu}:${e.dataset.blocks}`),
        subs: [...s.querySelectorAll(".col-sub")].map((e) => e.textContent),
        mbs: p.querySelectorAll("rect.mb").length,
        bands: [...p.querySelectorAll(".phase-name")].map((e) => e.textContent),
        memPainted: painted(m),
        indexAt: [mem.indexAt(0), mem.indexAt(64), mem.indexAt(64 + ((600 - 76) * 4.4) / 9), mem.indexAt(600 - 12), mem.indexAt(2000)],
        tiles,
        tilesPainted: painted(t),
        lanes: [...g.querySelectorAll(".lane")].map((e) => e.dataset.ipu),
        intervals: g.querySelectorAll("rect.iv").length,
        rects: gantt.rects,
        kinds: [...new Set([...g.querySelectorAll("rect.iv")].map((e) => e.classList[1]))].sort(),
      };
    }, fixturePlan());
    assert.deepEqual(r.rows, ["0", "1"]);
    assert.deepEqual(r.cells, ["0:b0", "1:b1", "0:b0"]);
    assert.deepEqual(r.subs, ["forward", "fwd + bwd", "backward"]);
    assert.equal(r.mbs, 12, "3 stages × 4 micro-batches");
    assert.deepEqual(r.bands, ["ramp-up (2)", "steady (2)", "ramp-down (2)"]);
    assert.ok(r.memPainted > 0.2, `memory chart mostly blank (${r.memPainted})`);
    assert.deepEqual(r.indexAt, [0, 0, 4, 9, 9]);
    assert.equal(r.tiles.over, 3, "three tiles over their 624 KiB");
    assert.ok(r.tiles.columns * r.tiles.rows >= 1472);
    assert.ok(r.tilesPainted > 0.5);
    assert.deepEqual(r.lanes, ["0", "1"]);
    assert.equal(r.intervals, 8, "idle intervals are not drawn");
    assert.equal(r.rects, 8);
    assert.deepEqual(r.kinds, ["compute", "copy", "exchange", "stream", "sync"]);
    await screenshot(ctx.page, "charts-fixture");
  });

  test("the Gantt chart draws an elided steady state shortened, at a marked gap", T, async () => {
    const r = await run(async () => {
      const a = await import("/plan/adapter.js");
      const { drawGantt } = await import("/charts/gantt.js");
      // Two 1-ms micro-batches, 100 elided, two more: the planner's listing of a long iteration.
      const unit = (t) => [{ start: t, end: t + 6e-4, kind: "compute", label: "stage 0" }, { start: t + 6e-4, end: t + 1e-3, kind: "copy", label: "c" }];
      const elided = { start: 2e-3, end: 0.102, kind: "elided", label: "100 more micro-batches (2–101) like micro-batch 1", repeat: { count: 100, unit: "micro-batch", periodS: 1e-3, busy: { compute: 6e-4, copy: 4e-4 } } };
      const intervals = [...unit(0), ...unit(1e-3), elided, ...unit(0.102), ...unit(0.103)];
      const plan = { time: { stepTimeS: 0.104, iterationTimeS: 0.104, iterationsPerStep: 1, microBatchesPerIteration: 104, microBatchSize: 1, samplesPerStep: 104, throughput: 1000, ipus: [{ ipu: 0, busy: {}, intervals }] } };
      const d = a.ganttData(plan);
      const svg = document.body.appendChild(document.createElementNS("http://www.w3.org/2000/svg", "svg"));
      const drawn = drawGantt(svg, { ...d, width: 610 });
      const gap = svg.querySelector("rect.gantt-gap");
      const xs = [...svg.querySelectorAll("rect.iv")].map((e) => +e.getAttribute("x"));
      return { gap: d.gap, rects: drawn.rects, x: +gap.getAttribute("x"), w: +gap.getAttribute("width"), dots: svg.querySelector(".pipe-gap").textContent, xs, last: [...svg.querySelectorAll("text.axis")].at(-1).textContent };
    });
    assert.deepEqual([r.gap.start, r.gap.end, r.gap.count, r.gap.unit], [2e-3, 0.102, 100, "micro-batch"]);
    assert.equal(r.rects, 8, "compute and copy of the four units drawn; the elided interval is no rectangle");
    // 4 ms drawn over 500 px (125 px/ms) around a 28-px gap.
    assert.ok(Math.abs(r.x - 320) < 1e-6 && Math.abs(r.w - 28) < 1e-6, `${r.x} ${r.w}`);
    assert.ok(r.dots.startsWith("…"));
    assert.ok(r.xs.some((x) => Math.abs(x - 348) < 1e-6), "the units after the gap start right of it");
    assert.equal(r.last, "104.00 ms", "the axis ends at the whole iteration");
  });

  test("the Gantt chart pools intervals narrower than a pixel: its drawing stays bounded", T, async () => {
    const r = await run(async () => {
      const { laneRects, drawGantt } = await import("/charts/gantt.js");
      // 50,000 intervals of 20 ns over 1 ms: compute 3 parts in 4, sync 1 in 4.
      const intervals = [];
      for (let i = 0; i < 50_000; i++) intervals.push({ start: i * 2e-8, end: (i + 1) * 2e-8, kind: i % 4 === 3 ? "sync" : "compute", label: `op ${i}` });
      const X = (t) => (t / 1e-3) * 500;
      const rects = laneRects(intervals, X);
      // Wide intervals stay as they are; touching ones of a kind merge.
      const wide = laneRects([{ start: 0, end: 0.4e-3, kind: "compute", label: "a" }, { start: 0.4e-3, end: 0.5e-3, kind: "compute", label: "b" }, { start: 0.5e-3, end: 1e-3, kind: "copy", label: "c" }], X);
      const svg = document.body.appendChild(document.createElementNS("http://www.w3.org/2000/svg", "svg"));
      const drawn = drawGantt(svg, { rows: [{ ipu: 0, intervals }, { ipu: 1, intervals }], end: 1e-3, width: 600 });
      return { rects: rects.length, kinds: [...new Set(rects.map((x) => x.kind))], count: rects.reduce((a, x) => a + x.count, 0), span: [rects[0].x0, rects.at(-1).x1], wide, drawn: drawn.rects, dom: svg.querySelectorAll("rect.iv").length };
    });
    assert.ok(r.rects <= 501, `${r.rects} rectangles for 500 pixels`);
    assert.deepEqual(r.kinds, ["compute"], "each pixel is mostly compute");
    assert.equal(r.count, 50_000, "every interval is in some rectangle");
    assert.deepEqual(r.span, [0, 500]);
    assert.deepEqual(r.wide.map((x) => `${x.kind}:${x.x0}-${x.x1}:${x.count}`), ["compute:0-250:2", "copy:250-500:1"]);
    assert.ok(r.drawn <= 2 * 520, `${r.drawn} rectangles drawn`);
    assert.equal(r.dom, r.drawn);
  });

  test("the memory and execution views from the fixture: a click lists the live tensors", T, async () => {
    await ctx.page.goto(server.url + "/engine/protocol.js");
    await ctx.page.addStyleTag({ url: "/style.css" });
    await run(async ({ plan, graph }) => {
      const { createMemoryView } = await import("/views/memory.js");
      const { createExecutionView } = await import("/views/execution.js");
      const { createFitView } = await import("/views/fit.js");
      document.body.replaceChildren();
      const box = (id) => {
        const d = document.body.appendChild(Object.assign(document.createElement("div"), { className: "view", id }));
        d.style.width = "900px";
        return d;
      };
      createMemoryView(box("m")).render({ plan });
      createExecutionView(box("e")).render({ plan });
      window.__lines = [];
      createFitView(box("f"), { onGoToLine: (line) => window.__lines.push(line) }).render({ plan, graph, checks: [] });
    }, { plan: fixturePlan(), graph: fixtureGraph() });
    // IPU 0 does not fit: it is shown first, with its peak step listed.
    assert.equal(await ctx.page.locator("#memory-ipu").inputValue(), "0");
    assert.match(await ctx.page.locator("#live-tensors h4").textContent(), /^Live at step 8 of 10: matmul_tn fc0 \(backward\): 3 tensors$/);
    const canvas = ctx.page.locator("#memory-chart");
    const box = await canvas.boundingBox();
    // Step 4 of steps 0 … 9 on a chart whose plot spans x = 64 .. width - 12.
    await canvas.click({ position: { x: 64 + ((box.width - 76) * 4) / 9, y: box.height / 2 } });
    assert.match(await ctx.page.locator("#live-tensors h4").textContent(), /^Live at step 4 of 10: parameter fc1.weight: 2 tensors$/);
    assert.deepEqual(await ctx.page.locator("#live-tensors td:first-child").allTextContents(), ["%2 = linear fc0", "%3 = relu fc0"]);
    assert.match(await ctx.page.locator("#live-tensors p").first().textContent(), /This step: activations 7\.8 KiB · pipeline stash 500 B · temporaries 100 B · in Streaming Memory 6\.8 KiB\. Always live: code 195 KiB/);
    await canvas.press("ArrowRight");
    assert.match(await ctx.page.locator("#live-tensors h4").textContent(), /^Live at step 5 of 10/);
    // Without the always-live classes, the capacity line is what they leave.
    await ctx.page.getByLabel(/Stack the always-live memory/).uncheck();
    assert.deepEqual(await ctx.page.locator("#memory-legend .key").allTextContents(), ["activations", "pipeline stash", "gradients", "temporaries"]);
    await ctx.page.locator("#memory-ipu").selectOption("1");
    assert.match(await ctx.page.locator("#memory-stats").textContent(), /yesfits/);
    assert.match(await ctx.page.locator("#execution-stats").textContent(), /8\.00 msstep time.*32,000 samples\/s/);
    assert.match(await ctx.page.locator("#execution-note").textContent(), /^One iteration \(4\.00 ms\): 4 micro-batches of 32; a step \(one host call\) runs 2 iterations/);
    assert.equal(await ctx.page.locator("#gantt-chart rect.iv").count(), 8);
    assert.deepEqual(await ctx.page.locator("#busy-table tbody tr:first-child td").allTextContents(), ["IPU 0", "2.30 ms", "0.0 µs", "300.0 µs", "200.0 µs", "400.0 µs", "800.0 µs"]);
    // Fit: the out-of-memory error, its line through the backward node's scope, the largest tensors.
    assert.match(await ctx.page.locator("#fit-verdict").textContent(), /^Valid, but it does not fit: 1 IPU out of memory\./);
    await ctx.page.getByRole("button", { name: "Go to line 10" }).click();
    assert.deepEqual(await ctx.page.evaluate(() => window.__lines), [10]);
    assert.deepEqual(await ctx.page.locator("#fit-largest td:first-child").allTextContents(), ["fc0.weight (optimizer state)", "fc0.weight"]);
    await screenshot(ctx.page, "views-fixture");
  });

  test("options: the panel's JSON is what the planner accepts, and its diagnostics find their fields", T, async () => {
    const r = await run(async () => {
      const O = await import("/options.js");
      const { PRESETS } = await import("/presets/index.js");
      const pkg = await import("/pkg/ipu_playground.js");
      await pkg.default();
      const model = pkg.traceMlp([4, 8, 2], 4);
      const codes = (options) => pkg.plan(model, options, {}).errors.map((e) => e.code);
      const presets = PRESETS.map((p) => [p.id, codes(O.toPlannerOptions(O.mergeOptions(O.defaultOptions(), p.options)))]);
      const locations = codes(O.toPlannerOptions(O.mergeOptions(O.defaultOptions(), { TensorLocations: { weight: O.locationSettings("offChip"), activation: O.locationSettings("onChip") } })));
      const field = (options) => pkg.plan(model, options, {}).errors.map((e) => O.fieldOfDiagnostic(e));
      return {
        presets,
        locations,
        fields: {
          zero: field({ deviceIterations: 0 }),
          accZero: field({ Training: { gradientAccumulation: 0 } }),
          generation: field({ ipuGeneration: "mk3" }),
          phases: field({ executionStrategy: { type: "serialPhased", phases: [] } }),
          phaseJson: field({ executionStrategy: { type: "serialPhased", phases: [[{ blocks: ["a"], ipu: 0 }]] } }),
          unknown: field({ frobnicate: 1 }),
          // A thrown error carries the option's key too (err.option), and the page's own diagnostics their field.
          thrown: (() => {
            try {
              pkg.poptorch.Options.fromJSON({ Training: { gradientAccumulation: "4" } });
            } catch (e) {
              return [e.kind, e.code, e.option, O.fieldOfDiagnostic(e)];
            }
          })(),
          own: O.fieldOfDiagnostic({ code: "not_enough_ipus", field: "ipus" }),
          nested: O.fieldOfOption("executionStrategy.autoStage"),
        },
        typeErrors: O.typeErrors(O.mergeOptions(O.defaultOptions(), { deviceIterations: 1.5, Training: { gradientAccumulation: "x" } })),
        roundTrip: ["default", "onChip", "offChip"].map((v) => O.locationOf(O.locationSettings(v))),
        merged: O.mergeOptions(O.defaultOptions(), { Training: { gradientAccumulation: 8 } }).Training,
      };
    });
    for (const [id, errors] of r.presets) assert.deepEqual(errors.filter((c) => c.startsWith("options")), [], `${id}: ${errors}`);
    assert.deepEqual(r.locations, []);
    assert.deepEqual(r.fields, {
      zero: ["deviceIterations"],
      accZero: ["gradientAccumulation"],
      generation: ["ipuGeneration"],
      phases: ["phases"],
      phaseJson: ["phases"],
      unknown: ["options"],
      thrown: ["plan", "options_json", "Training.gradientAccumulation", "gradientAccumulation"],
      own: "ipus",
      nested: "autoStage",
    });
    assert.deepEqual(r.typeErrors.map((e) => e.field), ["deviceIterations", "gradientAccumulation"]);
    assert.deepEqual(r.roundTrip, ["default", "onChip", "offChip"]);
    assert.deepEqual(r.merged, { gradientAccumulation: 8, automaticLossScaling: false });
  });

  test("a diagnostic's editor line: its node's source, else the line of the code that set its option", T, async () => {
    const r = await run(
      async ({ plan, graph }) => {
        const { diagnosticLine } = await import("/plan/lines.js");
        const a = { plan, graph, optionsFromCode: [{ field: "gradientAccumulation", value: 4, line: 31 }, { field: "strategy", value: {}, line: 12 }] };
        return {
          node: diagnosticLine(a, { code: "x", message: "m", node: 4 }),
          // The plan's diagnostics about an option carry its key (`option`), which names the field.
          accumulation: diagnosticLine(a, { code: "pipeline_gradient_accumulation", message: "m", node: null, option: "Training.gradientAccumulation" }),
          phases: diagnosticLine(a, { code: "parallel_phase_parity", message: "m", node: null, option: "executionStrategy" }),
          panel: diagnosticLine(a, { code: "pipeline_device_iterations", message: "m", node: null, option: "deviceIterations" }),
          none: diagnosticLine({ plan, graph }, { code: "pipeline_gradient_accumulation", message: "m", node: null, option: "Training.gradientAccumulation" }),
        };
      },
      { plan: fixturePlan(), graph: fixtureGraph() },
    );
    // Node 4 (fc1's, no source of its own) at its scope's first line, 11.
    assert.deepEqual(r, { node: 11, accumulation: 31, phases: 12, panel: null, none: null });
  });
});
