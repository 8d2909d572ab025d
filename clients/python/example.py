#!/usr/bin/env python3
"""An example Gaffer remote worker: python3 example.py

Environment: GAFFER_URL (default http://127.0.0.1:8080), GAFFER_TOKEN (a
token with the worker scope), GAFFER_QUEUES (comma-separated, default
"default"), GAFFER_CONCURRENCY (default 4), GAFFER_STOP_TIMEOUT (seconds,
default 30).

Kinds it works:
  greet  {"name": "Ada"}         -> {"greeting": "hello, Ada", "by": "python", "attempt": n}
  count  {"to": 5, "ms": 100}    counts to `to`, `ms` apart, reporting progress; stops
                                 early when cancelled -> {"counted": to}
  flaky  {}                      fails its first attempt (retry after 0.2s), then succeeds
  later  {"seconds": 0.5}        snoozes its first attempt, then succeeds
  reject {"reason": "..."}       fails permanently with the reason
  trace  {}                      -> {"traceparent": the W3C trace context it was enqueued under, or null}
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Dict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gaffer_worker import Job, Permanent, RetryLater, Snooze, Worker  # noqa: E402


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    w = Worker(
        os.environ.get("GAFFER_URL", "http://127.0.0.1:8080"),
        os.environ["GAFFER_TOKEN"],
        queues=os.environ.get("GAFFER_QUEUES", "default").split(","),
        name="python-example",
        version="example",
        concurrency=int(os.environ.get("GAFFER_CONCURRENCY", "4")),
        stop_timeout=float(os.environ.get("GAFFER_STOP_TIMEOUT", "30")),
        # Printed for the tests (clients/clients_test.go), which wait for it.
        on_registered=lambda id: print("WORKER", id, flush=True),
    )

    @w.handler("trace")
    def trace(job: Job) -> Dict[str, Any]:
        return {"traceparent": job.traceparent}

    @w.handler("greet")
    def greet(job: Job) -> Dict[str, Any]:
        return {"greeting": "hello, %s" % job.args.get("name", "world"), "by": "python", "attempt": job.attempt}

    @w.handler("count")
    def count(job: Job) -> Dict[str, Any]:
        to, ms = int(job.args.get("to", 5)), int(job.args.get("ms", 100))
        for i in range(1, to + 1):
            # wait() returns early, True, once the job should stop.
            if job.cancelled.wait(ms / 1000):
                raise Exception("stopped at %d of %d" % (i - 1, to))
            job.progress(100 * i / to, "counted %d of %d" % (i, to))
        return {"counted": to, "by": "python"}

    @w.handler("flaky")
    def flaky(job: Job) -> Dict[str, Any]:
        if job.attempt == 1:
            raise RetryLater("first attempts always fail", 0.2)
        return {"attempt": job.attempt, "by": "python"}

    @w.handler("later")
    def later(job: Job) -> Dict[str, Any]:
        if job.attempt == 1:
            raise Snooze(float(job.args.get("seconds", 0.5)))
        return {"attempt": job.attempt, "by": "python"}

    @w.handler("reject")
    def reject(job: Job) -> Dict[str, Any]:
        raise Permanent(job.args.get("reason", "rejected"))

    w.run()
    print("STOPPED", flush=True)


if __name__ == "__main__":
    main()
