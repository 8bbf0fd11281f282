// Vitest config for the conformance harness (see README.md).
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// Where the JSON report goes; run.mjs reads the same variable.
const resultsFile = process.env.CONFORMANCE_RESULTS_FILE || "results/latest.json";

export default defineConfig({
  test: {
    root: fileURLToPath(new URL(".", import.meta.url)),
    include: ["conformance.test.mjs"],
    environment: "node",
    // One file, one worker: the suite runs against a single shared server.
    pool: "forks",
    fileParallelism: false,
    // The suite sets its own, longer timeouts on long-poll/SSE/large-payload tests;
    // this default covers the rest on a slow (Kafka-backed) server.
    testTimeout: 30_000,
    hookTimeout: 30_000,
    teardownTimeout: 10_000,
    retry: 0,
    passWithNoTests: false,
    reporters: ["default", ["json", { outputFile: resultsFile }]],
  },
});
