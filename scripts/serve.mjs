#!/usr/bin/env node
// A small static file server for the playground, in plain Node (no npm packages).
//
//   node scripts/serve.mjs [--root DIR] [--mount /prefix/=DIR]... [--quiet]
//
// With no options it serves the playground exactly as `make playground` does:
// www/ at /, and the staged data/ folder at /data/. The wasm package is built
// into www/pkg/, so it needs no mount of its own.
//
// It binds 127.0.0.1 only, and answers only requests whose Host header names this server
// as 127.0.0.1, localhost or [::1] with its port (421 otherwise: a page on another site
// cannot reach it through DNS rebinding). PORT (default 8080) picks the port; PORT=0 takes
// a free one. Only files inside the given folders are served: `..`, `.` segments,
// percent-encoded dots or slashes, backslashes, NUL bytes, dotfiles and symlinks that lead
// outside get 403/404, and directories are never listed. Files are streamed with
// stream.pipeline, so an aborted download closes its file at once. Every response carries
// the Content-Security-Policy of cspFor(path), and so does every reply Node itself would
// have written (400 for a request it cannot parse, 431 for oversized headers: clientError).
// A connection that moves no byte for IDLE_MS (SERVE_IDLE_MS, default 30 s; a client that
// stops reading a download, or sends half a request) is closed: no client holds a file
// descriptor open by doing nothing.
//
// Importing this file starts nothing: it exports CSP, CSP_ENGINE, cspFor, hostAllowed,
// clientErrorReply and IDLE_MS_DEFAULT for the tests and the page.

import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { pipeline } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";

const HOST = "127.0.0.1";
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** The page's Content-Security-Policy: its own scripts, wasm compilation, no eval, nothing
 * from elsewhere, never framed. */
export const CSP = [
  "default-src 'self'",
  "script-src 'self' 'wasm-unsafe-eval'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "worker-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** The policy of the engine's worker scripts (everything under /engine/): the same, and
 * `blob:` scripts too, since the worker imports the user's model code as a blob: module. */
export const CSP_ENGINE = CSP.replace("script-src 'self' 'wasm-unsafe-eval'", "script-src 'self' 'wasm-unsafe-eval' blob:");

/** The Content-Security-Policy for a response to the request path `urlPath`. */
export function cspFor(urlPath) {
  const p = String(urlPath ?? "").split(/[?#]/)[0];
  return p.startsWith("/engine/") ? CSP_ENGINE : CSP;
}

/** True when a Host header names this server: 127.0.0.1, localhost or [::1] with `port`
 * (or with no port when the port is 80), in any letter case. */
export function hostAllowed(host, port) {
  if (typeof host !== "string") return false;
  const h = host.toLowerCase();
  const names = ["127.0.0.1", "localhost", "[::1]"];
  return names.some((n) => h === `${n}:${port}` || (Number(port) === 80 && h === n));
}

const MIME = {
  ".html": "text/html; charset=utf-8",
  ".htm": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".wasm": "application/wasm",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".txt": "text/plain; charset=utf-8",
  ".md": "text/plain; charset=utf-8",
  ".ts": "text/plain; charset=utf-8",
};
const OCTET = "application/octet-stream";

function usage(message) {
  if (message) console.error(`serve: ${message}`);
  console.error("usage: node scripts/serve.mjs [--root DIR] [--mount /prefix/=DIR]... [--quiet]   (PORT=8080 by default)");
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { root: path.join(REPO, "www"), mounts: null, quiet: false };
  const mounts = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--root") {
      if (!argv[i + 1]) usage("--root needs a folder");
      opts.root = path.resolve(argv[++i]);
    } else if (arg === "--mount") {
      const spec = argv[++i] ?? "";
      const eq = spec.indexOf("=");
      if (eq < 1) usage(`--mount wants /prefix/=DIR, got "${spec}"`);
      let prefix = spec.slice(0, eq);
      if (!prefix.startsWith("/")) prefix = "/" + prefix;
      if (!prefix.endsWith("/")) prefix += "/";
      if (prefix === "/" || prefix.split("/").some((s) => s === "." || s === ".."))
        usage(`bad mount prefix "${prefix}"`);
      mounts.push({ prefix, dir: path.resolve(spec.slice(eq + 1)) });
    } else if (arg === "--quiet") {
      opts.quiet = true;
    } else if (arg === "-h" || arg === "--help") {
      usage();
    } else {
      usage(`unknown argument "${arg}"`);
    }
  }
  // Default mounts: the staged Planetoid files.
  opts.mounts = mounts.length ? mounts : [{ prefix: "/data/", dir: path.join(REPO, "data") }];
  // Longest prefix first, so /data/x/ wins over /data/.
  opts.mounts.sort((a, b) => b.prefix.length - a.prefix.length);
  return opts;
}

function parsePort(text) {
  if (text === undefined || text === "") return 8080;
  if (!/^\d+$/.test(text) || Number(text) > 65535) {
    console.error(`serve: PORT must be a number from 0 to 65535, got "${text}"`);
    process.exit(2);
  }
  return Number(text);
}

function parseIdle(text) {
  if (text === undefined || text === "") return IDLE_MS_DEFAULT;
  if (!/^\d+$/.test(text) || Number(text) < 100 || Number(text) > 3_600_000) {
    console.error(`serve: SERVE_IDLE_MS must be a number of milliseconds from 100 to 3600000, got "${text}"`);
    process.exit(2);
  }
  return Number(text);
}

let opts;
let port;

/** A realpath that returns null for a missing path. */
function real(p) {
  try {
    return fs.realpathSync(p);
  } catch {
    return null;
  }
}

function isInside(child, parent) {
  const rel = path.relative(parent, child);
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
}

/**
 * Maps a raw request target to { file } or { status }.
 * Never decodes more than once, and checks every segment after decoding.
 */
function resolveTarget(rawUrl) {
  // Origin-form only ("/path?query"). Absolute-form, authority-form and "*" are refused.
  if (typeof rawUrl !== "string" || !rawUrl.startsWith("/")) return { status: 403 };
  let raw = rawUrl;
  const cut = raw.search(/[?#]/);
  if (cut >= 0) raw = raw.slice(0, cut);
  // Encoded slashes, backslashes and NULs could smuggle separators past the segment checks.
  if (/%2f|%5c|%00|\\|\0/i.test(raw)) return { status: 403 };
  let decoded;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    return { status: 403 };
  }
  if (decoded.includes("\0") || decoded.includes("\\")) return { status: 403 };

  let base = opts.root;
  let rest = decoded;
  for (const m of opts.mounts) {
    if (decoded.startsWith(m.prefix) || decoded + "/" === m.prefix) {
      base = m.dir;
      rest = decoded.slice(m.prefix.length - 1);
      break;
    }
  }
  const segments = rest.split("/").slice(1); // rest starts with "/"
  const trailingSlash = segments.length > 0 && segments[segments.length - 1] === "";
  if (trailingSlash) segments.pop();
  for (const s of segments) {
    if (s === "" || s === "." || s === "..") return { status: 403 }; // "//", "/./", "/../"
    if (s.startsWith(".")) return { status: 404 }; // dotfiles stay private
    if (s.includes(":")) return { status: 403 }; // drive letters, streams
  }
  const baseReal = real(base);
  if (!baseReal) return { status: 404 };
  const candidate = path.join(baseReal, ...segments);
  if (!isInside(candidate, baseReal)) return { status: 403 };
  const candidateReal = real(candidate);
  if (!candidateReal) return { status: 404 };
  if (!isInside(candidateReal, baseReal)) return { status: 403 }; // a symlink leading outside
  const stat = fs.statSync(candidateReal);
  if (stat.isDirectory()) {
    if (!trailingSlash) return { redirect: raw + "/" };
    const index = path.join(candidateReal, "index.html");
    const indexReal = real(index);
    if (!indexReal || !isInside(indexReal, baseReal) || !fs.statSync(indexReal).isFile()) return { status: 404 };
    return { file: indexReal, stat: fs.statSync(indexReal) };
  }
  if (trailingSlash) return { status: 404 };
  if (!stat.isFile()) return { status: 404 };
  return { file: candidateReal, stat };
}

const COMMON_HEADERS = {
  "Cache-Control": "no-cache",
  "X-Content-Type-Options": "nosniff",
  // Cross-origin isolation: lets the page use SharedArrayBuffer (the Training view's replica
  // workers share gradients through one; without it they train on one worker).
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Embedder-Policy": "require-corp",
  "Cross-Origin-Resource-Policy": "same-origin",
};

/** How long a connection may move no byte before it is closed (a slow reader's deadline). */
export const IDLE_MS_DEFAULT = 30_000;

/** The reply to a request Node could not parse (`clientError`): the status Node's own reply
 * would have (431 for oversized headers, 413 for oversized chunk extensions, 408 for a
 * request that took too long, else 400), with the same headers as every other reply. */
export function clientErrorReply(code) {
  const status =
    code === "HPE_HEADER_OVERFLOW" ? 431
      : code === "HPE_CHUNK_EXTENSIONS_OVERFLOW" ? 413
        : code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408
          : 400;
  const body = `${status} ${http.STATUS_CODES[status]}\n`;
  const headers = {
    ...COMMON_HEADERS,
    "Content-Security-Policy": CSP,
    "Content-Type": "text/plain; charset=utf-8",
    "Content-Length": Buffer.byteLength(body),
    Connection: "close",
  };
  const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("");
  return `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n${lines}\r\n${body}`;
}

function onClientError(err, socket) {
  // Nothing can be written to a socket that is gone, or after a reply has begun.
  if (err.code === "ECONNRESET" || !socket.writable || socket._httpMessage?.headersSent) {
    socket.destroy();
    return;
  }
  socket.end(clientErrorReply(err.code));
}

function sendStatus(res, status, extra = {}) {
  const body = `${status} ${http.STATUS_CODES[status] ?? ""}\n`;
  res.writeHead(status, {
    ...COMMON_HEADERS,
    "Content-Security-Policy": cspFor(res.req.url),
    "Content-Type": "text/plain; charset=utf-8",
    "Content-Length": Buffer.byteLength(body),
    ...extra,
  });
  res.end(res.req.method === "HEAD" ? undefined : body);
}

function handle(req, res) {
  const started = Date.now();
  // "close", not "finish": a client that hangs up as soon as it has the last byte (curl does)
  // can close the socket before "finish" fires, and that request would go unlogged.
  res.on("close", () => {
    if (!opts.quiet) console.log(`${req.method} ${req.url} ${res.statusCode} ${Date.now() - started}ms`);
  });
  if (!hostAllowed(req.headers.host, server.address().port)) {
    sendStatus(res, 421);
    return;
  }
  if (req.method !== "GET" && req.method !== "HEAD") {
    sendStatus(res, 405, { Allow: "GET, HEAD" });
    return;
  }
  let target;
  try {
    target = resolveTarget(req.url);
  } catch (err) {
    console.error(`serve: ${req.url}: ${err.message}`);
    sendStatus(res, 500);
    return;
  }
  if (target.redirect) {
    sendStatus(res, 301, { Location: target.redirect });
    return;
  }
  if (target.status) {
    sendStatus(res, target.status);
    return;
  }
  const { file, stat } = target;
  const etag = `W/"${stat.size.toString(16)}-${Math.floor(stat.mtimeMs).toString(16)}"`;
  const headers = {
    ...COMMON_HEADERS,
    "Content-Security-Policy": cspFor(req.url),
    "Content-Type": MIME[path.extname(file).toLowerCase()] ?? OCTET,
    ETag: etag,
    "Last-Modified": stat.mtime.toUTCString(),
  };
  if (req.headers["if-none-match"] === etag) {
    res.writeHead(304, headers);
    res.end();
    return;
  }
  headers["Content-Length"] = stat.size;
  res.writeHead(200, headers);
  if (req.method === "HEAD") {
    res.end();
    return;
  }
  // pipeline destroys the file stream (closing its descriptor) when the response ends
  // early: a client that aborts a download leaves nothing open.
  pipeline(fs.createReadStream(file), res, (err) => {
    if (err && err.code !== "ERR_STREAM_PREMATURE_CLOSE") console.error(`serve: sending ${file}: ${err.message}`);
  });
}

let server;

function main() {
  opts = parseArgs(process.argv.slice(2));
  port = parsePort(process.env.PORT);
  if (!fs.existsSync(opts.root) || !fs.statSync(opts.root).isDirectory()) {
    console.error(`serve: the root folder ${opts.root} does not exist`);
    process.exit(1);
  }
  const idle = parseIdle(process.env.SERVE_IDLE_MS);
  server = http.createServer(handle);
  server.on("clientError", onClientError);
  // With no callback, a socket idle this long is destroyed (its file stream closes with it).
  server.setTimeout(idle);
  server.on("error", (err) => {
    if (err.code === "EADDRINUSE") {
      console.error(`serve: port ${port} on ${HOST} is already in use; set PORT=… or stop the other server`);
    } else if (err.code === "EACCES") {
      console.error(`serve: not allowed to listen on port ${port} on ${HOST}; set PORT=… to a port above 1023`);
    } else {
      console.error(`serve: ${err.message}`);
    }
    process.exit(1);
  });

  server.listen(port, HOST, () => {
    const { port: actual } = server.address();
    const rel = (p) => path.relative(process.cwd(), p) || ".";
    const lines = [`serve: ${rel(opts.root)}/ at http://${HOST}:${actual}/`];
    for (const m of opts.mounts) {
      const note = fs.existsSync(m.dir) ? "" : " (missing for now)";
      lines.push(`serve: ${rel(m.dir)}/ at http://${HOST}:${actual}${m.prefix}${note}`);
    }
    lines.push("serve: press Ctrl-C to stop");
    console.log(lines.join("\n")); // one write, so a reader sees the whole banner at once
  });

  let stopping = false;
  function stop(signal) {
    if (stopping) return;
    stopping = true;
    console.log(`serve: ${signal}, stopping`);
    server.close(() => process.exit(0));
    server.closeAllConnections?.();
    // Should a socket linger, do not hang on it.
    setTimeout(() => process.exit(0), 2000).unref();
  }
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
}

// Run as a script (node scripts/serve.mjs), not when imported.
const invoked = process.argv[1] ? fs.realpathSync(path.resolve(process.argv[1])) : "";
if (invoked && import.meta.url === pathToFileURL(invoked).href) main();
