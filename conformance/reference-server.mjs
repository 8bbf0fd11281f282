#!/usr/bin/env node
// Starts the Durable Streams Node reference server (@durable-streams/server)
// for conformance runs and benchmarks.
//
// Usage:
//   node reference-server.mjs [PORT] [options]
//
// Options (each also settable via env; the flag wins):
//   --port N                 port to listen on; 0 = pick a free one   (env PORT, default 4437)
//   --host H                 interface to bind                         (env HOST, default 127.0.0.1)
//   --memory                 in-memory store instead of file-backed    (env REFERENCE_SERVER_MEMORY=1)
//   --data-dir DIR           file-backed store in DIR (kept on exit)   (env REFERENCE_SERVER_DATA_DIR)
//                            default: a fresh temp dir, deleted on exit
//   --long-poll-timeout MS   server long-poll timeout in ms            (env LONG_POLL_TIMEOUT_MS, default 500)
//   --webhooks               enable type=webhook subscriptions         (env REFERENCE_SERVER_WEBHOOKS=1)
//
// When ready it prints exactly one line to stdout:
//   listening on http://127.0.0.1:PORT
// Everything else (mode, data dir, server logs) goes to stderr.
// SIGTERM / SIGINT stop the server, close the store, remove the temp dir and exit 0.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { DurableStreamTestServer } from "@durable-streams/server";

function fail(msg) {
  process.stderr.write(`reference-server: ${msg}\n`);
  process.exit(2);
}

// The reference server logs through console.info/console.log (stdout). Keep stdout for the
// single "listening on" line so callers can parse it; send all logging to stderr.
console.log = console.info = console.debug = (...args) => console.error(...args);

const truthy = (v) => v !== undefined && /^(1|true|yes|on)$/i.test(String(v));

let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      port: { type: "string" },
      host: { type: "string" },
      memory: { type: "boolean" },
      "data-dir": { type: "string" },
      "long-poll-timeout": { type: "string" },
      webhooks: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
} catch (err) {
  fail(err.message);
}
const { values: opts, positionals } = parsed;

if (opts.help) {
  const src = (await import("node:fs")).readFileSync(new URL(import.meta.url), "utf8");
  process.stdout.write(src.split("\n").slice(1, 20).map((l) => l.replace(/^\/\/ ?/, "")).join("\n") + "\n");
  process.exit(0);
}

function intOption(name, raw, def) {
  if (raw === undefined || raw === "") return def;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) fail(`${name} must be a non-negative integer, got "${raw}"`);
  return n;
}

const port = intOption("port", opts.port ?? positionals[0] ?? process.env.PORT, 4437);
if (port > 65535) fail(`port out of range: ${port}`);
const host = opts.host ?? process.env.HOST ?? "127.0.0.1";
const longPollTimeout = intOption(
  "long-poll-timeout",
  opts["long-poll-timeout"] ?? process.env.LONG_POLL_TIMEOUT_MS,
  500,
);
const memory = opts.memory ?? truthy(process.env.REFERENCE_SERVER_MEMORY);
const webhooks = opts.webhooks ?? truthy(process.env.REFERENCE_SERVER_WEBHOOKS);
let dataDir = opts["data-dir"] ?? process.env.REFERENCE_SERVER_DATA_DIR;
if (memory && dataDir) fail("--memory and --data-dir are mutually exclusive");

let tempDir = null;
if (!memory && !dataDir) {
  tempDir = mkdtempSync(join(tmpdir(), "ds-reference-"));
  dataDir = tempDir;
}

const server = new DurableStreamTestServer({
  port,
  host,
  longPollTimeout,
  dataDir: memory ? undefined : dataDir,
  webhooks,
});

function removeTempDir() {
  if (tempDir) {
    try {
      rmSync(tempDir, { recursive: true, force: true });
    } catch {
      /* best effort */
    }
    tempDir = null;
  }
}

let url;
try {
  url = await server.start();
} catch (err) {
  removeTempDir();
  fail(`could not start on ${host}:${port}: ${err.message}`);
}

process.stderr.write(
  `reference-server: @durable-streams/server, ${memory ? "in-memory" : `file-backed (dataDir ${dataDir})`}, ` +
    `longPollTimeout ${longPollTimeout} ms${webhooks ? ", webhooks on" : ""}, pid ${process.pid}\n`,
);
process.stdout.write(`listening on ${url}\n`);

let stopping = false;
async function shutdown(signal) {
  if (stopping) return;
  stopping = true;
  const t0 = Date.now();
  const open = await new Promise((r) => (server.server ? server.server.getConnections((e, n) => r(e ? "?" : n)) : r(0)));
  process.stderr.write(`reference-server: ${signal}, stopping (${open} open connections)\n`);
  // server.stop() waits for open connections; don't let a stuck client hold us forever.
  const force = setTimeout(() => {
    process.stderr.write("reference-server: stop() took over 5 s, closing connections\n");
    server.server?.closeAllConnections?.();
  }, 5000);
  force.unref();
  const hard = setTimeout(() => {
    process.stderr.write("reference-server: still not stopped after 10 s, exiting\n");
    removeTempDir();
    process.exit(1);
  }, 10000);
  hard.unref();
  let code = 0;
  try {
    await server.stop();
  } catch (err) {
    process.stderr.write(`reference-server: error while stopping: ${err.stack ?? err}\n`);
    code = 1;
  }
  clearTimeout(force);
  clearTimeout(hard);
  removeTempDir();
  process.stderr.write(`reference-server: stopped in ${Date.now() - t0} ms\n`);
  process.exit(code);
}

process.on("SIGTERM", () => shutdown("SIGTERM"));
process.on("SIGINT", () => shutdown("SIGINT"));
