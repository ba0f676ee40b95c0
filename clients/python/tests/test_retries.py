"""Retries: which requests are sent again, after what, and how long the client waits.

A scripted local server plays the transport's failures a real server will not produce on demand
(503, a dropped connection, no answer); a closed port and the real server's rate limit are real.
"""

from __future__ import annotations

import email.utils
import re
import threading
import time
import unittest

from support import (
    ScriptedServer,
    answer,
    answer_early,
    client,
    closed_port,
    drop_connection,
    envelope,
    never_answer,
    server_url,
    token,
    unique,
)

import mnemo

FACT = {"id": "8f0c7f8e-0000-4000-8000-000000000001", "version": 1}
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def fast(url: str, **options) -> mnemo.Client:
    options.setdefault("backoff_base", 0.01)
    options.setdefault("timeout", 5.0)
    return mnemo.Client(url, "token-1", **options)


class RetryAfterTest(unittest.TestCase):
    def test_503_with_retry_after_seconds_then_200(self) -> None:
        with ScriptedServer(answer(503, envelope("unavailable"), {"Retry-After": "1"}), answer(200, FACT)) as server:
            started = time.monotonic()
            self.assertEqual(fast(server.url).get_fact(FACT["id"]), FACT)
            self.assertGreaterEqual(time.monotonic() - started, 0.95)
        self.assertEqual(len(server.received), 2)

    def test_429_with_retry_after_as_an_http_date(self) -> None:
        when = email.utils.formatdate(time.time() + 2, usegmt=True)
        with ScriptedServer(answer(429, envelope("rate-limited"), {"Retry-After": when}), answer(200, FACT)) as server:
            started = time.monotonic()
            fast(server.url).get_fact(FACT["id"])
            # The date has whole seconds: between 1 and 2 s from now.
            self.assertGreaterEqual(time.monotonic() - started, 0.9)
        self.assertEqual(len(server.received), 2)

    def test_retry_after_is_capped(self) -> None:
        with ScriptedServer(answer(503, envelope("unavailable"), {"Retry-After": "3600"}), answer(200, FACT)) as server:
            started = time.monotonic()
            fast(server.url, max_retry_wait=0.2).get_fact(FACT["id"])
            self.assertLess(time.monotonic() - started, 2)
        self.assertEqual(len(server.received), 2)

    def test_gives_up_after_max_retries_with_the_last_error(self) -> None:
        with ScriptedServer(answer(503, envelope("unavailable"), {"Retry-After": "0"})) as server:
            with self.assertRaises(mnemo.UnavailableError) as caught:
                fast(server.url, max_retries=2).get_fact(FACT["id"])
        self.assertEqual(len(server.received), 3)
        self.assertEqual(caught.exception.attempts, 3)
        self.assertEqual(caught.exception.retry_after, 0)

    def test_max_retries_0_sends_once(self) -> None:
        with ScriptedServer(answer(429, envelope("rate-limited"), {"Retry-After": "7"})) as server:
            with self.assertRaises(mnemo.RateLimitedError) as caught:
                fast(server.url, max_retries=0).get_fact(FACT["id"])
        self.assertEqual(len(server.received), 1)
        self.assertEqual(caught.exception.retry_after, 7)

    def test_backoff_without_retry_after(self) -> None:
        with ScriptedServer(answer(502, raw="<html>Bad Gateway</html>"), answer(504, raw=""), answer(200, FACT)) as server:
            self.assertEqual(fast(server.url).get_fact(FACT["id"]), FACT)
        self.assertEqual(len(server.received), 3)

    def test_errors_that_are_not_transient_are_not_retried(self) -> None:
        with ScriptedServer(answer(500, envelope("internal")), answer(200, FACT)) as server:
            with self.assertRaises(mnemo.InternalError):
                fast(server.url).get_fact(FACT["id"])
        self.assertEqual(len(server.received), 1)

    def test_a_token_function_is_called_for_every_attempt(self) -> None:
        issued = iter(["first", "second"])
        with ScriptedServer(answer(503, envelope("unavailable"), {"Retry-After": "0"}), answer(200, FACT)) as server:
            mnemo.Client(server.url, lambda: next(issued), backoff_base=0.01).get_fact(FACT["id"])
        self.assertEqual([server.header(i, "authorization") for i in range(2)], ["Bearer first", "Bearer second"])


class WhatIsRetriedTest(unittest.TestCase):
    def test_a_write_is_retried_with_the_same_generated_key(self) -> None:
        with ScriptedServer(answer(503, envelope("unavailable"), {"Retry-After": "0"}), drop_connection(), answer(201, FACT)) as server:
            self.assertEqual(fast(server.url).write_fact("acme.note", {"text": "x"}), FACT)
        keys = [server.header(i, "idempotency-key") for i in range(3)]
        self.assertTrue(UUID4.match(keys[0] or ""), keys)
        self.assertEqual(len(set(keys)), 1)
        self.assertEqual({body for _, _, _, body in server.received}, {b'{"type":"acme.note","content":{"text":"x"}}'})

    def test_each_write_gets_a_key_of_its_own_and_a_given_key_is_sent(self) -> None:
        with ScriptedServer(answer(201, FACT)) as server:
            c = fast(server.url)
            c.write_fact("acme.note", 1)
            c.supersede_fact(FACT["id"], content=2)
            c.verify_fact(FACT["id"])
            c.write_fact("acme.note", 3, idempotency_key="mine-1")
        keys = [server.header(i, "idempotency-key") for i in range(4)]
        self.assertEqual(len(set(keys[:3])), 3)
        self.assertTrue(all(UUID4.match(k or "") for k in keys[:3]), keys)
        self.assertEqual(keys[3], "mine-1")

    def test_a_write_in_flight_elsewhere_is_retried(self) -> None:
        with ScriptedServer(answer(409, envelope("idempotency-in-flight")), answer(201, FACT)) as server:
            self.assertEqual(fast(server.url).write_fact("acme.note", 1), FACT)
        self.assertEqual(len(server.received), 2)

    def test_a_write_without_a_key_is_not_sent_again_once_it_may_have_acted(self) -> None:
        for step, error in ((answer(503, envelope("unavailable")), mnemo.UnavailableError), (drop_connection(), mnemo.MnemoConnectionError)):
            with self.subTest(error=error.__name__):
                with ScriptedServer(step, answer(201, FACT)) as server:
                    with self.assertRaises(error):
                        fast(server.url).write_fact("acme.note", 1, idempotency_key=False)
                self.assertEqual(len(server.received), 1)
                self.assertIsNone(server.header(0, "idempotency-key"))

    def test_a_write_without_a_key_is_retried_after_429(self) -> None:
        with ScriptedServer(answer(429, envelope("rate-limited"), {"Retry-After": "0"}), answer(201, FACT)) as server:
            self.assertEqual(fast(server.url).write_fact("acme.note", 1, idempotency_key=False), FACT)
        self.assertEqual(len(server.received), 2)

    def test_reads_searches_and_deletes_are_retried_after_a_dropped_connection(self) -> None:
        calls = {
            "get_fact": lambda c: c.get_fact(FACT["id"]),
            "list_fact_revisions": lambda c: c.list_fact_revisions(FACT["id"]),
            "list_facts": lambda c: list(c.list_facts()),
            "retrieve": lambda c: c.retrieve("q"),
            "context": lambda c: c.context("q"),
            "report": lambda c: c.report(),
            "delete_fact": lambda c: c.delete_fact(FACT["id"], expect_version=1),
        }
        for name, call in calls.items():
            with self.subTest(name):
                with ScriptedServer(drop_connection(), answer(200, {"data": [], "hasMore": False, "nextCursor": None})) as server:
                    call(fast(server.url))
                self.assertEqual(len(server.received), 2)
                self.assertEqual(server.received[0][:2], server.received[1][:2])

    def test_report_and_erasure_requests_are_retried_under_one_generated_key(self) -> None:
        calls = {
            "request_report": lambda c: c.request_report(project_id="p1"),
            "request_erasure": lambda c: c.request_erasure(subject={"kind": "participant", "id": "end-7"}),
            "resume_erasure": lambda c: c.resume_erasure("e1"),
        }
        for name, call in calls.items():
            with self.subTest(name):
                with ScriptedServer(drop_connection(), answer(202, {"id": "e1", "status": "pending"})) as server:
                    self.assertEqual(call(fast(server.url)), {"id": "e1", "status": "pending"})
                keys = [server.header(i, "idempotency-key") for i in range(2)]
                self.assertTrue(UUID4.match(keys[0] or ""), keys)
                self.assertEqual(keys[0], keys[1])
                self.assertEqual(server.received[0], server.received[1])

    def test_request_retries_a_post_only_when_told_it_is_repeatable(self) -> None:
        with ScriptedServer(drop_connection(), answer(202, {"id": "r1"})) as server:
            with self.assertRaises(mnemo.MnemoConnectionError):
                fast(server.url).request("POST", "/v1/memory/reports", body={})
        self.assertEqual(len(server.received), 1)
        with ScriptedServer(drop_connection(), answer(202, {"id": "r1"})) as server:
            self.assertEqual(fast(server.url).request("POST", "/v1/memory/reports", body={}, repeatable=True), {"id": "r1"})
        self.assertEqual(len(server.received), 2)


class NoAnswerTest(unittest.TestCase):
    def test_connection_refused_is_retried_then_raised(self) -> None:
        url = f"http://127.0.0.1:{closed_port()}"
        started = time.monotonic()
        with self.assertRaises(mnemo.MnemoConnectionError) as caught:
            fast(url, max_retries=2, backoff_base=0.1).get_fact(FACT["id"])
        self.assertIsNot(type(caught.exception), mnemo.MnemoTimeoutError)
        self.assertEqual(caught.exception.attempts, 3)
        self.assertIsNone(caught.exception.status)
        self.assertIn("ConnectionRefusedError", caught.exception.message)
        self.assertIsInstance(caught.exception.__cause__, ConnectionRefusedError)
        # Two backoffs of at least half of 0.1 and 0.2 s.
        self.assertGreaterEqual(time.monotonic() - started, 0.15)

    def test_connection_refused_retries_even_a_write_without_a_key(self) -> None:
        # Refused before anything was sent: the server never saw it.
        with self.assertRaises(mnemo.MnemoConnectionError) as caught:
            fast(f"http://127.0.0.1:{closed_port()}", max_retries=1).write_fact("acme.note", 1, idempotency_key=False)
        self.assertEqual(caught.exception.attempts, 2)

    def test_no_answer_within_the_timeout(self) -> None:
        release = threading.Event()
        with ScriptedServer(never_answer(release)) as server:
            started = time.monotonic()
            with self.assertRaises(mnemo.MnemoTimeoutError) as caught:
                fast(server.url, timeout=0.3, max_retries=1).get_fact(FACT["id"])
            release.set()
        self.assertEqual(caught.exception.attempts, 2)
        self.assertEqual(len(server.received), 2)
        self.assertIsInstance(caught.exception, mnemo.MnemoConnectionError)
        self.assertLess(time.monotonic() - started, 3)

    def test_a_timeout_per_call_wins_over_the_clients(self) -> None:
        release = threading.Event()
        with ScriptedServer(never_answer(release)) as server:
            started = time.monotonic()
            with self.assertRaises(mnemo.MnemoTimeoutError):
                fast(server.url, timeout=30, max_retries=0).get_fact(FACT["id"], timeout=0.2)
            release.set()
        self.assertLess(time.monotonic() - started, 2)


class AnswersWithoutTheEnvelopeTest(unittest.TestCase):
    def test_a_proxy_page_raises_the_class_of_its_status(self) -> None:
        with ScriptedServer(answer(502, raw="<html><body>Bad Gateway</body></html>", headers={"X-Request-Id": "edge-1"})) as server:
            with self.assertRaises(mnemo.UnavailableError) as caught:
                fast(server.url, max_retries=0).get_fact(FACT["id"])
        error = caught.exception
        self.assertEqual((error.status, error.code, error.request_id), (502, "unavailable", "edge-1"))
        self.assertIn("Bad Gateway", error.message)
        self.assertEqual(error.body, "<html><body>Bad Gateway</body></html>")

    def test_a_status_that_names_no_single_code(self) -> None:
        with ScriptedServer(answer(409, raw="conflict")) as server:
            with self.assertRaises(mnemo.MnemoError) as caught:
                fast(server.url).get_fact(FACT["id"])
        self.assertIs(type(caught.exception), mnemo.MnemoError)
        self.assertEqual((caught.exception.status, caught.exception.code), (409, None))

    def test_an_unknown_code_in_the_envelope(self) -> None:
        with ScriptedServer(answer(418, envelope("teapot", "short and stout"))) as server:
            with self.assertRaises(mnemo.MnemoError) as caught:
                fast(server.url).get_fact(FACT["id"])
        self.assertEqual((caught.exception.code, caught.exception.message), ("teapot", "short and stout"))

    def test_an_answer_that_came_before_the_body_was_sent(self) -> None:
        with ScriptedServer(answer_early(413, envelope("payload-too-large"))) as server:
            with self.assertRaises(mnemo.PayloadTooLargeError) as caught:
                fast(server.url).write_fact("acme.note", "x" * (8 * 1024 * 1024))
        self.assertEqual(caught.exception.attempts, 1)
        self.assertEqual(len(server.received), 1)

    def test_a_success_that_is_not_json(self) -> None:
        with ScriptedServer(answer(200, raw="<html>login page</html>")) as server:
            with self.assertRaises(mnemo.MnemoError) as caught:
                fast(server.url).get_fact(FACT["id"])
        self.assertIn("other than JSON", caught.exception.message)


class RealRateLimitTest(unittest.TestCase):
    """The real server's 429 (MNEMO_TOKEN_RATE_LIMITED: a caller with a few reports a minute)."""

    def test_429_from_the_real_server(self) -> None:
        server_url()
        limited = client("rate_limited", max_retries=0)
        # Scoped to a project of its own: the report is over nothing, and cheap.
        scope = {"project_id": unique("p")}
        error = None
        for _ in range(30):
            try:
                limited.report(**scope)
            except mnemo.RateLimitedError as refused:
                error = refused
                break
        self.assertIsNotNone(error, "the server never answered 429: is MNEMO_RATE_LIMIT_REPORTS set to a few a minute?")
        assert error is not None
        self.assertEqual((error.status, error.code, error.attempts), (429, "rate-limited", 1))
        self.assertGreater(error.retry_after, 0)
        self.assertLessEqual(error.retry_after, 60)

        # Retried, each wait capped at 0.2 s (the server's window is a minute): three attempts, then the error.
        retrying = mnemo.Client(server_url(), token("rate_limited"), max_retries=2, max_retry_wait=0.2)
        started = time.monotonic()
        with self.assertRaises(mnemo.RateLimitedError) as caught:
            retrying.report(**scope)
        self.assertEqual(caught.exception.attempts, 3)
        self.assertGreaterEqual(time.monotonic() - started, 0.4)


if __name__ == "__main__":
    unittest.main()
