"""A Gaffer remote worker in Python, standard library only (3.9+).

A worker registers with a Gaffer node, long-polls for batches of jobs of
its queues and kinds, runs each with the handler registered for its kind,
heartbeats every running job in one call per interval, and reports each
attempt's outcome: complete (batched), fail (retryable or permanent),
snooze, progress. Every write names the attempt and its lease token; once
the attempt no longer owns its job (409 lease_lost, or a heartbeat saying
so) the worker drops that job's result. On SIGTERM or SIGINT it stops
claiming, gives in-flight jobs until a deadline to finish, then leaves
(DELETE /v1/workers/{id}), which releases whatever still runs.

    w = Worker("http://127.0.0.1:8080", token, queues=["py"])

    @w.handler("greet")
    def greet(job):
        job.progress(50, "half way")
        return {"greeting": "hello, " + job.args["name"]}

    w.run()

The protocol is in docs/workers.md; every endpoint and field this module
uses is listed in PROTOCOL below, which clients/protocol_test.go checks
against api/openapi.json.
"""

from __future__ import annotations

import http.client
import json
import logging
import signal
import socket
import threading
import time
import traceback
import urllib.parse
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, TypedDict, TypeVar, Union, overload

__all__ = ["Worker", "Job", "Permanent", "RetryLater", "Snooze", "LeaseLost", "APIError"]

# The release of this module; pyproject.toml carries the same number
# (tests/test_package.py checks that they agree).
__version__ = "0.1.0"

log = logging.getLogger("gaffer")

T = TypeVar("T")

#: A job's handler: called with the Job, returns its result (any JSON
#: value) or raises to choose another outcome.
Handler = Callable[["Job"], Any]

H = TypeVar("H", bound=Handler)

# The endpoints and fields this client uses, and nothing else: requests are
# built by _send, which refuses a field not listed under "send", and
# answers are read through _Answer, which refuses a field not listed under
# "read" ("jobs[].id": the field id of each item of the list jobs).
# clients/protocol_test.go fails when an entry is not in the OpenAPI
# document. Keep it JSON (double quotes, no trailing commas).

class ProtocolEntry(TypedDict, total=False):
    """One operation of PROTOCOL: an endpoint (method, path) or a schema
    read (schema), the fields sent and read, the problem codes acted on."""

    method: str
    path: str
    schema: str
    send: List[str]
    read: List[str]
    codes: List[str]


# gaffer:protocol begin
PROTOCOL: Dict[str, ProtocolEntry] = {
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
}
# gaffer:protocol end


class APIError(Exception):
    """An error answer of the API (application/problem+json)."""

    def __init__(self, status: int, code: str, detail: str, retry_after: Optional[float] = None) -> None:
        super().__init__("%d %s: %s" % (status, code, detail))
        self.status, self.code, self.detail = status, code, detail
        # retry_after: seconds, from a 429's or 503's Retry-After header.
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """Worth retrying: rate limited, or the node could not answer."""
        return self.status == 429 or self.status >= 500


class LeaseLost(Exception):
    """The attempt no longer owns its job: stop working on it.

    Raised by Job.progress; a handler may let it propagate. The job's
    result is dropped either way.
    """


class Permanent(Exception):
    """Raise from a handler to fail the job without further attempts."""


class RetryLater(Exception):
    """Raise from a handler to fail this attempt and retry after `seconds`
    (instead of the job's backoff)."""

    def __init__(self, message: str, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


class Snooze(Exception):
    """Raise from a handler to put the job back, due again in `seconds`,
    without using up an attempt."""

    def __init__(self, seconds: float) -> None:
        super().__init__("snooze %ss" % seconds)
        self.seconds = seconds


def _duration(seconds: float) -> str:
    """A Go-style duration string the API parses ("1.500s")."""
    return "%.3fs" % max(0.0, seconds)


# The most jobs one claim, heartbeat or completion names (a claim takes
# at most 1,000).
BATCH: int = 500

# The longest a claim asks to wait: a node may allow minutes, but a
# shorter poll costs little and keeps clear of proxies' idle timeouts.
MAX_CLAIM_WAIT: float = 60.0


class _Answer:
    """A decoded answer whose fields may be read only as PROTOCOL lists
    them for the operation: a misspelt or undeclared field raises KeyError
    instead of quietly reading nothing."""

    def __init__(self, op: str, value: Dict[str, Any], prefix: str = "") -> None:
        self._op, self._value, self._prefix = op, value, prefix

    def __getitem__(self, name: str) -> Any:
        path = self._prefix + name
        if path not in PROTOCOL[self._op]["read"]:
            raise KeyError("%s: field %r is not in PROTOCOL[%r]['read']" % (self._op, path, self._op))
        return self._wrap(path, self._value.get(name))

    def get(self, name: str, default: Any = None) -> Any:
        v = self[name]
        return default if v is None else v

    def _wrap(self, path: str, v: Any) -> Any:
        if isinstance(v, list) and any(p.startswith(path + "[].") for p in PROTOCOL[self._op]["read"]):
            return [_Answer(self._op, x, path + "[].") if isinstance(x, dict) else x for x in v]
        return v


def _check_send(op: str, body: Dict[str, Any], prefix: str = "") -> None:
    allowed = PROTOCOL[op]["send"]
    for k, v in body.items():
        path = prefix + k
        if path not in allowed:
            raise ValueError("%s: field %r is not in PROTOCOL[%r]['send']" % (op, path, op))
        if isinstance(v, list):
            for x in v:
                if isinstance(x, dict):
                    _check_send(op, x, path + "[].")


def _outcomes(jobs: List[Job], outcomes: List[_Answer]) -> Iterator[Tuple[Job, _Answer]]:
    """Pairs a batch's jobs with the answer's outcomes, which come in the
    batch's order."""
    if len(jobs) != len(outcomes) or any(j.id != o["id"] for j, o in zip(jobs, outcomes)):
        raise ValueError("a batch answer's outcomes do not match its jobs")
    return zip(jobs, outcomes)


class _HTTP:
    """One keep-alive connection per thread to the node."""

    def __init__(self, url: str, token: str) -> None:
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https"):
            raise ValueError("url must be http:// or https://, got %r" % url)
        self._https, self._host, self._port = u.scheme == "https", u.hostname, u.port
        self._base = u.path.rstrip("/")
        self._token = token
        self._local = threading.local()

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        cls: type[http.client.HTTPConnection] = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        # A URL without a host fails here, on the first call.
        return cls(self._host, self._port, timeout=timeout)  # type: ignore[arg-type]

    def call(
        self,
        op: str,
        params: Optional[Dict[str, Any]] = None,
        body: Optional[Dict[str, Any]] = None,
        timeout: float = 30.0,
        own_conn: Optional[List[Optional[http.client.HTTPConnection]]] = None,
    ) -> _Answer:
        """Send one PROTOCOL operation; return its answer as an _Answer.

        Raises APIError for an error answer, OSError/HTTPException when
        the node cannot be reached. own_conn: a one-element list that
        receives the connection used, so another thread can cut it.
        """
        spec = PROTOCOL[op]
        path = spec["path"]
        for k, v in (params or {}).items():
            path = path.replace("{" + k + "}", urllib.parse.quote(str(v), safe=""))
        data: Optional[bytes] = None
        headers = {"Authorization": "Bearer " + self._token, "Accept": "application/json"}
        if body is not None:
            _check_send(op, body)
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            conn: Optional[http.client.HTTPConnection] = None
            if own_conn is None:
                conn = getattr(self._local, "conn", None)
            fresh = conn is None
            if conn is None:
                conn = self._connect(timeout)
                if own_conn is None:
                    self._local.conn = conn
                else:
                    own_conn[0] = conn
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            try:
                conn.request(spec["method"], self._base + path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                if own_conn is None:
                    self._local.conn = None
                # A kept-alive connection the node closed while idle: try
                # once more on a new one.
                if fresh or attempt == 2:
                    raise
                continue
            except BaseException:
                conn.close()
                if own_conn is None:
                    self._local.conn = None
                raise
            if own_conn is not None:
                conn.close()
            break
        if resp.status // 100 != 2:
            try:
                retry_after = float(resp.getheader("Retry-After", ""))
            except ValueError:
                retry_after = None
            try:
                p = _Answer("problem", json.loads(raw))
                raise APIError(p.get("status", resp.status), p.get("code", ""), p.get("detail", ""), retry_after)
            except (ValueError, AttributeError):
                raise APIError(resp.status, "", raw[:200].decode("utf-8", "replace"), retry_after)
        return _Answer(op, json.loads(raw) if raw else {})


class Job:
    """A claimed job, handed to its kind's handler.

    Fields: id, kind, queue, tenant, args (decoded JSON), inputs (a
    workflow step's dependencies' results, or None), attempt,
    max_attempts, workflow_run, step, traceparent and tracestate (the W3C
    trace context the job was enqueued under, or None: start the
    handler's span as its child or link). `cancelled` is a threading.Event set
    when the handler should stop: the job was cancelled, its lease was
    lost, or the worker's stop deadline passed.
    """

    def __init__(self, worker: Worker, a: _Answer) -> None:
        self._worker = worker
        self.id: int = a["id"]
        self.kind: str = a["kind"]
        self.queue: str = a["queue"]
        self.tenant: str = a["tenant"]
        self.args: Any = a["args"]
        self.inputs: Optional[Dict[str, Any]] = a["inputs"]
        self.attempt: int = a["attempt"]
        self.max_attempts: int = a["max_attempts"]
        self.workflow_run: Optional[int] = a["workflow_run"]
        self.step: Optional[str] = a["step"]
        self.traceparent: Optional[str] = a["traceparent"]
        self.tracestate: Optional[str] = a["tracestate"]
        self.lease_token: str = a["lease_token"]
        self.cancelled = threading.Event()
        # lost: the attempt no longer owns the job (its result is dropped).
        self.lost: bool = False
        self.cancel_requested: bool = False

    def _lease(self) -> Dict[str, Any]:
        return {"attempt": self.attempt, "lease_token": self.lease_token}

    def progress(self, percent: float, message: str = "") -> None:
        """Report how far the attempt got (0-100, a short message).

        Raises LeaseLost when the attempt no longer owns the job (the
        handler should stop), APIError for a bad percent or message.
        Progress is news, not an outcome: when the node cannot take it
        (unreachable, rate limited) after a few tries, it is let go.
        """
        if self.lost:
            raise LeaseLost("job %d: lease lost" % self.id)
        body = dict(self._lease(), percent=percent, message=message)
        w = self._worker
        try:
            w._retrying("progress job %d" % self.id, lambda: w._http.call("progress", {"id": self.id}, body))
        except APIError as e:
            if e.code in ("lease_lost", "not_found", "worker_gone"):
                w._lose(self, e.code)
                raise LeaseLost("job %d: %s" % (self.id, e.code)) from None
            if not e.transient:
                raise
            log.warning("progress job %d: %s; not reported", self.id, e)
        except (OSError, http.client.HTTPException) as e:
            log.warning("progress job %d: %s; not reported", self.id, e)


class Worker:
    """A remote worker. Register handlers with handler(), then run().

    url: the node, e.g. "http://127.0.0.1:8080"; token: a token with the
    worker scope. queues: the queues to work; kinds: the kinds to claim
    (default: the kinds with a handler). concurrency: jobs run at once
    (one thread each). stop_timeout: seconds in-flight jobs get to finish
    after a stop before the worker leaves and they are released.
    on_registered: called with the worker's id once it is registered.
    """

    def __init__(
        self,
        url: str,
        token: str,
        queues: Iterable[str],
        kinds: Optional[List[str]] = None,
        name: str = "",
        version: str = "",
        concurrency: int = 4,
        stop_timeout: float = 30.0,
        on_registered: Optional[Callable[[str], Any]] = None,
    ) -> None:
        if not queues:
            raise ValueError("queues: name at least one queue")
        self._http = _HTTP(url, token)
        self.queues, self.kinds, self.name, self.version = list(queues), kinds, name, version
        self.concurrency, self.stop_timeout = concurrency, stop_timeout
        self.id: Optional[str] = None
        self._handlers: Dict[str, Handler] = {}
        self._lock = threading.Lock()
        # (job id, attempt) -> Job: a worker that was paused may run a
        # job's next attempt while its lost one still winds down.
        self._running: Dict[Tuple[int, int], Job] = {}
        self._slots = threading.Semaphore(concurrency)
        self._stopping = threading.Event()
        self._heartbeats_done = threading.Event()
        self._idle = threading.Condition(self._lock)
        self._done: List[Tuple[Job, Any]] = []  # completions waiting for the batch writer
        self._done_cond = threading.Condition(threading.Lock())
        self._claim_conn: List[Optional[http.client.HTTPConnection]] = [None]
        self._heartbeat_interval = 10.0
        self._max_wait = 30.0
        self._on_registered = on_registered

    @overload
    def handler(self, kind: str) -> Callable[[H], H]: ...

    @overload
    def handler(self, kind: str, fn: H) -> H: ...

    def handler(self, kind: str, fn: Optional[H] = None) -> Union[H, Callable[[H], H]]:
        """Register fn(job) for jobs of kind; usable as a decorator.

        fn's return value (any JSON value) is the job's result. Raise
        Permanent to fail without retry, RetryLater to retry after a
        delay, Snooze to put the job back; any other exception fails the
        attempt (retried by the job's backoff while attempts remain).
        """
        def register(f: H) -> H:
            self._handlers[kind] = f
            return f
        return register(fn) if fn is not None else register

    def stop(self) -> None:
        """Stop claiming; run() then finishes in-flight jobs, leaves and
        returns. Safe from a signal handler or any thread."""
        self._stopping.set()
        conn = self._claim_conn[0]
        if conn is not None and conn.sock is not None:
            # Cut the waiting claim: the node takes nothing for a claim
            # whose connection is gone.
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def run(self, install_signals: bool = True) -> None:
        """Register, work jobs until stop() (or SIGTERM/SIGINT when
        install_signals, from the main thread), then leave. Blocks.

        Raises ValueError when no handler is registered and no kinds
        were named, APIError (or OSError) when registering fails.
        """
        if not self._handlers and not self.kinds:
            raise ValueError("register a handler (Worker.handler) before run()")
        previous: Dict[signal.Signals, Any] = {}
        if install_signals:
            for s in (signal.SIGTERM, signal.SIGINT):
                previous[s] = signal.signal(s, lambda *_: self.stop())
        try:
            self._work()
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    def _work(self) -> None:
        self._register()
        for name, loop in (("heartbeat", self._heartbeat_loop), ("complete", self._complete_loop), ("claim", self._claim_loop)):
            threading.Thread(target=self._guard, args=(name, loop), name="gaffer-" + name, daemon=True).start()
        # The main thread only waits, so that signals are handled at once.
        while not self._stopping.wait(0.2):
            pass
        log.info("stopping: finishing %d in-flight jobs (at most %ss)", len(self._running), self.stop_timeout)
        deadline = time.monotonic() + self.stop_timeout
        with self._idle:
            while self._running and time.monotonic() < deadline:
                self._idle.wait(min(0.2, max(0.0, deadline - time.monotonic())))
            late = list(self._running.values())
        for j in late:
            # Its result would come too late: the node releases it below.
            self._lose(j, "stop deadline")
        self._flush_completions(deadline=time.monotonic() + 5)
        self._heartbeats_done.set()
        try:
            released = self._http.call("leave", {"id": self.id}, timeout=10)["released"]
            log.info("left: %s released %s jobs", self.id, released)
        except (APIError, OSError, http.client.HTTPException) as e:
            log.warning("leave %s: %s (its leases expire instead)", self.id, e)

    # -- internals --

    def _guard(self, name: str, loop: Callable[[], None]) -> None:
        # None of the loops should fail; if one does, the worker stops
        # rather than run on half-broken (no heartbeats, say).
        try:
            loop()
        except Exception:
            log.exception("%s loop failed; stopping", name)
            self.stop()

    def _register(self) -> None:
        kinds = self.kinds if self.kinds is not None else sorted(self._handlers)
        body = {"name": self.name, "version": self.version, "queues": self.queues, "kinds": kinds}
        w = self._http.call("register", body=body)
        worker_id: str = w["id"]
        self.id = worker_id
        self._heartbeat_interval = float(w["heartbeat_interval_seconds"])
        self._max_wait = min(float(w["max_wait_seconds"]), MAX_CLAIM_WAIT)
        log.info("registered worker %s (heartbeat every %ss)", self.id, self._heartbeat_interval)
        if self._on_registered is not None:
            self._on_registered(worker_id)

    def _claim_loop(self) -> None:
        backoff = 0.1
        while not self._stopping.is_set():
            # Wait for a free slot, then claim as many jobs as slots are free.
            if not self._slots.acquire(timeout=0.2):
                continue
            free = 1
            while free < min(self.concurrency, BATCH) and self._slots.acquire(blocking=False):
                free += 1
            try:
                body = {"worker": self.id, "max": free, "wait": _duration(self._max_wait)}
                ans = self._http.call("claim", body=body, timeout=self._max_wait + 10, own_conn=self._claim_conn)
                backoff = 0.1
            except (APIError, OSError, http.client.HTTPException) as e:
                for _ in range(free):
                    self._slots.release()
                if self._stopping.is_set():
                    break
                if isinstance(e, APIError) and e.code == "worker_gone":
                    log.warning("worker %s gone (silent too long): registering again", self.id)
                    # Its leases went with it.
                    with self._lock:
                        held = list(self._running.values())
                    for j in held:
                        self._lose(j, "worker gone")
                    try:
                        self._register()
                    except (APIError, OSError, http.client.HTTPException) as e2:
                        log.error("register: %s", e2)
                else:
                    log.warning("claim: %s", e)
                time.sleep(max(backoff, getattr(e, "retry_after", None) or 0))
                backoff = min(backoff * 2, 5.0)
                continue
            finally:
                self._claim_conn[0] = None
            jobs = [Job(self, a) for a in ans["jobs"]]
            for _ in range(free - len(jobs)):
                self._slots.release()
            if self._stopping.is_set():
                # Claimed as the stop came: not started; leaving releases them.
                for _ in jobs:
                    self._slots.release()
                break
            for j in jobs:
                with self._lock:
                    self._running[(j.id, j.attempt)] = j
                threading.Thread(target=self._run_job, args=(j,), name="gaffer-job-%d" % j.id, daemon=True).start()
            if ans["draining"]:
                log.info("worker %s drained: stopping", self.id)
                self.stop()

    def _lose(self, j: Job, why: str) -> None:
        if not j.lost:
            log.warning("job %d attempt %d: %s; its result is dropped", j.id, j.attempt, why)
        j.lost = True
        j.cancelled.set()

    def _finish(self, j: Job) -> None:
        with self._idle:
            self._running.pop((j.id, j.attempt), None)
            self._idle.notify_all()
        self._slots.release()

    def _run_job(self, j: Job) -> None:
        queued = False
        try:
            queued = self._run_handler(j)
        finally:
            # A queued completion stays in flight until it is written.
            if not queued:
                self._finish(j)

    def _run_handler(self, j: Job) -> bool:
        """Run j's handler and report its outcome; True when the outcome
        is a completion queued for the batch writer."""
        fn = self._handlers.get(j.kind)
        try:
            if fn is None:
                raise Permanent("no handler for kind %r in this worker" % j.kind)
            result = fn(j)
        except LeaseLost:
            self._lose(j, "lease lost")
            return False
        except Snooze as s:
            self._write(j, "snooze", dict(j._lease(), delay=_duration(s.seconds)))
            return False
        except Exception as e:  # the handler's failure is the job's
            body = dict(j._lease(), error=str(e) or type(e).__name__, permanent=isinstance(e, Permanent))
            if isinstance(e, RetryLater):
                body["retry_after"] = _duration(e.seconds)
            if not isinstance(e, (Permanent, RetryLater)):
                body["stack"] = traceback.format_exc()[-4000:]
            self._write(j, "fail", body)
            return False
        if j.lost:
            return False
        with self._done_cond:
            self._done.append((j, result))
            self._done_cond.notify()
        return True

    def _retrying(self, what: str, call: Callable[[], T], deadline: Optional[float] = None) -> T:
        """call(), again after a transient failure (the node unreachable,
        429, 5xx), up to 5 times or until deadline (time.monotonic())."""
        for attempt in range(5):
            try:
                return call()
            except (APIError, OSError, http.client.HTTPException) as e:
                if isinstance(e, APIError) and not e.transient:
                    raise
                pause = getattr(e, "retry_after", None) or 0.2 * (attempt + 1)
                if attempt == 4 or deadline is not None and time.monotonic() + pause > deadline:
                    raise
                log.warning("%s: %s; again in %.1fs", what, e, pause)
                time.sleep(pause)
        raise AssertionError("unreachable: the fifth attempt returns or raises")

    def _write(self, j: Job, op: str, body: Dict[str, Any]) -> None:
        if j.lost:
            return
        try:
            self._retrying("%s job %d" % (op, j.id), lambda: self._http.call(op, {"id": j.id}, body))
        except APIError as e:
            if e.code in ("lease_lost", "not_found", "worker_gone"):
                self._lose(j, e.code)
            else:
                log.error("%s job %d: %s", op, j.id, e)
        except (OSError, http.client.HTTPException) as e:
            log.error("%s job %d: %s (the lease expires and the job runs again)", op, j.id, e)

    def _complete_loop(self) -> None:
        while True:
            with self._done_cond:
                while not self._done:
                    self._done_cond.wait()
            self._flush_completions()

    def _flush_completions(self, deadline: Optional[float] = None) -> None:
        """Write every queued completion, BATCH a call."""
        while True:
            with self._done_cond:
                batch, self._done = self._done[:BATCH], self._done[BATCH:]
            if not batch:
                return
            body = {"jobs": [dict(id=j.id, attempt=j.attempt, lease_token=j.lease_token, result=r) for j, r in batch]}
            what = "complete %d jobs" % len(batch)
            try:
                ans = self._retrying(what, lambda: self._http.call("complete", body=body), deadline)
                for j, o in _outcomes([j for j, _ in batch], ans["jobs"]):
                    if o["status"] != "ok":
                        self._lose(j, o["status"])
            except (APIError, ValueError, OSError, http.client.HTTPException) as e:
                log.error("%s: %s (their leases expire and they run again)", what, e)
            for j, _ in batch:
                self._finish(j)

    def _heartbeat_loop(self) -> None:
        while not self._heartbeats_done.wait(self._heartbeat_interval):
            with self._lock:
                held = [j for j in self._running.values() if not j.lost]
            for i in range(0, len(held), BATCH):
                self._heartbeat(held[i:i + BATCH])

    def _heartbeat(self, jobs: List[Job]) -> None:
        body = {"worker": self.id, "jobs": [dict(id=j.id, attempt=j.attempt, lease_token=j.lease_token) for j in jobs]}
        try:
            ans = self._http.call("heartbeat", body=body)
        except APIError as e:
            if e.code == "worker_gone":
                for j in jobs:
                    self._lose(j, "worker gone")
            else:
                log.error("heartbeat: %s", e)
            return
        except (OSError, http.client.HTTPException) as e:
            # The next interval tries again; the lease lasts three.
            log.warning("heartbeat: %s", e)
            return
        for j, o in _outcomes(jobs, ans["jobs"]):
            if o["status"] != "ok":
                self._lose(j, o["status"])
            elif o.get("cancel_requested", False):
                j.cancel_requested = True
                j.cancelled.set()
