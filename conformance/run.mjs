#!/usr/bin/env node
// Runs the Durable Streams conformance suite against a server and checks the outcome
// against an expected-failures list.
//
// Usage (from anywhere; paths are resolved relative to this file):
//   node conformance/run.mjs <baseUrl> [--expected FILE] [-- extra vitest args]
//
//   <baseUrl>          server root, e.g. http://127.0.0.1:4437 (streams live under /v1/stream/)
//   --expected FILE    expected-failures list (default: conformance/expected-failures.txt;
//                      env CONFORMANCE_EXPECTED_FAILURES)
//   -- ...             passed to `vitest run` as is (e.g. -- -t "SSE Mode")
//
// Env passed through to the test file: CONFORMANCE_LONG_POLL_TIMEOUT_MS, CONFORMANCE_SUBSCRIPTIONS.
// JSON results: conformance/results/latest.json (env CONFORMANCE_RESULTS_FILE).
//
// Expected-failures file: one full test name per line, "describe > ... > test name",
// or "~ name" for a test that may pass or fail (its outcome is left unchecked),
// exactly as in the results (the vitest test's describe titles and title joined by " > ",
// without the file name). Blank lines and lines starting with # are ignored; so is
// trailing whitespace.
//
// Exit status:
//   0  every failing test is listed, and every listed test still fails (or was skipped)
//   1  a test failed that is not listed, a listed test passed (remove it from the list:
//      the list only shrinks), a listed name matches no test, or the run itself errored
//   2  usage error, server unreachable, or vitest produced no results
//
// The last line of stdout is always "N passed, N failed, N expected-fail, N skipped" when
// results exist,
// where "failed" counts only unexpected failures.

import { spawn } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

function die(msg, code = 2) {
  process.stderr.write(`run.mjs: ${msg}\n`);
  process.exit(code);
}

// ---- arguments -------------------------------------------------------------------------
const argv = process.argv.slice(2);
const dashdash = argv.indexOf("--");
const own = dashdash === -1 ? argv : argv.slice(0, dashdash);
const vitestExtra = dashdash === -1 ? [] : argv.slice(dashdash + 1);

let baseUrlArg;
let expectedPath = process.env.CONFORMANCE_EXPECTED_FAILURES || join(here, "expected-failures.txt");
for (let i = 0; i < own.length; i++) {
  const a = own[i];
  if (a === "-h" || a === "--help") {
    process.stdout.write(
      readFileSync(fileURLToPath(import.meta.url), "utf8")
        .split("\n")
        .slice(1, 29)
        .map((l) => l.replace(/^\/\/ ?/, ""))
        .join("\n") + "\n",
    );
    process.exit(0);
  } else if (a === "--expected") {
    expectedPath = own[++i];
    if (!expectedPath) die("--expected needs a file");
  } else if (a.startsWith("--expected=")) {
    expectedPath = a.slice("--expected=".length);
  } else if (a.startsWith("-")) {
    die(`unknown option ${a} (vitest options go after --)`);
  } else if (baseUrlArg === undefined) {
    baseUrlArg = a;
  } else {
    die(`unexpected argument ${a}`);
  }
}
if (!baseUrlArg) die("usage: node conformance/run.mjs <baseUrl> [--expected FILE] [-- vitest args]");
let baseUrl;
try {
  const u = new URL(baseUrlArg);
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error();
  baseUrl = u.href.replace(/\/+$/, "");
} catch {
  die(`not an http(s) URL: ${baseUrlArg}`);
}
expectedPath = resolve(expectedPath);

const resultsRel = process.env.CONFORMANCE_RESULTS_FILE || "results/latest.json";
const resultsPath = isAbsolute(resultsRel) ? resultsRel : join(here, resultsRel);

// ---- expected failures -----------------------------------------------------------------
const mayFail = new Set(); // "~ " lines: outcome not checked
function readExpected(path) {
  if (!existsSync(path)) die(`expected-failures file not found: ${path}`);
  const entries = new Map(); // name -> line number
  readFileSync(path, "utf8")
    .split(/\r?\n/)
    .forEach((line, idx) => {
      let name = line.trimEnd();
      if (!name.trim() || name.trimStart().startsWith("#")) return;
      if (name.startsWith("~ ")) {
        // "~ name": a test whose outcome depends on chance until its feature exists;
        // it may pass or fail and is never reported either way.
        mayFail.add(name.slice(2).trim());
        return;
      }
      if (entries.has(name.trim())) {
        process.stderr.write(`run.mjs: warning: ${path}:${idx + 1} duplicates line ${entries.get(name.trim())}\n`);
        return;
      }
      entries.set(name.trim(), idx + 1);
    });
  return entries;
}
const expected = readExpected(expectedPath);

// ---- preflight: is anything listening? -------------------------------------------------
const vitestEntry = join(here, "node_modules", "vitest", "vitest.mjs");
if (!existsSync(vitestEntry)) die(`vitest not installed: run \`npm ci\` in ${here}`);

try {
  const res = await fetch(baseUrl + "/", { method: "HEAD", signal: AbortSignal.timeout(5000) });
  await res.body?.cancel();
} catch (err) {
  die(`server not reachable at ${baseUrl}: ${err.cause?.code ?? err.cause?.message ?? err.message}`);
}

// ---- run vitest ------------------------------------------------------------------------
rmSync(resultsPath, { force: true }); // never read a stale report
const started = Date.now();
process.stdout.write(`Running conformance suite against ${baseUrl}\n`);
process.stdout.write(`Expected failures: ${relative(process.cwd(), expectedPath) || expectedPath} (${expected.size} listed)\n\n`);

const vitestCode = await new Promise((resolvePromise) => {
  const child = spawn(
    process.execPath,
    [vitestEntry, "run", "--config", join(here, "vitest.config.mjs"), ...vitestExtra],
    {
      cwd: here,
      stdio: ["ignore", "inherit", "inherit"],
      env: { ...process.env, CONFORMANCE_BASE_URL: baseUrl, CONFORMANCE_RESULTS_FILE: resultsPath },
    },
  );
  const forward = (sig) => child.kill(sig);
  process.on("SIGINT", forward);
  process.on("SIGTERM", forward);
  child.on("error", (err) => die(`could not start vitest: ${err.message}`));
  child.on("close", (code, signal) => resolvePromise(code ?? (signal ? 128 : 1)));
});
const wallSeconds = ((Date.now() - started) / 1000).toFixed(1);

if (!existsSync(resultsPath)) die(`vitest exited with ${vitestCode} and wrote no results to ${resultsPath}`);
let report;
try {
  report = JSON.parse(readFileSync(resultsPath, "utf8"));
} catch (err) {
  die(`cannot parse ${resultsPath}: ${err.message}`);
}

// ---- compare ---------------------------------------------------------------------------
const tests = [];
const runErrors = [];
for (const file of report.testResults ?? []) {
  for (const a of file.assertionResults ?? []) {
    tests.push({ name: [...(a.ancestorTitles ?? []), a.title].join(" > "), status: a.status, a });
  }
  if (file.message) runErrors.push(`${relative(here, file.name)}: ${file.message}`);
}
if (tests.length === 0) runErrors.push("no tests were collected");

const passed = tests.filter((t) => t.status === "passed");
const failed = tests.filter((t) => t.status === "failed");
const skipped = tests.filter((t) => t.status !== "passed" && t.status !== "failed");
const byName = new Map();
for (const t of tests) byName.set(t.name, [...(byName.get(t.name) ?? []), t]);

const unexpectedFailures = failed.filter((t) => !expected.has(t.name) && !mayFail.has(t.name));
const expectedFailures = failed.filter((t) => expected.has(t.name));
const nowPassing = []; // listed, but passed
const listedSkipped = []; // listed, but did not run (filtered or skipped)
const listedUnknown = []; // listed, but no such test
for (const [name, line] of expected) {
  const runs = byName.get(name);
  if (!runs) listedUnknown.push({ name, line });
  else if (runs.some((t) => t.status === "failed")) continue;
  else if (runs.some((t) => t.status === "passed")) nowPassing.push({ name, line });
  else listedSkipped.push({ name, line });
}
if (vitestCode !== 0 && failed.length === 0 && runErrors.length === 0) {
  runErrors.push(`vitest exited with code ${vitestCode} although no test failed (unhandled error? see output above)`);
}

const firstLine = (t) => (t.a.failureMessages?.[0] ?? "").split("\n")[0].slice(0, 200);
const out = [];
out.push("");
out.push("=".repeat(72));
out.push(`Conformance against ${baseUrl}  (${wallSeconds} s, vitest exit ${vitestCode})`);
out.push(
  `${tests.length} tests: ${passed.length} passed, ${failed.length} failed ` +
    `(${expectedFailures.length} expected, ${unexpectedFailures.length} unexpected), ${skipped.length} skipped`,
);
if (unexpectedFailures.length) {
  out.push("", `UNEXPECTED FAILURES (${unexpectedFailures.length}) — fix them, or list them in ${relative(process.cwd(), expectedPath) || expectedPath}:`);
  for (const t of unexpectedFailures) out.push(`  ✗ ${t.name}`, `      ${firstLine(t)}`);
}
if (nowPassing.length) {
  out.push("", `LISTED AS EXPECTED FAILURES BUT NOW PASSING (${nowPassing.length}) — remove these lines:`);
  for (const e of nowPassing) out.push(`  ✓ ${e.name}   (line ${e.line})`);
}
if (listedUnknown.length) {
  out.push("", `LISTED BUT MATCHING NO TEST (${listedUnknown.length}) — renamed or removed? fix or remove these lines:`);
  for (const e of listedUnknown) out.push(`  ? ${e.name}   (line ${e.line})`);
}
if (runErrors.length) {
  out.push("", "RUN ERRORS:");
  for (const e of runErrors) out.push(`  ! ${e}`);
}
if (expectedFailures.length) {
  out.push("", `Expected failures still failing (${expectedFailures.length}):`);
  for (const t of expectedFailures) out.push(`  - ${t.name}`);
}
if (listedSkipped.length) {
  out.push("", `Listed but not run this time (${listedSkipped.length}, not an error):`);
  for (const e of listedSkipped) out.push(`  - ${e.name}`);
}
const ok = unexpectedFailures.length === 0 && nowPassing.length === 0 && listedUnknown.length === 0 && runErrors.length === 0;
out.push("", ok ? "RESULT: OK" : "RESULT: FAIL");
out.push(
  `${passed.length} passed, ${unexpectedFailures.length + runErrors.length} failed, ` +
    `${expectedFailures.length} expected-fail, ${skipped.length} skipped`,
);
process.stdout.write(out.join("\n") + "\n");
process.exit(ok ? 0 : 1);
