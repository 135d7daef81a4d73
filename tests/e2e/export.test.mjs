// "Export as PopTorch" / "Export as PyTorch": the worker writes the wrapped model of the
// editor's code as a .py file and its weights as the .safetensors beside it; the page saves
// both. The files' contents are checked against real PyTorch by `make check-export`; here,
// that the buttons download them and the code holds the model.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { REPO } from "../node/helpers.mjs";
import { pageSuite, openReady, selectPreset } from "./helpers.mjs";

const T = { timeout: 120000 };

/** Clicks `name` and collects the downloads it starts: { filename: text or bytes }. */
async function downloads(page, name, count) {
  const got = [];
  const seen = new Promise((resolve) => {
    page.on("download", async (d) => {
      got.push([d.suggestedFilename(), fs.readFileSync(await d.path())]);
      if (got.length === count) resolve();
    });
  });
  await page.getByRole("button", { name }).click();
  await seen;
  return Object.fromEntries(got);
}

describe("export buttons", () => {
  const s = pageSuite([
    [path.join(REPO, "www", "pkg", "ipu_playground.js"), "run scripts/build-wasm.sh web"],
    [path.join(REPO, "www", "dist", "main.js"), "run node web/build.mjs"],
  ]);

  test("the MLP preset: a PopTorch file with its Blocks and options, a PyTorch file, the weights beside each", T, async () => {
    await openReady(s.page, s.server.url);
    assert.equal(await selectPreset(s.page, "mlp-pipelined"), "ok");
    const pop = await downloads(s.page, "Export as PopTorch", 2);
    assert.deepEqual(Object.keys(pop).sort(), ["mlp.safetensors", "mlp_poptorch.py"]);
    const code = pop["mlp_poptorch.py"].toString("utf8");
    for (const want of [
      'with poptorch.Block("embed", ipu_id=0):',
      'with poptorch.Block("head", ipu_id=3):',
      "opts.Training.gradientAccumulation(8)",
      "poptorch.optim.Adam(model.parameters()",
      "poptorch.trainingModel(model, opts, optimizer)",
      '_module(self, "fc1", torch.nn.Linear(784, 512, bias=True, dtype=torch.float32))',
      "= self.fc1(x)",
      "mlp.safetensors",
    ]) assert.ok(code.includes(want), `missing ${want}`);
    const header = JSON.parse(pop["mlp.safetensors"].subarray(8, 8 + Number(pop["mlp.safetensors"].readBigUInt64LE(0))).toString("utf8"));
    assert.deepEqual(header["fc1.weight"].shape, [512, 784]);

    const torch = await downloads(s.page, "Export as PyTorch", 2);
    assert.ok(torch["mlp_pytorch.py"].toString("utf8").includes("def train(model, steps"));
    assert.ok(!torch["mlp_pytorch.py"].toString("utf8").includes("poptorch"));
    assert.match(await s.page.locator("#status").textContent(), /Exported mlp_pytorch\.py and mlp\.safetensors/);
  });
});
