// Types of ipu-playground/replicas.mjs: replicas of a poptorch.trainingModel on worker_threads.
import type { CallInput, HostTensor, PoplarExecutor } from "./ipu_playground.js";

/** The replicas `[first, end)` each of `workers` workers runs (an error past replicationFactor workers). */
export function replicaRanges(replicas: number, workers: number): [number, number][];

/** A hash of a module's state (names and bytes): the workers check they start alike. */
export function stateFingerprint(module: { stateDict(): Record<string, HostTensor> }): string;

/** A hash of named tensors (names and bytes). */
export function tensorsFingerprint(tensors: Record<string, HostTensor>): string;

/** A hash of replica `r`'s device weights (every parameter of `model`): equal replicas, equal hashes. */
export function replicaFingerprint(model: PoplarExecutor, r: number): string;

/** The replica side, for a worker holding `model`: handles the coordinator's messages. */
export function replicaServer(model: PoplarExecutor, range: [number, number], reply: (message: unknown) => void, settings?: { memoryBytes?: () => number }): (message: any) => void;

/** One worker's record. */
export interface ReplicaWorkerStats {
  worker: number;
  replicas: [number, number];
  /** Milliseconds the worker spent on requests in all. */
  busyMs: number;
  /** Milliseconds the worker spent on the last call. */
  lastStepMs: number;
  steps: number;
  /** The worker's wasm memory in bytes at its last reply (null unless its server reports it). */
  memoryBytes: number | null;
}

export interface ReplicaEndpoint {
  post(message: unknown): void;
  onMessage(fn: (message: any) => void): void;
  onFailure(fn: (error: Error) => void): void;
  terminate(): void;
}

export class ReplicaCoordinator {
  constructor(endpoints: ReplicaEndpoint[], ranges: [number, number][]);
  readonly replicas: number;
  readonly workers: ReplicaWorkerStats[];
  /** `model.call(...inputs)` over the workers: each input combined, or an array of parts (a sparse graph part per replica, CallInput). */
  call(...inputs: CallInput[]): Promise<HostTensor | HostTensor[]>;
  replicaParameters(names: string[]): Promise<Record<number, Record<string, HostTensor>>>;
  /** Each replica's buffers (with broadcastBuffers(false) each replica's own), from the worker running it. */
  replicaBuffers(names: string[]): Promise<Record<number, Record<string, HostTensor>>>;
  hostParameters(names: string[], worker?: number): Promise<Record<string, HostTensor>>;
  /** Each replica's replicaFingerprint, from the worker running it. */
  fingerprints(): Promise<Record<number, string>>;
  close(): void;
}

/** An endpoint whose replica side (`makeServer(reply)`, e.g. replicaServer) runs in this thread. */
export function inProcessEndpoint(makeServer: (reply: (message: unknown) => void) => (message: any) => void): ReplicaEndpoint;

export class ReplicaWorkers extends ReplicaCoordinator {
  /** `moduleUrl` (a file URL or path)'s default export builds the same `poptorch.trainingModel` on each of `workers` workers. */
  static start(moduleUrl: string | { readonly href: string }, settings?: { workers?: number; args?: unknown }): Promise<ReplicaWorkers>;
}
