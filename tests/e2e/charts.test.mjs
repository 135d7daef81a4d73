// The chart modules (pure drawing functions), the Plan adapter and the placeholder planner,
// run in Chromium on fixtures: each module is imported by its served URL, as the page's
// worker or bundle would load it.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, launchChromium } from "../node/helpers.mjs";
import { openContext, screenshot, assertClean } from "./helpers.mjs";
import { fixturePlan, fixtureGraph } from "./fixtures/plan.mjs";

const T = { timeout: 60000 };

describe("charts, the plan adapter and the placeholder planner", () => {
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

  test("plan adapter: stages, pipeline, memory, live tensors, tiles, gantt, fit items", T, async () => {
    const r = await run(async (plan) => {
      const a = await import("/plan/adapter.js");
      return {
        ipus: a.planIpus(plan),
        stages: a.stagesData(plan),
        pipe: a.pipelineData(plan),
        mem: a.memoryData(plan, 0),
        live: a.liveTensors(plan, 0, 4).map((v) => v.name),
        tiles: a.tilesData(plan, 1).tiles.length,
        gantt: a.ganttData(plan),
        fit: a.fitItems(plan).map((i) => i.level),
        group: [a.groupOf("layers.3.attn.q"), a.groupOf("fc1"), a.groupOf("")],
      };
    }, fixturePlan());
    assert.deepEqual(r.ipus, [0, 1]);
    assert.equal(r.stages.kind, "stage");
    assert.deepEqual(r.stages.columns.map((c) => c.pass), ["forward", "forward", "backward"]);
    assert.deepEqual(r.pipe.steps, 6);
    assert.deepEqual([r.pipe.rampUp, r.pipe.steady, r.pipe.rampDown], [2, 2, 2]);
    assert.equal(r.mem.steps.length, 10);
    assert.equal(r.mem.steps[0].values.weights, 400_000, "always-live classes on every step");
    assert.equal(r.mem.steps[4].values.activations, 500_000);
    assert.equal(r.mem.capacity, 1472 * 638976);
    // Step node 4 on IPU 0: %3 (0..8) and %5 (2..4) are live, %7 (6..18) not yet, %11 is on IPU 1.
    assert.deepEqual(r.live, ["%3 linear", "%5 relu"]);
    assert.equal(r.tiles, 1472);
    assert.deepEqual(r.gantt.rows.map((x) => x.ipu), [0, 1]);
    assert.equal(r.gantt.throughput, 32000);
    assert.deepEqual(r.fit, ["error", "warning"]);
    assert.deepEqual(r.group, ["layers.3", "fc1", ""]);
  });

  test("charts draw the fixture: stages, pipeline, memory, tiles, gantt, graph", T, async () => {
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
      drawGantt(g, { ...a.ganttData(plan), width: 900 });
      return {
        rows: [...s.querySelectorAll(".ipu-row")].map((e) => e.dataset.ipu),
        cells: [...s.querySelectorAll(".cell")].map((e) => `${e.dataset.ipu}:${e.dataset.blocks}`),
        mbs: p.querySelectorAll("rect.mb").length,
        bands: [...p.querySelectorAll(".phase-name")].map((e) => e.textContent),
        memPainted: painted(m),
        stepAt: [mem.stepAt(0), mem.stepAt(64), mem.stepAt(600 - 12), mem.stepAt(2000)],
        tiles,
        tilesPainted: painted(t),
        lanes: [...g.querySelectorAll(".lane")].map((e) => e.dataset.ipu),
        intervals: g.querySelectorAll("rect.iv").length,
        kinds: [...new Set([...g.querySelectorAll("rect.iv")].map((e) => e.classList[1]))].sort(),
      };
    }, fixturePlan());
    assert.deepEqual(r.rows, ["0", "1"]);
    assert.deepEqual(r.cells, ["0:b0", "1:b1", "0:b0"]);
    assert.equal(r.mbs, 12, "3 stages × 4 micro-batches");
    assert.deepEqual(r.bands, ["ramp-up (2)", "steady (2)", "ramp-down (2)"]);
    assert.ok(r.memPainted > 0.2, `memory chart mostly blank (${r.memPainted})`);
    assert.deepEqual(r.stepAt, [0, 0, 9, 9]);
    assert.equal(r.tiles.over, 3, "three tiles over their 624 KiB");
    assert.ok(r.tiles.columns * r.tiles.rows >= 1472);
    assert.ok(r.tilesPainted > 0.5);
    assert.deepEqual(r.lanes, ["0", "1"]);
    assert.equal(r.intervals, 8, "idle intervals are not drawn");
    assert.deepEqual(r.kinds, ["compute", "copy", "exchange", "stream", "sync"]);
    await screenshot(ctx.page, "charts-fixture");
  });

  test("the memory and execution views from the fixture: a click lists the live tensors", T, async () => {
    await ctx.page.goto(server.url + "/engine/protocol.js");
    await ctx.page.addStyleTag({ url: "/style.css" });
    await run(async (plan) => {
      const { createMemoryView } = await import("/views/memory.js");
      const { createExecutionView } = await import("/views/execution.js");
      document.body.replaceChildren();
      const m = document.body.appendChild(Object.assign(document.createElement("div"), { className: "view", id: "m" }));
      const e = document.body.appendChild(Object.assign(document.createElement("div"), { className: "view", id: "e" }));
      m.style.width = e.style.width = "900px";
      createMemoryView(m).render({ plan });
      createExecutionView(e).render({ plan });
    }, fixturePlan());
    const canvas = ctx.page.locator("#memory-chart");
    const box = await canvas.boundingBox();
    // Step 4 of 10 on a chart whose plot spans x = 64 .. width - 12.
    await canvas.click({ position: { x: 64 + ((box.width - 76) * 4) / 9, y: box.height / 2 } });
    // Step 4 is node %8 on IPU 0: %3 (born 0, dies 8) and %7 (6 .. 18) are live, %5 (2 .. 4) is gone.
    assert.match(await ctx.page.locator("#live-tensors h4").textContent(), /^Live at step 4 \(%8 linear\): 2 tensors$/);
    assert.deepEqual(await ctx.page.locator("#live-tensors td:first-child").allTextContents(), ["%3 linear", "%7 linear"]);
    await canvas.press("ArrowRight");
    assert.match(await ctx.page.locator("#live-tensors h4").textContent(), /^Live at step 5/);
    assert.match(await ctx.page.locator("#e").textContent(), /32,000 samples\/s/);
    await screenshot(ctx.page, "views-from-fixture");
  });

  test("placeholder planner: PopTorch's rules on traced graphs", T, async () => {
    const r = await run(async ({ g4, g010, g3, gNoIpu, g2 }) => {
      const { placeholderPlan } = await import("/engine/placeholder-plan.js");
      const { defaultOptions, mergeOptions } = await import("/options.js");
      const o = (patch) => mergeOptions(defaultOptions(), patch);
      const pick = (p) => ({
        stages: p.stages.map((s) => `${s.id}@${s.ipu}:${s.pass[0]}`),
        errors: p.errors.map((e) => e.code),
        warnings: p.warnings.map((w) => w.code),
        used: p.ipusUsed,
        reserved: p.ipusReserved,
        pipe: p.pipeline && [p.pipeline.rampUp, p.pipeline.steady, p.pipeline.rampDown, p.pipeline.schedule.length],
        copies: p.copies.map((c) => `${c.fromIpu}>${c.toIpu}:${c.bytes}`),
        placement: p.placement.map((x) => x.ipu),
        msg: p.errors.map((e) => e.message).join(" | "),
        phases: p.phases.map((x) => `${x.id}:${x.pass[0]}:${x.ipus.join("")}`),
      });
      return {
        inference: pick(placeholderPlan(g4, o({ deviceIterations: 4 }))),
        inferenceShort: pick(placeholderPlan(g4, o({ deviceIterations: 2 }))),
        training: pick(placeholderPlan(g4, o({ Training: { gradientAccumulation: 8 } }), { training: true })),
        trainingShort: pick(placeholderPlan(g4, o({ Training: { gradientAccumulation: 4 } }), { training: true })),
        sameAsIpu010: pick(placeholderPlan(g010, o({ deviceIterations: 8 }))),
        autoIncrement010: pick(placeholderPlan(g010, o({ deviceIterations: 8, executionStrategy: { type: "pipelined", autoStage: "AutoIncrement" } }))),
        three: pick(placeholderPlan(g3, o({ deviceIterations: 8 }))),
        threeRounded: pick(placeholderPlan(g3, o({ deviceIterations: 8, autoRoundNumIpus: true }))),
        noIpu: pick(placeholderPlan(gNoIpu, o({}))),
        noIpuAuto: pick(placeholderPlan(gNoIpu, o({ executionStrategy: { type: "sharded", autoStage: "AutoIncrement" } }))),
        tooMany: pick(placeholderPlan(g2, o({ replicationFactor: 64, deviceIterations: 2 }))),
        system: pick(placeholderPlan(g2, o({ replicationFactor: 4, deviceIterations: 2 }), { available: 4 })),
        sharded: pick(placeholderPlan(g4, o({ executionStrategy: { type: "sharded", autoStage: "SameAsIpu" } }))),
        phasedNone: pick(placeholderPlan(g4, o({ executionStrategy: { type: "serial_phased", phases: [] } }))),
        parallelBad: pick(placeholderPlan(g4, o({ executionStrategy: { type: "parallel_phased", phases: [[{ blocks: ["b0", "b1"], ipu: 0 }], [{ blocks: ["b2", "b3"], ipu: 0 }]] } }))),
        serial: pick(placeholderPlan(g4, o({ executionStrategy: { type: "serial_phased", phases: [[{ blocks: ["b0"], ipu: 0 }], [{ blocks: ["b1"], ipu: 0 }], [{ blocks: ["b2", "b3"], ipu: 0 }]] } }), { training: true })),
        unknownBlock: pick(placeholderPlan(g4, o({ executionStrategy: { type: "serial_phased", phases: [[{ blocks: ["b0", "b1", "b2", "b3", "bX"], ipu: 0 }]] } }))),
        accInInference: pick(placeholderPlan(g2, o({ deviceIterations: 2, Training: { gradientAccumulation: 2 } }))),
      };
    }, { g4: fixtureGraph([0, 1, 2, 3]), g010: fixtureGraph([0, 1, 0]), g3: fixtureGraph([0, 1, 2]), gNoIpu: fixtureGraph([null, null]), g2: fixtureGraph([0, 1]) });

    // Inference over 4 IPUs: 4 stages, deviceIterations ≥ stages, 4 + 4 − 1 steps.
    assert.deepEqual(r.inference.stages, ["0@0:f", "1@1:f", "2@2:f", "3@3:f"]);
    assert.deepEqual(r.inference.errors, []);
    assert.deepEqual(r.inference.pipe, [3, 1, 3, 16]);
    assert.deepEqual(r.inference.copies, ["0>1:512", "1>2:512", "2>3:512"], "8×16 f32 crossing each IPU boundary");
    assert.deepEqual(r.inference.placement.slice(0, 5), [null, null, 0, 0, null], "placeholders have no IPU; Block 0's ops are on IPU 0");
    assert.deepEqual(r.inferenceShort.errors, ["iterations_below_stages"]);
    assert.match(r.inferenceShort.msg, /deviceIterations must be greater than or equal to the number of pipeline stages \(4\)/);
    // Training: 2F − 1 = 7 stages, backward stages on the forward IPUs in reverse.
    assert.deepEqual(r.training.stages, ["0@0:f", "1@1:f", "2@2:f", "3@3:f", "4@2:b", "5@1:b", "6@0:b"]);
    assert.deepEqual(r.training.errors, []);
    assert.deepEqual(r.training.pipe, [6, 2, 6, 56]);
    assert.deepEqual(r.trainingShort.errors, ["accumulation_below_stages"]);
    assert.match(r.trainingShort.msg, /\(7\) when using poptorch\.PipelinedExecution\. Please note that a model with 4 pipeline stages in PopTorch will have an additional 3 stages when training\./);
    // IPUs 0, 1, 0: SameAsIpu gives stages 0, 1, 0 (fails to schedule); AutoIncrement 0, 1, 2.
    assert.deepEqual(r.sameAsIpu010.errors, ["stage_order"]);
    assert.deepEqual(r.autoIncrement010.errors, []);
    assert.deepEqual(r.autoIncrement010.stages, ["0@0:f", "1@1:f", "2@0:f"]);
    // 3 IPUs reserve 4: an error without autoRoundNumIPUs, a warning with it.
    assert.deepEqual([r.three.used, r.three.reserved, r.three.errors], [3, 4, ["ipus_not_power_of_two"]]);
    assert.match(r.three.msg, /PopTorch must reserve a minimum of 4 in order to allow the model to run/);
    assert.deepEqual([r.threeRounded.errors, r.threeRounded.warnings], [[], ["ipus_rounded"]]);
    // Blocks without an IPU: SameAsIpu refuses; AutoIncrement puts block i on IPU i.
    assert.deepEqual(r.noIpu.errors, ["same_as_ipu_without_ipu", "same_as_ipu_without_ipu"]);
    assert.match(r.noIpu.msg, /poptorch\.AutoStage\.SameAsIpu was selected but no IPU was specified for block b0/);
    assert.deepEqual(r.noIpuAuto.stages, ["0@0:f", "1@1:f"]);
    assert.deepEqual(r.noIpuAuto.pipe, null, "sharded: no pipeline");
    // More than 64 IPUs; more than the system has.
    assert.deepEqual([r.tooMany.used, r.tooMany.errors], [128, ["too_many_ipus"]]);
    assert.deepEqual([r.system.used, r.system.errors], [8, ["not_enough_ipus"]]);
    assert.equal(r.sharded.pipe, null);
    // Phased.
    assert.deepEqual(r.phasedNone.errors, ["invalid_option"]);
    assert.match(r.phasedNone.msg, /There is currently no AutoStage for PhasedExecution, please explicitly specify the phases/);
    assert.deepEqual(r.parallelBad.errors, ["phase_parity"]);
    assert.deepEqual(r.serial.errors, []);
    assert.deepEqual(r.serial.phases, ["0:f:0", "1:f:0", "2:f:0", "3:b:0", "4:b:0"], "forward 0, 1, 2 → backward 4, 3 (2 is shared)");
    assert.deepEqual(r.unknownBlock.errors, ["unknown_block"]);
    assert.match(r.unknownBlock.msg, /Unknown Block 'bX' list of expected Blocks: \['b0', 'b1', 'b2', 'b3'\]/);
    assert.deepEqual(r.accInInference.errors, ["accumulation_in_inference"]);
  });
});
