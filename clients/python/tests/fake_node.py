"""A stand-in Gaffer node on 127.0.0.1 for the worker's unit tests.

It answers the worker protocol's endpoints the way a node does, from
state the test sets (the jobs to hand out, scripted answers), and records
every request. It checks nothing itself: the tests read `requests`. The
integration test against a real node is clients/clients_test.go.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

WORKER_ID = "w-1"


class Request:
    def __init__(self, method: str, path: str, headers: Dict[str, str], body: Any) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body

    def __repr__(self) -> str:
        return "%s %s %r" % (self.method, self.path, self.body)


class FakeNode:
    """Start with `with FakeNode() as node:`; node.url is its address."""

    def __init__(self, heartbeat_interval: float = 10.0, max_wait: float = 1.0) -> None:
        self.heartbeat_interval = heartbeat_interval
        self.max_wait = max_wait
        self.requests: List[Request] = []
        self.pending: List[Dict[str, Any]] = []
        self.draining = False
        # op -> answers (status, body, headers) given before the usual one.
        self.scripted: Dict[str, List[Tuple[int, Any, Dict[str, str]]]] = {}
        # job id -> the heartbeat outcome for it (default {"status": "ok"}).
        self.heartbeat_outcomes: Dict[int, Dict[str, Any]] = {}
        self.cond = threading.Condition()
        node = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                body = json.loads(raw) if raw else None
                req = Request(self.command, self.path, dict(self.headers), body)
                with node.cond:
                    node.requests.append(req)
                    node.cond.notify_all()
                status, answer, headers = node._answer(req)
                data = json.dumps(answer).encode() if answer is not None else b""
                self.send_response(status)
                ctype = "application/problem+json" if status >= 400 else "application/json"
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _serve

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                # A claim the worker cut on stop: nothing to report.
                pass

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self._server.server_address[1]

    def __enter__(self) -> FakeNode:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add_job(self, id: int, kind: str, args: Any = None, attempt: int = 1) -> None:
        with self.cond:
            self.pending.append({
                "id": id, "tenant": "t", "kind": kind, "queue": "py", "args": args if args is not None else {},
                "inputs": None, "attempt": attempt, "max_attempts": 3, "lease_token": "lease-%d-%d" % (id, attempt),
                "workflow_run": None, "step": None, "traceparent": None, "tracestate": None,
            })
            self.cond.notify_all()

    def script(self, op: str, status: int, body: Any, headers: Optional[Dict[str, str]] = None) -> None:
        with self.cond:
            self.scripted.setdefault(op, []).append((status, body, headers or {}))

    def calls(self, op: str) -> List[Request]:
        with self.cond:
            return [r for r in self.requests if _op(r) == op]

    def wait_for(self, predicate: Any, timeout: float = 5.0) -> bool:
        """Waits until predicate() holds, checked after each request."""
        with self.cond:
            return bool(self.cond.wait_for(predicate, timeout))

    def _answer(self, req: Request) -> Tuple[int, Any, Dict[str, str]]:
        op = _op(req)
        with self.cond:
            if self.scripted.get(op):
                return self.scripted[op].pop(0)
        if op == "register":
            return 201, {"id": WORKER_ID, "lease_ttl_seconds": 30,
                         "heartbeat_interval_seconds": self.heartbeat_interval,
                         "max_wait_seconds": self.max_wait}, {}
        if op == "leave":
            return 200, {"released": 0}, {}
        if op == "claim":
            with self.cond:
                self.cond.wait_for(lambda: self.pending or self.draining, min(self.max_wait, 0.2))
                jobs, self.pending = self.pending[:req.body["max"]], self.pending[req.body["max"]:]
                return 200, {"jobs": jobs, "draining": self.draining}, {}
        if op == "heartbeat":
            return 200, {"jobs": [dict({"id": j["id"], "status": "ok"}, **self.heartbeat_outcomes.get(j["id"], {}))
                                  for j in req.body["jobs"]]}, {}
        if op == "complete":
            return 200, {"jobs": [{"id": j["id"], "status": "ok"} for j in req.body["jobs"]]}, {}
        if op in ("fail", "snooze"):
            return 200, {"state": "pending"}, {}
        if op == "progress":
            return 204, None, {}
        return 404, {"code": "not_found", "detail": req.path, "status": 404}, {}


def _op(req: Request) -> str:
    path = req.path
    if path == "/v1/workers":
        return "register"
    if re.fullmatch(r"/v1/workers/[^/]+", path):
        return "leave"
    m = re.fullmatch(r"/v1/work/(claim|heartbeat|complete)", path)
    if m:
        return m.group(1)
    m = re.fullmatch(r"/v1/work/jobs/\d+/(fail|snooze|progress)", path)
    if m:
        return m.group(1)
    return "unknown"
