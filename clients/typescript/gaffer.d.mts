// Types of gaffer.mjs, the Gaffer remote worker for Node 20+. The
// module is JavaScript with JSDoc types so that it runs without a build
// step; this file gives TypeScript users its API. clients/dts_test.go
// checks that it declares every name gaffer.mjs exports.

/** One operation of the protocol table: an endpoint and the fields the
 * client sends and reads, checked against the OpenAPI document. */
export interface ProtocolEntry {
  method?: "GET" | "POST" | "DELETE";
  path?: string;
  schema?: string;
  send?: string[];
  read: string[];
  codes?: string[];
}

/** The most jobs one claim, heartbeat or completion names. */
export declare const BATCH: number;

/** The longest a claim asks to wait, in seconds. */
export declare const MAX_CLAIM_WAIT: number;

/** Every endpoint and field the client uses. */
export declare const PROTOCOL: Readonly<Record<string, ProtocolEntry>>;

/** An error answer of the API (application/problem+json). */
export declare class APIError extends Error {
  constructor(status: number, code: string, detail: string, retryAfter?: number);
  readonly status: number;
  /** A stable problem code, e.g. "lease_lost", "worker_gone". */
  readonly code: string;
  readonly detail: string;
  /** Seconds, from a 429's or 503's Retry-After header. */
  readonly retryAfter: number | undefined;
  /** Worth retrying: rate limited, or the node could not answer. */
  readonly transient: boolean;
}

/** The attempt no longer owns its job: stop working on it. Thrown by
 * Job.progress; a handler may let it propagate. */
export declare class LeaseLost extends Error {
  constructor(message: string);
}

/** Throw from a handler to fail the job without further attempts. */
export declare class Permanent extends Error {
  constructor(message: string);
}

/** Throw from a handler to fail this attempt and retry after `seconds`. */
export declare class RetryLater extends Error {
  constructor(message: string, seconds: number);
  readonly seconds: number;
}

/** Throw from a handler to put the job back, due in `seconds`, without
 * using up an attempt. */
export declare class Snooze extends Error {
  constructor(seconds: number);
  readonly seconds: number;
}

/** A claimed job, handed to its kind's handler. Only the worker makes
 * them, from the jobs a claim returns. */
export declare class Job<Args = any> {
  private constructor();
  readonly id: number;
  readonly kind: string;
  readonly queue: string;
  readonly tenant: string;
  readonly args: Args;
  /** A workflow step's dependencies' results, by step name. */
  readonly inputs: Record<string, unknown> | undefined;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly workflowRun: number | undefined;
  readonly step: string | undefined;
  /** The W3C trace context the job was enqueued under, if any: start the handler's span as its child or link. */
  readonly traceparent: string | undefined;
  readonly tracestate: string | undefined;
  readonly leaseToken: string;
  /** Aborted when the handler should stop: the job was cancelled, its
   * lease was lost, or the worker's stop deadline passed. */
  readonly signal: AbortSignal;
  /** The attempt no longer owns the job; its result is dropped. */
  readonly lost: boolean;
  /** A heartbeat said the job was cancelled. */
  readonly cancelRequested: boolean;
  /** Reports how far the attempt got (0-100, a short message). Rejects
   * with LeaseLost when the attempt no longer owns the job. */
  progress(percent: number, message?: string): Promise<void>;
}

/** A job's handler: its resolved value (any JSON value) is the result. */
export type Handler<Args = any> = (job: Job<Args>) => unknown | Promise<unknown>;

export interface WorkerOptions {
  /** The node, e.g. "http://127.0.0.1:8080". */
  url: string;
  /** A token with the worker scope. */
  token: string;
  /** The queues to work. */
  queues: string[];
  /** The kinds to claim; default: those with a handler. */
  kinds?: string[];
  name?: string;
  version?: string;
  /** Jobs run at once; default 4. */
  concurrency?: number;
  /** How long in-flight jobs get to finish after a stop, before the
   * worker leaves and they are released; default 30000. */
  stopTimeoutMs?: number;
  /** Called with the worker's id once it is registered. */
  onRegistered?: (id: string) => void;
  /** Default console. */
  logger?: { info(msg: string): void; warn(msg: string): void; error(msg: string): void };
}

/** A remote worker. Register handlers with handle(), then run(). */
export declare class Worker {
  constructor(options: WorkerOptions);
  /** The worker's id, once registered. */
  readonly id: string | undefined;
  /** Registers fn for jobs of kind. Throw Permanent, RetryLater or
   * Snooze from it to choose the outcome; any other error fails the
   * attempt (retried while attempts remain). */
  handle<Args = any>(kind: string, fn: Handler<Args>): this;
  /** Stops claiming; run() then finishes in-flight jobs, leaves and resolves. */
  stop(): void;
  /** Registers, works jobs until stop() (or SIGTERM/SIGINT unless
   * signals is false), then leaves. */
  run(options?: { signals?: boolean }): Promise<void>;
}
