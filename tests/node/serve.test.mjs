// Tests for scripts/serve.mjs, the playground's static server.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { startServer, runServerToExit, REPO, SERVE } from "./helpers.mjs";

const { CSP, CSP_ENGINE, cspFor, hostAllowed } = await import(SERVE);

/** Sends raw bytes as a request line so that no client library normalises the path.
 * `host`: the Host header (default 127.0.0.1 with the port; null sends none). */
function rawRequest(port, target, { method = "GET", headers = {}, host = `127.0.0.1:${port}`, version = "1.1" } = {}) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    const chunks = [];
    socket.setTimeout(5000, () => socket.destroy(new Error(`timeout on ${target}`)));
    socket.on("connect", () => {
      const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("");
      socket.write(Buffer.concat([
        Buffer.from(`${method} `, "latin1"),
        Buffer.isBuffer(target) ? target : Buffer.from(target, "latin1"),
        Buffer.from(` HTTP/${version}\r\n${host === null ? "" : `Host: ${host}\r\n`}${extra}Connection: close\r\n\r\n`, "latin1"),
      ]));
    });
    socket.on("data", (c) => chunks.push(c));
    socket.on("error", reject);
    socket.on("end", () => {
      const text = Buffer.concat(chunks).toString("latin1");
      const [head, ...rest] = text.split("\r\n\r\n");
      const [statusLine, ...headerLines] = head.split("\r\n");
      const status = Number(statusLine.split(" ")[1]);
      const hdrs = {};
      for (const line of headerLines) {
        const i = line.indexOf(":");
        hdrs[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      resolve({ status, headers: hdrs, body: rest.join("\r\n\r\n") });
    });
  });
}

const SECRET = "top secret: outside the served folders";

describe("serve.mjs on a scratch layout", () => {
  let tmp, server;
  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "serve-test-"));
    const site = path.join(tmp, "site");
    const data = path.join(tmp, "data");
    fs.mkdirSync(path.join(site, "sub"), { recursive: true });
    fs.mkdirSync(path.join(site, "pkg"), { recursive: true });
    fs.mkdirSync(data);
    fs.writeFileSync(path.join(tmp, "secret.txt"), SECRET);
    fs.writeFileSync(path.join(site, "index.html"), "<!doctype html><title>t</title>");
    fs.writeFileSync(path.join(site, "app.js"), "export const a = 1;");
    fs.writeFileSync(path.join(site, "mod.mjs"), "export const b = 2;");
    fs.writeFileSync(path.join(site, "style.css"), "body{}");
    fs.writeFileSync(path.join(site, "x.json"), "{}");
    fs.writeFileSync(path.join(site, "pkg", "engine_bg.wasm"), Buffer.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]));
    fs.writeFileSync(path.join(site, "sub", "index.html"), "<p>sub</p>");
    fs.mkdirSync(path.join(site, "engine"));
    fs.writeFileSync(path.join(site, "engine", "worker.js"), "self.onmessage = () => {};");
    // A download big enough to be cut off mid-way: far more than the socket buffers hold.
    const big = Buffer.alloc(32 << 20);
    big.set([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]);
    fs.writeFileSync(path.join(site, "pkg", "big_bg.wasm"), big);
    fs.writeFileSync(path.join(site, ".hidden"), SECRET);
    fs.symlinkSync(path.join(tmp, "secret.txt"), path.join(site, "link-out.txt"));
    fs.writeFileSync(path.join(data, "ind.cora.x"), Buffer.from([0x80, 0x02, 0x63]));
    fs.writeFileSync(path.join(data, "ind.cora.test.index"), "1\n2\n");
    server = await startServer({ args: ["--root", site, "--mount", `/data/=${data}`, "--quiet"] });
  });
  after(async () => {
    if (server) await server.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test("prints its URL on 127.0.0.1", () => {
    assert.match(server.output().stdout, /http:\/\/127\.0\.0\.1:\d+\//);
  });

  test("sends the right MIME types", async () => {
    const cases = {
      "/": "text/html; charset=utf-8",
      "/index.html": "text/html; charset=utf-8",
      "/app.js": "text/javascript; charset=utf-8",
      "/mod.mjs": "text/javascript; charset=utf-8",
      "/style.css": "text/css; charset=utf-8",
      "/x.json": "application/json; charset=utf-8",
      "/pkg/engine_bg.wasm": "application/wasm",
      "/data/ind.cora.x": "application/octet-stream",
      "/data/ind.cora.test.index": "application/octet-stream",
    };
    for (const [url, type] of Object.entries(cases)) {
      const res = await fetch(server.url + url);
      assert.equal(res.status, 200, url);
      assert.equal(res.headers.get("content-type"), type, url);
      await res.arrayBuffer();
    }
  });

  test("serves the bytes of the file, with a correct length", async () => {
    const res = await fetch(server.url + "/pkg/engine_bg.wasm");
    const bytes = new Uint8Array(await res.arrayBuffer());
    assert.deepEqual([...bytes], [0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]);
    assert.equal(res.headers.get("content-length"), "8");
    // A real wasm module header compiles as an (empty) module.
    await WebAssembly.compile(bytes);
  });

  test("sends no-cache and the cross-origin isolation headers", async () => {
    const res = await fetch(server.url + "/");
    assert.equal(res.headers.get("cache-control"), "no-cache");
    assert.equal(res.headers.get("cross-origin-opener-policy"), "same-origin");
    assert.equal(res.headers.get("cross-origin-embedder-policy"), "require-corp");
    assert.equal(res.headers.get("x-content-type-options"), "nosniff");
    await res.text();
  });

  test("answers a revalidation with 304", async () => {
    const first = await fetch(server.url + "/app.js");
    await first.text();
    const etag = first.headers.get("etag");
    assert.ok(etag);
    const again = await rawRequest(server.port, "/app.js", { headers: { "If-None-Match": etag } });
    assert.equal(again.status, 304);
  });

  test("redirects a folder without its slash and serves its index.html", async () => {
    const res = await rawRequest(server.port, "/sub");
    assert.equal(res.status, 301);
    assert.equal(res.headers.location, "/sub/");
    const page = await fetch(server.url + "/sub/");
    assert.equal(await page.text(), "<p>sub</p>");
  });

  test("404 for missing files, folders without an index, and dotfiles", async () => {
    for (const url of ["/nope.js", "/data/", "/data/ind.nope.x", "/.hidden", "/pkg/"]) {
      const res = await rawRequest(server.port, url);
      assert.equal(res.status, 404, url);
      assert.ok(!res.body.includes(SECRET), url);
    }
  });

  test("HEAD answers without a body, other methods get 405", async () => {
    const head = await rawRequest(server.port, "/app.js", { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.body, "");
    const post = await rawRequest(server.port, "/app.js", { method: "POST" });
    assert.equal(post.status, 405);
  });

  test("never serves anything outside its folders", async () => {
    const attacks = [
      "/../secret.txt",
      "/../../../../../../etc/passwd",
      "/sub/../../secret.txt",
      "/data/../secret.txt",
      "/data/../../secret.txt",
      "/%2e%2e/secret.txt",
      "/%2E%2e/secret.txt",
      "/%2e%2E/%2e%2e/%2e%2e/etc/passwd",
      "/.%2e/secret.txt",
      "/%2e./secret.txt",
      "/data/%2e%2e/secret.txt",
      "/..%2fsecret.txt",
      "/%2e%2e%2fsecret.txt",
      "/%2e%2e%2Fsecret.txt",
      "/data%2f..%2f..%2fsecret.txt",
      "/..%5csecret.txt",
      "/..\\secret.txt",
      "/sub\\..\\..\\secret.txt",
      "/%00",
      "/index.html%00.js",
      "//etc/passwd",
      "/%2fetc%2fpasswd",
      "/etc/passwd",
      `/${path.join(os.tmpdir(), "secret.txt")}`,
      "/C:/Windows/win.ini",
      "/link-out.txt",
      "/%252e%252e/secret.txt",
      "/%",
      "/%zz",
    ];
    for (const url of attacks) {
      const res = await rawRequest(server.port, url);
      assert.ok(res.status === 403 || res.status === 404, `${url} -> ${res.status}`);
      assert.ok(!res.body.includes(SECRET), `${url} leaked the secret`);
      assert.ok(!res.body.includes("root:"), `${url} leaked /etc/passwd`);
    }
  });

  test("refuses NUL bytes and absolute-form request targets", async () => {
    const nul = await rawRequest(server.port, Buffer.from("/index.html\0", "latin1"));
    assert.ok([400, 403, 404].includes(nul.status), `NUL -> ${nul.status}`);
    for (const target of [`http://127.0.0.1:${server.port}/../secret.txt`, "*", "secret.txt"]) {
      const res = await rawRequest(server.port, target);
      assert.ok([400, 403, 404].includes(res.status), `${target} -> ${res.status}`);
      assert.ok(!res.body.includes(SECRET));
    }
  });

  test("sends the page's Content-Security-Policy on every response, and the engine's under /engine/", async () => {
    // The policy agreed with the page (issue #12), word for word.
    assert.equal(
      CSP,
      "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; " +
        "img-src 'self' data: blob:; font-src 'self'; connect-src 'self'; worker-src 'self'; " +
        "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    assert.equal(CSP_ENGINE, CSP.replace("'wasm-unsafe-eval';", "'wasm-unsafe-eval' blob:;"));
    assert.equal(cspFor("/engine/worker.js?v=1"), CSP_ENGINE);
    assert.equal(cspFor("/engine/"), CSP_ENGINE);
    for (const p of ["/", "/index.html", "/engine", "/engineX/a.js", "/pkg/engine_bg.wasm", "/data/engine/x"]) {
      assert.equal(cspFor(p), CSP, p);
    }
    const etag = (await rawRequest(server.port, "/app.js")).headers.etag;
    const cases = [
      ["/", {}, 200, CSP],
      ["/app.js", {}, 200, CSP],
      ["/app.js", { headers: { "If-None-Match": etag } }, 304, CSP],
      ["/pkg/engine_bg.wasm", {}, 200, CSP],
      ["/engine/worker.js", {}, 200, CSP_ENGINE],
      ["/engine/nope.js", {}, 404, CSP_ENGINE],
      ["/nope.js", {}, 404, CSP],
      ["/../secret.txt", {}, 403, CSP],
      ["/sub", {}, 301, CSP],
      ["/app.js", { method: "POST" }, 405, CSP],
      ["/app.js", { host: "evil.example" }, 421, CSP],
    ];
    for (const [url, opt, status, csp] of cases) {
      const res = await rawRequest(server.port, url, opt);
      assert.equal(res.status, status, url);
      assert.equal(res.headers["content-security-policy"], csp, `${url} ${status}`);
    }
  });

  test("answers only Host headers naming 127.0.0.1, localhost or [::1] with its port", async () => {
    const p = server.port;
    for (const host of [`127.0.0.1:${p}`, `localhost:${p}`, `LocalHost:${p}`, `[::1]:${p}`]) {
      const res = await rawRequest(p, "/app.js", { host });
      assert.equal(res.status, 200, host);
      assert.equal(res.body, "export const a = 1;", host);
    }
    const refused = [
      "evil.example", `evil.example:${p}`, "127.0.0.1", "localhost", `127.0.0.1:${p + 1}`, `localhost:${p}0`,
      `127.0.0.1.evil.example:${p}`, `localhost.:${p}`, `[::2]:${p}`, `0.0.0.0:${p}`, `127.1:${p}`, "",
    ];
    for (const host of refused) {
      const res = await rawRequest(p, "/app.js", { host });
      assert.equal(res.status, 421, JSON.stringify(host));
      assert.ok(!res.body.includes("export const"), JSON.stringify(host));
    }
    // HTTP/1.0 without a Host header, and a path that would leak were the Host allowed.
    assert.equal((await rawRequest(p, "/app.js", { host: null, version: "1.0" })).status, 421);
    const res = await rawRequest(p, "/../secret.txt", { host: "evil.example" });
    assert.equal(res.status, 421);
    assert.ok(!res.body.includes(SECRET));
    assert.equal(hostAllowed("localhost", 80), true);
    assert.equal(hostAllowed(undefined, 80), false);
  });

  test("aborted downloads free their file descriptors", { skip: !fs.existsSync("/proc/self/fd") && "needs /proc" }, async () => {
    const fdDir = `/proc/${server.child.pid}/fd`;
    const open = () => fs.readdirSync(fdDir).length;
    // One whole download first, so that whatever the server opens once is open already.
    const whole = await fetch(`${server.url}/pkg/big_bg.wasm`, { headers: { Connection: "close" } });
    assert.equal((await whole.arrayBuffer()).byteLength, 32 << 20);
    const settle = async (want) => {
      let n = open();
      for (let waited = 0; n > want && waited < 10000; waited += 50) {
        await new Promise((r) => setTimeout(r, 50));
        n = open();
      }
      return n;
    };
    const before = await settle(0);
    // Downloads cut off after their first bytes, 20 at a time, 300 in all.
    const abort = () =>
      new Promise((resolve, reject) => {
        const socket = net.connect(server.port, "127.0.0.1");
        socket.setTimeout(10000, () => socket.destroy(new Error("timeout")));
        socket.on("connect", () =>
          socket.write(`GET /pkg/big_bg.wasm HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`),
        );
        socket.once("data", () => {
          socket.destroy();
          resolve();
        });
        socket.on("error", reject);
      });
    for (let round = 0; round < 15; round++) await Promise.all(Array.from({ length: 20 }, abort));
    const after = await settle(before);
    assert.equal(after, before, `${after - before} descriptors left open after 300 aborted downloads`);
    // And the server still serves the whole file.
    const again = await fetch(`${server.url}/pkg/big_bg.wasm`);
    assert.equal((await again.arrayBuffer()).byteLength, 32 << 20);
  });

  test("listens on 127.0.0.1 only", async () => {
    const others = Object.values(os.networkInterfaces())
      .flat()
      .filter((a) => a && !a.internal && a.family === "IPv4")
      .map((a) => a.address);
    for (const address of [...others, "::1"]) {
      const refused = await new Promise((resolve) => {
        const s = net.connect(server.port, address);
        s.on("connect", () => { s.destroy(); resolve(false); });
        s.on("error", () => resolve(true));
      });
      assert.ok(refused, `port ${server.port} answered on ${address}`);
    }
  });
});

/** Writes `bytes` on a raw socket to 127.0.0.1:`port` and resolves every byte the server
 * sends until it closes the connection ({ text, ms }); gives up after `limitMs`. */
function rawExchange(port, bytes, { limitMs = 5000, pause = false } = {}) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(port, "127.0.0.1");
    const chunks = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the connection open for ${limitMs} ms`));
    }, limitMs);
    socket.on("connect", () => {
      socket.write(bytes);
      if (pause) socket.pause();
    });
    socket.on("data", (c) => chunks.push(c));
    socket.on("error", () => {}); // a reset after a cut-off reply still resolves on close
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({ text: Buffer.concat(chunks).toString("latin1"), bytes: chunks.reduce((n, c) => n + c.length, 0), ms: Date.now() - started });
    });
  });
}

/** The status and headers of each HTTP response in `text` (which may hold several). */
function responses(text) {
  const out = [];
  for (const m of text.matchAll(/HTTP\/1\.[01] (\d{3})[^\r]*\r\n((?:[^\r]+\r\n)*)\r\n/g)) {
    const headers = {};
    for (const line of m[2].split("\r\n").filter(Boolean)) {
      const i = line.indexOf(":");
      headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    out.push({ status: Number(m[1]), headers });
  }
  return out;
}

describe("serve.mjs: protocol errors and slow clients", () => {
  const IDLE_MS = 800;
  let tmp, server;
  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "serve-proto-"));
    fs.writeFileSync(path.join(tmp, "index.html"), "<!doctype html><title>t</title>");
    // Far more than the socket buffers of both ends hold, so a reader that stops stalls it.
    fs.writeFileSync(path.join(tmp, "big.bin"), Buffer.alloc(64 << 20, 7));
    server = await startServer({ args: ["--root", tmp, "--quiet"], env: { SERVE_IDLE_MS: String(IDLE_MS) } });
  });
  after(async () => {
    if (server) await server.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test("Node's own error replies (400, 431) carry the CSP, nosniff and the other headers", async () => {
    const host = `Host: 127.0.0.1:${server.port}\r\n`;
    const cases = [
      ["a request line that is not HTTP", "GARBAGE\r\n\r\n", 400],
      ["a space in the target", `GET /a b HTTP/1.1\r\n${host}\r\n`, 400],
      ["a header line without a colon", `GET / HTTP/1.1\r\n${host}Broken header\r\n\r\n`, 400],
      ["a control byte in a header value", `GET / HTTP/1.1\r\n${host}X-A: a\x01b\r\n\r\n`, 400],
      // Refused (405) before its body is read; the bad body then ends the connection.
      ["a POST with a bad chunk size", `POST / HTTP/1.1\r\n${host}Transfer-Encoding: chunked\r\n\r\nzz\r\n`, 405],
      ["two Content-Lengths", `GET / HTTP/1.1\r\n${host}Content-Length: 1\r\nContent-Length: 2\r\n\r\n`, 400],
      ["an unknown HTTP version", `GET / HTTP/9.9\r\n${host}\r\n`, 400],
      ["64 KiB of headers", `GET / HTTP/1.1\r\n${host}X-Big: ${"a".repeat(64 << 10)}\r\n\r\n`, 431],
      ["1,000 small headers of 40 bytes", `GET / HTTP/1.1\r\n${host}${"X-H: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".repeat(1000)}\r\n`, 431],
    ];
    for (const [what, request, status] of cases) {
      const { text } = await rawExchange(server.port, Buffer.from(request, "latin1"));
      const got = responses(text);
      assert.equal(got.length, 1, `${what}: one reply, got ${JSON.stringify(text.slice(0, 200))}`);
      assert.equal(got[0].status, status, what);
      const h = got[0].headers;
      assert.equal(h["content-security-policy"], CSP, `${what}: CSP`);
      assert.equal(h["x-content-type-options"], "nosniff", `${what}: nosniff`);
      assert.equal(h["cross-origin-resource-policy"], "same-origin", `${what}: CORP`);
      assert.equal(h["cache-control"], "no-cache", what);
      if (status !== 405) assert.equal(h.connection, "close", what);
      // Every byte sent belongs to that one reply: its head and its announced body.
      const body = text.slice(text.indexOf("\r\n\r\n") + 4);
      assert.equal(Buffer.byteLength(body, "latin1"), Number(h["content-length"]), what);
    }
    // And the server still serves.
    const res = await fetch(`${server.url}/`);
    assert.equal(res.status, 200);
    await res.text();
  });

  test("a client that stops reading a download loses its connection after the idle deadline", { skip: !fs.existsSync("/proc/self/fd") && "needs /proc" }, async () => {
    const fdDir = `/proc/${server.child.pid}/fd`;
    const open = () => fs.readdirSync(fdDir).length;
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    await sleep(IDLE_MS * 2); // earlier keep-alive connections have gone by now
    const before = open();
    const socket = net.connect(server.port, "127.0.0.1");
    let received = 0;
    const closed = new Promise((resolve) => socket.on("close", resolve));
    socket.on("error", () => {});
    socket.on("data", (c) => (received += c.length));
    socket.on("connect", () => {
      socket.pause(); // reads nothing: the server's writes stall once the buffers are full
      socket.write(`GET /big.bin HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`);
    });
    try {
      // The server holds the connection and the file open …
      let peak = open();
      for (let t = 0; peak <= before && t < 3000; t += 20) {
        await sleep(20);
        peak = Math.max(peak, open());
      }
      assert.ok(peak > before, "the server never opened the download");
      // … and closes both once no byte has moved for IDLE_MS, while the client still waits.
      const started = Date.now();
      let now = open();
      for (; now > before && Date.now() - started < IDLE_MS * 15; await sleep(50)) now = open();
      // At most as many as before: an earlier connection of the suite may close meanwhile too.
      assert.ok(now <= before, `${now - before} descriptors still open ${Date.now() - started} ms later`);
    } finally {
      socket.resume();
    }
    const ended = await Promise.race([closed.then(() => true), sleep(10000).then(() => false)]);
    if (!ended) socket.destroy();
    assert.ok(ended, "the client's connection was not closed");
    assert.ok(received < 64 << 20, `the whole file arrived (${received} bytes): it was not cut off`);
  });

  test("a half-sent request is closed after the idle deadline", async () => {
    const { ms } = await rawExchange(server.port, `GET / HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n`, { limitMs: 10000 });
    assert.ok(ms >= IDLE_MS * 0.8, `closed after ${ms} ms, before the deadline`);
  });

  test("rejects a bad SERVE_IDLE_MS with a message", async () => {
    for (const bad of ["0", "abc", "1.5"]) {
      const { code, stderr } = await runServerToExit({ args: ["--root", tmp], port: 0, env: { SERVE_IDLE_MS: bad } });
      assert.equal(code, 2, bad);
      assert.match(stderr, /SERVE_IDLE_MS must be a number of milliseconds/, bad);
    }
  });
});

describe("serve.mjs as the playground runs it", () => {
  test("with no options it serves www/ at / and data/ at /data/", async () => {
    const server = await startServer();
    try {
      const { stdout } = server.output();
      assert.match(stdout, /www\/ at http:\/\/127\.0\.0\.1:\d+\/\n/);
      assert.match(stdout, /data\/ at http:\/\/127\.0\.0\.1:\d+\/data\//);
      const page = await fetch(server.url + "/");
      assert.equal(page.status, 200);
      assert.equal(page.headers.get("content-type"), "text/html; charset=utf-8");
      assert.equal(await page.text(), fs.readFileSync(path.join(REPO, "www", "index.html"), "utf8"));
      for (const file of ["main.js", "engine/worker.js"]) {
        const res = await fetch(`${server.url}/${file}`);
        assert.equal(res.status, 200, file);
        assert.equal(res.headers.get("content-type"), "text/javascript; charset=utf-8");
        await res.text();
      }
      // The repository around www/ stays private.
      for (const url of ["/../Cargo.toml", "/%2e%2e/Cargo.toml", "/../scripts/serve.mjs", "/data/../Cargo.toml"]) {
        const res = await rawRequest(server.port, url);
        assert.ok(res.status === 403 || res.status === 404, `${url} -> ${res.status}`);
        assert.ok(!res.body.includes("[package]"));
      }
      if (fs.existsSync(path.join(REPO, "data", "ind.cora.y"))) {
        const res = await fetch(server.url + "/data/ind.cora.y");
        assert.equal(res.status, 200);
        assert.equal(res.headers.get("content-type"), "application/octet-stream");
        assert.equal((await res.arrayBuffer()).byteLength, fs.statSync(path.join(REPO, "data", "ind.cora.y")).size);
      }
    } finally {
      await server.stop();
    }
  });

  test("logs every request, even from a client that hangs up at the last byte", async () => {
    const server = await startServer();
    try {
      const N = 20;
      for (let i = 0; i < N; i++) {
        // As curl does: a keep-alive request, and the socket closed as soon as the body is in.
        await new Promise((resolve, reject) => {
          const socket = net.connect(server.port, "127.0.0.1");
          let got = Buffer.alloc(0);
          socket.setTimeout(5000, () => socket.destroy(new Error("timeout")));
          socket.on("connect", () => socket.write(`GET /main.js?n=${i} HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`));
          socket.on("data", (chunk) => {
            got = Buffer.concat([got, chunk]);
            const head = got.indexOf("\r\n\r\n");
            const length = /content-length: (\d+)/i.exec(got.toString("latin1"));
            if (head >= 0 && length && got.length - head - 4 >= Number(length[1])) {
              socket.destroy();
              resolve();
            }
          });
          socket.on("error", reject);
        });
      }
      const logged = () => server.output().stdout.match(/^GET \/main\.js\?n=\d+ 200 \d+ms$/gm) ?? [];
      for (let waited = 0; logged().length < N && waited < 2000; waited += 50) await new Promise((r) => setTimeout(r, 50));
      assert.equal(logged().length, N, server.output().stdout);
    } finally {
      await server.stop();
    }
  });

  test("stops cleanly with exit code 0 on SIGTERM and on SIGINT", async () => {
    for (const signal of ["SIGTERM", "SIGINT"]) {
      const server = await startServer({ args: ["--quiet"] });
      // An open keep-alive connection must not hold it up.
      const res = await fetch(server.url + "/");
      await res.text();
      const { code } = await server.stop(signal);
      assert.equal(code, 0, `${signal}: ${JSON.stringify(server.output())}`);
    }
  });

  test("a second server on a busy port says so and exits non-zero", async () => {
    const first = await startServer({ args: ["--quiet"] });
    try {
      const second = await runServerToExit({ port: first.port });
      assert.notEqual(second.code, 0);
      assert.ok(
        second.stderr.includes(`port ${first.port} on 127.0.0.1 is already in use; set PORT=… or stop the other server`),
        second.stderr,
      );
      // The first one is unharmed.
      const res = await fetch(first.url + "/");
      assert.equal(res.status, 200);
      await res.text();
    } finally {
      await first.stop();
    }
  });

  test("rejects a bad PORT and bad options with a message", async () => {
    const badPort = await runServerToExit({ port: "http" });
    assert.notEqual(badPort.code, 0);
    assert.match(badPort.stderr, /PORT must be a number/);
    const badArg = await runServerToExit({ args: ["--bogus"], port: 0 });
    assert.notEqual(badArg.code, 0);
    assert.match(badArg.stderr, /unknown argument "--bogus"/);
    const missingRoot = await runServerToExit({ args: ["--root", "/nonexistent/dir"], port: 0 });
    assert.notEqual(missingRoot.code, 0);
    assert.match(missingRoot.stderr, /does not exist/);
  });
});
