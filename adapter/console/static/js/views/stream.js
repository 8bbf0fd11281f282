// One stream: its facts, where to start, the live tail into a bounded buffer, and actions.

import { call, consoleApi, getJSON, streamPath, token } from "../api.js";
import { Bounded, MAX_MESSAGES } from "../buffer.js";
import { append, clear, download, h, note, status } from "../dom.js";
import { splitArray } from "../json.js";
import { message, ndjsonLine, row } from "../render.js";
import { base64Bytes, LiveReader } from "../sse.js";
import { actions } from "./actions.js";

const FLUSH_MS = 100;
const NEXT_OFFSET = { "Next offset": "Start from this offset to read the messages after this row (not this row itself)" };
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function kindOf(contentType) {
  const media = contentType.split(";")[0].trim().toLowerCase();
  if (media === "application/json") return "json";
  return media.startsWith("text/") ? "text" : "binary";
}

function tokenToKafka(token) {
  const [high, low] = token.split("_");
  return (BigInt(high) * 10n ** 16n + BigInt(low)).toString();
}

function facts(path, headers, info) {
  const entries = [
    ["Content type", headers.get("Content-Type")],
    ["Tail offset", headers.get("Stream-Next-Offset")],
    ["Status", headers.get("Stream-Closed") === "true" ? "Closed" : "Open"],
    ["TTL (s)", headers.get("Stream-TTL")],
    ["Expires at", headers.get("Stream-Expires-At")],
    ["ETag", headers.get("ETag")],
    ["Kafka", `${info.topic} partition ${info.partition}`],
    ["Mounted topic", info.mount && `records keyed by this id (${info.mount.key_encoding}); ${info.mount.appends ? "appends produce records" : "read-only"}`],
  ];
  // A source (or fork) in another bucket is named with its bucket.
  const named = (bucket, id) => (bucket === info.bucket_id ? id : `${bucket}/${id}`);
  for (const source of info.sources) {
    entries.push(["Forked from", `${named(source.source_bucket, source.forked_from)} at ${source.fork_offset}`]);
  }
  if (info.forks.length) entries.push(["Forks", info.forks.map((f) => named(f.bucket_id, f.stream_id)).join(", ")]);
  return h("dl", { class: "facts" }, entries.filter(([, v]) => v).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

export async function streamView(view, bucket, stream, params, context) {
  const path = streamPath(bucket, stream);
  const generation = context.generation;
  const [head, info] = await Promise.all([call("HEAD", path), getJSON(consoleApi("stream", bucket, stream))]);
  if (generation !== context.generation) return; // navigated elsewhere meanwhile
  const contentType = head.headers.get("Content-Type");
  const kind = kindOf(contentType);
  const from = params.get("from") ?? "-1";
  const state = {
    bucket,
    stream,
    path,
    contentType,
    kind,
    offset: from,
    closed: head.headers.get("Stream-Closed") === "true",
    buffer: new Bounded(),
    pending: [],
    paused: false,
    pretty: true,
    counter: 0,
    reader: null,
    context,
    mount: info.mount,
  };

  const badge = h("span", { id: "stream-status", class: `badge ${state.closed ? "closed" : "open"}` }, state.closed ? "Closed" : "Open");
  const newBadge = h("span", { id: "new-count", class: "badge new", hidden: true });
  const dropNotice = h("p", { id: "dropped", class: "note warn", hidden: true });
  const counts = h("p", { id: "counts", class: "note" });
  const list = h("tbody", { id: "messages" });
  const startNote = h("p", { id: "start-note", class: "note" });

  const liveButton = h("button", { type: "button", id: "live", "aria-pressed": "true", "aria-keyshortcuts": "l" }, "Live");
  const pauseButton = h("button", { type: "button", id: "pause", "aria-pressed": "false", "aria-keyshortcuts": "p" }, "Pause");
  const prettyButton = kind === "json" ? h("button", { type: "button", id: "pretty", "aria-pressed": "true" }, "Pretty JSON") : null;
  const exportButton = h("button", { type: "button", id: "export", "aria-keyshortcuts": "e" }, "Export NDJSON");

  function rebuild() {
    clear(list);
    for (const item of state.buffer.items) item.node = null;
    state.pending = [...state.buffer.items];
    flush();
  }

  function flush() {
    if (state.paused) {
      newBadge.hidden = state.pending.length === 0;
      newBadge.textContent = `${state.pending.length} new`;
      return;
    }
    newBadge.hidden = true;
    if (state.pending.length === 0) return;
    const fragment = document.createDocumentFragment();
    for (const item of state.pending) {
      if (item.dropped) continue;
      item.node = row(item, stream, { pretty: state.pretty });
      fragment.append(item.node);
    }
    state.pending = [];
    list.append(fragment);
    const { items, bytes, dropped } = state.buffer;
    counts.textContent = `${items.length} message${items.length === 1 ? "" : "s"} loaded (${bytes} bytes); next offset ${state.offset}`;
    dropNotice.hidden = dropped === 0;
    dropNotice.textContent = `${dropped} older messages were dropped: the view holds at most ${MAX_MESSAGES} messages or 16 MiB.`;
    status(`${items.length} messages loaded`);
  }

  function add(item) {
    for (const old of state.buffer.push(item)) {
      old.dropped = true;
      old.node?.remove();
    }
    state.pending.push(item);
  }

  // Batches wait for their messages' boundaries and offsets: the chain keeps them in order.
  let chain = Promise.resolve();

  function onBatch({ data, base64, control, start }) {
    const next = control.streamNextOffset;
    const texts = kind === "json" ? splitArray(data) : null;
    const bytes = texts ? null : base64 ? base64Bytes(data) : encoder.encode(data);
    const as = (raw) => (kind === "text" ? decoder.decode(raw) : raw);
    chain = chain
      .then(() => (texts ? jsonMessages(texts, start, next) : messagesOf(bytes, start, next)))
      .catch(() => withOffsets((texts ?? [bytes]).map((raw) => ({ raw })), next)) // as one read
      .then((parts) => parts.forEach((part) => add(message(kind, as(part.raw), ++state.counter, part.next))));
  }

  /**
   * Each message with the offset to resume after it: after the last of a read, the read's own
   * Stream-Next-Offset; after another, the offset after its Kafka record (null where that is
   * not known: a mounted topic's records list no offsets), never the read's, which would skip
   * the messages between.
   */
  function withOffsets(parts, next) {
    const last = parts.length - 1;
    return parts.map((part, i) => ({ raw: part.raw, next: i === last ? next : (part.record?.next_offset ?? null) }));
  }

  /** The records of a read from `start`, page by page, until `enough(records)`. */
  async function recordsFrom(start, enough) {
    const records = [];
    let offset = start;
    while (offset && !enough(records)) {
      const query = `offset=${encodeURIComponent(offset)}&limit=1000`;
      const page = await getJSON(`${consoleApi("records", bucket, stream)}?${query}`);
      if (page.records.length === 0) break;
      records.push(...page.records);
      offset = page.next_offset;
    }
    return records;
  }

  /** A JSON read's messages: one Kafka record each (asked for only when there are several). */
  async function jsonMessages(texts, start, next) {
    const records = texts.length > 1 && !state.mount ? await recordsFrom(start, (found) => found.length >= texts.length) : [];
    return withOffsets(texts.map((raw, i) => ({ raw, record: records[i] })), next);
  }

  /** A text or binary read cut at its messages: SSE joins them, their records tell the sizes. */
  async function messagesOf(bytes, start, next) {
    let total = 0;
    const records = await recordsFrom(start, (found) => found.reduce((sum, r) => sum + r.bytes, 0) >= bytes.length);
    const parts = [];
    for (const record of records) {
      if (total >= bytes.length) break;
      parts.push({ raw: bytes.subarray(total, total + record.bytes), record });
      total += record.bytes;
    }
    return withOffsets(total === bytes.length ? parts : [{ raw: bytes }], next);
  }

  function markClosed() {
    state.closed = true;
    badge.textContent = "Closed";
    badge.className = "badge closed";
    liveButton.setAttribute("aria-pressed", "false");
    liveButton.disabled = true;
    view.dispatchEvent(new Event("stream-closed"));
    status("the stream is closed");
  }

  function startLive(offset) {
    state.reader?.stop();
    const reader = new LiveReader(path, offset, {
      batch: onBatch,
      control: (control) => {
        state.offset = control.streamNextOffset;
      },
      closed: markClosed,
      error: (error) => {
        note(startNote, error.message);
        liveButton.setAttribute("aria-pressed", "false");
      },
      status,
    });
    state.reader = reader;
    liveButton.setAttribute("aria-pressed", "true");
    window.consoleLive = reader; // for tests and the curious: connections made so far
    reader.run();
  }

  function stopLive() {
    state.reader?.stop();
    state.reader = null;
    liveButton.setAttribute("aria-pressed", "false");
  }

  const toggleLive = () => (state.reader ? stopLive() : state.closed || startLive(state.offset));
  const togglePause = () => {
    state.paused = !state.paused;
    pauseButton.setAttribute("aria-pressed", String(state.paused));
    flush();
  };
  const exportAll = () => {
    const lines = state.buffer.items.map((item) => `${ndjsonLine(item)}\n`);
    download(`${stream}.ndjson`, lines, "application/x-ndjson");
  };
  liveButton.addEventListener("click", toggleLive);
  pauseButton.addEventListener("click", togglePause);
  exportButton.addEventListener("click", exportAll);
  prettyButton?.addEventListener("click", () => {
    state.pretty = !state.pretty;
    prettyButton.setAttribute("aria-pressed", String(state.pretty));
    rebuild();
  });

  const startForm = startControls(bucket, stream, from, startNote, !info.mount);
  const bearer = token() ? ` -H "Authorization: Bearer $TOKEN"` : "";
  const curl = `curl -N${bearer} '${location.origin}${path}?offset=${from}&live=sse'`;
  const kafkaStart = /^\d{16}_\d{16}$/.test(from) ? tokenToKafka(from) : from === "now" ? "end" : "beginning";
  const kcat = `kcat -C -b "$BOOTSTRAP" -t '${info.topic}' -p ${info.partition} -o ${kafkaStart} -K '\\t' -e  # records keyed '${stream}'`;
  append(
    view,
    h("h1", {}, stream, " ", badge),
    facts(path, head.headers, info),
    h("p", { class: "actions" }, copyButton("Copy as curl", curl), " ", copyButton("Copy as kcat", kcat)),
    startForm,
    h(
      "div",
      { class: "toolbar", role: "group", "aria-label": "Reading" },
      liveButton,
      pauseButton,
      newBadge,
      prettyButton,
      exportButton,
    ),
    dropNotice,
    counts,
    h(
      "table",
      { class: "messages" },
      h("caption", { class: "visually-hidden" }, "Messages"),
      h("thead", {}, h("tr", {}, ["#", "Next offset", "Bytes", "Message", ""].map((t) => h("th", { scope: "col", title: NEXT_OFFSET[t] }, t)))),
      list,
    ),
    info.mount ? null : coordinates(bucket, stream, from),
    actions(state, view, { startLive, stopLive, add, flush, clearView: () => { state.buffer.clear(); state.pending = []; clear(list); } }),
  );

  context.shortcuts.set("l", toggleLive);
  context.shortcuts.set("p", togglePause);
  context.shortcuts.set("e", exportAll);
  context.shortcuts.set("o", () => document.getElementById("start-offset").focus());
  const timer = setInterval(flush, FLUSH_MS);
  context.cleanup = () => {
    clearInterval(timer);
    state.reader?.stop();
  };
  if (from === "-1" && info.earliest_offset !== info.history_start) {
    // Reads below the earliest retained offset are refused (410): begin where history is kept.
    note(startNote, `Messages before ${info.earliest_offset} are folded into a snapshot (see Snapshot below): showing from there.`, "warn");
    startLive(info.earliest_offset);
  } else {
    startLive(from);
  }
}

function copyButton(label, text) {
  return h(
    "button",
    {
      type: "button",
      title: text,
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(text);
          status(`copied: ${text}`);
        } catch {
          status(text);
        }
      },
    },
    label,
  );
}

function startControls(bucket, stream, from, startNote, seeks) {
  const isOffset = from !== "-1" && from !== "now";
  const choice = h(
    "select",
    { id: "start-from" },
    h("option", { value: "-1", selected: from === "-1" }, "the beginning"),
    h("option", { value: "now", selected: from === "now" }, "now"),
    h("option", { value: "offset", selected: isOffset }, "an offset"),
    seeks && h("option", { value: "last" }, "the last N messages"),
    seeks && h("option", { value: "time" }, "a time (UTC)"),
  );
  const offset = h("input", {
    id: "start-offset",
    value: isOffset ? from : "",
    placeholder: "0000000000000000_0000000000000000",
    autocomplete: "off",
    spellcheck: "false",
    "aria-describedby": "start-note",
  });
  const last = h("input", { id: "start-last", type: "number", min: "1", value: "100", inputmode: "numeric" });
  const time = h("input", { id: "start-time", type: "datetime-local", step: "0.001" });
  const form = h(
    "form",
    { class: "inline", id: "start" },
    h("label", { for: "start-from" }, "Start from"),
    choice,
    h("label", { for: "start-offset" }, "Offset"),
    offset,
    seeks && [h("label", { for: "start-last" }, "N"), last, h("label", { for: "start-time" }, "Time (UTC)"), time],
    h("button", {}, "Go"),
    startNote,
  );
  offset.addEventListener("input", () => { choice.value = "offset"; });
  last.addEventListener("input", () => { choice.value = "last"; });
  time.addEventListener("input", () => { choice.value = "time"; });
  async function resolve() {
    if (choice.value === "offset") return offset.value.trim();
    if (choice.value === "last" || choice.value === "time") {
      const query = choice.value === "last"
        ? `last=${encodeURIComponent(last.value)}`
        : `time=${Date.parse(`${time.value}Z`)}`;
      return (await getJSON(`${consoleApi("seek", bucket, stream)}?${query}`)).offset;
    }
    return choice.value;
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let value;
    try {
      value = await resolve();
    } catch (error) {
      note(startNote, error.message);
      return;
    }
    // The link names the resolved offset: reloading it shows exactly this view again.
    const target = `#/s/${encodeURIComponent(bucket)}/${encodeURIComponent(stream)}?from=${encodeURIComponent(value)}`;
    if (location.hash === target) window.dispatchEvent(new HashChangeEvent("hashchange"));
    else location.hash = target;
  });
  return form;
}

/** The Kafka coordinates of the first messages from where the view started. */
function coordinates(bucket, stream, from) {
  const result = h("div", { id: "coordinates" });
  const button = h("button", { type: "button", id: "show-coordinates" }, "Kafka coordinates");
  button.addEventListener("click", async () => {
    try {
      const query = `offset=${encodeURIComponent(from)}&limit=100`;
      const listed = await getJSON(`${consoleApi("records", bucket, stream)}?${query}`);
      const rows = listed.records.map((r) =>
        h(
          "tr",
          {},
          h("td", { class: "num offset" }, r.offset),
          h("td", { class: "num" }, String(r.kafka_offset)),
          h("td", {}, new Date(r.timestamp_ms).toISOString()),
          h("td", { class: "num" }, String(r.bytes)),
          h("td", {}, r.written_by),
        ),
      );
      result.replaceChildren(
        h(
          "table",
          {},
          h("caption", {}, `${listed.topic} partition ${listed.partition}: the first ${rows.length} messages from ${from}`),
          h("thead", {}, h("tr", {}, ["Offset", "Kafka offset", "Timestamp (UTC)", "Bytes", "Written by"].map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", {}, rows),
        ),
      );
    } catch (error) {
      result.replaceChildren(h("p", { class: "note error" }, error.message));
    }
  });
  return h("details", {}, h("summary", {}, "Kafka records"), button, result);
}
