// Shared by the Node tests and the page tests: start scripts/serve.mjs as a child process,
// exactly as `make playground` runs it, on a free port.
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
export const SERVE = path.join(REPO, "scripts", "serve.mjs");

/** mulberry32: a small seeded generator of uniform numbers in [0, 1), so that a seed replays
 * the same run (the fuzz tests and the seeded test data all draw from it). */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Starts the server. `args` are serve.mjs options (none = the playground's own layout).
 * Resolves once it prints its URL; rejects if it exits first or takes over 15 s.
 */
export function startServer({ args = [], port = "0", cwd = REPO, env = {} } = {}) {
  const child = spawn(process.execPath, [SERVE, ...args], {
    cwd,
    env: { ...process.env, ...env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  child.stdout.setEncoding("utf8");
  child.stderr.setEncoding("utf8");
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const server = {
    child,
    exited,
    output: () => ({ stdout, stderr }),
    async stop(signal = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`server did not start in 15 s\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, 15000);
    const onData = () => {
      const m = stdout.match(/at (http:\/\/127\.0\.0\.1:(\d+))\//);
      if (m && stdout.includes("press Ctrl-C to stop")) {
        clearTimeout(timer);
        child.stdout.off("data", onData);
        server.url = m[1];
        server.port = Number(m[2]);
        resolve(server);
      }
    };
    child.stdout.on("data", onData);
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(Object.assign(new Error(`server exited (code ${code}, signal ${signal}) before serving\nstdout: ${stdout}\nstderr: ${stderr}`), { code, stdout, stderr }));
    });
  });
}

/** Runs serve.mjs expecting it to exit by itself; resolves {code, stdout, stderr}. */
export function runServerToExit({ args = [], port, env = {}, timeoutMs = 15000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SERVE, ...args], {
      cwd: REPO,
      env: { ...process.env, ...env, ...(port === undefined ? {} : { PORT: String(port) }) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "", stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`server did not exit in ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Debian's Chromium and the flags this sandbox needs (no downloads, no background traffic). */
export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-quic",
  "--no-first-run",
  "--disable-gpu",
  "--disable-dev-shm-usage",
];

/** Launches headless Chromium through playwright-core (which never downloads a browser). */
export async function launchChromium() {
  const { chromium } = await import("playwright-core");
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
}
