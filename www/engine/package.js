// The package as the editor's code imports it ("ipu-playground" is pointed here, see
// usercode.js): the npm package's API unchanged, except that datasets.Planetoid fetched from
// a URL is kept for the worker's next analyses (each edit runs the code again; the served
// files do not change while the page is open).
import * as base from "../pkg/ipu_playground.js";

export * from "../pkg/ipu_playground.js";

// The last few datasets fetched from a URL, by name, URL and options.
const planetoids = new Map();
const KEEP_PLANETOIDS = 3;

function Planetoid(name, source, options) {
  if (typeof source !== "string") return base.datasets.Planetoid(name, source, options);
  let key;
  try {
    key = JSON.stringify([name, source, options ?? null]);
  } catch {
    return base.datasets.Planetoid(name, source, options);
  }
  if (!planetoids.has(key)) {
    const p = Promise.resolve(base.datasets.Planetoid(name, source, options));
    p.catch(() => planetoids.delete(key));
    planetoids.set(key, p);
    while (planetoids.size > KEEP_PLANETOIDS) planetoids.delete(planetoids.keys().next().value);
  }
  return planetoids.get(key);
}

export const datasets = base.datasets ? Object.freeze({ ...base.datasets, Planetoid }) : undefined;
