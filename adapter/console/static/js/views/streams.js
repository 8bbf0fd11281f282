// The streams of a bucket: prefix search and cursor paging, both kept in the URL.

import { bucketPath, call, getJSON, refused, streamPath } from "../api.js";
import { append, h, note, status } from "../dom.js";
import { mountBadge } from "./buckets.js";

const PAGE = 50;

function when(ms) {
  return ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "";
}

function pageLink(bucket, prefix, after, trail, limit) {
  const params = new URLSearchParams();
  if (prefix) params.set("prefix", prefix);
  if (after) params.set("after", after);
  for (const cursor of trail) params.append("trail", cursor);
  if (limit !== PAGE) params.set("limit", String(limit));
  const query = params.toString();
  return `#/b/${encodeURIComponent(bucket)}${query ? `?${query}` : ""}`;
}

export async function streamsView(view, bucket, params, context) {
  const prefix = params.get("prefix") ?? "";
  const after = params.get("after") ?? "";
  const trail = params.getAll("trail"); // the `after` of every earlier page: Prev pops one
  const limit = Number(params.get("limit") ?? PAGE) || PAGE;
  const query = new URLSearchParams({ limit: String(limit) });
  if (prefix) query.set("prefix", prefix);
  if (after) query.set("after", after);
  const [page, { mount }] = await Promise.all([getJSON(`${bucketPath(bucket)}/streams?${query}`), getJSON(bucketPath(bucket))]);
  const rows = page.streams.map((s) =>
    h(
      "tr",
      {},
      h("th", { scope: "row" }, h("a", { href: `#/s/${encodeURIComponent(bucket)}/${encodeURIComponent(s.stream_id)}` }, s.stream_id)),
      h("td", {}, h("span", { class: `badge ${s.status.toLowerCase()}` }, s.status)),
      h("td", {}, s.content_type),
      h("td", { class: "num offset" }, s.tail_offset),
      h("td", {}, when(s.last_write_at_ms)),
    ),
  );
  const search = h("input", { id: "prefix", name: "prefix", type: "search", value: prefix, autocomplete: "off" });
  const searchForm = h("form", { class: "inline", role: "search" }, h("label", { for: "prefix" }, "Stream id prefix"), search, h("button", {}, "Filter"));
  searchForm.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = pageLink(bucket, search.value, "", [], limit);
  });
  const prev = trail.length || after
    ? h("a", { class: "button", rel: "prev", href: pageLink(bucket, prefix, trail.at(-1) ?? "", trail.slice(0, -1), limit) }, "Prev")
    : h("button", { type: "button", disabled: true }, "Prev");
  const next = page.next_cursor
    ? h("a", { class: "button", rel: "next", href: pageLink(bucket, prefix, page.next_cursor, [...trail, after], limit) }, "Next")
    : h("button", { type: "button", disabled: true }, "Next");
  append(
    view,
    h("h1", {}, `Streams of ${bucket}`, mount ? [" ", mountBadge(mount)] : null),
    mount ? h("p", { class: "note", id: "mount-note" }, `A mounted Kafka topic: each stream is a record key (${mount.key_encoding}; a key that is no valid id is ~ and its base64url).`) : null,
    searchForm,
    h(
      "table",
      { id: "streams" },
      h("caption", {}, `${page.streams.length} streams on this page${prefix ? ` starting with “${prefix}”` : ""}`),
      h(
        "thead",
        {},
        h("tr", {}, ["Stream", "Status", "Content type", "Tail offset", "Last write (UTC)"].map((t) => h("th", { scope: "col" }, t))),
      ),
      h("tbody", {}, rows),
    ),
    h("nav", { class: "pager", "aria-label": "Pages" }, prev, " ", next),
    context.mode === "rw" && !mount ? createForm(bucket) : null,
  );
  status(`${page.streams.length} streams shown`);
}

function createForm(bucket) {
  const id = h("input", { id: "new-stream", required: true, autocomplete: "off" });
  const type = h("input", { id: "new-type", value: "application/json", list: "content-types" });
  const ttl = h("input", { id: "new-ttl", type: "number", min: "1", inputmode: "numeric" });
  const result = h("p", { class: "note", id: "new-stream-note" });
  const form = h(
    "form",
    { class: "grid" },
    h("h2", {}, "Create a stream"),
    h("label", { for: "new-stream" }, "Stream id"),
    id,
    h("label", { for: "new-type" }, "Content type"),
    type,
    h("datalist", { id: "content-types" }, ["application/json", "text/plain", "application/octet-stream"].map((v) => h("option", { value: v }))),
    h("label", { for: "new-ttl" }, "TTL (seconds, optional)"),
    ttl,
    h("button", {}, "Create"),
    result,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const headers = { "Content-Type": type.value };
    if (ttl.value) headers["Stream-TTL"] = ttl.value;
    try {
      await call("PUT", streamPath(bucket, id.value), { headers });
      location.hash = `#/s/${encodeURIComponent(bucket)}/${encodeURIComponent(id.value)}`;
    } catch (error) {
      refused(error, form.querySelector("button"));
      note(result, error.message);
    }
  });
  return form;
}
