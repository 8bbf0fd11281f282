// Drives the official TypeScript client (@durable-streams/client), unchanged, against a server.
//
// Usage: node ts_client.mjs <streams base URL, e.g. http://127.0.0.1:4437/v1/stream>
// It uses only the client's public API, prints one JSON line per check
// ({"check", "ok", "detail"}) and exits non-zero when any check failed. The client publishes
// no tests of its own, so these checks walk through what its README promises.

import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { isDeepStrictEqual } from "node:util"
import { pathToFileURL } from "node:url"

// The client is installed with the conformance suite's node tree; load it through its
// package's own ESM entry point, as an application importing it would.
const require = createRequire(new URL("../../conformance/package.json", import.meta.url))
const manifest = require.resolve("@durable-streams/client/package.json")
const entry = JSON.parse(readFileSync(manifest, "utf8")).exports["."].import.default
const client = await import(pathToFileURL(join(dirname(manifest), entry)).href)
const { DurableStream, FetchError, IdempotentProducer, StreamClosedError, stream } =
  client

const CHECK_TIMEOUT_MS = 20_000 // a hung check fails by name instead of hanging the run
const base = process.argv[2]?.replace(/\/+$/, "")
if (!base) {
  console.error("usage: node ts_client.mjs <streams base URL>")
  process.exit(2)
}
const run = Math.random().toString(36).slice(2, 10)
const url = (name) => `${base}/ts-${run}-${name}`
let failed = 0

// A rejection nobody awaited (a reader's retry after its check ended) still fails the run.
process.on("unhandledRejection", (error) => {
  failed += 1
  console.error(`unhandled: ${error?.stack ?? error}`)
})

function expect(condition, detail) {
  if (!condition) throw new Error(detail)
  return detail
}

function withTimeout(promise, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), CHECK_TIMEOUT_MS)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

async function check(name, body) {
  let line
  try {
    line = { check: name, ok: true, detail: await withTimeout(body(), name) }
  } catch (error) {
    failed += 1
    line = { check: name, ok: false, detail: `${error?.name ?? "Error"}: ${error?.message ?? error}` }
  }
  console.log(JSON.stringify(line))
}

// A fetch that remembers which live modes were asked for, so a live check can append only once
// the client is waiting in that mode, and say which request carried the late message.
function recordingFetch() {
  const modes = []
  const waiters = []
  const fetchFn = (input, init) => {
    const mode = new URL(String(input)).searchParams.get("live")
    if (mode) {
      modes.push(mode)
      for (const waiter of waiters.filter((waiter) => waiter.mode === mode)) waiter.resolve()
    }
    return fetch(input, init)
  }
  const waitFor = (wanted) =>
    modes.includes(wanted)
      ? Promise.resolve()
      : new Promise((resolve) => waiters.push({ mode: wanted, resolve }))
  return { fetchFn, modes, waitFor }
}

// A fetch that sends every producer POST twice, as a proxy retrying after a lost response
// would, and answers the client with the retry's response.
function retryingFetch() {
  const statuses = []
  const fetchFn = async (input, init) => {
    if (init?.method !== "POST") return fetch(input, init)
    const first = await fetch(input, init)
    await first.arrayBuffer()
    const retry = await fetch(input, init)
    statuses.push([first.status, retry.status])
    return retry
  }
  return { fetchFn, statuses }
}

async function liveRead(handle, live, subscribe, append) {
  const recorder = recordingFetch()
  const { offset } = await handle.head()
  const res = await stream({ url: handle.url, offset, live, fetch: recorder.fetchFn })
  try {
    const arrived = new Promise((resolve) => subscribe(res, resolve))
    await recorder.waitFor(live)
    await append()
    return { received: await arrived, modes: recorder.modes }
  } finally {
    res.cancel("the check is over")
  }
}

const text = new DurableStream({ url: url("text"), batching: false })
const json = new DurableStream({ url: url("json"), batching: false })
let firstTextTail

await check("create a text stream", async () => {
  await text.create({ contentType: "text/plain" })
  const head = await text.head()
  expect(head.exists && head.contentType?.startsWith("text/plain"), `HEAD: ${JSON.stringify(head)}`)
  return `created ${text.url}, content type ${head.contentType}`
})

await check("create a JSON stream", async () => {
  await DurableStream.create({ url: json.url, contentType: "application/json" })
  const head = await json.head()
  expect(head.exists && head.contentType === "application/json", `HEAD: ${JSON.stringify(head)}`)
  return `created ${json.url}`
})

await check("append text and read it back from the start", async () => {
  await text.append("hello ")
  firstTextTail = (await text.head()).offset
  await text.append("world")
  const read = await (await text.stream({ live: false })).text()
  return expect(read === "hello world", `read ${JSON.stringify(read)}`)
})

await check("append JSON and read the messages back from the start", async () => {
  await json.append(JSON.stringify({ n: 1 }))
  await json.append(JSON.stringify({ n: 2 }))
  const items = await (await stream({ url: json.url, live: false })).json()
  return expect(isDeepStrictEqual(items, [{ n: 1 }, { n: 2 }]), `read ${JSON.stringify(items)}`)
})

await check("read from an offset", async () => {
  const read = await (await text.stream({ offset: firstTextTail, live: false })).text()
  return expect(read === "world", `from ${firstTextTail} read ${JSON.stringify(read)}`)
})

await check("long-poll delivers a message appended after it subscribed", async () => {
  const { received, modes } = await liveRead(
    text,
    "long-poll",
    (res, resolve) => res.subscribeText(async (chunk) => chunk.text && resolve(chunk.text)),
    () => text.append("late"),
  )
  return expect(received === "late", `received ${JSON.stringify(received)} over ${modes}`)
})

await check("SSE delivers a message appended after it subscribed", async () => {
  const { received, modes } = await liveRead(
    json,
    "sse",
    (res, resolve) => res.subscribeJson(async (batch) => batch.items.length && resolve(batch.items)),
    () => json.append(JSON.stringify({ late: true })),
  )
  const detail = `received ${JSON.stringify(received)} over ${modes}`
  return expect(isDeepStrictEqual(received, [{ late: true }]) && modes.includes("sse"), detail)
})

await check("the idempotent producer's retried append is stored once", async () => {
  const produced = new DurableStream({ url: url("produced"), contentType: "application/json" })
  await produced.create()
  const retrying = retryingFetch()
  const errors = []
  const producer = new IdempotentProducer(produced, "ts-producer", {
    fetch: retrying.fetchFn,
    onError: (error) => errors.push(String(error)),
  })
  for (const n of [1, 2, 3]) producer.append(JSON.stringify({ n }))
  await producer.flush()
  await producer.detach()
  const items = await (await produced.stream({ live: false })).json()
  const detail = `sent twice, answered ${JSON.stringify(retrying.statuses)}; read ${JSON.stringify(items)}`
  expect(errors.length === 0, `producer errors ${errors}; ${detail}`)
  const deduplicated = retrying.statuses.length > 0 && retrying.statuses.every(([a, b]) => a === 200 && b === 204)
  return expect(deduplicated && isDeepStrictEqual(items, [{ n: 1 }, { n: 2 }, { n: 3 }]), detail)
})

await check("close a stream", async () => {
  const { finalOffset } = await text.close()
  const head = await text.head()
  expect(head.streamClosed === true, `HEAD after close: ${JSON.stringify(head)}`)
  const refused = await text.append("after close").then(
    () => "accepted",
    (error) => error,
  )
  // Appends go through the client's retrying fetch, which surfaces the 409 as a FetchError.
  const closedConflict =
    refused instanceof StreamClosedError ||
    (refused instanceof FetchError && refused.status === 409 && refused.headers["stream-closed"] === "true")
  expect(closedConflict, `append after close: ${refused}`)
  const res = await text.stream({ live: false })
  const read = await res.text()
  const detail = `closed at ${finalOffset}; read ${JSON.stringify(read)}, closed=${res.streamClosed}`
  return expect(read === "hello worldlate" && res.streamClosed === true, detail)
})

await check("delete a stream", async () => {
  await json.delete()
  const head = await json.head()
  return expect(head.exists === false, `HEAD after delete: ${JSON.stringify(head)}`)
})

await check("a missing stream surfaces as the client's 404 errors", async () => {
  const missing = url("missing")
  const outcome = (promise) => promise.then(() => "no error", (error) => error)
  const errors = {
    "stream()": await outcome(stream({ url: missing, live: false })),
    "append()": await outcome(new DurableStream({ url: missing, batching: false }).append("x")),
    "DurableStream.delete()": await outcome(DurableStream.delete({ url: missing })),
  }
  for (const [call, error] of Object.entries(errors)) {
    expect(error instanceof FetchError && error.status === 404, `${call} on a missing stream: ${error}`)
  }
  const head = await DurableStream.head({ url: missing })
  expect(head.exists === false, `HEAD of a missing stream: ${JSON.stringify(head)}`)
  return `FetchError 404 from ${Object.keys(errors).join(", ")}; HEAD exists=false`
})

process.exit(failed === 0 ? 0 : 1)
