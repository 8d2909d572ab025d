// Unit tests of gaffer.mjs against a stand-in node on 127.0.0.1:
// node --test test/*.test.mjs. tsc (npm run typecheck) checks this file
// against gaffer.d.mts, and it uses every name that file declares, so a
// declaration that drifts from the module fails here one way or the other.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  APIError, BATCH, Job, LeaseLost, MAX_CLAIM_WAIT, PROTOCOL, Permanent, RetryLater, Snooze, Worker,
} from "../gaffer.mjs";
import { FakeNode, WORKER_ID } from "./fake-node.mjs";

/** @typedef {import("../gaffer.mjs").WorkerOptions} WorkerOptions */
/** @typedef {import("../gaffer.mjs").ProtocolEntry} ProtocolEntry */

const quiet = { info() {}, warn() {}, error() {} };

/** @param {FakeNode} node @param {Partial<WorkerOptions>} [o] */
function worker(node, o = {}) {
  return new Worker({ url: node.url, token: "tok", queues: ["ts"], stopTimeoutMs: 2000, logger: quiet, ...o });
}

/** @param {(node: FakeNode) => Promise<void>} fn */
async function withNode(fn, o = {}) {
  const node = await new FakeNode(o).start();
  try {
    await fn(node);
  } finally {
    await node.close();
  }
}

test("each outcome is written with its attempt's lease", () => withNode(async (node) => {
  /** @type {string[]} */
  const registered = [];
  /** @type {Job<{name: string}>[]} */
  const seen = [];
  const w = worker(node, { name: "unit", version: "9", concurrency: 8, onRegistered: (id) => registered.push(id) });
  /** @type {import("../gaffer.mjs").Handler<{name: string}>} */
  const greet = (job) => {
    seen.push(job);
    return { hello: job.args.name, attempt: job.attempt };
  };
  const same = w.handle("greet", greet)
    .handle("reject", () => { throw new Permanent("no good"); })
    .handle("retry", () => { throw new RetryLater("later please", 0.25); })
    .handle("snooze", () => { throw new Snooze(1.5); })
    .handle("boom", () => { throw new TypeError("kaput"); });
  assert.equal(same, w);
  node.addJob(1, "greet", { name: "Ada" });
  node.addJob(2, "reject");
  node.addJob(3, "retry");
  node.addJob(4, "snooze");
  node.addJob(5, "boom");
  node.addJob(6, "nobody");
  const done = w.run({ signals: false });
  await node.waitFor(() => node.calls("complete").length === 1 && node.calls("fail").length === 4 && node.calls("snooze").length === 1);
  w.stop();
  await done;

  assert.deepEqual(registered, [WORKER_ID]);
  assert.equal(w.id, WORKER_ID);
  assert.deepEqual(node.calls("register")[0].body, { name: "unit", version: "9", queues: ["ts"], kinds: ["boom", "greet", "reject", "retry", "snooze"] });
  for (const r of node.requests) assert.equal(r.headers.authorization, "Bearer tok", r.path);

  const j = seen[0];
  assert.ok(j instanceof Job);
  assert.deepEqual(
    [j.id, j.kind, j.queue, j.tenant, j.args, j.inputs, j.attempt, j.maxAttempts, j.workflowRun, j.step, j.traceparent, j.tracestate, j.leaseToken],
    [1, "greet", "ts", "t", { name: "Ada" }, null, 1, 3, null, null, "00-trace", null, "lease-1-1"]);
  assert.equal(j.lost, false);
  assert.equal(j.cancelRequested, false);
  assert.equal(j.signal.aborted, false);

  assert.deepEqual(node.calls("complete")[0].body, { jobs: [{ id: 1, attempt: 1, lease_token: "lease-1-1", result: { hello: "Ada", attempt: 1 } }] });
  const fails = new Map(node.calls("fail").map((r) => [Number(r.path.split("/")[4]), r.body]));
  assert.deepEqual(fails.get(2), { attempt: 1, lease_token: "lease-2-1", error: "no good", permanent: true });
  assert.deepEqual(fails.get(3), { attempt: 1, lease_token: "lease-3-1", error: "later please", permanent: false, retry_after: "0.250s" });
  assert.equal(fails.get(5).error, "kaput");
  assert.equal(fails.get(5).permanent, false);
  assert.match(fails.get(5).stack, /TypeError: kaput/);
  assert.equal(fails.get(6).permanent, true);
  assert.match(fails.get(6).error, /no handler for kind "nobody"/);
  assert.deepEqual(node.calls("snooze")[0].body, { attempt: 1, lease_token: "lease-4-1", delay: "1.500s" });
  assert.deepEqual(node.calls("claim")[0].body, { worker: WORKER_ID, max: 8, wait: "1.000s" });
  assert.deepEqual(node.calls("leave").map((r) => r.path), [`/v1/workers/${WORKER_ID}`]);
}));

test("progress on a lost lease rejects with LeaseLost and drops the result", () => withNode(async (node) => {
  node.script("progress", { status: 409, body: { code: "lease_lost", detail: "gone", status: 409 } });
  const w = worker(node);
  /** @type {unknown[]} */
  const seen = [];
  w.handle("work", async (job) => {
    await assert.rejects(job.progress(50, "half"), LeaseLost);
    seen.push([job.lost, job.signal.aborted]);
    // A second report is refused without asking the node.
    await assert.rejects(job.progress(60), LeaseLost);
    return "too late";
  });
  node.addJob(7, "work");
  const done = w.run({ signals: false });
  await node.waitFor(() => seen.length === 1);
  await new Promise((r) => setTimeout(r, 100));
  w.stop();
  await done;
  assert.deepEqual(seen, [[true, true]]);
  assert.deepEqual(node.calls("progress").map((r) => r.body), [{ attempt: 1, lease_token: "lease-7-1", percent: 50, message: "half" }]);
  assert.deepEqual(node.calls("complete"), []);
}));

test("a rate-limited completion is written again after Retry-After", () => withNode(async (node) => {
  node.script("complete", { status: 429, body: { code: "rate_limited", detail: "slow down", status: 429 }, headers: { "Retry-After": "0.05" } });
  const w = worker(node).handle("greet", () => "hi");
  node.addJob(8, "greet");
  const done = w.run({ signals: false });
  await node.waitFor(() => node.calls("complete").length === 2);
  w.stop();
  await done;
  assert.deepEqual(node.calls("complete")[0].body, node.calls("complete")[1].body);
}));

test("a heartbeat saying cancel_requested aborts job.signal", () => withNode(async (node) => {
  node.heartbeatOutcomes.set(9, { cancel_requested: true });
  const w = worker(node);
  /** @type {Job[]} */
  const jobs = [];
  w.handle("long", async (job) => {
    jobs.push(job);
    await new Promise((resolve, reject) => {
      const t = setTimeout(resolve, 5000);
      job.signal.addEventListener("abort", () => { clearTimeout(t); reject(new Error("cancelled")); });
    });
  });
  node.addJob(9, "long");
  const done = w.run({ signals: false });
  await node.waitFor(() => node.calls("fail").length === 1);
  w.stop();
  await done;
  assert.deepEqual(node.calls("heartbeat")[0].body, { worker: WORKER_ID, jobs: [{ id: 9, attempt: 1, lease_token: "lease-9-1" }] });
  assert.equal(node.calls("fail")[0].body.error, "cancelled");
  assert.equal(jobs[0].cancelRequested, true);
}, { heartbeatInterval: 0.05 }));

test("a draining claim stops the worker, which leaves", () => withNode(async (node) => {
  node.draining = true;
  await worker(node).handle("greet", () => "hi").run({ signals: false });
  assert.equal(node.calls("leave").length, 1);
}));

test("worker_gone registers again", () => withNode(async (node) => {
  node.script("claim", { status: 404, body: { code: "worker_gone", detail: "silent", status: 404 } });
  const w = worker(node).handle("greet", () => "hi");
  const done = w.run({ signals: false });
  await node.waitFor(() => node.calls("register").length === 2);
  w.stop();
  await done;
}));

test("a job past the stop deadline is let go, not completed", () => withNode(async (node) => {
  const w = worker(node, { stopTimeoutMs: 300 });
  /** @type {Job[]} */
  const jobs = [];
  w.handle("stuck", async (job) => {
    jobs.push(job);
    await new Promise((r) => setTimeout(r, 1000));
    return "never written";
  });
  node.addJob(11, "stuck");
  const done = w.run({ signals: false });
  await node.waitFor(() => jobs.length === 1);
  const t = Date.now();
  w.stop();
  await done;
  assert.ok(Date.now() - t < 900, `run() took ${Date.now() - t}ms after stop()`);
  assert.equal(jobs[0].lost, true);
  assert.equal(jobs[0].signal.aborted, true);
  assert.equal(node.calls("leave").length, 1);
  await new Promise((r) => setTimeout(r, 800));
  assert.deepEqual(node.calls("complete"), []);
}));

test("a problem answer becomes an APIError", () => withNode(async (node) => {
  node.script("register", { status: 503, body: { code: "unavailable", detail: "busy", status: 503 }, headers: { "Retry-After": "2" } });
  const w = worker(node).handle("greet", () => "hi");
  const err = await w.run({ signals: false }).then(() => null, (e) => e);
  assert.ok(err instanceof APIError);
  assert.deepEqual([err.status, err.code, err.detail, err.retryAfter, err.transient], [503, "unavailable", "busy", 2, true]);
  const lost = new APIError(409, "lease_lost", "");
  assert.equal(lost.transient, false);
  assert.equal(lost.retryAfter, undefined);
}));

test("bad construction is refused", () => {
  assert.throws(() => new Worker({ url: "http://127.0.0.1:1", token: "t", queues: [] }), /queues/);
  assert.throws(() => new Worker({ url: "ftp://127.0.0.1", token: "t", queues: ["q"] }), /http:\/\/ or https:\/\//);
  return assert.rejects(new Worker({ url: "http://127.0.0.1:1", token: "t", queues: ["q"], kinds: [] }).run({ signals: false }), /register a handler/);
});

test("the constants and the protocol table", () => {
  assert.equal(BATCH, 500);
  assert.equal(MAX_CLAIM_WAIT, 60);
  /** @type {ProtocolEntry} */
  const claim = PROTOCOL.claim;
  assert.deepEqual([claim.method, claim.path], ["POST", "/v1/work/claim"]);
  assert.deepEqual(PROTOCOL.problem.codes, ["lease_lost", "worker_gone", "not_found"]);
  assert.equal(new RetryLater("m", 2).seconds, 2);
  assert.equal(new Snooze(3).seconds, 3);
  assert.ok(new Permanent("p") instanceof Error);
  assert.ok(new LeaseLost("l") instanceof Error);
});
