// The buckets: a table with stream counts; create and delete in read-write mode.

import { bucketPath, call, consoleApi, getJSON, refused } from "../api.js";
import { append, ask, h, note, status } from "../dom.js";

const BUCKET_ID = "^[a-z0-9_\\-]{4,64}$";

export async function bucketsView(view, context) {
  let buckets;
  try {
    ({ buckets } = await getJSON(consoleApi("buckets")));
  } catch (error) {
    if (error.status !== 403) throw error;
    append(view, h("p", { class: "note error", role: "alert" }, `This token may not list buckets (${error.message}).`), openForm());
    return;
  }
  const rw = context.mode === "rw";
  const rows = buckets.map((bucket) =>
    h(
      "tr",
      {},
      h(
        "th",
        { scope: "row" },
        h("a", { href: `#/b/${encodeURIComponent(bucket.bucket_id)}` }, bucket.bucket_id),
        bucket.mount ? [" ", mountBadge(bucket.mount)] : null,
      ),
      h("td", { class: "num" }, String(bucket.streams ?? "")),
      h("td", {}, retention(bucket)),
      rw ? h("td", {}, deleteButton(bucket.bucket_id, bucket.mount)) : null,
    ),
  );
  append(
    view,
    h("h1", {}, "Buckets"),
    h(
      "table",
      {},
      h("caption", {}, `${buckets.length} buckets`),
      h(
        "thead",
        {},
        h("tr", {}, h("th", { scope: "col" }, "Bucket"), h("th", { scope: "col" }, "Streams"), h("th", { scope: "col" }, "Retention"), rw ? h("th", { scope: "col" }, "Actions") : null),
      ),
      h("tbody", {}, rows),
    ),
    rw ? createForm() : null,
  );
  status(`${buckets.length} buckets`);
}

/** A bucket's age retention as a person reads it; a mount's is its topic's own. */
function retention(bucket) {
  if (bucket.mount) return "the topic's own";
  const ms = bucket.retention?.max_age_ms;
  if (ms === null || ms === undefined) return "none";
  const units = [["d", 86400000], ["h", 3600000], ["min", 60000], ["s", 1000]];
  const [unit, size] = units.find(([, size]) => ms % size === 0) ?? ["ms", 1];
  return `older than ${ms / size} ${unit} trimmed`;
}

/** For a token scoped to some buckets: open one by its id. */
function openForm() {
  const input = h("input", { id: "open-bucket", required: true, pattern: BUCKET_ID, autocomplete: "off" });
  const form = h("form", { class: "inline" }, h("label", { for: "open-bucket" }, "Open bucket"), input, h("button", {}, "Open"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/b/${encodeURIComponent(input.value)}`;
  });
  return form;
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
      refused(error, form.querySelector("button"));
      note(result, error.message);
    }
  });
  return form;
}

/** A mounted topic's badge: the Kafka topic its streams (record keys) come from. */
export function mountBadge(mount) {
  const title = `Kafka topic ${mount.topic}: one stream per record key (${mount.key_encoding})${mount.appends ? ", appends allowed" : ", read-only"}`;
  return h("span", { class: "badge mount", title }, `topic ${mount.topic}`);
}

function deleteButton(bucketId, mount) {
  const result = h("span", { class: "note" });
  const verb = mount ? "Unmount" : "Delete";
  const button = h("button", { type: "button", class: "danger small" }, verb);
  button.addEventListener("click", async () => {
    const why = mount ? `The topic ${mount.topic} is left as it is.` : "Only an empty bucket can be deleted.";
    const answer = await ask(`${verb} bucket ${bucketId}?`, h("p", {}, why), verb, { danger: true });
    if (!answer) return;
    try {
      await call("DELETE", bucketPath(bucketId));
      button.closest("tr").remove();
      status(`bucket ${bucketId} ${mount ? "unmounted" : "deleted"}`);
    } catch (error) {
      refused(error, button);
      note(result, error.status === 409 ? `Not empty: ${error.message}` : error.message);
    }
  });
  return h("span", {}, button, " ", result);
}
