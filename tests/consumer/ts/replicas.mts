// ipu-playground/replicas.mjs as a TypeScript user writes it (checked by tsc, never run).
import { ReplicaWorkers, replicaRanges, type ReplicaWorkerStats } from "ipu-playground/replicas.mjs";

export async function trainOnTwoWorkers(): Promise<number> {
  const workers = await ReplicaWorkers.start("./replica-model.mjs", { workers: 2, args: { replicas: 4 } });
  const out = await workers.call({ shape: [4, 3], data: new Float32Array(12) }, { shape: [4], data: new Int32Array(4) });
  const loss = Array.isArray(out) ? out[1] : out;
  const stats: ReplicaWorkerStats[] = workers.workers;
  const weights = await workers.replicaParameters(["fc1.weight"]);
  const prints: Record<number, string> = await workers.fingerprints();
  const ranges: [number, number][] = replicaRanges(workers.replicas, stats.length);
  workers.close();
  return loss.data[0] + stats[0].busyMs + weights[0]["fc1.weight"].shape[0] + ranges.length + prints[0].length;
}
