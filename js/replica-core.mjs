// PopTorch's replicas as parallel workers, the part shared by Node (replicas.mjs:
// ReplicaWorkers on worker_threads) and the page (www/engine/training.js: Web Workers, the
// engine worker itself running the first replicas): the replica side (replicaServer), the
// coordinator over any endpoints (ReplicaCoordinator), and the helpers. No import: it runs
// in Node, a page's workers and the engine worker alike (scripts/build-wasm.sh copies it
// next to the package, into pkg-node/ and www/pkg/).
//
// Each step, every worker runs its own replicas' micro-batches (`model.contribute()`), writes
// their contributions (gradients accumulated per replica, in the layout the core defines:
// replica-major, `contributionLength` float32 values each) into one SharedArrayBuffer, and
// once every worker has written, every worker applies the whole buffer (`model.apply`):
// the reduction (Mean or Sum, running mean, replica groups), loss scaling, clipping and the
// optimizer are the core's, the same bytes in the same order on every worker, so the
// replicas' weights stay bit-identical. This file only moves bytes and counts time.
//
// Messages (coordinator → replica, each with an `id`; the reply `{ id, value, busyMs }` or
// `{ id, error }`): hello, begin { inputs }, contribute { buffer? }, apply, end,
// assemble { parts }, parameters { names }, buffers { names }, host { names }, fingerprints.

/** How many workers `replicas` replicas can use at most (each worker runs one or more). */
export function replicaRanges(replicas, workers) {
  if (!Number.isInteger(workers) || workers < 1) {
    throw new RangeError(`ReplicaWorkers: workers must be a whole number of at least 1, got ${workers}`);
  }
  if (workers > replicas) {
    throw new RangeError(
      `ReplicaWorkers: ${workers} workers for ${replicas} replicas: each worker runs at least one replica, so use at most replicationFactor (${replicas}) workers`,
    );
  }
  return Array.from({ length: workers }, (_, w) => [Math.floor((w * replicas) / workers), Math.floor(((w + 1) * replicas) / workers)]);
}

/** FNV-1a over named tensors (`{ name: HostTensor }`: names and bytes, names sorted). */
export function tensorsFingerprint(tensors) {
  let h = 0x811c9dc5;
  const mix = (b) => {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  };
  for (const name of Object.keys(tensors).sort()) {
    for (let i = 0; i < name.length; i++) mix(name.charCodeAt(i) & 0xff);
    const d = tensors[name].data;
    const bytes = new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
    for (let i = 0; i < bytes.length; i++) mix(bytes[i]);
  }
  return h.toString(16).padStart(8, "0");
}

/** FNV-1a over a module's state (names and bytes): workers must start from the same weights. */
export function stateFingerprint(module) {
  return tensorsFingerprint(module.stateDict());
}

/** The fingerprint of replica `r`'s device weights (every parameter of `model`). */
export function replicaFingerprint(model, r) {
  const names = model.model.namedParameters().map(([n]) => n);
  return tensorsFingerprint(Object.fromEntries(names.map((n) => [n, model.getReplicaParameter(r, n)])));
}

/**
 * The replica side: answers a coordinator's requests for `model` (a training model built by
 * the user's module), which runs replicas `range`. `reply(message)` posts back. With
 * `memoryBytes()` (the worker's wasm memory size), each reply says it.
 */
export function replicaServer(model, range, reply, { memoryBytes } = {}) {
  model.setLocalReplicas(range[0], range[1]);
  let shared = null;
  /** `{ replica: { name: get(replica, name) } }` for this worker's replicas. */
  const perReplica = (names, get) => {
    const out = {};
    for (let r = range[0]; r < range[1]; r++) out[r] = Object.fromEntries(names.map((n) => [n, get(r, n)]));
    return out;
  };
  const ops = {
    hello: () => ({ replicas: range, fingerprint: stateFingerprint(model.model) }),
    begin: ({ inputs }) => ({ iterations: model.beginCall(inputs), per: model.contributionLength }),
    contribute: ({ buffer }) => {
      if (buffer) shared = new Float32Array(buffer);
      const mine = model.contribute();
      shared.set(mine, range[0] * model.contributionLength);
      return null;
    },
    apply: () => {
      model.apply(shared);
      return null;
    },
    end: () => model.endCall(),
    assemble: ({ parts }) => model.assemble(parts),
    parameters: ({ names }) => perReplica(names, (r, n) => model.getReplicaParameter(r, n)),
    buffers: ({ names }) => perReplica(names, (r, n) => model.getReplicaBuffer(r, n)),
    host: ({ names }) => Object.fromEntries(names.map((n) => [n, model.getParameter(n)])),
    fingerprints: () => {
      const out = {};
      for (let r = range[0]; r < range[1]; r++) out[r] = replicaFingerprint(model, r);
      return out;
    },
  };
  return (msg) => {
    const t0 = performance.now();
    try {
      const value = ops[msg.op](msg);
      reply({ id: msg.id, value, busyMs: performance.now() - t0, memoryBytes: memoryBytes?.() });
    } catch (e) {
      reply({ id: msg.id, error: { name: e?.name ?? "Error", message: e?.message ?? String(e), stack: e?.stack } });
    }
  };
}

/** A worker's failure, naming the worker and its replicas, with the worker's error as `cause`. */
export function workerError(w, range, err) {
  const cause = Object.assign(new Error(err.message), { name: err.name, stack: err.stack });
  return new Error(`replica worker ${w} (replicas ${range[0]}..${range[1]}): ${err.message}`, { cause });
}

/**
 * The coordinator over `endpoints` (one per worker: `{ post(message), onMessage(fn),
 * onFailure(fn), terminate() }`), in worker order.
 */
export class ReplicaCoordinator {
  constructor(endpoints, ranges) {
    this.endpoints = endpoints;
    this.ranges = ranges;
    this.replicas = ranges.at(-1)[1];
    this.next = 1;
    this.waiting = new Map();
    this.failed = null;
    this.shared = null;
    this.sent = endpoints.map(() => false);
    /** Per worker: `{ worker, replicas, busyMs, lastStepMs, steps, memoryBytes }` (memoryBytes: its wasm memory, when its server says). */
    this.workers = ranges.map((replicas, worker) => ({ worker, replicas, busyMs: 0, lastStepMs: 0, steps: 0, memoryBytes: null }));
    endpoints.forEach((ep, w) => {
      ep.onMessage((msg) => {
        // A worker that failed before serving (its model module threw) reports without an id.
        if (msg.id === undefined && msg.error) return this.fail(workerError(w, ranges[w], msg.error));
        const p = this.waiting.get(msg.id);
        if (!p) return;
        this.waiting.delete(msg.id);
        if (msg.error) p.reject(workerError(w, ranges[w], msg.error));
        else {
          this.workers[w].busyMs += msg.busyMs ?? 0;
          if (Number.isFinite(msg.memoryBytes)) this.workers[w].memoryBytes = msg.memoryBytes;
          if (p.step) p.step[w] += msg.busyMs ?? 0;
          p.resolve(msg.value);
        }
      });
      ep.onFailure((err) => this.fail(workerError(w, ranges[w], err)));
    });
  }

  /** Every pending request fails with `err`, and the workers stop. */
  fail(err) {
    if (this.failed) return;
    this.failed = err;
    for (const p of this.waiting.values()) p.reject(err);
    this.waiting.clear();
    this.endpoints.forEach((ep) => ep.terminate());
  }

  /** Sends `msg` to worker `w`; its busy time adds to `step[w]` when given. */
  request(w, msg, step) {
    if (this.failed) return Promise.reject(this.failed);
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject, step });
      this.endpoints[w].post({ ...msg, id });
    });
  }

  /** Sends `msg` to every worker and waits for all; the first failure stops them all. */
  async all(msg, step, per = () => ({})) {
    try {
      return await Promise.all(this.endpoints.map((_, w) => this.request(w, { ...msg, ...per(w) }, step)));
    } catch (e) {
      this.fail(e);
      throw e;
    }
  }

  /** Checks that every worker built the model with the same weights. */
  async hello() {
    const hi = await this.all({ op: "hello" });
    const bad = hi.findIndex((h) => h.fingerprint !== hi[0].fingerprint);
    if (bad > 0) {
      const e = new Error(
        `replica worker ${bad} built the model with other weights than worker 0 (state ${hi[bad].fingerprint} vs ${hi[0].fingerprint}): the model module must build it the same way on every worker (seed its weights)`,
      );
      this.fail(e);
      throw e;
    }
  }

  /** One host call (`model.call(...inputs)`, host tensors) over every worker: the outputs per
   * output mode. */
  async call(...inputs) {
    const step = this.endpoints.map(() => 0);
    const begun = await this.all({ op: "begin", inputs }, step);
    const { iterations, per } = begun[0];
    const odd = begun.findIndex((b) => b.iterations !== iterations || b.per !== per);
    if (odd > 0) {
      const e = new Error(
        `replica worker ${odd} compiled another step than worker 0 (${begun[odd].iterations} device iterations of ${begun[odd].per} values per replica, against ${iterations} of ${per}): the model module must build the same model on every worker`,
      );
      this.fail(e);
      throw e;
    }
    const bytes = per * this.replicas * 4;
    if (!this.shared || this.shared.byteLength !== bytes) {
      this.shared = new SharedArrayBuffer(bytes);
      this.sent = this.endpoints.map(() => false);
    }
    for (let d = 0; d < iterations; d++) {
      await this.all({ op: "contribute" }, step, (w) => {
        if (this.sent[w]) return {};
        this.sent[w] = true;
        return { buffer: this.shared };
      });
      await this.all({ op: "apply" }, step);
    }
    const parts = await this.all({ op: "end" }, step);
    const out = await this.request(0, { op: "assemble", parts }, step).catch((e) => {
      this.fail(e);
      throw e;
    });
    step.forEach((ms, w) => {
      this.workers[w].lastStepMs = ms;
      this.workers[w].steps += 1;
    });
    return out;
  }

  /** Each replica's device values of parameters `names`: `{ replica: { name: HostTensor } }`. */
  async replicaParameters(names) {
    const per = await this.all({ op: "parameters", names });
    return Object.assign({}, ...per);
  }

  /** Each replica's device values of buffers `names` (with `broadcastBuffers(false)` each
   * replica's own, on the worker running it): `{ replica: { name: HostTensor } }`. */
  async replicaBuffers(names) {
    const per = await this.all({ op: "buffers", names });
    return Object.assign({}, ...per);
  }

  /** The host values of parameters `names` (`model.getParameter`) as worker `w` holds them
   * after the last call (every worker holds the same). */
  hostParameters(names, w = 0) {
    return this.request(w, { op: "host", names });
  }

  /** Each replica's weight fingerprint (replicaFingerprint), `{ replica: hex }`, from whichever worker runs it. */
  async fingerprints() {
    const per = await this.all({ op: "fingerprints" });
    return Object.assign({}, ...per);
  }

  close() {
    this.fail(new Error("ReplicaWorkers: closed"));
  }
}


/**
 * An endpoint whose replica side runs in this thread (`serve` a replicaServer handler): the
 * page's engine worker runs the first replicas itself, beside its Web Workers. A request is
 * served in a later task, so the coordinator posts to every endpoint before one computes.
 */
export function inProcessEndpoint(makeServer) {
  let listener = () => {};
  let closed = false;
  const serve = makeServer((m) => !closed && listener(m));
  return {
    post: (m) => setTimeout(() => !closed && serve(m), 0),
    onMessage: (fn) => (listener = fn),
    onFailure: () => {},
    terminate: () => (closed = true),
  };
}
