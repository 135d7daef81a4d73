// The Planetoid datasets the page trains on: the raw files it fetches from the served
// data/ folder (scripts/stage-data.sh puts them there), and each graph's sizes (counted
// from those files by tests/planetoid.rs), which the graph view traces RevGNN with.
import { ErrorKind, makeError } from "./protocol.js";

export const SUFFIXES = ["x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"];

/** nodes, directed edges (before self-loops), features, classes, stored feature entries. */
export const DATASETS = Object.freeze({
  Cora: { nodes: 2708, edges: 10556, features: 1433, classes: 7, featureNnz: 49216 },
  CiteSeer: { nodes: 3327, edges: 9104, features: 3703, classes: 6, featureNnz: 105165 },
  PubMed: { nodes: 19717, edges: 88648, features: 500, classes: 3, featureNnz: 988031 },
});

export function checkName(name) {
  if (!Object.hasOwn(DATASETS, name)) {
    throw makeError(ErrorKind.DATASET, `Unknown dataset "${name}": choose ${Object.keys(DATASETS).join(", ")}`);
  }
}

/** Fetches the eight raw files of `name` from `base` (the served data/ folder). */
export async function fetchPlanetoid(name, base) {
  checkName(name);
  const low = name.toLowerCase();
  const files = {};
  const missing = [];
  await Promise.all(
    SUFFIXES.map(async (s) => {
      const file = `ind.${low}.${s}`;
      let res;
      try {
        res = await fetch(new URL(file, base));
      } catch (err) {
        throw makeError(ErrorKind.DATASET, `Could not fetch data/${file}: ${err.message}`);
      }
      if (!res.ok) {
        missing.push(`${file} (HTTP ${res.status})`);
        return;
      }
      files[s] = new Uint8Array(await res.arrayBuffer());
    }),
  );
  if (missing.length) {
    throw makeError(
      ErrorKind.DATASET,
      `The ${name} dataset is not on the server: data/${missing.sort().join(", ")} missing. ` +
        "Stage it with scripts/stage-data.sh (or make playground), which copies the Planetoid raw files into data/.",
    );
  }
  return files;
}
