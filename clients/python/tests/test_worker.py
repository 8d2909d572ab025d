"""Unit tests of gaffer_worker against a stand-in node on 127.0.0.1.

python3 -m unittest discover -s clients/python/tests
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import unittest
import warnings
from typing import Any, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gaffer_worker as gw  # noqa: E402
from fake_node import WORKER_ID, FakeNode  # noqa: E402

# The worker's warnings (a lost lease, a retry) are what these tests
# provoke; they are checked through what the node receives instead.
logging.getLogger("gaffer").addHandler(logging.NullHandler())
logging.getLogger("gaffer").propagate = False


def setUpModule() -> None:
    # Each worker thread keeps its own keep-alive connection and leaves it
    # to the garbage collector when the thread ends.
    warnings.simplefilter("ignore", ResourceWarning)


class Running:
    """A worker run() on a thread, stopped and joined on exit."""

    def __init__(self, worker: gw.Worker) -> None:
        self.worker = worker
        self.error: List[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.worker.run(install_signals=False)
        except BaseException as e:
            self.error.append(e)

    def __enter__(self) -> Running:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.worker.stop()
        self.join()

    def join(self, timeout: float = 10.0) -> None:
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError("run() did not return within %ss of stop()" % timeout)
        if self.error:
            raise self.error[0]


def worker(node: FakeNode, **kw: Any) -> gw.Worker:
    kw.setdefault("stop_timeout", 2.0)
    return gw.Worker(node.url, "tok", queues=["py"], **kw)


class OutcomeTest(unittest.TestCase):
    def test_each_outcome_is_written_with_its_lease(self) -> None:
        with FakeNode() as node:
            w = worker(node, name="unit", version="9")

            @w.handler("greet")
            def greet(job: gw.Job) -> Any:
                return {"hello": job.args["name"], "attempt": job.attempt}

            @w.handler("reject")
            def reject(job: gw.Job) -> Any:
                raise gw.Permanent("no good")

            @w.handler("retry")
            def retry(job: gw.Job) -> Any:
                raise gw.RetryLater("later please", 0.25)

            @w.handler("snooze")
            def snooze(job: gw.Job) -> Any:
                raise gw.Snooze(1.5)

            @w.handler("boom")
            def boom(job: gw.Job) -> Any:
                raise ValueError("kaput")

            node.add_job(1, "greet", {"name": "Ada"})
            node.add_job(2, "reject")
            node.add_job(3, "retry")
            node.add_job(4, "snooze")
            node.add_job(5, "boom")
            node.add_job(6, "nobody")
            registered: List[str] = []
            w._on_registered = registered.append
            with Running(w):
                self.assertTrue(node.wait_for(lambda: len(node.calls("complete")) >= 1
                                              and len(node.calls("fail")) == 4 and len(node.calls("snooze")) == 1))
            self.assertEqual(registered, [WORKER_ID])
            self.assertEqual(w.id, WORKER_ID)

            reg = node.calls("register")[0].body
            # kinds: those with a handler, sorted.
            self.assertEqual(reg, {"name": "unit", "version": "9", "queues": ["py"],
                                   "kinds": ["boom", "greet", "reject", "retry", "snooze"]})
            for r in node.requests:
                self.assertEqual(r.headers.get("Authorization"), "Bearer tok", r)

            complete = node.calls("complete")[0].body
            self.assertEqual(complete, {"jobs": [{"id": 1, "attempt": 1, "lease_token": "lease-1-1",
                                                  "result": {"hello": "Ada", "attempt": 1}}]})
            fails = {int(r.path.split("/")[4]): r.body for r in node.calls("fail")}
            self.assertEqual(fails[2], {"attempt": 1, "lease_token": "lease-2-1", "error": "no good", "permanent": True})
            self.assertEqual(fails[3], {"attempt": 1, "lease_token": "lease-3-1", "error": "later please",
                                        "permanent": False, "retry_after": "0.250s"})
            self.assertEqual(fails[5]["error"], "kaput")
            self.assertFalse(fails[5]["permanent"])
            self.assertIn("ValueError: kaput", fails[5]["stack"])
            self.assertTrue(fails[6]["permanent"])
            self.assertIn("no handler for kind 'nobody'", fails[6]["error"])
            self.assertEqual(node.calls("snooze")[0].body, {"attempt": 1, "lease_token": "lease-4-1", "delay": "1.500s"})
            # Claims ask for at most the free slots and at most the node's wait.
            claim = node.calls("claim")[0].body
            self.assertEqual(claim, {"worker": WORKER_ID, "max": 4, "wait": "1.000s"})
            self.assertEqual([r.path for r in node.calls("leave")], ["/v1/workers/" + WORKER_ID])

    def test_progress_on_a_lost_lease_drops_the_result(self) -> None:
        with FakeNode() as node:
            node.script("progress", 409, {"code": "lease_lost", "detail": "gone", "status": 409})
            w = worker(node)
            seen: List[Any] = []

            @w.handler("work")
            def work(job: gw.Job) -> Any:
                try:
                    job.progress(50, "half")
                except gw.LeaseLost:
                    seen.append(("lost", job.lost, job.cancelled.is_set()))
                    # A second report is refused without asking the node.
                    try:
                        job.progress(60)
                    except gw.LeaseLost:
                        seen.append("again")
                return "too late"

            node.add_job(7, "work")
            with Running(w):
                self.assertTrue(node.wait_for(lambda: len(seen) == 2))
                time.sleep(0.2)
            self.assertEqual(seen, [("lost", True, True), "again"])
            self.assertEqual(len(node.calls("progress")), 1)
            self.assertEqual(node.calls("progress")[0].body,
                             {"attempt": 1, "lease_token": "lease-7-1", "percent": 50, "message": "half"})
            self.assertEqual(node.calls("complete"), [])

    def test_a_rate_limited_completion_is_retried_after_retry_after(self) -> None:
        with FakeNode() as node:
            node.script("complete", 429, {"code": "rate_limited", "detail": "slow down", "status": 429},
                        {"Retry-After": "0.05"})
            w = worker(node)
            w.handler("greet", lambda job: "hi")
            node.add_job(8, "greet")
            with Running(w):
                self.assertTrue(node.wait_for(lambda: len(node.calls("complete")) == 2))
            self.assertEqual(node.calls("complete")[0].body, node.calls("complete")[1].body)

    def test_a_heartbeat_saying_cancel_requested_sets_cancelled(self) -> None:
        with FakeNode(heartbeat_interval=0.05) as node:
            node.heartbeat_outcomes[9] = {"cancel_requested": True}
            w = worker(node)
            stopped = threading.Event()

            @w.handler("long")
            def long(job: gw.Job) -> Any:
                if job.cancelled.wait(5):
                    stopped.set()
                    raise Exception("cancelled")
                return "finished"

            node.add_job(9, "long")
            with Running(w):
                self.assertTrue(stopped.wait(5))
                self.assertTrue(node.wait_for(lambda: len(node.calls("fail")) == 1))
            hb = node.calls("heartbeat")[0].body
            self.assertEqual(hb, {"worker": WORKER_ID, "jobs": [{"id": 9, "attempt": 1, "lease_token": "lease-9-1"}]})
            self.assertEqual(node.calls("fail")[0].body["error"], "cancelled")

    def test_a_heartbeat_saying_lease_lost_drops_the_result(self) -> None:
        with FakeNode(heartbeat_interval=0.05) as node:
            node.heartbeat_outcomes[10] = {"status": "lease_lost"}
            w = worker(node)
            release = threading.Event()
            jobs: List[gw.Job] = []

            @w.handler("long")
            def long(job: gw.Job) -> Any:
                jobs.append(job)
                release.wait(5)
                return "stale"

            node.add_job(10, "long")
            with Running(w):
                self.assertTrue(node.wait_for(lambda: len(node.calls("heartbeat")) >= 1))
                time.sleep(0.1)
                release.set()
                time.sleep(0.2)
            self.assertTrue(jobs[0].lost)
            self.assertEqual(node.calls("complete"), [])

    def test_a_draining_claim_stops_the_worker_and_it_leaves(self) -> None:
        with FakeNode() as node:
            node.draining = True
            w = worker(node)
            w.handler("greet", lambda job: "hi")
            r = Running(w).__enter__()
            r.join()  # returns by itself
            self.assertEqual(len(node.calls("leave")), 1)

    def test_worker_gone_registers_again(self) -> None:
        with FakeNode() as node:
            node.script("claim", 404, {"code": "worker_gone", "detail": "silent", "status": 404})
            w = worker(node)
            w.handler("greet", lambda job: "hi")
            with Running(w):
                self.assertTrue(node.wait_for(lambda: len(node.calls("register")) == 2))

    def test_a_job_past_the_stop_deadline_is_let_go(self) -> None:
        with FakeNode() as node:
            w = worker(node, stop_timeout=0.3)
            started = threading.Event()
            jobs: List[gw.Job] = []

            @w.handler("stuck")
            def stuck(job: gw.Job) -> Any:
                jobs.append(job)
                started.set()
                time.sleep(3)
                return "never written"

            node.add_job(11, "stuck")
            r = Running(w).__enter__()
            self.assertTrue(started.wait(5))
            t = time.monotonic()
            w.stop()
            r.join()
            self.assertLess(time.monotonic() - t, 2.0)
            self.assertTrue(jobs[0].lost and jobs[0].cancelled.is_set())
            self.assertEqual(node.calls("complete"), [])
            self.assertEqual(len(node.calls("leave")), 1)


class GuardTest(unittest.TestCase):
    def test_a_field_outside_protocol_is_refused(self) -> None:
        with self.assertRaisesRegex(ValueError, "'bogus' is not in PROTOCOL"):
            gw._check_send("claim", {"worker": "w", "bogus": 1})
        with self.assertRaisesRegex(ValueError, r"'jobs\[\].bogus'"):
            gw._check_send("complete", {"jobs": [{"id": 1, "bogus": 2}]})
        a = gw._Answer("claim", {"jobs": [{"id": 1, "secret": 2}], "draining": False})
        self.assertEqual(a["jobs"][0]["id"], 1)
        with self.assertRaises(KeyError):
            a["jobs"][0]["secret"]
        with self.assertRaises(KeyError):
            a["nonsense"]

    def test_bad_construction_is_refused(self) -> None:
        with self.assertRaisesRegex(ValueError, "queues"):
            gw.Worker("http://127.0.0.1:1", "t", queues=[])
        with self.assertRaisesRegex(ValueError, "http:// or https://"):
            gw.Worker("ftp://127.0.0.1", "t", queues=["q"])
        with self.assertRaisesRegex(ValueError, "register a handler"):
            gw.Worker("http://127.0.0.1:1", "t", queues=["q"]).run(install_signals=False)

    def test_a_problem_answer_becomes_an_api_error(self) -> None:
        with FakeNode() as node:
            node.script("register", 503, {"code": "unavailable", "detail": "busy", "status": 503}, {"Retry-After": "2"})
            with self.assertRaises(gw.APIError) as cm:
                gw._HTTP(node.url + "/", "tok").call("register", body={"name": "", "version": "", "queues": ["q"],
                                                                          "kinds": ["k"]})
            e = cm.exception
            self.assertEqual((e.status, e.code, e.detail, e.retry_after, e.transient), (503, "unavailable", "busy", 2.0, True))
            self.assertFalse(gw.APIError(409, "lease_lost", "").transient)

    def test_durations_are_go_style(self) -> None:
        self.assertEqual(gw._duration(1.5), "1.500s")
        self.assertEqual(gw._duration(-3), "0.000s")


if __name__ == "__main__":
    unittest.main()
