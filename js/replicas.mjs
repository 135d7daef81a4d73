// PopTorch's replicas as parallel workers on Node: `replicationFactor` replicas of a
// training model on several `worker_threads`, each worker holding its own single-threaded
// wasm instance and a copy of the weights (the coordinator and the replica side are
// replica-core.mjs's, shared with the page's Web Workers).
//
//   import { ReplicaWorkers } from "ipu-playground/replicas.mjs";      // Node
//   const workers = await ReplicaWorkers.start(new URL("./model.mjs", import.meta.url), { workers: 2 });
//   const [logits, loss] = await workers.call(x, y);                    // as model.call(x, y)
//   await workers.close();
//
// `model.mjs` exports (default) a function that builds the wrapped model the same way on
// every worker: `poptorch.trainingModel(net, options, optimizer)` with seeded weights (the
// workers check that they start from the same weights). An input may be an array of parts
// (a sparse graph part per replica: CallInput), as model.call takes it.
import { ReplicaCoordinator, replicaRanges, workerError } from "./replica-core.mjs";

export * from "./replica-core.mjs";

/**
 * Node: `replicationFactor` replicas on `workers` `worker_threads`, each importing the model
 * module `moduleUrl` (a file URL or path) and the package.
 */
export class ReplicaWorkers extends ReplicaCoordinator {
  static async start(moduleUrl, { workers = 1, args = {} } = {}) {
    const { Worker } = await import("node:worker_threads");
    // A URL (or anything with an href), or a path from the working directory.
    const href = typeof moduleUrl?.href === "string" ? moduleUrl.href : new URL(String(moduleUrl), `file://${process.cwd()}/`).href;
    // The replica count comes from the model itself: one worker builds it first.
    const first = new Worker(new URL("./replica-worker.mjs", import.meta.url), { workerData: { module: href, args, probe: true } });
    const replicas = await new Promise((resolve, reject) => {
      first.once("message", (m) => (m.error ? reject(workerError(0, [0, "?"], m.error)) : resolve(m.replicas)));
      first.once("error", (e) => reject(workerError(0, [0, "?"], e)));
      first.once("exit", (code) => reject(workerError(0, [0, "?"], new Error(`the worker exited (code ${code}) before building the model`))));
    }).finally(() => first.terminate());
    const ranges = replicaRanges(replicas, workers);
    const endpoints = ranges.map((range) => {
      const worker = new Worker(new URL("./replica-worker.mjs", import.meta.url), { workerData: { module: href, args, range } });
      let failure = () => {};
      worker.on("error", (e) => failure(e));
      worker.on("exit", (code) => code !== 0 && failure(new Error(`the worker exited with code ${code}`)));
      return {
        post: (m) => worker.postMessage(m),
        onMessage: (fn) => worker.on("message", fn),
        onFailure: (fn) => (failure = fn),
        terminate: () => {
          failure = () => {};
          worker.terminate();
        },
      };
    });
    const c = new ReplicaWorkers(endpoints, ranges);
    await c.hello();
    return c;
  }
}
