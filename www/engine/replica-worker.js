// A replica worker of the Training view: a module Web Worker with its own wasm instance,
// started by the engine worker (engine/training.js) when a replicated training model runs
// on several workers. It runs the editor's code as the engine worker does (the same
// context, so the same seeded weights), takes the wrapped training model of its default
// export, and serves the coordinator's requests for its replicas (pkg/replica-core.mjs,
// the replica side Node's ReplicaWorkers uses too). Messages: engine/protocol.js Replica.
import { loadEngine } from "./load.js";
import { Replica } from "./protocol.js";
import { replicaServer } from "../pkg/replica-core.mjs";
import { codeContext, importCode, panelOptions } from "./analysis.js";
import { normalize } from "./usercode.js";
import * as pkg from "../pkg/ipu_playground.js";

const fail = (e) => self.postMessage({ error: { name: e?.name ?? "Error", message: e?.message ?? String(e), stack: e?.stack } });

self.onmessage = async ({ data }) => {
  if (data?.type !== Replica.INIT) return;
  self.onmessage = null;
  try {
    const { memory } = await loadEngine();
    const { code, language, options, ipus, half, dataset, epochs, range } = data;
    const { ctx } = codeContext({ options: panelOptions(options), ipus, half, dataset, epochs });
    const { exports, url } = await importCode(code, language, ctx);
    let model;
    try {
      model = (await normalize(exports, ctx, (v) => v instanceof pkg.poptorch.PoplarExecutor)).model;
    } finally {
      if (url) URL.revokeObjectURL(url);
    }
    if (!model?.training) throw new TypeError("the code's default export gave no poptorch.trainingModel on this replica worker");
    const serve = replicaServer(model, range, (m) => self.postMessage(m), { memoryBytes: () => memory?.buffer.byteLength ?? 0 });
    self.onmessage = ({ data: m }) => serve(m);
    self.postMessage({ type: Replica.READY });
  } catch (e) {
    fail(e);
  }
};
