// The Planetoid datasets the page trains on: the raw files it fetches from the served
// data/ folder (scripts/stage-data.sh puts them there; the package names them,
// `_planetoidFiles`), and each graph's sizes (counted from those files by
// tests/planetoid.rs), which the graph view traces RevGNN with.
import { _planetoidFiles } from "../pkg/ipu_playground.js";
import { ErrorKind, makeError } from "./protocol.js";

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

/**
 * Fetches the eight raw files of `name` from `base` (the served data/ folder), keyed by
 * file name (`ind.cora.x`, …) as the package's Planetoid and RevGnnTrainer take them.
 */
export async function fetchPlanetoid(name, base) {
  checkName(name);
  const files = {};
  const missing = [];
  await Promise.all(
    _planetoidFiles(name).map(async (file) => {
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
      files[file] = new Uint8Array(await res.arrayBuffer());
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
