// A Gaffer remote worker for Node 20+, no dependencies: Node's own fetch.
//
// A worker registers with a Gaffer node, long-polls for batches of jobs
// of its queues and kinds, runs each with the handler registered for its
// kind, heartbeats every running job in one call per interval, and
// reports each attempt's outcome: complete (batched), fail (retryable or
// permanent), snooze, progress. Every write names the attempt and its
// lease token; once the attempt no longer owns its job (409 lease_lost,
// or a heartbeat saying so) the worker drops that job's result. On
// SIGTERM or SIGINT it stops claiming, gives in-flight jobs until a
// deadline to finish, then leaves (DELETE /v1/workers/{id}), which
// releases whatever still runs.
//
//   const w = new Worker({ url: "http://127.0.0.1:8080", token, queues: ["ts"] });
//   w.handle("greet", async (job) => {
//     await job.progress(50, "half way");
//     return { greeting: `hello, ${job.args.name}` };
//   });
//   await w.run();
//
// Written as JavaScript with JSDoc types, its types in gaffer.d.mts: it
// runs as it is, with no build step (see README.md). The protocol is in
// docs/workers.md; every endpoint and field this module uses is listed in
// PROTOCOL, which clients/protocol_test.go checks against api/openapi.json.

// The endpoints and fields this client uses, and nothing else: requests
// are built by call(), which refuses a field not listed under "send", and
// answers are read through answer(), which throws on a field not listed
// under "read" ("jobs[].id": the field id of each item of the list jobs).
// Keep it JSON (double quotes, no trailing commas).
/**
 * @typedef {{method?: "GET" | "POST" | "DELETE", path?: string, schema?: string,
 *   send?: string[], read: string[], codes?: string[]}} ProtocolEntry
 * @type {Readonly<Record<string, ProtocolEntry>>}
 */
// gaffer:protocol begin
export const PROTOCOL = {
  "register": {"method": "POST", "path": "/v1/workers",
    "send": ["name", "version", "queues", "kinds"],
    "read": ["id", "lease_ttl_seconds", "heartbeat_interval_seconds", "max_wait_seconds"]},
  "leave": {"method": "DELETE", "path": "/v1/workers/{id}",
    "send": [],
    "read": ["released"]},
  "claim": {"method": "POST", "path": "/v1/work/claim",
    "send": ["worker", "max", "wait"],
    "read": ["draining", "jobs", "jobs[].id", "jobs[].tenant", "jobs[].kind", "jobs[].queue", "jobs[].args",
      "jobs[].inputs", "jobs[].attempt", "jobs[].max_attempts", "jobs[].lease_token", "jobs[].workflow_run",
      "jobs[].step", "jobs[].traceparent", "jobs[].tracestate"]},
  "heartbeat": {"method": "POST", "path": "/v1/work/heartbeat",
    "send": ["worker", "jobs", "jobs[].id", "jobs[].attempt", "jobs[].lease_token"],
    "read": ["jobs", "jobs[].id", "jobs[].status", "jobs[].cancel_requested"]},
  "complete": {"method": "POST", "path": "/v1/work/complete",
    "send": ["jobs", "jobs[].id", "jobs[].attempt", "jobs[].lease_token", "jobs[].result"],
    "read": ["jobs", "jobs[].id", "jobs[].status"]},
  "fail": {"method": "POST", "path": "/v1/work/jobs/{id}/fail",
    "send": ["attempt", "lease_token", "error", "permanent", "retry_after", "stack"],
    "read": ["state"]},
  "snooze": {"method": "POST", "path": "/v1/work/jobs/{id}/snooze",
    "send": ["attempt", "lease_token", "delay"],
    "read": ["state"]},
  "progress": {"method": "POST", "path": "/v1/work/jobs/{id}/progress",
    "send": ["attempt", "lease_token", "percent", "message"],
    "read": []},
  "problem": {"schema": "Problem",
    "read": ["code", "detail", "status"],
    "codes": ["lease_lost", "worker_gone", "not_found"]}
};
// gaffer:protocol end

/** An error answer of the API (application/problem+json). */
export class APIError extends Error {
  /**
   * @param {number} status @param {string} code @param {string} detail
   * @param {number} [retryAfter] seconds, from a 429's or 503's Retry-After header
   */
  constructor(status, code, detail, retryAfter) {
    super(`${status} ${code}: ${detail}`);
    this.name = "APIError";
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.retryAfter = retryAfter;
  }

  /** Worth retrying: rate limited, or the node could not answer. */
  get transient() {
    return this.status === 429 || this.status >= 500;
  }
}

/** The attempt no longer owns its job: stop working on it. Thrown by
 * job.progress; a handler may let it propagate. */
export class LeaseLost extends Error {
  constructor(message) { super(message); this.name = "LeaseLost"; }
}

/** Throw from a handler to fail the job without further attempts. */
export class Permanent extends Error {
  constructor(message) { super(message); this.name = "Permanent"; }
}

/** Throw from a handler to fail this attempt and retry after `seconds`
 * (instead of the job's backoff). */
export class RetryLater extends Error {
  /** @param {string} message @param {number} seconds */
  constructor(message, seconds) { super(message); this.name = "RetryLater"; this.seconds = seconds; }
}

/** Throw from a handler to put the job back, due again in `seconds`,
 * without using up an attempt. */
export class Snooze extends Error {
  /** @param {number} seconds */
  constructor(seconds) { super(`snooze ${seconds}s`); this.name = "Snooze"; this.seconds = seconds; }
}

/** A Go-style duration the API parses ("1.500s"). @param {number} seconds */
function duration(seconds) {
  return `${Math.max(0, seconds).toFixed(3)}s`;
}

/** The most jobs one claim, heartbeat or completion names (a claim
 * takes at most 1,000). */
export const BATCH = 500;

/** The longest a claim asks to wait, in seconds: a node may allow
 * minutes, but a shorter poll costs little and keeps clear of proxies'
 * idle timeouts (and of fetch's own 300s wait for an answer). */
export const MAX_CLAIM_WAIT = 60;

/**
 * Wraps a decoded answer so that only the fields PROTOCOL lists for op
 * can be read: a misspelt or undeclared field throws instead of quietly
 * reading undefined.
 * @param {string} op @param {any} value @param {string} [prefix]
 */
function answer(op, value, prefix = "") {
  const read = PROTOCOL[op].read;
  return new Proxy(value ?? {}, {
    get(target, name) {
      // A promise resolved with the answer looks for then.
      if (typeof name !== "string" || name === "then" || name === "toJSON") return undefined;
      const path = prefix + name;
      if (!read.includes(path)) throw new Error(`${op}: field ${path} is not in PROTOCOL.${op}.read`);
      const v = target[name];
      if (Array.isArray(v) && read.some((p) => p.startsWith(path + "[]."))) {
        return v.map((x) => (x && typeof x === "object" ? answer(op, x, path + "[].") : x));
      }
      return v;
    },
  });
}

/** @param {string} op @param {Record<string, any>} body @param {string} [prefix] */
function checkSend(op, body, prefix = "") {
  const allowed = PROTOCOL[op].send;
  for (const [k, v] of Object.entries(body)) {
    const path = prefix + k;
    if (!allowed.includes(path)) throw new Error(`${op}: field ${path} is not in PROTOCOL.${op}.send`);
    if (Array.isArray(v)) {
      for (const x of v) if (x && typeof x === "object") checkSend(op, x, path + "[].");
    }
  }
}

/**
 * Pairs a batch's jobs with the answer's outcomes, which come in the
 * batch's order.
 * @param {Job[]} jobs @param {any[]} outs
 * @returns {Array<[Job, any]>}
 */
function outcomes(jobs, outs) {
  if (jobs.length !== outs.length || jobs.some((j, i) => j.id !== outs[i].id)) {
    throw new Error("a batch answer's outcomes do not match its jobs");
  }
  return jobs.map((j, i) => [j, outs[i]]);
}

/** A claimed job, handed to its kind's handler. */
export class Job {
  /** @param {Worker} worker @param {any} a a claim answer's job */
  constructor(worker, a) {
    this._worker = worker;
    /** @type {number} */ this.id = a.id;
    /** @type {string} */ this.kind = a.kind;
    /** @type {string} */ this.queue = a.queue;
    /** @type {string} */ this.tenant = a.tenant;
    /** @type {any} */ this.args = a.args;
    /** @type {any} */ this.inputs = a.inputs;
    /** @type {number} */ this.attempt = a.attempt;
    /** @type {number} */ this.maxAttempts = a.max_attempts;
    /** @type {number | undefined} */ this.workflowRun = a.workflow_run;
    /** @type {string | undefined} */ this.step = a.step;
    /** W3C trace context the job was enqueued under, if any. */
    /** @type {string | undefined} */ this.traceparent = a.traceparent;
    /** @type {string | undefined} */ this.tracestate = a.tracestate;
    /** @type {string} */ this.leaseToken = a.lease_token;
    /** @type {AbortController} */ this._abort = new AbortController();
    /** Aborted when the handler should stop: the job was cancelled, its
     * lease was lost, or the worker's stop deadline passed.
     * @type {AbortSignal} */
    this.signal = this._abort.signal;
    /** The attempt no longer owns the job; its result is dropped. */
    this.lost = false;
    this.cancelRequested = false;
  }

  _lease() {
    return { attempt: this.attempt, lease_token: this.leaseToken };
  }

  /**
   * Reports how far the attempt got (0-100, a short message). Rejects
   * with LeaseLost when the attempt no longer owns the job (the handler
   * should stop), APIError for a bad percent or message. Progress is
   * news, not an outcome: when the node cannot take it (unreachable,
   * rate limited) after a few tries, it is let go.
   * @param {number} percent @param {string} [message]
   */
  async progress(percent, message = "") {
    if (this.lost) throw new LeaseLost(`job ${this.id}: lease lost`);
    const w = this._worker;
    try {
      await w._retrying(`progress job ${this.id}`,
        () => w._call("progress", { params: { id: this.id }, body: { ...this._lease(), percent, message } }));
    } catch (e) {
      if (e instanceof APIError && ["lease_lost", "not_found", "worker_gone"].includes(e.code)) {
        w._lose(this, e.code);
        throw new LeaseLost(`job ${this.id}: ${e.code}`);
      }
      if (e instanceof APIError && !e.transient) throw e;
      w.log.warn(`progress job ${this.id}: ${e.message}; not reported`);
    }
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A remote worker. Register handlers with handle(), then run(). */
export class Worker {
  /**
   * @param {object} o
   * @param {string} o.url the node, e.g. "http://127.0.0.1:8080"
   * @param {string} o.token a token with the worker scope
   * @param {string[]} o.queues the queues to work
   * @param {string[]} [o.kinds] the kinds to claim (default: those with a handler)
   * @param {string} [o.name] @param {string} [o.version]
   * @param {number} [o.concurrency] jobs run at once (default 4)
   * @param {number} [o.stopTimeoutMs] how long in-flight jobs get to finish after a stop (default 30000)
   * @param {(id: string) => void} [o.onRegistered] called with the worker's id once registered
   * @param {{info: Function, warn: Function, error: Function}} [o.logger] default console
   */
  constructor(o) {
    if (!o.queues || o.queues.length === 0) throw new Error("queues: name at least one queue");
    const u = new URL(o.url);
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error(`url must be http:// or https://, got ${o.url}`);
    this.url = o.url.replace(/\/+$/, "");
    this.token = o.token;
    this.queues = o.queues;
    this.kinds = o.kinds;
    this.name = o.name ?? "";
    this.version = o.version ?? "";
    this.concurrency = o.concurrency ?? 4;
    this.stopTimeoutMs = o.stopTimeoutMs ?? 30000;
    this.onRegistered = o.onRegistered;
    this.log = o.logger ?? console;
    /** @type {string | undefined} */ this.id = undefined;
    /** @type {Map<string, (job: Job) => any>} */ this._handlers = new Map();
    // "id/attempt" -> Job: a worker that was paused may run a job's next
    // attempt while its lost one still winds down.
    /** @type {Map<string, Job>} */ this._running = new Map();
    /** @type {Array<[Job, any]>} */ this._done = [];
    this._flushing = null;
    this._stopping = false;
    this._stopped = new Promise((r) => { this._onStop = r; });
    this._claimAbort = null;
    this._slotFreed = null;
    this._heartbeatMs = 10000;
    this._maxWait = 30;
  }

  /**
   * Registers fn for jobs of kind. Its return value (any JSON value) is
   * the job's result. Throw Permanent to fail without retry, RetryLater
   * to retry after a delay, Snooze to put the job back; any other error
   * fails the attempt (retried by the job's backoff while attempts remain).
   * @param {string} kind @param {(job: Job) => any} fn
   */
  handle(kind, fn) {
    this._handlers.set(kind, fn);
    return this;
  }

  /** Stops claiming; run() then finishes in-flight jobs, leaves and resolves. */
  stop() {
    if (this._stopping) return;
    this._stopping = true;
    // Cut the waiting claim: the node takes nothing for a claim whose
    // connection is gone.
    this._claimAbort?.abort();
    this._onStop();
  }

  /**
   * Registers, works jobs until stop() (or SIGTERM/SIGINT when signals),
   * then leaves.
   * @param {{signals?: boolean}} [o]
   */
  async run(o = {}) {
    if (this._handlers.size === 0 && !this.kinds?.length) throw new Error("register a handler (worker.handle) before run()");
    const signals = o.signals ?? true;
    const onSignal = () => this.stop();
    if (signals) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    try {
      await this._register();
      // Neither loop should fail; if one does, the worker stops rather
      // than run on half-broken.
      const fatal = (what) => (e) => { this.log.error(`${what}: ${e?.stack ?? e}; stopping`); this.stop(); };
      const heartbeats = this._heartbeatLoop().catch(fatal("heartbeats"));
      const claims = this._claimLoop().catch(fatal("claims"));
      await this._stopped;
      this.log.info(`stopping: finishing ${this._running.size} in-flight jobs (at most ${this.stopTimeoutMs}ms)`);
      const deadline = Date.now() + this.stopTimeoutMs;
      while (this._running.size > 0 && Date.now() < deadline) {
        await Promise.race([this._slot(), sleep(Math.min(200, Math.max(0, deadline - Date.now())))]);
      }
      for (const j of this._running.values()) this._lose(j, "stop deadline"); // released by the leave below
      await this._flush();
      await claims;
      this._heartbeatStop = true;
      clearTimeout(this._heartbeatTimer);
      this._heartbeatWake?.();
      await heartbeats;
      try {
        const a = await this._call("leave", { params: { id: this.id }, timeoutMs: 10000 });
        this.log.info(`left: ${this.id} released ${a.released} jobs`);
      } catch (e) {
        this.log.warn(`leave ${this.id}: ${e.message} (its leases expire instead)`);
      }
    } finally {
      if (signals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
    }
  }

  // -- internals --

  /**
   * Sends one PROTOCOL operation and returns its answer (see answer()).
   * Rejects with APIError for an error answer.
   * @param {string} op
   * @param {{params?: Record<string, any>, body?: Record<string, any>, timeoutMs?: number, signal?: AbortSignal}} [o]
   */
  async _call(op, o = {}) {
    const spec = PROTOCOL[op];
    let path = spec.path;
    for (const [k, v] of Object.entries(o.params ?? {})) path = path.replace(`{${k}}`, encodeURIComponent(String(v)));
    const headers = { Authorization: `Bearer ${this.token}`, Accept: "application/json" };
    let body;
    if (o.body !== undefined) {
      checkSend(op, o.body);
      body = JSON.stringify(o.body);
      headers["Content-Type"] = "application/json";
    }
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(new Error(`${op}: timed out`)), o.timeoutMs ?? 30000);
    const cut = () => ctl.abort(o.signal?.reason);
    o.signal?.addEventListener("abort", cut);
    try {
      const resp = await fetch(this.url + path, { method: spec.method, headers, body, signal: ctl.signal });
      const text = await resp.text();
      if (!resp.ok) {
        let p;
        try { p = answer("problem", JSON.parse(text)); } catch { p = null; }
        const ra = Number(resp.headers.get("Retry-After") ?? NaN);
        const retryAfter = Number.isFinite(ra) ? ra : undefined;
        if (p) throw new APIError(p.status ?? resp.status, p.code ?? "", p.detail ?? "", retryAfter);
        throw new APIError(resp.status, "", text.slice(0, 200), retryAfter);
      }
      return answer(op, text ? JSON.parse(text) : {});
    } finally {
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", cut);
    }
  }

  async _register() {
    const kinds = this.kinds ?? [...this._handlers.keys()].sort();
    const w = await this._call("register", { body: { name: this.name, version: this.version, queues: this.queues, kinds } });
    this.id = w.id;
    this._heartbeatMs = w.heartbeat_interval_seconds * 1000;
    this._maxWait = Math.min(w.max_wait_seconds, MAX_CLAIM_WAIT);
    this.log.info(`registered worker ${this.id} (heartbeat every ${this._heartbeatMs}ms)`);
    this.onRegistered?.(this.id);
  }

  /** Resolves when a running job finishes. */
  _slot() {
    if (!this._slotFreed) {
      this._slotFreed = new Promise((r) => { this._freeSlot = r; });
    }
    return this._slotFreed;
  }

  _finish(j) {
    this._running.delete(`${j.id}/${j.attempt}`);
    const free = this._freeSlot;
    this._slotFreed = null;
    free?.();
  }

  async _claimLoop() {
    let backoff = 100;
    while (!this._stopping) {
      const free = Math.min(this.concurrency - this._running.size, BATCH);
      if (free <= 0) {
        await Promise.race([this._slot(), this._stopped]);
        continue;
      }
      this._claimAbort = new AbortController();
      let a;
      try {
        a = await this._call("claim", {
          body: { worker: this.id, max: free, wait: duration(this._maxWait) },
          timeoutMs: (this._maxWait + 10) * 1000, signal: this._claimAbort.signal,
        });
        backoff = 100;
      } catch (e) {
        if (this._stopping) break;
        if (e instanceof APIError && e.code === "worker_gone") {
          this.log.warn(`worker ${this.id} gone (silent too long): registering again`);
          for (const j of this._running.values()) this._lose(j, "worker gone"); // its leases went with it
          try { await this._register(); } catch (e2) { this.log.error(`register: ${e2.message}`); }
        } else {
          this.log.warn(`claim: ${e.message}`);
        }
        await sleep(Math.max(backoff, (e instanceof APIError && e.retryAfter) ? e.retryAfter * 1000 : 0));
        backoff = Math.min(backoff * 2, 5000);
        continue;
      } finally {
        this._claimAbort = null;
      }
      // Claimed as the stop came: not started; leaving releases them.
      if (this._stopping) break;
      for (const x of a.jobs) {
        const j = new Job(this, x);
        this._running.set(`${j.id}/${j.attempt}`, j);
        this._runJob(j);
      }
      if (a.draining) {
        this.log.info(`worker ${this.id} drained: stopping`);
        this.stop();
      }
    }
  }

  _lose(j, why) {
    if (!j.lost) this.log.warn(`job ${j.id} attempt ${j.attempt}: ${why}; its result is dropped`);
    j.lost = true;
    j._abort.abort(new LeaseLost(why));
  }

  async _runJob(j) {
    let queued = false;
    try {
      queued = await this._runHandler(j);
    } catch (e) {
      this.log.error(`job ${j.id}: ${e.message}`);
    } finally {
      // A queued completion stays in flight until it is written.
      if (!queued) this._finish(j);
    }
  }

  /** Runs j's handler and reports its outcome; true when the outcome is a
   * completion queued for the batch writer. */
  async _runHandler(j) {
    const fn = this._handlers.get(j.kind);
    let result;
    try {
      if (!fn) throw new Permanent(`no handler for kind ${JSON.stringify(j.kind)} in this worker`);
      result = await fn(j);
    } catch (e) {
      if (e instanceof LeaseLost) {
        this._lose(j, "lease lost");
      } else if (e instanceof Snooze) {
        await this._write(j, "snooze", { ...j._lease(), delay: duration(e.seconds) });
      } else {
        const err = e instanceof Error ? e : new Error(String(e));
        const body = { ...j._lease(), error: err.message || err.name, permanent: err instanceof Permanent };
        if (err instanceof RetryLater) body.retry_after = duration(err.seconds);
        else if (!(err instanceof Permanent) && err.stack) body.stack = err.stack.slice(0, 4000);
        await this._write(j, "fail", body);
      }
      return false;
    }
    if (j.lost) return false;
    this._done.push([j, result === undefined ? null : result]);
    this._flush();
    return true;
  }

  /**
   * call(), again after a transient failure (the node unreachable, 429,
   * 5xx), up to 5 times.
   * @template T @param {string} what @param {() => Promise<T>} call @returns {Promise<T>}
   */
  async _retrying(what, call) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await call();
      } catch (e) {
        if ((e instanceof APIError && !e.transient) || attempt === 4) throw e;
        const pause = e instanceof APIError && e.retryAfter ? e.retryAfter * 1000 : 200 * (attempt + 1);
        this.log.warn(`${what}: ${e.message}; again in ${pause}ms`);
        await sleep(pause);
      }
    }
  }

  async _write(j, op, body) {
    if (j.lost) return;
    try {
      await this._retrying(`${op} job ${j.id}`, () => this._call(op, { params: { id: j.id }, body }));
    } catch (e) {
      if (e instanceof APIError && ["lease_lost", "not_found", "worker_gone"].includes(e.code)) this._lose(j, e.code);
      else this.log.error(`${op} job ${j.id}: ${e.message} (the lease expires and the job runs again)`);
    }
  }

  /** Writes every queued completion, BATCH a call; one writer at a
   * time, so completions that come while a call is out go in the next. */
  _flush() {
    if (!this._flushing) {
      this._flushing = (async () => {
        try {
          while (this._done.length > 0) await this._completeBatch(this._done.splice(0, BATCH));
        } catch (e) {
          this.log.error(`completions: ${e?.stack ?? e}`);
        } finally {
          this._flushing = null;
        }
      })();
    }
    return this._flushing;
  }

  async _completeBatch(batch) {
    const body = { jobs: batch.map(([j, result]) => ({ id: j.id, attempt: j.attempt, lease_token: j.leaseToken, result })) };
    const what = `complete ${batch.length} jobs`;
    try {
      const a = await this._retrying(what, () => this._call("complete", { body }));
      for (const [j, o] of outcomes(batch.map(([j]) => j), a.jobs)) {
        if (o.status !== "ok") this._lose(j, o.status);
      }
    } catch (e) {
      this.log.error(`${what}: ${e.message} (their leases expire and they run again)`);
    }
    for (const [j] of batch) this._finish(j);
  }

  async _heartbeatLoop() {
    while (!this._heartbeatStop) {
      await new Promise((r) => { this._heartbeatTimer = setTimeout(r, this._heartbeatMs); this._heartbeatWake = r; });
      if (this._heartbeatStop) return;
      const held = [...this._running.values()].filter((j) => !j.lost);
      for (let i = 0; i < held.length; i += BATCH) await this._heartbeat(held.slice(i, i + BATCH));
    }
  }

  /** @param {Job[]} jobs */
  async _heartbeat(jobs) {
    let a;
    try {
      a = await this._call("heartbeat", {
        body: { worker: this.id, jobs: jobs.map((j) => ({ id: j.id, attempt: j.attempt, lease_token: j.leaseToken })) },
      });
    } catch (e) {
      if (e instanceof APIError && e.code === "worker_gone") for (const j of jobs) this._lose(j, "worker gone");
      else this.log.warn(`heartbeat: ${e.message}`); // the next interval tries again; the lease lasts three
      return;
    }
    for (const [j, o] of outcomes(jobs, a.jobs)) {
      if (o.status !== "ok") {
        this._lose(j, o.status);
      } else if (o.cancel_requested) {
        j.cancelRequested = true;
        j._abort.abort(new Error("cancel requested"));
      }
    }
  }
}
