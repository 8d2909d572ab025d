#!/usr/bin/env node
// An example Gaffer remote worker: node example.mjs
//
// Environment: GAFFER_URL (default http://127.0.0.1:8080), GAFFER_TOKEN (a
// token with the worker scope), GAFFER_QUEUES (comma-separated, default
// "default"), GAFFER_CONCURRENCY (default 4), GAFFER_STOP_TIMEOUT
// (seconds, default 30).
//
// Kinds it works:
//   greet  {"name": "Ada"}        -> {"greeting": "hello, Ada", "by": "typescript", "attempt": n}
//   count  {"to": 5, "ms": 100}   counts to `to`, `ms` apart, reporting progress; stops
//                                 early when cancelled -> {"counted": to}
//   flaky  {}                     fails its first attempt (retry after 0.2s), then succeeds
//   later  {"seconds": 0.5}       snoozes its first attempt, then succeeds
//   reject {"reason": "..."}      fails permanently with the reason
//   trace  {}                     -> {"traceparent": the W3C trace context it was enqueued under, or null}

import { Permanent, RetryLater, Snooze, Worker } from "./gaffer.mjs";

const env = process.env;
const w = new Worker({
  url: env.GAFFER_URL ?? "http://127.0.0.1:8080",
  token: env.GAFFER_TOKEN ?? "",
  queues: (env.GAFFER_QUEUES ?? "default").split(","),
  name: "typescript-example",
  version: "example",
  concurrency: Number(env.GAFFER_CONCURRENCY ?? 4),
  stopTimeoutMs: Number(env.GAFFER_STOP_TIMEOUT ?? 30) * 1000,
  // Printed for the tests (clients/clients_test.go), which wait for it.
  onRegistered: (id) => console.log(`WORKER ${id}`),
  logger: { info: console.error, warn: console.error, error: console.error },
});

/**
 * Waits ms, or less when signal aborts first.
 * @param {number} ms @param {AbortSignal} signal
 * @returns {Promise<void>}
 */
function pause(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

w.handle("trace", async (job) => ({ traceparent: job.traceparent ?? null }));
w.handle("greet", async (job) => ({ greeting: `hello, ${job.args?.name ?? "world"}`, by: "typescript", attempt: job.attempt }));

w.handle("count", async (job) => {
  const to = Number(job.args?.to ?? 5);
  const ms = Number(job.args?.ms ?? 100);
  for (let i = 1; i <= to; i++) {
    await pause(ms, job.signal);
    if (job.signal.aborted) throw new Error(`stopped at ${i - 1} of ${to}`);
    await job.progress((100 * i) / to, `counted ${i} of ${to}`);
  }
  return { counted: to, by: "typescript" };
});

w.handle("flaky", async (job) => {
  if (job.attempt === 1) throw new RetryLater("first attempts always fail", 0.2);
  return { attempt: job.attempt, by: "typescript" };
});

w.handle("later", async (job) => {
  if (job.attempt === 1) throw new Snooze(Number(job.args?.seconds ?? 0.5));
  return { attempt: job.attempt, by: "typescript" };
});

w.handle("reject", async (job) => {
  throw new Permanent(job.args?.reason ?? "rejected");
});

await w.run();
console.log("STOPPED");
