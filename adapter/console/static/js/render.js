// One message as DOM: JSON pretty or raw, text, or hex + ASCII; large ones as a preview.

import { download, h } from "./dom.js";
import { reformat } from "./json.js";

export const COLLAPSE_BYTES = 64 * 1024;
const PREVIEW_BYTES = 4096;
const encoder = new TextEncoder();

/** A message of the view: kind is "json", "text" or "binary"; raw a string or bytes;
 * nextOffset the offset to resume after it (null when not known). */
export function message(kind, raw, n, nextOffset) {
  const size = kind === "binary" ? raw.length : encoder.encode(raw).length;
  return { kind, raw, n, nextOffset, size, node: null };
}

export function hexdump(bytes, limit = bytes.length) {
  const lines = [];
  for (let at = 0; at < Math.min(bytes.length, limit); at += 16) {
    const row = bytes.subarray(at, Math.min(at + 16, bytes.length));
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(row, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : "."));
    lines.push(`${at.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  |${ascii.join("")}|`);
  }
  return lines.join("\n");
}

function body(item, options) {
  const large = item.size > COLLAPSE_BYTES;
  if (item.kind === "binary") {
    return hexdump(item.raw, large ? PREVIEW_BYTES : item.raw.length);
  }
  if (large) return item.raw.slice(0, PREVIEW_BYTES);
  if (item.kind === "json" && options.pretty) return reformat(item.raw, 2);
  return item.raw;
}

function saveButton(item, streamId) {
  const ext = { json: "json", text: "txt", binary: "bin" }[item.kind];
  return h(
    "button",
    {
      type: "button",
      class: "small",
      onclick: () => download(`${streamId}-${item.n}.${ext}`, [item.raw], "application/octet-stream"),
    },
    `Download (${item.size} bytes)`,
  );
}

/** A table row for a message. */
export function row(item, streamId, options) {
  const large = item.size > COLLAPSE_BYTES;
  const content = h("pre", { class: `msg ${item.kind}` }, body(item, options));
  const cell = h("td", {}, content);
  if (large) cell.prepend(h("p", { class: "note" }, `Preview of ${item.size} bytes`));
  return h(
    "tr",
    { "data-n": item.n },
    h("td", { class: "num" }, String(item.n)),
    h("td", { class: "num offset" }, item.nextOffset),
    h("td", { class: "num" }, String(item.size)),
    cell,
    h("td", {}, item.kind === "binary" || large ? saveButton(item, streamId) : null),
  );
}

/** One NDJSON line of an export: JSON as itself, text as a string, bytes as base64. */
export function ndjsonLine(item) {
  if (item.kind === "json") return reformat(item.raw, 0);
  if (item.kind === "text") return JSON.stringify(item.raw);
  let binary = "";
  for (const b of item.raw) binary += String.fromCharCode(b);
  return JSON.stringify({ base64: btoa(binary) });
}
