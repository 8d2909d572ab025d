// A stand-in Gaffer node on 127.0.0.1 for the worker's unit tests. It
// answers the worker protocol's endpoints the way a node does, from state
// the test sets (jobs to hand out, scripted answers), and records every
// request; the tests read `requests`. The integration test against a real
// node is clients/clients_test.go.
import http from "node:http";

export const WORKER_ID = "w-1";

/** @typedef {{method: string, path: string, headers: http.IncomingHttpHeaders, body: any}} Request */
/** @typedef {{status: number, body: any, headers?: Record<string, string>}} Answer */

/** @param {string} path @returns {string} the protocol operation a path names */
export function op(path) {
  if (path === "/v1/workers") return "register";
  if (/^\/v1\/workers\/[^/]+$/.test(path)) return "leave";
  let m = /^\/v1\/work\/(claim|heartbeat|complete)$/.exec(path);
  if (m) return m[1];
  m = /^\/v1\/work\/jobs\/\d+\/(fail|snooze|progress)$/.exec(path);
  return m ? m[1] : "unknown";
}

export class FakeNode {
  /** @param {{heartbeatInterval?: number, maxWait?: number}} [o] */
  constructor(o = {}) {
    this.heartbeatInterval = o.heartbeatInterval ?? 10;
    this.maxWait = o.maxWait ?? 1;
    /** @type {Request[]} */ this.requests = [];
    /** @type {any[]} */ this.pending = [];
    this.draining = false;
    /** @type {Map<string, Answer[]>} answers given before the usual one */
    this.scripted = new Map();
    /** @type {Map<number, object>} job id -> its heartbeat outcome's fields */
    this.heartbeatOutcomes = new Map();
    /** @type {Array<() => void>} */ this._waiters = [];
    this.server = http.createServer((req, res) => this._serve(req, res));
    this.url = "";
  }

  /** @returns {Promise<this>} */
  async start() {
    await new Promise((r) => this.server.listen(0, "127.0.0.1", () => r(undefined)));
    const addr = this.server.address();
    if (!addr || typeof addr === "string") throw new Error("no address");
    this.url = `http://127.0.0.1:${addr.port}`;
    return this;
  }

  async close() {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(() => r(undefined)));
  }

  /** @param {number} id @param {string} kind @param {any} [args] */
  addJob(id, kind, args = {}) {
    this.pending.push({
      id, tenant: "t", kind, queue: "ts", args, inputs: null, attempt: 1, max_attempts: 3,
      lease_token: `lease-${id}-1`, workflow_run: null, step: null, traceparent: "00-trace", tracestate: null,
    });
    this._wake();
  }

  /** @param {string} o @param {Answer} answer */
  script(o, answer) {
    const list = this.scripted.get(o) ?? [];
    list.push(answer);
    this.scripted.set(o, list);
  }

  /** @param {string} o @returns {Request[]} */
  calls(o) {
    return this.requests.filter((r) => op(r.path) === o);
  }

  /** Resolves once predicate() holds, checked after each request; rejects after timeoutMs.
   * @param {() => boolean} predicate @param {number} [timeoutMs] */
  async waitFor(predicate, timeoutMs = 5000) {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error("timed out waiting; requests: " + JSON.stringify(this.requests.map((r) => r.path)));
      await new Promise((r) => { this._waiters.push(() => r(undefined)); setTimeout(r, 50); });
    }
  }

  _wake() {
    const w = this._waiters;
    this._waiters = [];
    for (const f of w) f();
  }

  /** @param {http.IncomingMessage} req @param {http.ServerResponse} res */
  async _serve(req, res) {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    /** @type {Request} */
    const r = { method: req.method ?? "", path: req.url ?? "", headers: req.headers, body: raw ? JSON.parse(raw) : undefined };
    this.requests.push(r);
    this._wake();
    const a = await this._answer(r);
    const data = a.body === undefined ? "" : JSON.stringify(a.body);
    res.writeHead(a.status, {
      "Content-Type": a.status >= 400 ? "application/problem+json" : "application/json",
      "Content-Length": Buffer.byteLength(data),
      ...a.headers,
    });
    res.end(data);
  }

  /** @param {Request} r @returns {Promise<Answer>} */
  async _answer(r) {
    const o = op(r.path);
    const scripted = this.scripted.get(o);
    if (scripted?.length) return /** @type {Answer} */ (scripted.shift());
    switch (o) {
      case "register":
        return { status: 201, body: { id: WORKER_ID, lease_ttl_seconds: 30, heartbeat_interval_seconds: this.heartbeatInterval, max_wait_seconds: this.maxWait } };
      case "leave":
        return { status: 200, body: { released: 0 } };
      case "claim": {
        const until = Date.now() + Math.min(this.maxWait * 1000, 200);
        while (this.pending.length === 0 && !this.draining && Date.now() < until) {
          await new Promise((w) => setTimeout(w, 10));
        }
        const jobs = this.pending.splice(0, r.body.max);
        return { status: 200, body: { jobs, draining: this.draining } };
      }
      case "heartbeat":
        return { status: 200, body: { jobs: r.body.jobs.map((/** @type {any} */ j) => ({ id: j.id, status: "ok", ...this.heartbeatOutcomes.get(j.id) })) } };
      case "complete":
        return { status: 200, body: { jobs: r.body.jobs.map((/** @type {any} */ j) => ({ id: j.id, status: "ok" })) } };
      case "fail":
      case "snooze":
        return { status: 200, body: { state: "pending" } };
      case "progress":
        return { status: 204, body: undefined };
      default:
        return { status: 404, body: { code: "not_found", detail: r.path, status: 404 } };
    }
  }
}
