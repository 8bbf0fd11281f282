// Runs the Durable Streams protocol conformance suite
// (@durable-streams/server-conformance-tests) against an already running server.
//
//   CONFORMANCE_BASE_URL=http://127.0.0.1:4437 npx vitest run
//
// Usually driven by run.mjs, which also checks conformance/expected-failures.txt.
//
// Optional env:
//   CONFORMANCE_LONG_POLL_TIMEOUT_MS  per-test timeout budget the suite gives long-poll tests
//                                     (suite default 20000; the test timeout is this + 1000 ms).
//                                     Must exceed the server's long-poll timeout.
//   CONFORMANCE_SUBSCRIPTIONS=1       also run the "Reserved subscription APIs" group
//                                     (skipped by default, as in the suite).
import { runConformanceTests } from "@durable-streams/server-conformance-tests";

const raw = process.env.CONFORMANCE_BASE_URL;
if (!raw || !raw.trim()) {
  throw new Error(
    "CONFORMANCE_BASE_URL is not set. Run `node run.mjs <baseUrl>` from conformance/, " +
      "or set CONFORMANCE_BASE_URL=http://host:port (the server root; streams live under /v1/stream/).",
  );
}
let parsed;
try {
  parsed = new URL(raw.trim());
} catch {
  throw new Error(`CONFORMANCE_BASE_URL is not a valid URL: ${JSON.stringify(raw)}`);
}
if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
  throw new Error(`CONFORMANCE_BASE_URL must be http(s), got ${JSON.stringify(raw)}`);
}
// The suite builds URLs as `${baseUrl}/v1/stream/...`: no trailing slash.
const baseUrl = parsed.href.replace(/\/+$/, "");

const options = { baseUrl };
if (process.env.CONFORMANCE_LONG_POLL_TIMEOUT_MS) {
  const ms = Number(process.env.CONFORMANCE_LONG_POLL_TIMEOUT_MS);
  if (!Number.isInteger(ms) || ms <= 0) {
    throw new Error(`CONFORMANCE_LONG_POLL_TIMEOUT_MS must be a positive integer`);
  }
  options.longPollTimeoutMs = ms;
}
if (/^(1|true|yes|on)$/i.test(process.env.CONFORMANCE_SUBSCRIPTIONS ?? "")) {
  options.subscriptions = true;
}

runConformanceTests(options);
