// The buckets: a table with stream counts; create and delete in read-write mode.

import { bucketPath, call, consoleApi, getJSON } from "../api.js";
import { ask, h, note, status } from "../dom.js";

const BUCKET_ID = "^[a-z0-9_\\-]{4,64}$";

export async function bucketsView(view, context) {
  const { buckets } = await getJSON(consoleApi("buckets"));
  const rw = context.mode === "rw";
  const rows = buckets.map((bucket) =>
    h(
      "tr",
      {},
      h("th", { scope: "row" }, h("a", { href: `#/b/${encodeURIComponent(bucket.bucket_id)}` }, bucket.bucket_id)),
      h("td", { class: "num" }, String(bucket.streams)),
      rw ? h("td", {}, deleteButton(bucket.bucket_id)) : null,
    ),
  );
  view.append(
    h("h1", {}, "Buckets"),
    h(
      "table",
      {},
      h("caption", {}, `${buckets.length} buckets`),
      h(
        "thead",
        {},
        h("tr", {}, h("th", { scope: "col" }, "Bucket"), h("th", { scope: "col" }, "Streams"), rw ? h("th", { scope: "col" }, "Actions") : null),
      ),
      h("tbody", {}, rows),
    ),
    rw ? createForm() : null,
  );
  status(`${buckets.length} buckets`);
}

function createForm() {
  const input = h("input", {
    id: "new-bucket",
    name: "bucket",
    required: true,
    pattern: BUCKET_ID,
    autocomplete: "off",
    "aria-describedby": "new-bucket-note",
  });
  const result = h("p", { id: "new-bucket-note", class: "note" }, "4 to 64 of a-z, 0-9, _ and -");
  input.addEventListener("input", () => {
    const ok = input.validity.valid || input.value === "";
    note(result, ok ? "4 to 64 of a-z, 0-9, _ and -" : "Use 4 to 64 of a-z, 0-9, _ and -", ok ? "" : "error");
  });
  const form = h(
    "form",
    { class: "inline" },
    h("h2", {}, "Create a bucket"),
    h("label", { for: "new-bucket" }, "Bucket id"),
    input,
    h("button", {}, "Create"),
    result,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await call("PUT", bucketPath(input.value));
      location.hash = `#/b/${encodeURIComponent(input.value)}`;
    } catch (error) {
      note(result, error.message);
    }
  });
  return form;
}

function deleteButton(bucketId) {
  const result = h("span", { class: "note" });
  const button = h("button", { type: "button", class: "danger small" }, "Delete");
  button.addEventListener("click", async () => {
    const answer = await ask(`Delete bucket ${bucketId}?`, h("p", {}, "Only an empty bucket can be deleted."), "Delete", { danger: true });
    if (!answer) return;
    try {
      await call("DELETE", bucketPath(bucketId));
      button.closest("tr").remove();
      status(`bucket ${bucketId} deleted`);
    } catch (error) {
      note(result, error.status === 409 ? `Not empty: ${error.message}` : error.message);
    }
  });
  return h("span", {}, button, " ", result);
}
