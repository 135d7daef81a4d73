// A Node worker_threads replica of ReplicaWorkers (replicas.mjs): imports the user's model
// module, builds the wrapped model, and serves the coordinator's requests for its replicas.
import { parentPort, workerData } from "node:worker_threads";
import { replicaServer } from "./replica-core.mjs";

const fail = (e) => parentPort.postMessage({ error: { name: e?.name ?? "Error", message: e?.message ?? String(e), stack: e?.stack } });
try {
  const mod = await import(workerData.module);
  const build = mod.default ?? mod.build;
  if (typeof build !== "function") {
    throw new TypeError(`${workerData.module}: the model module must export (default) a function that builds the training model`);
  }
  const model = await build(workerData.args);
  if (!model || typeof model.setLocalReplicas !== "function" || model.training !== true) {
    throw new TypeError(`${workerData.module}: its default export must return a poptorch.trainingModel(...), got ${model?.constructor?.name ?? typeof model}`);
  }
  const replicas = model.options.replicationFactor;
  if (workerData.probe) parentPort.postMessage({ replicas });
  else parentPort.on("message", replicaServer(model, workerData.range, (m) => parentPort.postMessage(m)));
} catch (e) {
  fail(e);
}
