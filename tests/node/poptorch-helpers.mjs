// Shared by the poptorch Node tests: the package and the user's models imported by name
// from tests/consumer, seeded data as host tensors, and comparisons.
import assert from "node:assert/strict";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { REPO, rng } from "./helpers.mjs";

const CONSUMER = path.join(REPO, "tests", "consumer");
export const api = createRequire(path.join(CONSUMER, "package.json"))("ipu-playground");
export const models = await import(pathToFileURL(path.join(CONSUMER, "poptorch-models.mjs")).href);
export const { nn, poptorch } = api;

/** \`n\` seeded uniform numbers in [lo, hi) (helpers.mjs's rng). */
export function uniform(n, seed, lo = -1, hi = 1) {
  const r = rng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = lo + (hi - lo) * r();
  return out;
}

export const f32 = (shape, data) => ({ shape, data: Float32Array.from(data) });
export const i32 = (shape, data) => ({ shape, data: Int32Array.from(data) });

/** Rows `from..to` of a host tensor (dim 0). */
export function rows(t, from, to) {
  const inner = t.shape.slice(1).reduce((a, b) => a * b, 1);
  return { ...t, shape: [to - from, ...t.shape.slice(1)], data: t.data.slice(from * inner, to * inner) };
}

/** `n` samples for the Classifier: x uniform in [-1, 1), label 1 where x₀ + x₁ > 0. */
export function classifierData(n, seed = 7) {
  const x = uniform(n * 3, seed);
  return [f32([n, 3], x), i32([n], Array.from({ length: n }, (_, i) => (x[3 * i] + x[3 * i + 1] > 0 ? 1 : 0)))];
}

/** A model's state as `{ name: number[] }`. */
export const values = (module) => Object.fromEntries(Object.entries(module.stateDict()).map(([k, v]) => [k, Array.from(v.data)]));

/** Every value of `a` within `atol + rtol·|b|` of `b`'s. */
export function assertClose(a, b, atol, rtol, what) {
  assert.deepEqual(Object.keys(a), Object.keys(b), what);
  for (const k of Object.keys(a)) {
    const [x, y] = [Array.from(a[k].data ?? a[k]), Array.from(b[k].data ?? b[k])];
    assert.equal(x.length, y.length, `${what}: ${k}`);
    x.forEach((p, i) => assert.ok(Math.abs(p - y[i]) <= atol + rtol * Math.abs(y[i]), `${what}: ${k}[${i}]: ${p} vs ${y[i]}`));
  }
}

/** A copy of `module` (same class, arguments and weights). */
export function twin(Model, module, ...args) {
  const m = new Model(...args);
  m.loadStateDict(module.stateDict());
  return m;
}

/** A small reference training step (a seeded Classifier, two calls of SGD with momentum):
 * its outputs and weights as plain numbers, to compare with a fresh process's. */
export function referenceStep() {
  const net = seededClassifier();
  const m = poptorch.trainingModel(net, new poptorch.Options(), new poptorch.optim.SGD(net.parameters(), { lr: 0.1, momentum: 0.9 }));
  const outs = [m.call(...classifierData(4, 3)), m.call(...classifierData(4, 5))].map((r) => r.map((t) => Array.from(t.data)));
  m.destroy();
  return { outs, weights: values(net) };
}
const seededClassifier = () => models.seeded(models.Classifier);
